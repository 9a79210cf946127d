"""What the spread run (controller.run_spread) asks of a batch system, and what a job tells its worker about itself.

Why a protocol: the queue (workqueue), the worker and the controller's wait loop are the same whatever starts the
jobs; only submitting, noticing dead jobs and cancelling differ between Slurm (slurm.JobPool, the one shipped) and
another system (Flux, PBS, or the local processes of tests/test_executors.py).  A pool is made by a factory
(SpreadOptions.pool) from the queue, the worker's Python and the number of jobs; it writes the job's script, which
runs spread/worker.main with the names of the variables the batch system sets in each job (JobVariables).
"""

from dataclasses import dataclass
from typing import Callable, List, Mapping, Optional, Protocol, runtime_checkable

from eb_pytorch_cuda.testsuite.spread.workqueue import SuiteQueue


@dataclass(frozen=True)
class JobVariables:
    """The variables a batch system sets in each job: id_variable holds the job's id (its worker names start
    with it: workqueue.worker_id), and every variable whose name starts with prefix (or is one of the worker's
    device variables) is the job's own, not the submitter's (worker.job_environment)."""

    id_variable: Optional[str] = None
    prefix: Optional[str] = None

    def job_id(self, environ: Mapping[str, str]) -> Optional[str]:
        return environ.get(self.id_variable) if self.id_variable else None

    def owns(self, name: str) -> bool:
        return bool(self.prefix) and name.startswith(str(self.prefix))

    def worker_argv(self) -> List[str]:
        """The worker's options that carry these names (worker.main)."""
        argv = ['--job-id-variable', self.id_variable] if self.id_variable else []
        return argv + (['--job-variable-prefix', self.prefix] if self.prefix else [])


@runtime_checkable
class JobPool(Protocol):
    """The jobs of one spread test step.  live: ids of the jobs the system still runs or will run; gone: ids of
    those that ended (both in submission order)."""

    noun: str  # what the progress line calls the jobs ('Slurm job(s)')
    live: List[str]
    gone: List[str]

    def asked(self) -> str:
        """The options the jobs are asked for, as the progress line shows them."""

    def cancel_previous(self) -> List[str]:
        """Cancel the jobs a killed step left (their ids kept beside the queue) and mark them dead in the queue."""

    def start(self, suites_left: int) -> None:
        """Submit jobs up to the pool's size, no more than suites_left."""

    def check(self, suites_unclaimed: int) -> List[str]:
        """Mark the jobs that ended dead in the queue (their claims go back), submit replacements while unclaimed
        suites outnumber the live jobs; the jobs found ended now.  PluginError (one line) past its replacements."""

    def finish(self) -> None:
        """Cancel what is still queued or running."""


PoolFactory = Callable[[SuiteQueue, str, int], JobPool]  # (queue, the worker's Python, jobs) -> pool
