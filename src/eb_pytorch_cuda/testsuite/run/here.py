"""The executor of a run here, on the step's own node (not over Slurm): the plan's suites in batches
through run_test.py itself (run/batches: its pool and serial list apply, no per-suite start-up cost),
`parallel` batches at a time, each in its own process group killed at the sum of its suites' timeouts; a
suite its killed batch did not finish runs again alone (run/solo) with its own timeout.

A ten-hour test step must survive a hanging multiprocess test and a killed `eb`: each suite's record goes
to the build's store (run/store) as soon as it settles, so a rerun resumes with what is missing.  The
calls are started through the launcher given (run/launcher; real processes by default).
"""

import contextlib
import functools
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence

from eb_pytorch_cuda.inputs import make_directory
from eb_pytorch_cuda.testsuite.results.model import SUITE_PASSED
from eb_pytorch_cuda.testsuite.results.pieces import Piece, with_merged
from eb_pytorch_cuda.testsuite.results.previous import History
from eb_pytorch_cuda.testsuite.results.records import StoreRecord
from eb_pytorch_cuda.testsuite.results.seconds import shown
from eb_pytorch_cuda.testsuite.run import discovery, solo
from eb_pytorch_cuda.testsuite.run.batches import plan_batches, run_batch_to_the_end
from eb_pytorch_cuda.testsuite.run.launcher import PROCESSES, Launcher
from eb_pytorch_cuda.testsuite.run.executor import Executor
from eb_pytorch_cuda.testsuite.run.heartbeat import Heartbeat
from eb_pytorch_cuda.testsuite.run.plan import PieceRule, RunPlan, RunRequest, here_piece_rule
from eb_pytorch_cuda.testsuite.run.store import ResultStore


class HereExecutor(Executor):
    """Runs a plan here, on the step's own node (executor protocol: run/executor.Executor; nothing refused);
    progress hears each suite's outcome.  With more than one slot and a previous run's times, its long suites'
    pieces run side by side, each alone (run/solo) in a slot of its own (run/plan.here_piece_rule)."""

    name = 'here'
    on_this_node = True

    def __init__(self, progress: Optional[Callable[[str], None]] = None, launcher: Launcher = PROCESSES) -> None:
        self.progress = progress or (lambda message: None)
        self.launcher = launcher

    def installation_parent(self, build_dir: Optional[str]) -> Optional[str]:
        return None  # only this node reads it

    def piece_rule(self, history: History, slots: int) -> Optional[PieceRule]:
        return here_piece_rule(history.suite_seconds, history.test_seconds, slots)

    def prepare(self, request: RunRequest, store: ResultStore) -> RunRequest:
        return request

    def describe(self, build_dir: Optional[str]) -> List[str]:
        return []

    def finish(self, store: ResultStore) -> None:
        return None

    def discard(self, store: ResultStore) -> List[str]:
        return []  # a killed run's process groups: stopped by the next run (service.run_suites)

    def node_devices(self, store: ResultStore) -> Dict[str, Dict[str, Any]]:
        return {}  # decided by the step, on this node

    def run(self, plan: RunPlan, units: Sequence[str], store: ResultStore) -> None:
        command = plan.command
        self.progress(f"running {len(units)} suites: {' '.join(discovery.run_argv(command.argv, ['<suites>']))} in "
                      f"{command.cwd}, in batches of up to {plan.batch_size} (run_test.py's own pool and serial list "
                      f"apply; {plan.parallel} batch(es) at a time; outputs in {plan.output_dir}; results kept in "
                      f"{store.path})")
        run_here(plan, units, store, progress=self.progress, launcher=self.launcher)


class _Tally:
    """The batch sink of a run here: each record into the store, and a progress line per suite settled (with
    the suite's time and the run's, from the heartbeat, which hears that the suite ended)."""

    def __init__(self, store: ResultStore, total: int, finished: int, failing: int,
                 progress: Optional[Callable[[str], None]], heartbeat: Heartbeat) -> None:
        self.store, self.total, self.finished, self.failing, self.progress = store, total, finished, failing, progress
        self.heartbeat = heartbeat
        self.lock = threading.Lock()
        self.batches = 0

    def settled(self, suite: str, record: StoreRecord) -> None:
        self.store.append(record)
        self.heartbeat.ended(suite)
        with self.lock:
            self.finished += 1
            state = record.suite.status
            self.failing += state != SUITE_PASSED
            if self.progress:
                notes = f" [{'; '.join(record.notes)}]" if record.notes else ''
                took = '' if record.seconds is None else f' in {shown(record.seconds)}'
                self.progress(f"suite {self.finished}/{self.total}: {suite} {state}{took}{notes} "
                              f"({self.failing} suite(s) failed so far; {shown(self.heartbeat.elapsed())} into "
                              f"the run)")

    def corrected(self, suite: str, record: StoreRecord) -> None:
        self.store.append(record)

    def next_batch(self) -> int:
        with self.lock:
            self.batches += 1
            return self.batches


