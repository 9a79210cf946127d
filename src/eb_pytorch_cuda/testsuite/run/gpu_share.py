"""How the suite processes of parallel run_test.py calls share a GPU's memory.

PyTorch's harness shares a GPU among the processes of one run_test.py call: it sets NUM_PARALLEL_PROCS to its
pool size and common_utils caps each process at about 1/n of the GPU.  Our parallel calls put several such pools
on one GPU, so the caps add up to several GPUs (on the H100, six calls of three: a test out of memory with 27.75
MiB free).  Each call that shares a GPU gets the plugin eb_pytorch_cuda_gpu_share (harness_plugin) and the count
of suite processes on its GPU, and the plugin sets each process's cap by common_utils' own formula with that count;
run/node bounds the calls a GPU takes so that each process's cap stays at least GPU_GIB_PER_PROCESS.
"""

from typing import Dict, Mapping, Sequence

from eb_pytorch_cuda.testsuite.run.plugins import with_plugin

PLUGIN = 'eb_pytorch_cuda_gpu_share'  # the module eb_pytorch_cuda/harness_plugin holds
VARIABLE = 'EB_PYTORCH_CUDA_GPU_PROCESSES'  # the plugin's: the suite processes sharing this process's GPU
OTHER_LIBRARIES_GIB = 0.85  # common_utils' allowance a process, besides its cap
# the least cap a suite process should get beside other calls: PyTorch's own CI runs its CUDA tests 2 processes to
# a GPU except on its sm86 runners (3; tools/testing/test_selections.py:17-24), about 3 GiB a process on 8 GiB
GPU_GIB_PER_PROCESS = 3.0


def processes_on_a_gpu(parallel: int, gpus: Sequence[str], pool_size: int) -> int:
    """The suite processes that may run on one GPU at once: the calls pinned to it (slots spread round robin over
    gpus, run/gpus.slot_gpus) times the harness's pool (an upper bound: a call of one suite runs one)."""
    calls = -(-max(1, parallel) // max(1, len(gpus)))
    return calls * max(1, pool_size)


def share_environment(env: Mapping[str, str], processes: int) -> Dict[str, str]:
    """env for a call whose GPU `processes` suite processes share: the plugin and the count."""
    return dict(with_plugin(env, PLUGIN), **{VARIABLE: str(processes)})


def share_line(processes: int, gpu_gib: Sequence[float]) -> str:
    """The run's line on its GPUs' memory: the cap of each of `processes` suite processes on the smallest GPU
    (gpu_gib: each GPU's GiB, as nvidia-smi gives it; none: not known), and a warning where it is under
    GPU_GIB_PER_PROCESS (an explicit parallel_test_suites may ask for more calls than 'auto' gives)."""
    said = f'GPU memory: up to {processes} suite processes on each GPU, each capped at its share when CUDA starts in it'
    if not gpu_gib:
        return said + ' (run/gpu_share)'
    gib = min(gpu_gib)
    each = gib / processes - OTHER_LIBRARIES_GIB
    if each <= 0:
        return (f'GPU memory: {processes} suite processes on a GPU of {gib:.0f} GiB leave none a share: they run '
                f'uncapped and may run out of GPU memory; set parallel_test_suites lower (run/gpu_share)')
    said += f': {each:.2f} GiB of {gib:.0f} GiB (run/gpu_share)'
    if each < GPU_GIB_PER_PROCESS:
        said += (f'; under the {GPU_GIB_PER_PROCESS:g} GiB a process that parallel_test_suites=auto keeps, tests '
                 f'may run out of GPU memory: set parallel_test_suites lower')
    return said


def calls_a_gpu_takes(gpu_gib: float, pool_size: int, gib_per_process: float) -> int:
    """The calls of pool_size processes one GPU of gpu_gib takes with each process's cap (common_utils' formula:
    (GiB - n x OTHER_LIBRARIES_GIB) / n) at least gib_per_process: at least 1 (one call keeps upstream's own
    share, whatever it is)."""
    processes = int(gpu_gib // (gib_per_process + OTHER_LIBRARIES_GIB))
    return max(1, processes // max(1, pool_size))
