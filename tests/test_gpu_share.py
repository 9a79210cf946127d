"""A GPU's memory shared by the calls on it (run/gpu_share, the plugin eb_pytorch_cuda_gpu_share): each suite
process capped at the harness's own share of one call, the node rule that counts each process for
GPU_GIB_PER_PROCESS, and the plugin loaded by PyTorch's real 2.6.0 harness into each pytest session of a suite,
where it tells what it did.

On this CPU-only machine CUDA is never initialised, so the harness's sessions show the two branches that leave
the cap as it is (the `-m serial` session without NUM_PARALLEL_PROCS, the pool's session with it and no CUDA);
the branch that sets the cap needs a GPU: the H100 round of validation/h100-2026-12-07-bench-gpu-share-harness/
shows it in each suite log of ours beside others (tests/test_gpu_bench_records.py).
"""

import os
import shutil
import subprocess

import pytest
from environment import REAL_PYTHON as PYTHON, REPO, missing
from helpers import H200, cli, real_tree, stand_in_nvidia_smi
from scratch import scratch_dir

from eb_pytorch_cuda.harness_plugin import eb_pytorch_cuda_gpu_share as plugin
from eb_pytorch_cuda.testsuite.run import gpu_share, node
from eb_pytorch_cuda.testsuite.run.plugins import PLUGIN_DIR

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'data')
PROBE = os.path.join(DATA, 'retry_probe', 'test_eb_retry_probe.py')
PYTHON21 = os.path.join(REPO, '.venvs', 'harness-2.1', 'bin', 'python')
PYTEST_INI = os.path.join(DATA, 'pytorch26-plain', 'pytest.ini')  # upstream's top-level one (test_harness_retries)


def test_plugin_and_step_name_the_same_variable_and_allowance():
    """The plugin imports nothing of ours (it runs in the test Python): its constants are copies, kept equal."""
    assert plugin.VARIABLE == gpu_share.VARIABLE
    assert plugin.OTHER_LIBRARIES_GIB == gpu_share.OTHER_LIBRARIES_GIB
    assert os.path.isfile(os.path.join(PLUGIN_DIR, gpu_share.PLUGIN + '.py'))


def test_share_is_common_utils_formula_for_one_call():
    """A call of 3 on the H100 (torch's total_memory, 79.18 GiB): common_utils' own 0.32 (rounded there), 25.54
    GiB a process, the plugin's and the run line's formula alike (the line reads nvidia-smi's size, a little
    more); the 3 caps with their allowances add up to the GPU."""
    assert round(plugin.share(79.18, 3), 2) == 0.32
    each = plugin.share(79.18, 3) * 79.18
    assert abs(each - gpu_share.harness_share_gib(79.18, 3)) < 1e-9 and abs(each - 25.5433) < 1e-3
    assert abs(3 * (each + gpu_share.OTHER_LIBRARIES_GIB) - 79.18) < 1e-9


def test_processes_on_a_gpu_count_every_call_pinned_to_it():
    assert gpu_share.processes_on_a_gpu(6, ['0'], 3) == 18
    assert gpu_share.processes_on_a_gpu(6, ['0', '1'], 3) == 9
    assert gpu_share.processes_on_a_gpu(5, ['0', '1'], 2) == 6  # slots round robin: 3 calls on GPU 0
    assert gpu_share.processes_on_a_gpu(1, ['0'], 3) == 3


def test_share_environment_adds_the_plugin_once():
    env = gpu_share.share_environment({'PYTEST_PLUGINS': 'other', 'PYTHONPATH': '/inst/lib'}, 3)
    again = gpu_share.share_environment(env, 3)
    assert again == env
    assert env['PYTEST_PLUGINS'] == 'other,' + gpu_share.PLUGIN
    assert env['PYTHONPATH'].split(os.pathsep) == ['/inst/lib', PLUGIN_DIR]
    assert env[gpu_share.VARIABLE] == '3'


