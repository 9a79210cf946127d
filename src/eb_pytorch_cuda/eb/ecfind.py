"""An easyconfig named as `eb` takes it: a path, or a bare file name that eb finds on its robot path.

`eb PyTorch-2.1.2-foss-2023a-CUDA-12.1.1.eb` works from any directory: a name without a directory part that
does not exist here is looked up in each robot path in turn, first hit wins (EasyBuild's
det_easyconfig_paths and locate_files), skipping --ignore-dirs and, unless --consider-archived-easyconfigs,
the __archive__ directories.  `--easyconfig` takes the same names: the robot path is the one the installed
EasyBuild's configuration gives (eb/siteconfig: configuration files, $EASYBUILD_* variables, its default
easyconfigs), each directory listed by EasyBuild's own create_index.  An index file in a robot path (eb
--create-index) is not read: it caches the same listing, and a stale one is what eb warns about.
"""

import os
from typing import Optional

from eb_pytorch_cuda.eb import siteconfig
from eb_pytorch_cuda.errors import PluginError

ARCHIVE_DIR = '__archive__'  # EasyBuild's EASYCONFIGS_ARCHIVE_DIR (4.9.4 and 5.x)


def locate_easyconfig(name: str, settings: Optional[siteconfig.EasyBuildSettings] = None) -> str:
    """name where it exists or has a directory part (a path is a path); else the file of that name on the robot
    path, as eb finds it.  PluginError naming it and the robot path searched when it is on none."""
    if name != os.path.basename(name) or os.path.lexists(name):
        return name
    try:
        from easybuild.tools.filetools import create_index
    except ImportError:
        raise PluginError(name, 'no such file (finding it on the robot path needs easybuild-framework)') from None
    settings = settings or siteconfig.read_settings()
    ignore = list(settings.ignore_dirs) + ([] if settings.consider_archived else [ARCHIVE_DIR])
    for path in settings.robot_paths:
        if not os.path.isdir(path):
            continue
        found = sorted(relative for relative in create_index(path, ignore_dirs=ignore)
                       if os.path.basename(relative) == name)
        if found:
            return os.path.join(path, found[0])
    searched = ', '.join(settings.robot_paths) or 'none configured'
    raise PluginError(name, f'no such file, and no easyconfig of that name on the robot path ({searched})')
