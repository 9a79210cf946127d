"""The one nvidia-smi reader (run/gpus.query_gpus) on a stand-in nvidia-smi, a real process that answers as the
real one did on the H200 node: the GPUs' memory bounds the batches, and known failures scoped to a compute
capability follow the GPUs the suites run on.  (From test_device_tests and test_testsuite_policy, whose tier
starts no process: issue 34, item 6.)"""

import os

from eb_pytorch_cuda.testsuite.policy.judging import Policy, judge, known_failures
from eb_pytorch_cuda.testsuite.results.logparse import parse_log_text
from eb_pytorch_cuda.testsuite.run.gpus import gpu_compute_capabilities


def test_gpu_memory_bounds_the_batches_through_the_one_nvidia_smi_reader(tmp_path, monkeypatch):
    """A stand-in nvidia-smi answers memory.total as the real one does (`index, MiB` with nounits: 143771 MiB is
    the H200's, KINDS.md); CUDA_VISIBLE_DEVICES picks the GPUs, set empty none."""
    from eb_pytorch_cuda.testsuite.run.node import gpu_memory_gib, this_node
    script = tmp_path / 'nvidia-smi'
    script.write_text('#!/bin/sh\ncase "$*" in *memory.total*) printf "0, 143771\\n1, 16384\\n";; '
                      '*) printf "0, 9.0\\n1, 8.0\\n";; esac\n')
    script.chmod(0o755)
    monkeypatch.setenv('PATH', str(tmp_path))
    assert gpu_memory_gib({}) == (143771 / 1024, 16.0)
    assert gpu_memory_gib({'CUDA_VISIBLE_DEVICES': '0'}) == (143771 / 1024,)
    assert gpu_memory_gib({'CUDA_VISIBLE_DEVICES': ''}) == ()
    assert gpu_compute_capabilities({'CUDA_VISIBLE_DEVICES': '1'}) == ('8.0',)
    assert this_node({'CUDA_VISIBLE_DEVICES': '1'}, cuda_device_tests=True).gpu_gib == (16.0,)
    assert this_node({}, cuda_device_tests=False).gpu_gib == ()


def test_known_failures_scoped_to_a_compute_capability_follow_the_gpus_the_suites_run_on(tmp_path, monkeypatch):
    """nvidia-smi's real answer on the H200 node (docs/validation/gpu.md), replayed by a stand-in nvidia-smi:
    no GPU can be shown on this machine.  Without nvidia-smi (this machine, for real) nothing is seen."""
    import shutil
    from eb_pytorch_cuda.testsuite.policy.judging import detect_context
    monkeypatch.setenv('PATH', str(tmp_path))
    assert shutil.which('nvidia-smi') is None and gpu_compute_capabilities({}) == ()
    recorded = os.path.join(os.path.dirname(__file__), 'data', 'h200-nvidia-smi-query-compute-cap.txt')
    answer = open(recorded).read() + '1, 8.0\n'  # a second GPU, an A100, beside the recorded H200
    script = tmp_path / 'nvidia-smi'
    script.write_text('#!/bin/sh\n/bin/cat <<"EOF"\n' + answer + 'EOF\n')
    script.chmod(0o755)
    assert gpu_compute_capabilities({}) == ('8.0', '9.0')
    assert gpu_compute_capabilities({'CUDA_VISIBLE_DEVICES': '0'}) == ('9.0',)
    assert gpu_compute_capabilities({'CUDA_VISIBLE_DEVICES': 'GPU-198b8bd4'}) == ('8.0', '9.0')  # UUIDs: all
    assert gpu_compute_capabilities({'CUDA_VISIBLE_DEVICES': '7'}) == ()
    # one test_nn failure, known on A100 nodes only: accepted where the suites ran on the A100, not on the H200
    result = parse_log_text('Running test_nn 1/1 ... [\nFAIL: test_x (__main__.TestNN)\nRan 3 tests in 0.1s\n\n'
                            'FAILED (failures=1)\n')
    a100_only = {'8.0': [('test_nn', 'fails on A100 nodes only', 1)]}
    for visible, passed in (('0', False), ('1', True)):
        context = detect_context(gpu_compute_capabilities({'CUDA_VISIBLE_DEVICES': visible}), target='x86_64/generic')
        assert judge(result, Policy(0, known_failures(a100_only, context))).passed is passed, visible
