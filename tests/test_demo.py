"""`eb-pytorch-cuda demo` runs the whole pipeline with real eb (4.9.4 and 5.4.1) and says what it did.

Also in the stock venvs of tools/setup.sh (`python3 -m venv`, `pip install easybuild==X .`: setuptools
65.5, the package a plain install), as a user runs it: with 5.4.1 in one command since `wheel`, which
EasyBuild 5's pip needs to build the stand-ins there, is a declared dependency.
"""

import os
import re
import subprocess
import sys

import pytest

from deployments import stock_venv
from eb_runner import EB_VERSIONS, LMOD_CMD, eb_venv

ENVIRONMENTS = [*(f'eb-{version}' for version in EB_VERSIONS), 'stock-4.9.4', 'stock-5.4.1']


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
    # the Markdown report as a terminal shows it: its escapes, kept in the file for a renderer, taken out
    assert "CUDA device tests: cuda_device_tests='auto': " in out and '\\_' not in out
    assert 'rerun of test_flaky::TestFlaky.test_sometimes: flaky' in out
    assert 'mapped by a real load' in out
    assert 'without the NEEDED entry (what EESSI hit): exit 1' in out
    assert 'libcudnn_cnn_train.so.8: cannot open shared object file' in out
    assert 'as installed: exit 0' in out and 'torch_conv(20) = 41' in out
    assert (tmp_path / 'easybuild' / 'modules' / 'all' / 'PyTorch' / '2.1.2-standin-easyblock.lua').exists()
    # the test step says the policy's CPU target and where it came from (here no $EESSI_SOFTWARE_SUBDIR)
    log = (tmp_path / 'eb-output.log').read_text()
    assert re.search(r'^== policy scope: target (\S+ \(detected by archspec\)|unknown \(fallback x86_64/generic: '
                     r'neither \$EESSI_SOFTWARE_SUBDIR nor archspec names it; entries scoped to a CPU target will '
                     r'not apply)', log, re.M), log
    # doctor on the installations (PyTorch, its cuDNN, OpenBLAS), no --from: it starts at libtorch_cuda.so as PyTorch
    # does, and the layout the real loader loads above is judged fine (before: exit 1, cuDNN's cnn_infer loaded by
    # itself could not dlopen() cnn_train)
    doctor = subprocess.run([str(venv / 'bin' / 'eb-pytorch-cuda'), 'doctor', str(tmp_path / 'easybuild' / 'software')],
                            env=env, capture_output=True, text=True, timeout=300)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert doctor.stdout.splitlines()[0].endswith('nothing found')
    assert 'libtorch_cuda.so, as PyTorch loads it' in doctor.stdout


def test_demo_says_up_front_when_eb_5_cannot_build_wheels_with_this_python(tmp_path):
    # a venv as `python3 -m venv` makes it (setuptools 65.5, no `wheel`), nothing installed: EasyBuild 5
    # installs the stand-ins with pip run by this Python; the check runs before anything is written
    from eb_pytorch_cuda.eb.demo import check_wheel_building
    from eb_pytorch_cuda.errors import PluginError
    bare = tmp_path / 'bare'
    subprocess.run([sys.executable, '-m', 'venv', '--without-pip', str(bare)], check=True)
    python = str(bare / 'bin' / 'python')
    with pytest.raises(PluginError) as raised:
        check_wheel_building(python)
    assert str(raised.value) == (
        f"{python}: cannot build wheels (no `wheel` package, setuptools older than 70.1), which EasyBuild 5.4.1 "
        f"needs to install the stand-ins: `{python} -m pip install wheel`")