def test_node_rule_counts_each_process_for_3_gib():
    """The H100 node of 2026-12-06 (16 CPUs, 79.18 GiB GPU): 6 calls, 18 processes counted for 3 GiB and
    common_utils' allowance each; the H200 node (139.8 GiB): the 16 CPUs bound it at 8 (the GPU would take 12); a
    23 GiB GPU takes one call (upstream's own test step); two such GPUs two."""
    h100 = node.NodeSize(16, 120.0, (79.18,))
    assert h100.slots() == 6
    assert 'counting 3 GiB of GPU a suite process (not a cap)' in h100.describe()
    assert node.NodeSize(16, 120.0, (139.8,)).slots() == 8
    assert gpu_share.calls_a_gpu_takes(139.8, 3, node.GPU_GIB_PER_PROCESS) == 12
    assert node.NodeSize(16, 120.0, (23.0,)).slots() == 1
    assert node.NodeSize(16, 120.0, (23.0, 23.0)).slots() == 2
    for gib in (7.4, 23.0, 79.18, 139.8):
        calls = gpu_share.calls_a_gpu_takes(gib, node.POOL_PROCESSES, node.GPU_GIB_PER_PROCESS)
        if calls > 1:
            assert calls * node.POOL_PROCESSES * (node.GPU_GIB_PER_PROCESS + gpu_share.OTHER_LIBRARIES_GIB) <= gib


def test_real_harness_loads_the_plugin_in_each_session(harness26, tmp_path_factory):
    """run_test.py 2.6.0 on one suite with a sharing call's environment: the pool's session loads the plugin,
    which arms the cap for when CUDA starts (never here) and starts no CUDA; and the session does not see
    NUM_PARALLEL_PROCS: run_test.py sets it after it spawned its pool, so common_utils caps none of a call's
    first 3 suites itself."""
    with scratch_dir(tmp_path_factory, 'gpu-share') as root:
        test_dir = real_tree(root / 'pytorch')
        counts = root / 'counts'
        counts.mkdir()
        os.symlink(PROBE, test_dir / os.path.basename(PROBE))
        env = {name: value for name, value in os.environ.items() if name not in ('CI', 'NUM_PARALLEL_PROCS')}
        env.update(EB_RETRY_PROBE_DIR=str(counts), EB_RETRY_PROBE_SECONDS='0')
        env = gpu_share.share_environment(env, 3)
        done = subprocess.run([PYTHON, 'run_test.py', '--continue-through-error', '--pipe-logs', '-i',
                               'test_eb_retry_probe'], cwd=test_dir, env=env, capture_output=True, text=True,
                              timeout=600)
        output = done.stdout + done.stderr
    assert 'Running parallel tests on 3 processes' in output, output[-3000:]
    sessions = [line for line in output.splitlines() if line.startswith('Executing [')]
    assert any("'-m', 'serial'" in line for line in sessions), sessions
    assert any("'-m', 'not serial'" in line for line in sessions), sessions
    headers = [line for line in output.splitlines() if line.startswith('eb-pytorch-cuda GPU share:')]
    # the pool's session prints pytest's header and summary (its `-m serial` session of 0 tests, here, does not)
    assert headers and set(headers) == {'eb-pytorch-cuda GPU share: this process capped at the share of a call of '
                                        '3 when CUDA starts; NUM_PARALLEL_PROCS=unset',
                                        'eb-pytorch-cuda GPU share: none set (CUDA did not start in this process)'
                                        }, output[-3000:]
    assert 'GPU share: none (' not in output  # the count reached the plugin


ARM_AND_START = r'''
import os, sys
os.environ['EB_PYTORCH_CUDA_GPU_PROCESSES'] = '3'
import torch
sys.path.insert(0, sys.argv[1])
import eb_pytorch_cuda_gpu_share as plugin
queued = len(torch.cuda._queued_calls)
plugin.pytest_configure(None)
print(plugin.pytest_report_header(None)[0])
print('queued', len(torch.cuda._queued_calls) - queued, 'initialised', torch.cuda.is_initialized())
torch.cuda._queued_calls[-1][0]()  # what torch's lazy CUDA start runs: here, with no GPU, it fails inside
print('returned')
class Reporter:
    def write_line(self, line):
        print(line)
plugin.pytest_terminal_summary(Reporter())
'''


@pytest.mark.parametrize('python', [PYTHON, PYTHON21], ids=['torch2.6.0', 'torch2.1.2'])
def test_the_cap_waits_in_torchs_own_queue_for_cuda_to_start(harness26, python):
    """With the real torch wheels (2.6.0 of the 2.6 harness, 2.1.2 of the 2.1 line's), the plugin arms the cap as a
    call queued for torch's lazy CUDA start, without starting CUDA; run as torch would run it on a node without a
    GPU, it raises nothing (torch would raise it from the test that started CUDA) and writes nothing (it would be
    the test's captured output): the session's terminal summary says it set none, and why."""
    if not os.access(python, os.X_OK):
        missing(f'{python} is missing')
    done = subprocess.run([python, '-c', ARM_AND_START, PLUGIN_DIR], capture_output=True, text=True, timeout=300,
                          env={name: value for name, value in os.environ.items() if name != 'CUDA_VISIBLE_DEVICES'})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:3] == [
        'eb-pytorch-cuda GPU share: this process capped at the share of a call of 3 when CUDA starts; '
        'NUM_PARALLEL_PROCS=unset', 'queued 1 initialised False', 'returned']
    assert len(lines) == 4 and lines[3].startswith('eb-pytorch-cuda GPU share: none set (RuntimeError: '), lines
    assert done.stderr == '', done.stderr


