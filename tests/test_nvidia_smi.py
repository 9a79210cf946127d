"""The one nvidia-smi reader (run/gpus) on a stand-in nvidia-smi: a real process on PATH that answers the queries
run/gpus makes as the real one does, because no GPU is here.  Its H200 is the H200 node's real answer
(tests/data/h200-cuda-visible-devices-probe.json: `0, GPU-8d175d91-..., 9.0, 143771` and nvidia-smi -L); its
second GPU, an A100, its MIG devices and the node without GPUs (`No devices were found`, exit status 6) are made
up in the same form, as no such node was lent here.  What is checked: the GPUs' memory bounds the batches, and, for
each CUDA_VISIBLE_DEVICES value on 0, 1 and 2 GPUs, the GPUs seen, the CUDA device tests' mode (SANDCASTLE=0 or
upstream's SANDCASTLE=1 left alone; True stops) and the compute capabilities the policy is scoped to.  (Here,
not in test_device_tests or test_testsuite_policy: their tier starts no process.)"""

import os
import shutil
import subprocess

import pytest

from helpers import H200, module_env, stand_in_nvidia_smi, standin_test_tree, suite_command

from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.testsuite import service
from eb_pytorch_cuda.testsuite.policy.judging import Policy, judge, known_failures
from eb_pytorch_cuda.testsuite.results.logparse import parse_log_text
from eb_pytorch_cuda.testsuite.run.gpus import gpu_compute_capabilities, gpu_count

A100 = ('1', 'GPU-5ad2c3e7-1b4f-4a43-9d0e-0c51f3a1b2c4', '8.0', '16384', 'NVIDIA A100-SXM4-80GB')  # made up
MIGS = ('MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f', 'MIG-cba663e8-9bed-5b25-b243-5985ef7c9beb')


def test_gpu_memory_bounds_the_batches_through_the_one_nvidia_smi_reader(tmp_path, monkeypatch):
    """memory.total as the real one answers it with nounits (`index, uuid, MiB`: 143771 MiB is the H200's);
    CUDA_VISIBLE_DEVICES picks the GPUs, set empty none."""
    from eb_pytorch_cuda.testsuite.run.node import gpu_memory_gib, this_node
    stand_in_nvidia_smi(tmp_path, [H200, A100])
    monkeypatch.setenv('PATH', str(tmp_path))
    assert gpu_memory_gib({}) == (143771 / 1024, 16.0)
    assert gpu_memory_gib({'CUDA_VISIBLE_DEVICES': '0'}) == (143771 / 1024,)
    assert gpu_memory_gib({'CUDA_VISIBLE_DEVICES': ''}) == ()
    assert gpu_memory_gib({'CUDA_VISIBLE_DEVICES': '2'}) == ()  # names no GPU here
    assert gpu_compute_capabilities({'CUDA_VISIBLE_DEVICES': '1'}) == ('8.0',)
    assert this_node({'CUDA_VISIBLE_DEVICES': '1'}).gpu_gib == (16.0,)
    assert this_node({'CUDA_VISIBLE_DEVICES': ''}).gpu_gib == ()


def test_compute_capability_scopes_follow_the_gpus_the_suites_run_on(tmp_path, monkeypatch):
    """Without nvidia-smi (this machine, for real) nothing is seen; with the H200 and an A100 beside it, a failure
    known on A100 nodes only is accepted where the suites run on the A100, by index or by UUID."""
    monkeypatch.setenv('PATH', str(tmp_path))
    assert shutil.which('nvidia-smi') is None and gpu_compute_capabilities({}) == ()
    assert gpu_compute_capabilities({'CUDA_VISIBLE_DEVICES': '0'}) == ()  # set, but no GPU to name
    stand_in_nvidia_smi(tmp_path, [H200, A100])
    assert gpu_compute_capabilities({}) == ('8.0', '9.0')
    assert gpu_compute_capabilities({'CUDA_VISIBLE_DEVICES': '0'}) == ('9.0',)
    assert gpu_compute_capabilities({'CUDA_VISIBLE_DEVICES': 'GPU-5ad2'}) == ('8.0',)  # a UUID: that GPU's
    assert gpu_compute_capabilities({'CUDA_VISIBLE_DEVICES': 'GPU-198b8bd4'}) == ()  # another node's GPU
    assert gpu_compute_capabilities({'CUDA_VISIBLE_DEVICES': '7'}) == ()
    result = parse_log_text('Running test_nn 1/1 ... [\nFAIL: test_x (__main__.TestNN)\nRan 3 tests in 0.1s\n\n'
                            'FAILED (failures=1)\n')
    a100_only = {'8.0': [('test_nn', 'fails on A100 nodes only', 1)]}
    for visible, passed in (('0', False), ('1', True), (H200[1], False), (A100[1][:12], True)):
        context = service.scope_context(('9.0',), True, {'CUDA_VISIBLE_DEVICES': visible}, target='x86_64/generic')
        assert judge(result, Policy(0, known_failures(a100_only, context))).passed is passed, visible


