"""Where a run plan's suites run: the executor protocol, as pytest-xdist's `Scheduling` protocol
(xdist/scheduler/protocol.py) hides which scheduler its DSession drives.

Two implementations: here (run/here.HereExecutor: batches through run_test.py, `parallel` calls at a time)
and over Slurm jobs (spread/controller.SlurmExecutor: a shared queue that each job's worker claims from).
The service chooses one (service.executor_for, the one factory, as dsession.py chooses its scheduler),
builds the plan with the request the executor prepared, hands it the plan's units and the build's store,
and then reruns the failures and judges the same way whichever ran them.
"""

from dataclasses import replace
from typing import Callable, Optional, Protocol, Sequence, Tuple

from eb_pytorch_cuda.testsuite.results.model import RunResult
from eb_pytorch_cuda.testsuite.results.pieces import with_merged
from eb_pytorch_cuda.testsuite.run.plan import RunPlan, RunRequest, build_plan
from eb_pytorch_cuda.testsuite.run.store import ResultStore


class Executor(Protocol):
    """Runs a plan's units, each record into the store as it is known (a killed step resumes from there)."""

    def prepare(self, request: RunRequest, store: ResultStore) -> RunRequest:
        """The request as this executor needs it (e.g. long suites cut into pieces), after refusing what it
        cannot run (one line: PluginError) before anything is discovered or started; by default (an executor
        that derives from this protocol and runs whole suites, refusing nothing) the request itself."""
        return request

    def run(self, plan: RunPlan, units: Sequence[str], store: ResultStore) -> None:
        """Run every one of units (suite or piece keys of plan) not yet in store, storing each record."""


def execute(executor: Executor, request: RunRequest, store: ResultStore,
            progress: Optional[Callable[[str], None]] = None) -> Tuple[RunPlan, RunResult]:
    """(the plan, the store's RunResult of its suites) after executor ran request: prepared by the executor
    (its refusals first), planned once (run/plan.build_plan; progress hears what it says), run.  What
    service.run_suites does inside its store lock, before the reruns."""
    request = executor.prepare(request, store)
    if request.pieces is not None and not request.done:  # suites or pieces already stored are not cut again
        request = replace(request, done=frozenset(with_merged(store.finished())))  # a suite all of whose pieces are
    plan = build_plan(request, progress)
    executor.run(plan, plan.units, store)
    return plan, store.result(list(plan.suites))
