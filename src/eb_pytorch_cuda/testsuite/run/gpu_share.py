"""How the suite processes of parallel run_test.py calls share a GPU's memory.

PyTorch's harness shares a GPU among the processes of one run_test.py call: it sets NUM_PARALLEL_PROCS to its
pool size n and common_utils caps each process at about 1/n of the GPU, but 2.6's run_test.py sets it after it
spawned its pool, so a call's first 3 suites run uncapped (tests/test_gpu_share.py, on the real harness).  Each of
our calls that runs beside others on a GPU gets the plugin eb_pytorch_cuda_gpu_share (harness_plugin) with that n,
and every one of its suite processes gets the cap the harness means to give it: 1/n of the GPU by common_utils' own
formula, never less.  The caps bound each process, not their sum: the calls together may ask for more than the
GPU holds, as a plain call's uncapped first suites may; a test that runs out of memory beside the others is rerun
alone after the suites where rerun_failed_tests is set (run/reruns), with the whole GPU (a Slurm job reruns its
suites' failures beside its other slots: there the rerun shares the GPU).

Why not a split of the GPU over all its processes (each 1/(calls x n)): tests size their work by the GPU's whole
memory (test_transformers' 2048-long attention references run only where total_memory is 40 GiB or more,
test_transformers.py:3326 in 2.6.0).  On the H100 such a split of 6 calls (about 3.55 GiB a process) failed 22
attention tests of test_transformers, 20 of which the plain call on the same machine passed (19 of them with
2048-long keys), and both its pieces were killed at their timeouts; the failures' messages did not come back, so
"out of memory" is the likely cause, not a seen one (docs/validation/h100-2026-12-07-bench-gpu-share-3gib/).  In
that plain call test_transformers ran among the pool's later suites, under the harness's own cap of a call of 3.
Uncapped, the same 6 calls lost one test of about 11,000 to memory held by others
(h100-2026-12-06-bench-gpu-gradgrad/).  run/node bounds the calls a GPU takes by the memory it counts a suite
process for, GPU_GIB_PER_PROCESS: what most tests need, not a cap.
"""

from typing import Dict, Mapping, Sequence

from eb_pytorch_cuda.testsuite.run.plugins import with_plugin

PLUGIN = 'eb_pytorch_cuda_gpu_share'  # the module eb_pytorch_cuda/harness_plugin holds
VARIABLE = 'EB_PYTORCH_CUDA_GPU_PROCESSES'  # the plugin's: n of common_utils' formula, the processes of one call
OTHER_LIBRARIES_GIB = 0.85  # common_utils' allowance a process, besides its cap
# the GPU memory a suite process is counted for where the calls a GPU takes are counted (run/node), not a cap:
# PyTorch's own CI runs its CUDA tests 2 processes to a GPU except on its sm86 runners (3;
# tools/testing/test_selections.py:17-24), about 3 GiB a process on 8 GiB
GPU_GIB_PER_PROCESS = 3.0


def processes_on_a_gpu(parallel: int, gpus: Sequence[str], pool_size: int) -> int:
    """The suite processes that may run on one GPU at once: the calls pinned to it (slots spread round robin over
    gpus, run/gpus.slot_gpus) times the harness's pool (an upper bound: a call of one suite runs one)."""
    calls = -(-max(1, parallel) // max(1, len(gpus)))
    return calls * max(1, pool_size)


def share_environment(env: Mapping[str, str], call_processes: int) -> Dict[str, str]:
    """env for a call beside others on a GPU: the plugin, and n of common_utils' formula (the processes of one
    call: the harness's pool size), whose cap each suite process gets."""
    return dict(with_plugin(env, PLUGIN), **{VARIABLE: str(call_processes)})


def harness_share_gib(gpu_gib: float, call_processes: int) -> float:
    """The cap in GiB common_utils gives each of call_processes processes of one call on a GPU of gpu_gib."""
    return (gpu_gib - call_processes * OTHER_LIBRARIES_GIB) / call_processes


def share_line(processes: int, call_processes: int, gpu_gib: Sequence[float], reruns: int) -> str:
    """The run's line on its GPUs' memory: up to `processes` suite processes on each GPU, each capped at the share
    of a call of call_processes (gpu_gib: each GPU's GiB, as nvidia-smi gives it, a little more than torch's
    total_memory, from which the plugin computes it; none: not known), what becomes of a test out of memory beside
    the others (reruns: rerun_failed_tests), and a warning where the processes are counted for more than the
    smallest GPU holds (an explicit parallel_test_suites may ask for more calls than 'auto' gives)."""
    said = (f'GPU memory: up to {processes} suite processes on each GPU, each capped at PyTorch\'s own share of a '
            f'call of {call_processes} when CUDA starts in it')
    if gpu_gib:
        gib = min(gpu_gib)
        each = harness_share_gib(gib, call_processes)
        said += f' (about {each:.1f} GiB of {gib:.0f} GiB)' if each > 0 else f' (none of {gib:.0f} GiB: uncapped)'
    said += '; the caps bound each process, not their sum'
    said += ('; a test out of memory beside the others is rerun alone after the suites' if reruns > 0 else
             '; a test out of memory beside the others stays failed: rerun_failed_tests = 0 (1 reruns it alone '
             'after the suites)')
    if gpu_gib and processes * (GPU_GIB_PER_PROCESS + OTHER_LIBRARIES_GIB) > min(gpu_gib):
        said += (f'; counted for more than the GPU holds ({GPU_GIB_PER_PROCESS:g} GiB a process, as '
                 f'parallel_test_suites=auto counts them): tests may run out of GPU memory, set '
                 f'parallel_test_suites lower')
    return said + ' (run/gpu_share)'


def calls_a_gpu_takes(gpu_gib: float, pool_size: int, gib_per_process: float) -> int:
    """The calls of pool_size processes one GPU of gpu_gib takes with each process counted for gib_per_process
    and common_utils' allowance (OTHER_LIBRARIES_GIB): at least 1 (one call is upstream's own test step)."""
    processes = int(gpu_gib // (gib_per_process + OTHER_LIBRARIES_GIB))
    return max(1, processes // max(1, pool_size))