class _GpuShare:
    """The GPUs of a run's slots, each job given the one running the fewest jobs now (not by start order: with two
    GPUs, a long piece on one and the other idle, the next job goes to the idle one)."""

    def __init__(self, gpus: Sequence[str]) -> None:
        self.running = dict.fromkeys(gpus, 0)
        self.lock = threading.Lock()

    @contextlib.contextmanager
    def one(self) -> Iterator[Optional[str]]:
        if not self.running:
            yield None
            return
        with self.lock:
            gpu = min(self.running, key=lambda name: self.running[name])
            self.running[gpu] += 1
        try:
            yield gpu
        finally:
            with self.lock:
                self.running[gpu] -= 1


def run_here(plan: RunPlan, units: Sequence[str], store: ResultStore, *,
             progress: Optional[Callable[[str], None]] = None, launcher: Launcher = PROCESSES) -> List[str]:
    """Run every one of units not in store, in batches (the plan's batch_size suites a call, its parallel calls
    at a time over its gpus, the suites the harness runs alone after the rest, seeing every GPU), a long suite's
    pieces each alone in a slot; store each record as it settles.  A suite the store has whole, or as all its
    pieces (results/pieces.with_merged), is done.  Returns the units run now."""
    done = with_merged(store.finished())
    todo = [unit for unit in units if unit not in done and Piece.parse(unit).suite not in done]
    measured = {key: record for key, record in done.items() if key in set(plan.suites) | set(units)}
    if progress and measured:
        progress(f'resuming: {len(measured)} suite(s) already measured for this build, {len(todo)} to run')
    heartbeat = Heartbeat(plan.heartbeat, list(measured) + todo, progress, measured, plan.expected)
    tally = _Tally(store, len(measured) + len(todo), len(measured),
                   sum(1 for record in measured.values() if record.suite.status != SUITE_PASSED), progress, heartbeat)
    make_directory(plan.output_dir)  # a dangling symlink there is named so, not "File exists"
    share = _GpuShare(plan.gpus)

    def one(batch: List[str], alone: bool = False) -> None:
        index = tally.next_batch()
        path = os.path.join(plan.output_dir, f'batch-{os.getpid()}-{index:04d}.log')
        with share.one() as gpu:
            # a suite its killed batch did not finish runs again on the slot's GPU, counted among its sharers
            pinned = None if alone else gpu
            run_batch_to_the_end(plan, batch, tally, output_path=path, gpu=pinned, alone_gpu=pinned,
                                 progress=progress, launcher=launcher, on_running=heartbeat.runs, alone=alone)

    def piece(key: str, alone: bool = False) -> None:  # a piece of a long suite: its shard alone (run/solo)
        tally.next_batch()
        heartbeat.started(key)
        with share.one() as gpu:
            tally.settled(key, solo.run_suite(plan, key, gpu=None if alone else gpu, launcher=launcher, alone=alone))

    cut = [key for key in todo if not Piece.parse(key).whole]
    serial_cut = [key for key in cut if plan.harness.must_serial(Piece.parse(key).suite)]
    whole = [key for key in todo if Piece.parse(key).whole]
    batches = plan_batches(whole, plan.harness.must_serial, plan.parallel, plan.batch_size)
    # the long suites' pieces first (longest first), then the batches: one pool of the plan's slots for both
    jobs: List[Callable[[], None]] = [
        functools.partial(piece, key) for key in sorted((key for key in cut if key not in serial_cut),
                                                        key=lambda key: -plan.expected.get(key, 0.0))]
    jobs += [functools.partial(one, batch) for batch, alone in batches if not alone]
    with heartbeat.ticking():  # a line every plan.heartbeat.seconds while the calls run (run/heartbeat)
        if plan.parallel > 1 and len(jobs) > 1:
            with ThreadPoolExecutor(max_workers=plan.parallel) as pool:
                list(pool.map(lambda job: job(), jobs))
        else:
            for job in jobs:
                job()
        for key in serial_cut:  # the harness runs these suites alone: so do their pieces, one after another
            piece(key, alone=True)
        for batch in (batch for batch, alone in batches if alone):
            one(batch, alone=True)
    return todo