def test_share_line_says_each_process_cap_the_reruns_and_warns_over_the_count():
    """The run's line: on the H200 (143771 MiB) 6 processes (2 calls of 3) each capped at a call's share, about
    46.0 GiB, with reruns on; 48 processes (16 calls of 3 asked for) on its 80 GiB neighbour: counted for more than
    the GPU holds, a warning naming the setting; with no reruns the line says a test out of memory stays failed and
    what reruns it; a GPU too small for any share; without nvidia-smi's memory the line says only the cap's rule."""
    gib = 143771 / 1024
    head = ("GPU memory: up to 6 suite processes on each GPU, each capped at PyTorch's own share of a call of 3 "
            "when CUDA ")
    bound = '; the caps bound each process, not their sum'
    rerun = '; a test out of memory beside the others is rerun alone after the suites'
    assert gpu_share.share_line(6, 3, (gib,), 1) == (head + 'starts in it (about 46.0 GiB of 140 GiB)' + bound + rerun
                                                     + ' (run/gpu_share)')
    assert gpu_share.share_line(48, 3, (gib, 80.0), 1).endswith(
        ' (about 25.8 GiB of 80 GiB)' + bound + rerun + '; counted for more than the GPU holds (3 GiB a process, as '
        'parallel_test_suites=auto counts them): tests may run out of GPU memory, set parallel_test_suites lower '
        '(run/gpu_share)')
    assert gpu_share.share_line(6, 3, (gib,), 0).endswith(
        bound + '; a test out of memory beside the others stays failed: rerun_failed_tests = 0 (1 reruns it alone '
        'after the suites) (run/gpu_share)')
    assert ' (none of 2 GiB: uncapped)' + bound in gpu_share.share_line(3, 3, (2.0,), 1)
    assert gpu_share.share_line(6, 3, (), 1) == head + 'starts in it' + bound + rerun + ' (run/gpu_share)'


def test_a_parallel_run_where_a_gpu_is_seen_caps_its_suites_at_a_calls_share(harness26, tmp_path_factory):
    """test-suite --parallel 2 on the real 2.6.0 harness where an H200 is seen (a stand-in nvidia-smi: this machine
    has none): the run says each suite process's cap (2 calls of 3 processes on 140 GiB, each the share of a call
    of 3), and the suite's pytest session, started by the real run_test.py, loads the plugin with that count."""
    with scratch_dir(tmp_path_factory, 'gpu-share-run') as root:
        tree, counts = root / 'pytorch', root / 'counts'
        test_dir = real_tree(tree)
        shutil.copy(PYTEST_INI, tree / 'pytest.ini')
        os.symlink(PROBE, test_dir / os.path.basename(PROBE))
        counts.mkdir()
        fake = root / 'bin'
        stand_in_nvidia_smi(fake, [H200])
        env = {name: value for name, value in os.environ.items() if name not in ('CI', 'CUDA_VISIBLE_DEVICES')}
        env.update(EB_RETRY_PROBE_DIR=str(counts), EB_RETRY_PROBE_SECONDS='0',
                   PATH=f"{fake}{os.pathsep}{os.environ['PATH']}")
        done = cli('test-suite', tree, '--python', PYTHON, '--runtest',
                   'cd test && %(python)s run_test.py --continue-through-error -i test_eb_retry_probe',
                   '--parallel', '2', '--rerun', '0', '--results', root / 'results', timeout=900, env=env)
        logs = ''.join(open(path, errors='replace').read() for path in (root / 'results' / 'output').glob('*.log'))
    each = 143771 / 1024 / 3 - gpu_share.OTHER_LIBRARIES_GIB
    assert (f"GPU memory: up to 6 suite processes on each GPU, each capped at PyTorch's own share of a call of 3 "
            f"when CUDA starts in it (about {each:.1f} GiB of 140 GiB); the caps bound each process, not their sum; "
            f"a test out of memory beside the others stays failed: rerun_failed_tests = 0") in done.stderr, \
        done.stderr[-3000:]
    assert ('eb-pytorch-cuda GPU share: this process capped at the share of a call of 3 when CUDA starts; '
            'NUM_PARALLEL_PROCS=unset') in logs, logs[-3000:]
