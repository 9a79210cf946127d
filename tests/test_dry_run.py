"""The extended dry run of the main job, on a machine with no CUDA and none of the dependencies installed.

`eb -x PyTorch-2.1.2-foss-2023a-CUDA-12.1.1.eb --cuda-compute-capabilities=8.0,9.0` with our
configuration completes without a single "ignoring error" and shows the whole plan.
"""

import os
import re
import subprocess
from pathlib import Path

import pytest

from helpers import cli
from eb_runner import EB_VERSIONS, LMOD_CMD, eb_venv

EC = 'PyTorch-2.1.2-foss-2023a-CUDA-12.1.1.eb'


def dry_run(version, tmp_path, configfile=None, target='x86_64/intel/haswell'):
    venv = eb_venv(version)
    env = {k: v for k, v in os.environ.items() if not k.startswith(('EASYBUILD_', 'EBROOT', 'EESSI_'))}
    env.update(PATH=f"{venv / 'bin'}:/usr/bin:/bin", LMOD_CMD=LMOD_CMD, EASYBUILD_PREFIX=str(tmp_path / 'eb'),
               EASYBUILD_MODULES_TOOL='Lmod', EASYBUILD_MODULE_SYNTAX='Lua', EESSI_SOFTWARE_SUBDIR=target,
               EASYBUILD_ALLOW_USE_AS_ROOT_AND_ACCEPT_CONSEQUENCES='1')
    command = [str(venv / 'bin' / 'eb'), '-x', EC, '--cuda-compute-capabilities=8.0,9.0']
    if configfile:
        command.insert(1, f'--configfiles={configfile}')
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    return done.returncode, done.stdout + done.stderr


@pytest.fixture
def configfile(tmp_path):
    path = tmp_path / 'pytorch-cuda.cfg'
    path.write_text(cli('config', check_rc=0).stdout)
    return path


@pytest.mark.parametrize('version', EB_VERSIONS)
def test_dry_run_is_clean_and_shows_the_whole_plan(tmp_path, configfile, version):
    code, out = dry_run(version, tmp_path, configfile)
    assert code == 0, out[-3000:]
    assert 'ignoring error' not in out, re.findall(r'ignoring error.*', out)
    # configure options
    assert "export TORCH_CUDA_ARCH_LIST='8.0;9.0'" in out
    assert re.search(r'USE_CUDA=1 CUDNN_LIB_DIR=\$EBROOTCUDNN/lib64', out)
    # the exact test command, run without a shell, with its exclusions
    assert re.search(r'command \(no shell\): \S+/bin/python run_test.py --continue-through-error --verbose '
                     r'-x test_cuda_expandable_segments distributed/test_distributed_spawn ', out)
    # the failure policy for this target
    assert 'scope: x86_64, target x86_64/intel/haswell, compute capabilities 8.0, 9.0' in out
    assert 'budget for unknown failures: 0; reruns: 1' in out
    # which CUDA device tests the step will run, and what decides it (issue 33): the main job has CUDA
    assert ("cuda_device_tests='auto': where the test step sees a GPU (nvidia-smi, CUDA_VISIBLE_DEVICES): CUDA and "
            "CPU device tests, SANDCASTLE=0; where it sees none: CPU device tests only, SANDCASTLE=1 "
            "(cuda_compute_capabilities: 8.0, 9.0)") in out
    # the batches at a time, and that long suites run as pieces with more than one (issue 33 item 5)
    assert ("as many calls as the test step's node holds (parallel_test_suites='auto': its CPUs, memory and GPU "
            "memory; run/node) (with more than one and the previous build's results, a suite longer than its share "
            "of the node, at least 120 s, runs as pieces side by side) at a time") in out.replace('\n', ' ')
    assert len(re.findall(r'^  known failure \[', out, re.M)) == 8  # cc 8.0 8; haswell has no public data
    assert 'known failure [8.0]: distributed/test_c10d_nccl (at most 1) -- PR 20156' in out
    # what the hooks will patch, with what, and the sanity checks
    assert ('[pytorch-cuda hooks] would add NEEDED libcudnn_cnn_train.so.8 (cuDNN 8.9.2.26-CUDA-12.1.1) '
            'to every libtorch_cuda.so') in out
    assert ('[pytorch-cuda hooks] sanity check: every installed libtorch_cuda.so must have NEEDED '
            'libcudnn_cnn_train.so.8') in out
    assert 'Sanity check commands' in out and 'libcaffe2_nvrtc.so' in out


@pytest.mark.parametrize('version', EB_VERSIONS)
def test_other_targets_get_their_own_known_failures(tmp_path, configfile, version):
    code, out = dry_run(version, tmp_path, configfile, target='aarch64/nvidia/grace')
    assert code == 0 and 'ignoring error' not in out
    assert len(re.findall(r'^  known failure \[', out, re.M)) == 8  # cc 8.0 8; grace has no public data
    assert ('known failures of scopes not in force here: aarch64/generic, aarch64/neoverse_n1, aarch64/neoverse_v1, '
            'x86_64/intel/cascadelake, x86_64/intel/icelake, x86_64/intel/sapphirerapids') in out