NODES = {'none': ([], ()), 'H200': ([H200], ()), 'H200+A100': ([H200, A100], ()), 'H200+A100 MIG': ([H200, A100], MIGS)}
CAPABILITY = {'0': '9.0', '1': '8.0', MIGS[0]: '8.0', MIGS[1]: '8.0'}
UNSET = None
# CUDA_VISIBLE_DEVICES -> {node: the GPUs seen}; a node not named sees none
CASES = [
    (UNSET, {'H200': ['0'], 'H200+A100': ['0', '1'], 'H200+A100 MIG': ['0', '1']}),
    ('0', {'H200': ['0'], 'H200+A100': ['0'], 'H200+A100 MIG': ['0']}),
    ('1', {'H200+A100': ['1'], 'H200+A100 MIG': ['1']}),
    ('7', {}),  # an index too high: CUDA sees no GPU
    ('1,0', {'H200+A100': ['1', '0'], 'H200+A100 MIG': ['1', '0']}),
    ('0,7,1', {'H200': ['0'], 'H200+A100': ['0'], 'H200+A100 MIG': ['0']}),
    (H200[1], {'H200': ['0'], 'H200+A100': ['0'], 'H200+A100 MIG': ['0']}),  # a UUID
    ('GPU-5ad2', {'H200+A100': ['1'], 'H200+A100 MIG': ['1']}),  # a UUID's prefix (a GPU in MIG mode counts
    # as the GPU nvidia-smi lists: what CUDA makes of it is not modelled); a MIG device: its GPU's capability
    (MIGS[1], {'H200+A100 MIG': [MIGS[1]]}),
    ('', {}), ('-1', {}), ('0,0', {})]


@pytest.mark.parametrize('node', list(NODES))
@pytest.mark.parametrize('visible, seen', CASES)
def test_the_gpus_seen_the_mode_and_the_policy_scope_for_each_cuda_visible_devices(
        tmp_path, monkeypatch, node, visible, seen):
    """'auto' with a CUDA build: SANDCASTLE=0 exactly where a GPU is left, else nothing set (upstream's
    SANDCASTLE=1 stays); True stops where none is left, in one line saying why; the policy's compute
    capabilities are those of the GPUs left (none left: the build's, here '7.0')."""
    gpus, migs = NODES[node]
    stand_in_nvidia_smi(tmp_path, gpus, migs)
    monkeypatch.setenv('PATH', str(tmp_path))
    env = {} if visible is None else {'CUDA_VISIBLE_DEVICES': visible}
    names = seen.get(node, [])
    capabilities = tuple(sorted({CAPABILITY[name] for name in names}))
    assert gpu_count(env) == names
    mode = service.device_test_mode('auto', lambda: True, env)
    assert (mode.enabled, mode.environment, list(mode.gpus)) == \
        (bool(names), {'SANDCASTLE': '0'} if names else {}, names), mode.describe()
    if names:
        assert mode.reason == f"{len(names)} GPU(s) seen ({', '.join(names)}), the build has CUDA"
        assert service.device_test_mode(True, lambda: True, env).environment == {'SANDCASTLE': '0'}
    else:
        assert mode.reason.startswith('no GPU seen: ')
        with pytest.raises(PluginError) as raised:
            service.device_test_mode(True, lambda: True, env)
        assert str(raised.value) == ('cuda_device_tests: is True, but the test step cannot run CUDA tests here: '
                                     + mode.reason)
    assert gpu_compute_capabilities(env) == capabilities
    assert service.scope_context(('7.0',), True, env).compute_capabilities == (capabilities or ('7.0',))


