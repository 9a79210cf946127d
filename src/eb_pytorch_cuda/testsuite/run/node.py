"""How many batches of suites this node runs at a time when parallel_test_suites is 'auto' (the default).

Why: a user should not have to know how many run_test.py calls a node holds.  Each call runs its own pool of
suites (NUM_PROCS: 2 on the 2.1 line, 3 on 2.6; each imports torch, about 1.3 GB, and uses a core or more), so
the node's CPUs (the ones this process may use: its affinity, as Slurm and cgroups set it), its available memory
and the memory of the GPUs the suites run on each bound the number of calls:

    slots = max(1, min(CPUs // CPUS_PER_BATCH, available GiB // GIB_PER_BATCH, MAX_SLOTS,
                       GPUs x run.gpu_share.calls_a_gpu_takes(smallest GPU's GiB, POOL_PROCESSES,
                                                          GPU_GIB_PER_PROCESS)  where a GPU is seen))

The calls on one GPU share its memory as the processes of one call's pool do (run/gpu_share: each suite process
capped at the harness's own share of a call, the caps bounding each process, not their sum), so a GPU takes as
many calls as hold each process counted for GPU_GIB_PER_PROCESS, what most tests need.  On the project's 2-core
VM that is 1 (what it always ran); on the 16-core, 128 GiB H200 node 8 (its 140 GiB GPU would take 12 calls); on
the H100 node (79 GiB) 6.  CPU figures: the H200 benchmarks (docs/benchmarks.md); GPU_GIB_PER_PROCESS: PyTorch's
own CI runs its CUDA tests 2 processes to a GPU except on its sm86 runners (3; tools/testing/test_selections.py:
17-24), so its suites pass with (8 GiB - 2 x 0.85) / 2, about 3 GiB, a process on an 8 GiB GPU; a test that needs
more for a while gets it from the GPU's free memory, and one that finds too little beside the others is rerun
alone (rerun_failed_tests).
"""

import os
from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

from eb_pytorch_cuda.testsuite.run.gpu_share import GPU_GIB_PER_PROCESS, calls_a_gpu_takes
from eb_pytorch_cuda.testsuite.run.gpus import query_gpus

CPUS_PER_BATCH = 2
GIB_PER_BATCH = 4
POOL_PROCESSES = 3  # the suite processes of one call at most (2.6's NUM_PROCS; the 2.1 line's is 2)
MAX_SLOTS = 16


@dataclass(frozen=True)
class NodeSize:
    """What bounds the batches on this node (None: not known, no bound)."""

    cpus: int
    available_gib: Optional[float]
    gpu_gib: Sequence[float] = ()  # per GPU the suites run on

    def slots(self) -> int:
        bounds = [self.cpus // CPUS_PER_BATCH, MAX_SLOTS]
        if self.available_gib is not None:
            bounds.append(int(self.available_gib // GIB_PER_BATCH))
        if self.gpu_gib:
            bounds.append(len(self.gpu_gib) * calls_a_gpu_takes(min(self.gpu_gib), POOL_PROCESSES, GPU_GIB_PER_PROCESS))
        return max(1, min(bounds))

    def describe(self) -> str:
        memory = f'{self.available_gib:.0f} GiB available' if self.available_gib is not None else 'memory unknown'
        gpus = f", {len(self.gpu_gib)} GPU(s) of {min(self.gpu_gib):.0f} GiB" if self.gpu_gib else ''
        return (f'{self.slots()} batch(es) at a time (parallel_test_suites=auto: {self.cpus} CPUs, {memory}{gpus}; '
                f'{CPUS_PER_BATCH} CPUs, {GIB_PER_BATCH} GiB a batch'
                f'{f", counting {GPU_GIB_PER_PROCESS:g} GiB of GPU a suite process (not a cap)" if gpus else ""})')


def available_gib(meminfo: str = '/proc/meminfo') -> Optional[float]:
    """MemAvailable of meminfo, in GiB; None where it cannot be read."""
    try:
        with open(meminfo) as handle:
            for line in handle:
                if line.startswith('MemAvailable:'):
                    return int(line.split()[1]) / (1024 * 1024)
    except (OSError, ValueError, IndexError):
        return None
    return None


def gpu_memory_gib(env: Mapping[str, str]) -> Sequence[float]:
    """Total memory (GiB) of each GPU the suites run on (run.gpus.query_gpus); () where none is seen."""
    found = []
    for mib in query_gpus(env, 'memory.total'):
        try:
            found.append(float(mib) / 1024)
        except ValueError:
            continue
    return tuple(found)


def usable_cpus() -> int:
    """The CPUs this process may use: its affinity (as Slurm and cgroups set it), else the node's count."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def this_node(env: Mapping[str, str]) -> NodeSize:
    """This node's size as the batches see it: with the memory of the GPUs they run on, whatever the CUDA device
    tests' mode, since batches beside each other are pinned to the GPUs and share their memory (run/gpu_share)
    wherever a GPU is seen."""
    return NodeSize(usable_cpus(), available_gib(), gpu_memory_gib(env))


def threads_per_suite(cpus: int, parallel: int, pool_size: int) -> int:
    """Intra-op threads (OMP_NUM_THREADS) for each suite process when `parallel` run_test.py calls, each with a
    pool of up to pool_size suites, share cpus: at least 1.  Why: torch gives every process a thread per core
    unless OMP_NUM_THREADS says otherwise, so 8 calls of up to 3 suites on 16 cores may run 384 threads; on the
    H200 node, so run, test_masked took 194 s whole and 844 s as two pieces side by side
    (docs/validation/h200-2026-12-03-bench-cpu-pool-ours/; docs/benchmarks.md: the run with this rule)."""
    return max(1, cpus // max(1, parallel * pool_size))