@pytest.mark.parametrize('version', EB_VERSIONS)
def test_upstream_alone_does_not_get_through_a_dry_run(tmp_path, version):
    # the reference we beat: the same easyconfig with upstream's easyblock and no hooks
    code, out = dry_run(version, tmp_path)
    assert len(re.findall(r'ignoring error', out)) >= 7


@pytest.mark.parametrize('version', EB_VERSIONS)
def test_the_easystack_of_the_main_job_plans_the_same_build(tmp_path, configfile, version):
    venv = eb_venv(version)
    env = {k: v for k, v in os.environ.items() if not k.startswith(('EASYBUILD_', 'EBROOT', 'EESSI_'))}
    env.update(PATH=f"{venv / 'bin'}:/usr/bin:/bin", LMOD_CMD=LMOD_CMD, EASYBUILD_PREFIX=str(tmp_path / 'eb'),
               EASYBUILD_MODULES_TOOL='Lmod', EASYBUILD_MODULE_SYNTAX='Lua',
               EASYBUILD_ALLOW_USE_AS_ROOT_AND_ACCEPT_CONSEQUENCES='1', EESSI_SOFTWARE_SUBDIR='x86_64/intel/haswell')
    easystack = Path(__file__).resolve().parent.parent / 'easyconfigs' / 'easystack-pytorch-cuda.yml'
    command = [str(venv / 'bin' / 'eb'), f'--configfiles={configfile}', '-x', '--easystack', str(easystack)]
    if version.startswith('4.'):
        command.append('--experimental')
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    assert "export TORCH_CUDA_ARCH_LIST='8.0;9.0'" in out and 'ignoring error' not in out
    assert len(re.findall(r'^  known failure \[', out, re.M)) == 8


# The policy each EESSI target resolves to (known_test_failures of the main easyconfig, per scope): the
# targets with public field data, and ones without (no entries: the first unnamed failure fails there)
FIELD_POLICY = {
    'aarch64/neoverse_v1': [
        '[aarch64/neoverse_v1]: inductor/test_torchinductor (at most 1) -- CpuTests.test_min_max_reduction_nan_cpu',
        '[aarch64/neoverse_v1]: test_model_dump (at most 2) -- no reason given in EESSI PR 444',
        '[aarch64/neoverse_v1]: test_ops (at most 2) -- no reason given in EESSI PR 444',
        '[aarch64/neoverse_v1]: test_linalg (at most 2) -- no reason given in EESSI PR 444',
        '[aarch64/neoverse_v1]: test_scatter_gather_ops (at most 1) -- on neoverse_v1 only',
    ],
    'aarch64/generic': [
        '[aarch64/generic]: inductor/test_torchinductor (at most 1)', '[aarch64/generic]: test_model_dump (at most 2)',
        '[aarch64/generic]: test_ops (at most 2)', '[aarch64/generic]: test_linalg (at most 2)',
    ],
    'x86_64/intel/icelake': [
        '[x86_64/intel/icelake]: dynamo/test_functions (at most 1) -- no reason given in EESSI issue 461',
        '[x86_64/intel/icelake]: dynamo/test_dynamic_shapes (at most 2) -- no reason given in EESSI issue 461',
    ],
    'x86_64/intel/sapphirerapids': [
        '[x86_64/intel/sapphirerapids]: dynamo/test_functions (at most 1)',
        '[x86_64/intel/sapphirerapids]: dynamo/test_dynamic_shapes (at most 2)',
        '[x86_64/intel/sapphirerapids]: test_proxy_tensor (at most 1) -- no reason given in EESSI issue 461',
    ],
    'aarch64/a64fx': [], 'aarch64/nvidia/grace': [], 'x86_64/intel/haswell': [], 'x86_64/amd/zen4': [],
}


@pytest.mark.parametrize('target', sorted(FIELD_POLICY))
@pytest.mark.parametrize('version', EB_VERSIONS)
def test_the_dry_run_shows_the_policy_resolved_for_each_target(tmp_path, configfile, version, target):
    code, out = dry_run(version, tmp_path, configfile, target=target)
    assert code == 0 and 'ignoring error' not in out, out[-3000:]
    assert f'target {target}, compute capabilities 8.0, 9.0' in out
    cpu = [line.strip() for line in re.findall(r'^  known failure (\[.*)$', out, re.M) if not line.startswith('[8.0]')]
    assert len(cpu) == len(FIELD_POLICY[target]), cpu
    for line, expected in zip(cpu, FIELD_POLICY[target]):
        assert line.startswith(expected), (line, expected)
    # the GPU generation's entries come with the compute capability, on every target
    assert len(re.findall(r'^  known failure \[8\.0\]: ', out, re.M)) == 8
    assert 'budget for unknown failures: 0; reruns: 1' in out