def test_the_reasons_name_the_value_and_what_nvidia_smi_lists(tmp_path, monkeypatch):
    monkeypatch.setenv('PATH', str(tmp_path))
    mode = service.device_test_mode('auto', lambda: True, {'CUDA_VISIBLE_DEVICES': '0'})
    assert mode.reason == "no GPU seen: no nvidia-smi on PATH (CUDA_VISIBLE_DEVICES='0' names none)"
    stand_in_nvidia_smi(tmp_path, [])
    assert service.device_test_mode('auto', lambda: True, {}).reason == \
        'no GPU seen: nvidia-smi exited 6 (No devices were found)'
    stand_in_nvidia_smi(tmp_path, [H200])
    assert service.device_test_mode('auto', lambda: True, {'CUDA_VISIBLE_DEVICES': '7'}).reason == \
        "no GPU seen: CUDA_VISIBLE_DEVICES='7' names none of the 1 GPU(s) nvidia-smi lists"


def _counting_tree(root):
    """The stand-in source tree (one suite), its run_test.py writing a line to $RUN_TEST_CALLS each time it is
    started, the dry run that lists the suites included: a step that stops before any suite runs starts none."""
    test_dir = standin_test_tree(root, keep=('test_known_failure',), distributed=False)
    run_test = test_dir / 'run_test.py'
    run_test.write_text("import os, sys\nwith open(os.environ['RUN_TEST_CALLS'], 'a') as calls:\n"
                        "    calls.write(' '.join(sys.argv[1:]) + '\\n')\n" + run_test.read_text())
    return root


def test_true_with_no_visible_gpu_stops_before_run_test_py_starts(tmp_path):
    """One GPU and CUDA_VISIBLE_DEVICES=7 (CUDA sees none, as on the H200): a run would give 0 CUDA tests and,
    with 'auto', a PASS.  So `test-suite --cuda-device-tests true` stops in one line, exit 2, with no
    run_test.py started and no results written; 'auto' runs the suites without the CUDA mode (the tree's
    run_test.py is started: the count means something)."""
    source = _counting_tree(tmp_path / 'src')
    stand_in_nvidia_smi(tmp_path / 'bin', [H200])
    calls = tmp_path / 'calls'
    env = dict(module_env(), PATH=f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}", CUDA_VISIBLE_DEVICES='7',
               RUN_TEST_CALLS=str(calls))
    stopped = subprocess.run(suite_command(source, tmp_path / 'true', '--cuda-device-tests', 'true'), env=env,
                             capture_output=True, text=True, timeout=300)
    errors = [line for line in stopped.stderr.splitlines() if not line.startswith('== ')]
    assert stopped.returncode == 2 and stopped.stdout == '' and len(errors) == 1, stopped.stderr
    assert errors[0].endswith("cuda_device_tests: is True, but the test step cannot run CUDA tests here: no GPU "
                              "seen: CUDA_VISIBLE_DEVICES='7' names none of the 1 GPU(s) nvidia-smi lists"), errors
    assert not calls.exists() and not (tmp_path / 'true').exists()
    ran = subprocess.run(suite_command(source, tmp_path / 'auto', '--cuda-device-tests', 'auto'), env=env,
                         capture_output=True, text=True, timeout=300)
    assert ran.returncode in (0, 1), ran.stderr[-3000:]
    assert ("== cuda_device_tests='auto': upstream's device tests (CPU only under SANDCASTLE=1): no GPU seen: "
            "CUDA_VISIBLE_DEVICES='7' names none of the 1 GPU(s) nvidia-smi lists; sets nothing") in ran.stderr
    assert calls.exists() and any('test_known_failure' in line for line in calls.read_text().splitlines())
    assert (tmp_path / 'auto' / 'pytorch-test-results.json').exists()
