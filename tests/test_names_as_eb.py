"""Names where eb takes names: `--easyconfig NAME` found on the robot path as real `eb` finds it (4.9.4 and 5.4.1,
robot paths from a site's configuration file), `--python NAME` on PATH, `--cuda-device-tests True` as an
easyconfig writes it.  Before, each was refused: "no such file", "is not an executable Python", "choose from".
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import eb_pytorch_cuda
from eb_pytorch_cuda import standins
from eb_runner import EB_VERSIONS, LMOD_CMD, TEST_EASYCONFIGS, eb_venv
from helpers import DATA, one_line_error, standin_source

NAME = 'PyTorch-2.1.2-standin-easyblock.eb'
SAVED = DATA / 'store-82948c5' / 'pytorch-test-results.json'  # any saved result: the report names its terms' file
SRC = str(Path(eb_pytorch_cuda.__file__).resolve().parent.parent)  # this session's package, for every venv


@pytest.fixture
def site(tmp_path):
    """A site's configuration file ($XDG_CONFIG_DIRS/easybuild.d) with three robot paths: the first holds NAME only
    in __archive__ (eb skips it), the second holds it two levels down beside its dependencies, the third another
    copy (the second's wins: first hit)."""
    first, robot, later = tmp_path / 'first', tmp_path / 'robot', tmp_path / 'later'
    for directory in (first / '__archive__', robot / 'p' / 'PyTorch', later / 'x', tmp_path / 'xdg' / 'easybuild.d'):
        directory.mkdir(parents=True)
    for dependency in ('cuDNN-8.9.2.26-standin.eb', 'OpenBLAS-0.3.23-standin.eb'):
        shutil.copy(TEST_EASYCONFIGS / dependency, robot)
    for directory in (first / '__archive__', robot / 'p' / 'PyTorch', later / 'x'):
        shutil.copy(TEST_EASYCONFIGS / NAME, directory)
    (tmp_path / 'xdg' / 'easybuild.d' / 'site.cfg').write_text(
        f'[config]\nrobot-paths = {first}:{robot}:{later}\n')
    return tmp_path


def _env(site, version):
    return {'HOME': str(site), 'PATH': f"{eb_venv(version) / 'bin'}:/usr/bin:/bin", 'PYTHONPATH': SRC,
            'XDG_CONFIG_DIRS': str(site / 'xdg'), 'LMOD_CMD': LMOD_CMD, 'EASYBUILD_MODULES_TOOL': 'Lmod',
            'EASYBUILD_PREFIX': str(site / 'prefix'), 'EASYBUILD_ALLOW_USE_AS_ROOT_AND_ACCEPT_CONSEQUENCES': '1'}


def _report(site, version, *args, cwd=None):
    return subprocess.run([str(eb_venv(version) / 'bin' / 'python'), '-m', 'eb_pytorch_cuda', 'report', str(SAVED),
                           '--target', 'x86_64/generic', *map(str, args)], env=_env(site, version), cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def _eb_finds(site, version):
    """The file `eb -D NAME` plans to build (its $CFGS abbreviation undone)."""
    done = subprocess.run([str(eb_venv(version) / 'bin' / 'eb'), '-D', NAME], env=_env(site, version), cwd=site,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    cfgs = re.search(r'^CFGS=(.*)$', done.stdout, re.M).group(1)
    planned = re.search(rf'^ \* \[ \] \$CFGS/(\S*{re.escape(NAME)}) ', done.stdout, re.M).group(1)
    return os.path.join(cfgs, planned)


@pytest.mark.parametrize('version', EB_VERSIONS)
def test_a_bare_easyconfig_name_is_the_file_eb_finds_on_the_robot_path(site, version):
    found = _eb_finds(site, version)
    assert found == str(site / 'robot' / 'p' / 'PyTorch' / NAME)
    done = _report(site, version, '--easyconfig', NAME, cwd=site)
    assert done.returncode in (0, 1), done.stderr
    assert f'; from {found} (budget 0, 1 known failure)' in done.stdout.splitlines()[0]


@pytest.mark.parametrize('version', EB_VERSIONS)
def test_a_name_that_exists_here_is_that_file_as_for_eb(site, version):
    here = site / 'here'
    here.mkdir()
    shutil.copy(TEST_EASYCONFIGS / NAME, here)
    done = _report(site, version, '--easyconfig', NAME, cwd=here)
    assert f'; from {NAME} (budget 0, 1 known failure)' in done.stdout.splitlines()[0], done.stderr


@pytest.mark.parametrize('version', EB_VERSIONS)
def test_a_name_on_no_robot_path_is_one_line_naming_the_robot_path(site, version):
    done = _report(site, version, '--easyconfig', 'PyTorch-0.0-none.eb', cwd=site)
    one_line_error(done, 'PyTorch-0.0-none.eb: no such file, and no easyconfig of that name on the robot path (',
                   f"{site / 'first'}, {site / 'robot'}, {site / 'later'})")


def test_python_by_name_from_path_and_device_tests_as_an_easyconfig_writes_them(tmp_path):
    source = standin_source(tmp_path / 'src')
    shutil.copy(os.path.join(standins.TORCH_SOURCES, 'test', 'test_cudnn.py'), source / 'test')
    python = Path(sys.executable)
    env = dict(os.environ, PATH=f'{python.parent}{os.pathsep}{os.environ["PATH"]}', PYTHONPATH=SRC)
    done = subprocess.run([sys.executable, '-m', 'eb_pytorch_cuda', 'test-suite', str(source), '--python',
                           python.name, '--cuda-device-tests', 'False', '--results', str(tmp_path / 'results')],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode in (0, 1), done.stderr
    assert f'{shutil.which(python.name, path=env["PATH"])} run_test.py --continue-through-error' in done.stderr
    assert '== cuda_device_tests=False: ' in done.stderr and 'suite 1/1: test_cudnn' in done.stderr


@pytest.mark.parametrize('written', ['True', 'FALSE', 'false', 'Auto'])
def test_cuda_device_tests_takes_any_case(written):
    from eb_pytorch_cuda.cli import build_parser
    args = build_parser().parse_args(['test-suite', 'src', '--python', 'python3', '--cuda-device-tests', written])
    assert args.cuda_device_tests == written.lower()
