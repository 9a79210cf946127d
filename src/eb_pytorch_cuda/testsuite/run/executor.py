"""Where a run plan's suites run: the executor protocol, as pytest-xdist's `Scheduling` protocol
(xdist/scheduler/protocol.py) hides which scheduler its DSession drives.

Two implementations: here (run/here.HereExecutor: batches through run_test.py, `parallel` calls at a time)
and over Slurm jobs (spread/controller.SlurmExecutor: a shared queue that each job's worker claims from).
The service chooses one from the settings (service.executor_of, the one place that asks "here or Slurm?"),
and from then on asks the executor whatever differs between them: whether this node is the one the suites
run on (its GPUs probed for the scope and the CUDA device tests, its CPUs and memory sized), where the tested
installation goes, how long suites are cut into pieces, what the dry run says, and what is cleaned up after.
"""

from dataclasses import replace
from typing import Any, Callable, Dict, List, Optional, Protocol, Sequence, Tuple

from eb_pytorch_cuda.inputs import make_directory
from eb_pytorch_cuda.testsuite.results.model import RunResult
from eb_pytorch_cuda.testsuite.results.pieces import with_merged
from eb_pytorch_cuda.testsuite.results.previous import History
from eb_pytorch_cuda.testsuite.run.plan import PieceRule, RunPlan, RunRequest, build_plan
from eb_pytorch_cuda.testsuite.run.store import ResultStore


class Executor(Protocol):
    """Runs a plan's units, each record into the store as it is known (a killed step resumes from there).

    on_this_node: the suites run on the node that runs the step (its GPUs decide the CUDA device tests and the
    policy's compute capabilities, its size the 'auto' slots); False: on other nodes, nothing is probed here."""

    name: str
    on_this_node: bool

    def installation_parent(self, build_dir: Optional[str]) -> Optional[str]:
        """Where the tested installation is made (None: the system's temporary directory): a directory the
        nodes that run the suites see."""

    def piece_rule(self, history: History, slots: int) -> Optional[PieceRule]:
        """How long suites are cut into pieces from the previous run's times (None: never)."""

    def prepare(self, request: RunRequest, store: ResultStore) -> RunRequest:
        """The request as this executor needs it, after refusing what it cannot run (one line: PluginError)
        before anything is discovered or started."""

    def run(self, plan: RunPlan, units: Sequence[str], store: ResultStore) -> None:
        """Run every one of units (suite or piece keys of plan) not yet in store, storing each record."""

    def describe(self, build_dir: Optional[str]) -> List[str]:
        """What the dry run says of where the suites run (no line: the node that runs the step)."""

    def finish(self, store: ResultStore) -> None:
        """Drop what only this build's next run needed besides the store (a spread's queue)."""

    def discard(self, store: ResultStore) -> List[str]:
        """--rebuild/--force: drop what an earlier run of this build left besides the store, stopping what it left
        running (a spread's jobs and queue: its results would otherwise be copied back as this run's); return
        the paths dropped."""

    def node_devices(self, store: ResultStore) -> Dict[str, Dict[str, Any]]:
        """{job: the CUDA device tests' mode it decided on its own node (enabled, gpus, reason)} where the suites
        ran on other nodes (spread/workqueue.SuiteQueue.note_devices); empty where the step decided it here."""


def execute(executor: Executor, request: RunRequest, store: ResultStore,
            progress: Optional[Callable[[str], None]] = None) -> Tuple[RunPlan, RunResult]:
    """(the plan, the store's RunResult of its suites) after executor ran request: prepared by the executor
    (its refusals first), planned once (run/plan.build_plan; progress hears what it says), run.  What
    service.run_suites does inside its store lock, before the reruns."""
    request = executor.prepare(request, store)
    if request.pieces is not None and not request.done:  # suites or pieces already stored are not cut again
        request = replace(request, done=frozenset(with_merged(store.finished())))  # a suite all of whose pieces are
    plan = build_plan(request, progress)
    make_directory(plan.output_dir)  # every executor's runs write their output there (a dangling link: named)
    executor.run(plan, plan.units, store)
    return plan, store.result(list(plan.suites))
