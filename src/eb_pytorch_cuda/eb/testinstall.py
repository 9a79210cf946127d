"""Where a test installation made by EasyBuild's Python installer can be imported from.

EasyBuild's PythonPackage installs into a temporary prefix before the tests, and what lands there
depends on the installer (docs/design.md section 2): pip puts packages in <prefix>/lib/pythonX.Y/
site-packages; Python's posix_local scheme adds <prefix>/local/; setuptools 65.5 (what `python3 -m
venv` brings with Python 3.11) running `setup.py install` makes an egg, <site-packages>/torch-2.1.2-
py3.11.egg, named only in <site-packages>/easy-install.pth.  PYTHONPATH entries are not site
directories, so their .pth files are never read: the egg stays out of reach (`No module named
'torch'`).  import_paths() lists what to put on PYTHONPATH so that any of these imports.
"""

import os
from typing import Iterable, List

SITE_DIR_NAMES = ('site-packages', 'dist-packages')
MAX_DEPTH = 5  # <prefix>/local/lib/pythonX.Y/site-packages is 4 levels down


def site_dirs(prefix: str) -> List[str]:
    """Every site-packages/dist-packages directory within MAX_DEPTH levels of prefix, sorted."""
    found = []
    base_depth = prefix.rstrip(os.sep).count(os.sep)
    for dirpath, dirnames, _ in os.walk(prefix):
        if os.path.basename(dirpath) in SITE_DIR_NAMES:
            found.append(dirpath)
            dirnames[:] = []  # nothing below a site directory is one
        elif dirpath.count(os.sep) - base_depth >= MAX_DEPTH:
            dirnames[:] = []
    return sorted(found)


def pth_entries(site_dir: str) -> List[str]:
    """The existing directories and eggs that the .pth files of site_dir add (as site.py would)."""
    entries = []
    for name in sorted(os.listdir(site_dir)):
        if not name.endswith('.pth'):
            continue
        with open(os.path.join(site_dir, name), encoding='utf-8', errors='replace') as handle:
            for line in handle:
                line = line.strip()
                if not line or line.startswith('#') or line.startswith(('import ', 'import\t')):
                    continue  # site.py executes import lines; a test environment needs none of them
                entry = os.path.normpath(os.path.join(site_dir, line))
                if os.path.exists(entry):
                    entries.append(entry)
    return entries


def import_paths(prefix: str, pylibdirs: Iterable[str] = ()) -> List[str]:
    """PYTHONPATH entries that make what was installed under prefix importable, whatever the installer made.

    pylibdirs (EasyBuild's, absolute) come first, then any other site directory found under prefix;
    each followed by what its .pth files add (eggs).  Nothing is listed twice.
    """
    paths: List[str] = []
    for site_dir in [*pylibdirs, *site_dirs(prefix)]:
        for entry in [site_dir, *(pth_entries(site_dir) if os.path.isdir(site_dir) else [])]:
            if entry not in paths:
                paths.append(entry)
    return paths
