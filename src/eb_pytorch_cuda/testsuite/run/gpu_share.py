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


def processes_on_a_gpu(parallel: int, gpus: Sequence[str], pool_size: int) -> int:
    """The suite processes that may run on one GPU at once: the calls pinned to it (slots spread round robin over
    gpus, run/gpus.slot_gpus) times the harness's pool (an upper bound: a call of one suite runs one)."""
    calls = -(-max(1, parallel) // max(1, len(gpus)))
    return calls * max(1, pool_size)


def share_environment(env: Mapping[str, str], processes: int) -> Dict[str, str]:
    """env for a call whose GPU `processes` suite processes share: the plugin and the count."""
    return dict(with_plugin(env, PLUGIN), **{VARIABLE: str(processes)})


def calls_a_gpu_takes(gpu_gib: float, pool_size: int, gib_per_process: float) -> int:
    """The calls of pool_size processes one GPU of gpu_gib takes with each process's cap (common_utils' formula:
    (GiB - n x OTHER_LIBRARIES_GIB) / n) at least gib_per_process: at least 1 (one call keeps upstream's own
    share, whatever it is)."""
    processes = int(gpu_gib // (gib_per_process + OTHER_LIBRARIES_GIB))
    return max(1, processes // max(1, pool_size))
