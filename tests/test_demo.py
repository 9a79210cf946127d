"""`eb-pytorch-cuda demo` runs the whole pipeline with real eb (4.9.4 and 5.4.1) and says what it did.

Also in the stock venv of tools/setup.sh (`python3 -m venv`, `pip install easybuild==4.9.4 .`: setuptools
65.5, no wheel, the package a plain install), as a user runs it.
"""

import os
import subprocess

import pytest

from deployments import stock_venv
from eb_runner import EB_VERSIONS, LMOD_CMD, eb_venv

ENVIRONMENTS = [*(f'eb-{version}' for version in EB_VERSIONS), 'stock-4.9.4']


@pytest.mark.parametrize('environment', ENVIRONMENTS)
def test_demo_builds_tests_patches_checks_and_shows_the_prevented_error(tmp_path, environment):
    kind, version = environment.split('-', 1)
    venv = stock_venv(version) if kind == 'stock' else eb_venv(version)
    env = {k: v for k, v in os.environ.items() if not k.startswith('EASYBUILD_')}
    env['LMOD_CMD'] = LMOD_CMD
    done = subprocess.run([str(venv / 'bin' / 'eb-pytorch-cuda'), 'demo', '--workdir', str(tmp_path)],
                          env=env, capture_output=True, text=True, timeout=600)
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    if os.geteuid() == 0:
        assert 'running as root: passing --allow-use-as-root-and-accept-consequences to eb' in out
    assert '== verdict: PASS' in out and '### PyTorch 2.1.2 test suite: PASS' in out
    assert 'rerun of test_flaky::TestFlaky.test_sometimes: flaky' in out
    assert 'mapped by a real load' in out
    assert 'without the NEEDED entry (what EESSI hit): exit 1' in out
    assert 'libcudnn_cnn_train.so.8: cannot open shared object file' in out
    assert 'as installed: exit 0' in out and 'torch_conv(20) = 41' in out
    assert (tmp_path / 'easybuild' / 'modules' / 'all' / 'PyTorch' / '2.1.2-standin-easyblock.lua').exists()


def test_demo_says_up_front_when_eb_5_cannot_build_wheels_with_this_python(tmp_path):
    # the stock 5.4.1 venv: setuptools 65.5 without `wheel`; EasyBuild 5 installs the stand-ins with pip
    venv = stock_venv('5.4.1')
    env = {k: v for k, v in os.environ.items() if not k.startswith('EASYBUILD_')}
    env['LMOD_CMD'] = LMOD_CMD
    workdir = tmp_path / 'demo'
    done = subprocess.run([str(venv / 'bin' / 'eb-pytorch-cuda'), 'demo', '--workdir', str(workdir)],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"eb-pytorch-cuda: error: {venv / 'bin' / 'python'}: cannot build wheels (no `wheel` package, setuptools "
        f"older than 70.1), which EasyBuild 5.4.1 needs to install the stand-ins: "
        f"`{venv / 'bin' / 'python'} -m pip install wheel`"]
    assert not workdir.exists()
