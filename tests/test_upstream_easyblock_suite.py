"""Upstream easybuild-easyblocks' own easyblock tests, run on our easyblock in each deployment.

For EasyBuild 4.9.4 and 5.4.1, Lua and Tcl module syntax, and each way a site deploys the easyblock
(tests/deployments.py): upstream's init test (the file's text rules, instantiation, extra_options
format) and its --module-only test, unchanged (vendored in tests/upstream_easyblocks/, one directory per
upstream ref), plus: EB_PyTorch is ours, it extends upstream's (not itself), and upstream's
module-level API is importable from easybuild.easyblocks.pytorch.  Also upstream's flake8
configuration on our easyblock, as upstream's lint job runs it.
"""

import subprocess

import pytest

from deployments import KINDS, SUITE_REF, UPSTREAM_SUITES, OURS, deploy
from eb_runner import EB_VERSIONS, eb_venv


@pytest.mark.parametrize('syntax', ('Lua', 'Tcl'))
@pytest.mark.parametrize('kind', KINDS)
@pytest.mark.parametrize('version', EB_VERSIONS)
def test_upstream_init_and_module_only_tests_pass(tmp_path, version, kind, syntax):
    deployment = deploy(kind, version, tmp_path)
    command = [deployment.python, str(UPSTREAM_SUITES / 'run_suite.py'),
               '--suite-dir', str(UPSTREAM_SUITES / SUITE_REF[version]), '--easyblock', str(deployment.easyblock)]
    if deployment.include:
        command += ['--include', *map(str, deployment.include)]
    env = dict(deployment.env, EASYBUILD_MODULE_SYNTAX=syntax)
    del env['EASYBUILD_PREFIX']  # upstream's module-only test installs under its own --prefix
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    assert 'test_init_eb_pytorch_cuda' in out and 'test_module_only_eb_pytorch_cuda' in out
    assert f'deployment: EB_PyTorch from {deployment.easyblock}' in out
    module_file = '1.3.2.lua' if syntax == 'Lua' else '1.3.2'
    assert f"module files ({syntax}): ['" in out and f"/pytorch-py-sw/{module_file}']" in out
    assert 'upstream easyblock suite: passed (0 failure(s))' in out


@pytest.mark.parametrize('version', EB_VERSIONS)
def test_upstream_flake8_configuration_accepts_our_easyblock(version):
    config = UPSTREAM_SUITES / SUITE_REF[version] / 'flake8.cfg'
    done = subprocess.run([str(eb_venv('5.4.1') / 'bin' / 'flake8'), f'--config={config}', str(OURS)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize('version', EB_VERSIONS)
def test_easybuild_style_check_accepts_our_easyblock(version):
    # EasyBuild's own style check (pycodestyle, line length 120, its extra rules), as `eb --check-style` runs it
    script = ('import sys\nfrom easybuild.framework.easyconfig.style import check_easyconfigs_style\n'
              'sys.exit(check_easyconfigs_style([sys.argv[1]]))\n')
    done = subprocess.run([str(eb_venv(version) / 'bin' / 'python'), '-c', script, str(OURS)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
