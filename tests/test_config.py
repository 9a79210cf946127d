"""`eb-pytorch-cuda config` makes a real `eb` (4.9.4 and 5.4.1) use our easyblock, hooks and easyconfigs."""

import os
import subprocess

import pytest

from helpers import cli
from eb_runner import EB_VERSIONS, LMOD_CMD, REPO, eb_venv


def _show_config(version, tmp_path, extra_args=(), extra_env=None):
    venv = eb_venv(version)
    env = {k: v for k, v in os.environ.items() if not k.startswith('EASYBUILD_')}
    env.update({'PATH': f"{venv / 'bin'}:/usr/bin:/bin", 'EASYBUILD_PREFIX': str(tmp_path)}, **(extra_env or {}))
    done = subprocess.run([str(venv / 'bin' / 'eb'), '--show-config', *extra_args], env=env, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    return {line.split('(')[0].strip(): line.split('=', 1)[1].strip()
            for line in done.stdout.splitlines() if '=' in line}


def _expected(config, version):
    upstream = str(eb_venv(version) / 'easybuild' / 'easyconfigs')
    assert config['include-easyblocks'] == str(REPO / 'easybuild' / 'easyblocks' / 'p' / 'pytorch.py')
    assert config['hooks'] == str(REPO / 'hooks' / 'eb_hooks.py')
    assert config['robot-paths'] == f"{REPO / 'easyconfigs'}, {upstream}"


@pytest.mark.parametrize('version', EB_VERSIONS)
def test_config_file_is_used_by_eb(tmp_path, version):
    path = tmp_path / 'pytorch-cuda.cfg'
    path.write_text(cli('config', check_rc=0).stdout)
    _expected(_show_config(version, tmp_path, [f'--configfiles={path}']), version)


@pytest.mark.parametrize('version', EB_VERSIONS)
def test_environment_exports_are_used_by_eb(tmp_path, version):
    # the exports are parsed here, not sourced through a shell
    venv_cli = eb_venv(version) / 'bin' / 'eb-pytorch-cuda'
    text = subprocess.run([str(venv_cli), 'config', '--env'], capture_output=True, text=True, check=True).stdout
    exports = dict(line[len('export '):].split('=', 1) for line in text.splitlines())
    assert set(exports) == {'EASYBUILD_INCLUDE_EASYBLOCKS', 'EASYBUILD_HOOKS', 'EASYBUILD_ROBOT_PATHS'}
    _expected(_show_config(version, tmp_path, extra_env=exports), version)


def test_the_easyconfig_is_found_through_the_robot_path(tmp_path):
    path = tmp_path / 'pytorch-cuda.cfg'
    path.write_text(cli('config', check_rc=0).stdout)
    venv = eb_venv('5.4.1')
    env = {k: v for k, v in os.environ.items() if not k.startswith('EASYBUILD_')}
    env.update(PATH=f"{venv / 'bin'}:/usr/bin:/bin", EASYBUILD_PREFIX=str(tmp_path),
               EASYBUILD_ALLOW_USE_AS_ROOT_AND_ACCEPT_CONSEQUENCES='1', LMOD_CMD=LMOD_CMD)
    done = subprocess.run([str(venv / 'bin' / 'eb'), f'--configfiles={path}', '--search',
                           'PyTorch-2.1.2-foss-2023a-CUDA-12.1.1.eb'], env=env, capture_output=True, text=True)
    found = [line for line in done.stdout.splitlines() if 'PyTorch-2.1.2-foss-2023a-CUDA-12.1.1.eb' in line]
    assert found and str(REPO / 'easyconfigs') in found[0], done.stdout
