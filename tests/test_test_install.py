"""The test installation imports whatever EasyBuild's installer made (eb.testinstall.import_paths).

Real installers, real results: `setup.py install --prefix` with the setuptools that `python3 -m venv`
brings (65.5: an egg named only in easy-install.pth), `pip install --prefix` (site-packages), and
Debian's Python, whose default scheme is posix_local (<prefix>/local/lib/python3.X/dist-packages).
Each is then imported by a fresh Python with PYTHONPATH set as the test step sets it.
"""

import os
import subprocess
import sysconfig
from pathlib import Path

import pytest

from eb_pytorch_cuda.eb.testinstall import import_paths
from eb_runner import REPO, eb_venv
from environment import missing

STOCK_PYTHON = REPO / '.venvs' / 'stock-4.9.4' / 'bin' / 'python'
DEBIAN_PYTHON = Path('/usr/bin/python3')
SETUP_PY = ("from setuptools import setup\n"
            "setup(name='probepkg', version='0.1', packages=['probepkg'], zip_safe=False)\n")
PYLIBDIR = os.path.join('lib', 'python%d.%d' % tuple(map(int, sysconfig.get_python_version().split('.'))),
                        'site-packages')


def make_package(tmp_path):
    source = tmp_path / 'src'
    (source / 'probepkg').mkdir(parents=True)
    (source / 'probepkg' / '__init__.py').write_text('WHERE = __file__\n')
    (source / 'setup.py').write_text(SETUP_PY)
    return source


def imports_from(python, paths):
    """Where a fresh Python imports probepkg from with PYTHONPATH=paths (None: it cannot)."""
    env = {k: v for k, v in os.environ.items() if k != 'PYTHONPATH'}
    env['PYTHONPATH'] = os.pathsep.join(map(str, paths))
    done = subprocess.run([str(python), '-c', 'import probepkg; print(probepkg.WHERE)'], env=env, cwd='/',
                          capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else None


def install(python, args, source):
    subprocess.run([str(python), *args], cwd=source, check=True, capture_output=True, text=True)


def test_an_egg_from_stock_setuptools_is_imported_through_easy_install_pth(tmp_path):
    if not STOCK_PYTHON.exists():
        missing(f'{STOCK_PYTHON} missing')
    source, prefix = make_package(tmp_path), tmp_path / 'prefix'
    pylibdir = prefix / PYLIBDIR
    pylibdir.mkdir(parents=True)
    env_pythonpath = {'PYTHONPATH': str(pylibdir)}  # setuptools refuses a prefix not on PYTHONPATH
    subprocess.run([str(STOCK_PYTHON), 'setup.py', 'install', f'--prefix={prefix}'], cwd=source, check=True,
                   capture_output=True, env=dict(os.environ, **env_pythonpath))
    eggs = list(pylibdir.glob('probepkg-0.1-py*.egg'))
    assert eggs and (pylibdir / 'easy-install.pth').exists()
    assert imports_from(STOCK_PYTHON, [pylibdir]) is None  # what the stock-venv demo hit
    paths = import_paths(str(prefix), [str(pylibdir)])
    assert paths == [str(pylibdir), str(eggs[0])]
    assert imports_from(STOCK_PYTHON, paths).startswith(str(eggs[0]))


def test_a_pip_prefix_install_is_imported_from_site_packages(tmp_path):
    python = eb_venv('5.4.1') / 'bin' / 'python'
    source, prefix = make_package(tmp_path), tmp_path / 'prefix'
    install(python, ['-m', 'pip', 'install', '-q', f'--prefix={prefix}', '--no-deps', '--no-build-isolation',
                     '--no-index', '.'], source)
    pylibdir = prefix / PYLIBDIR
    assert import_paths(str(prefix), [str(pylibdir)]) == [str(pylibdir)]
    assert imports_from(python, [pylibdir]).startswith(str(pylibdir / 'probepkg'))


def test_the_posix_local_scheme_is_found_below_the_prefix(tmp_path):
    scheme = subprocess.run([str(DEBIAN_PYTHON), '-c', 'import sysconfig; print(sysconfig.get_default_scheme())'],
                            capture_output=True, text=True)
    if scheme.stdout.strip() != 'posix_local':
        pytest.skip(f'{DEBIAN_PYTHON} is not a Debian Python with the posix_local scheme')
    source, prefix = make_package(tmp_path), tmp_path / 'prefix'
    install(DEBIAN_PYTHON, ['-m', 'pip', 'install', '-q', f'--prefix={prefix}', '--no-deps', '--no-build-isolation',
                            '--no-index', '.'], source)
    local_dirs = list(prefix.glob('local/lib/python3*/dist-packages'))
    assert local_dirs, list(prefix.rglob('*'))
    wrong_guess = prefix / PYLIBDIR  # what a prefix-relative pylibdir alone would name
    paths = import_paths(str(prefix), [str(wrong_guess)])
    assert paths == [str(wrong_guess), str(local_dirs[0])]
    assert imports_from(DEBIAN_PYTHON, paths).startswith(str(local_dirs[0] / 'probepkg'))
