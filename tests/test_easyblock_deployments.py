"""Our easyblock however a site deploys it (tests/deployments.py), with real eb 4.9.4 and 5.4.1.

In each deployment eb finds our EB_PyTorch (with our parameters), it extends upstream's, and the
extended dry run of the main job is clean: configure options from upstream's class, our test plan,
the hooks' plan.  Upstream's own easyblock tests on it: test_upstream_easyblock_suite.py.
"""

import os
import re
import shutil
import subprocess
import sys

import pytest

from deployments import KINDS, OURS, base_env, deploy
from eb_runner import EB_VERSIONS, HOOKS, REPO, eb_venv

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
    assert 'test suite (eb_pytorch_cuda):' in out and 'budget for unknown failures: 0; reruns: 1' in out
    assert '[pytorch-cuda hooks] would add NEEDED libcudnn_cnn_train.so.8' in out


def test_a_site_tree_without_upstream_pytorch_anywhere_gets_a_clear_error(tmp_path):
    # a site fork of easybuild-easyblocks whose p/pytorch.py is ours, and no easybuild-easyblocks installed:
    # there is no upstream EB_PyTorch to extend; the easyblock must say so, not load itself (RecursionError)
    venv = tmp_path / 'venv'
    subprocess.run([sys.executable, '-m', 'venv', '--without-pip', str(venv)], check=True)
    framework = next((eb_venv('5.4.1') / 'lib').glob('python3*/site-packages'))
    tree = tmp_path / 'site'
    shutil.copytree(framework / 'easybuild', tree / 'easybuild', ignore=shutil.ignore_patterns('__pycache__'))
    shutil.copy(OURS, tree / 'easybuild' / 'easyblocks' / 'p' / 'pytorch.py')
    (tmp_path / 'deps').mkdir()
    (tmp_path / 'deps' / 'elftools').symlink_to(framework / 'elftools')
    env = base_env(venv, tmp_path / 'eb')
    env['PYTHONPATH'] = os.pathsep.join([str(tree), str(REPO / 'src'), str(tmp_path / 'deps')])
    done = subprocess.run([str(venv / 'bin' / 'python'), '-c', 'import easybuild.easyblocks.pytorch'], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and 'RecursionError' not in done.stderr
    assert ("EasyBuildError: eb-pytorch-cuda: upstream EB_PyTorch (easybuild-easyblocks' p/pytorch.py) not found "
            f"on the easyblocks search path {tree / 'easybuild' / 'easyblocks'}") in done.stderr, done.stderr[-2000:]
