"""Our easyblock however a site deploys it (tests/deployments.py), with real eb 4.9.4 and 5.4.1.

In each deployment eb finds our EB_PyTorch (with our parameters), it extends upstream's, and the
extended dry run of the main job is clean: configure options from upstream's class, our test plan,
the hooks' plan.  Upstream's own easyblock tests on it: test_upstream_easyblock_suite.py.
"""

import re

import pytest

from deployments import KINDS, deploy
from eb_runner import EB_VERSIONS, HOOKS, REPO

MAIN_EC = 'PyTorch-2.1.2-foss-2023a-CUDA-12.1.1.eb'


@pytest.mark.parametrize('kind', KINDS)
@pytest.mark.parametrize('version', EB_VERSIONS)
def test_eb_uses_our_easyblock_and_the_main_job_dry_run_is_clean(tmp_path, version, kind):
    deployment = deploy(kind, version, tmp_path)
    done = deployment.eb('--avail-easyconfig-params', '--easyblock=EB_PyTorch')
    assert done.returncode == 0, done.stdout + done.stderr
    for parameter in ('cudnn_needed', 'known_test_failures', 'test_suite_timeout', 'excluded_tests'):
        assert re.search(rf'^\s*{parameter}\b', done.stdout, re.M), parameter

    options = ['-x', MAIN_EC, '--cuda-compute-capabilities=8.0,9.0']
    if kind != 'pip':  # the pip deployment's configuration file (eb-pytorch-cuda config) names all of these
        options += [f'--hooks={HOOKS}', f"--robot-paths={REPO / 'easyconfigs'}:"]
    deployment.env['EESSI_SOFTWARE_SUBDIR'] = 'x86_64/intel/haswell'
    done = deployment.eb(*options)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    assert "*** DRY RUN using 'EB_PyTorch' easyblock (easybuild.easyblocks.pytorch @ " in out
    assert 'ignoring error' not in out, re.findall(r'ignoring error.*', out)
    assert "export TORCH_CUDA_ARCH_LIST='8.0;9.0'" in out  # upstream's configure step
    assert 'test suite (eb_pytorch_cuda):' in out and 'budget for unknown failures: 2; reruns: 1' in out
    assert '[pytorch-cuda hooks] would add NEEDED libcudnn_cnn_train.so.8' in out
