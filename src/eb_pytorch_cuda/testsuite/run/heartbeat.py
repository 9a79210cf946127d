"""The heartbeat of a running test step: a line at least every test_suite_heartbeat seconds (5 minutes by
default) naming the suites running now with how long each has run, how many are done, and, where the previous
results give the suites' times, an estimate of the time left.

Why: PyTorch's harness prints nothing while a suite runs (its output comes when the suite ends), and a suite
may run for an hour; a step silent for that long cannot be told from a hung one.

The record (Heartbeat) is told what starts and ends: the run here (run/here) by its batches (a suite runs from
the harness's announcement, `Running X ...`, to the end of that run of it: 2.6 runs a suite twice, its `-m
serial` session first, and between the two it waits) and its tally (a suite ends when its record is stored), while
a thread of its own prints the line (ticking: the run's threads wait on their calls); the Slurm spread
(spread/controller) by the queue's claims of live jobs, once per look at the queue (running_now), and calls
beat() from its waiting loop.
"""

import contextlib
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterable, Iterator, Mapping, Optional, Sequence

from eb_pytorch_cuda.testsuite.policy.settings import DEFAULT_HEARTBEAT
from eb_pytorch_cuda.testsuite.results import previous
from eb_pytorch_cuda.testsuite.results.seconds import shown

MOST_NAMED = 5  # running suites named on one line (the longest-running ones); the rest are counted


@dataclass(frozen=True)
class HeartbeatSettings:
    """How often the line comes (seconds) and the previous results' times of the suites ({suite: s}), from
    which the line estimates the time left (none without them)."""
    seconds: float = DEFAULT_HEARTBEAT
    previous_seconds: Mapping[str, float] = field(default_factory=dict)


def settings_of(seconds: Optional[float], history: previous.History) -> HeartbeatSettings:
    """The heartbeat of a step: every `seconds` (None: DEFAULT_HEARTBEAT), the suites' times of the previous
    results (history: read once by the step, what is not a time left out there)."""
    return HeartbeatSettings(DEFAULT_HEARTBEAT if seconds is None else seconds, dict(history.suite_seconds))


@dataclass(frozen=True)
class Estimate:
    """The time left (seconds) for the units left that have a previous time (timed of left)."""
    seconds: float
    timed: int
    left: int


def estimate(left: Sequence[str], elapsed: Mapping[str, float], expected: Mapping[str, float],
             finished: float, wall: float) -> Optional[Estimate]:
    """The time left for left (units not done; elapsed: {unit: s it has run} of those running), by their
    previous times (expected: {unit: s}) and this run's own pace: the previous seconds it has got through
    (finished: of the units it finished; and of those running, how long each has run, up to its previous time)
    per second of wall time since it started.  The pace takes in this node's speed and how many suites run at a
    time (the batches, the harness's own pool, Slurm jobs) as they are.  None: no unit left has a previous
    time, or nothing with one has run yet."""
    timed = [unit for unit in left if unit in expected]
    got_through = finished + sum(min(seconds, expected[unit]) for unit, seconds in elapsed.items() if unit in expected)
    if not timed or wall <= 0 or got_through <= 0:
        return None
    work = sum(max(0.0, expected[unit] - elapsed.get(unit, 0.0)) for unit in timed)
    return Estimate(work * wall / got_through, len(timed), len(left))


def running_text(elapsed: Mapping[str, float]) -> str:
    """'test_nn (10m02s), test_torch (3m10s) and 2 more', the longest-running first."""
    if not elapsed:
        return 'no suite announced yet'
    ordered = sorted(elapsed, key=lambda unit: (-elapsed[unit], unit))
    named = ', '.join(f'{unit} ({shown(elapsed[unit])})' for unit in ordered[:MOST_NAMED])
    return named + (f' and {len(ordered) - MOST_NAMED} more' if len(ordered) > MOST_NAMED else '')


def eta_text(found: Optional[Estimate], have_times: bool) -> str:
    """The line's estimate of the time left, or why there is none."""
    if not have_times:
        return 'no ETA (no previous results)'
    if found is None:
        return 'ETA once a suite with a previous time has run'
    text = f'ETA {shown(found.seconds)} (previous results\' times at this run\'s pace'
    if found.timed < found.left:
        text += f'; {found.left - found.timed} of the {found.left} suites left have no previous time'
    return text + ')'


class Heartbeat:
    """What runs since when, in one run of units (suite or piece keys; done: those already stored), and the
    line said every HeartbeatSettings.seconds through progress (nothing without progress).  Thread-safe: a run's
    batches start and end units from their own threads."""

    def __init__(self, settings: HeartbeatSettings, units: Iterable[str],
                 progress: Optional[Callable[[str], None]] = None, done: Iterable[str] = (),
                 expected: Optional[Mapping[str, float]] = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.every = max(0.05, float(settings.seconds))
        self.units = list(dict.fromkeys(units))
        self.progress = progress
        self.expected = {**settings.previous_seconds, **(expected or {})}  # a piece's own time over its suite's
        self.done = set(done) & set(self.units)
        self.running: Dict[str, float] = {}
        self.finished = 0.0  # previous seconds of the units finished in this run (estimate's pace)
        self.clock = clock
        self.start = clock()
        self.due = self.start + self.every
        self.lock = threading.Lock()

    def elapsed(self) -> float:
        """Seconds since the run started."""
        return self.clock() - self.start

    def started(self, unit: str) -> None:
        """unit runs now (already running: since its start)."""
        self.runs(unit, True)

    def runs(self, unit: str, running: bool) -> None:
        """unit runs now (running: since now, unless it already runs) or waits (not running: between the
        harness's runs of it); its time on the line is that of its current run."""
        with self.lock:
            if not running:
                self.running.pop(unit, None)
            elif unit not in self.done:
                self.running.setdefault(unit, self.clock())

    def ended(self, unit: str) -> None:
        """unit's outcome is stored."""
        with self.lock:
            self._ended(unit)

    def _ended(self, unit: str) -> None:
        self.running.pop(unit, None)
        if unit not in self.done:
            self.done.add(unit)
            self.finished += self.expected.get(unit, 0.0)

    def running_now(self, units: Iterable[str], done: Iterable[str]) -> None:
        """What runs now and what is done, as a look at a queue sees them (the Slurm spread's claims): a unit
        seen running for the first time started now; one no longer running is done or back in the queue."""
        with self.lock:
            now, units = self.clock(), set(units)
            for unit in set(done) - self.done:
                if unit in self.units:
                    self._ended(unit)
            self.running = {unit: since for unit, since in self.running.items() if unit in units}
            for unit in units - self.done:
                self.running.setdefault(unit, now)

    def line(self) -> str:
        """'still running after 12m05s: test_nn (10m02s), ...; 45/1000 suites done; ETA 2h10m (...)'."""
        with self.lock:
            now = self.clock()
            elapsed = {unit: now - since for unit, since in self.running.items()}
            left = [unit for unit in self.units if unit not in self.done]
            found = estimate(left, elapsed, self.expected, self.finished, now - self.start)
            what = running_text(elapsed) if left else 'every suite has ended, run_test.py is finishing'
            return (f'still running after {shown(now - self.start)}: {what}; '
                    f'{len(self.done)}/{len(self.units)} suites done; {eta_text(found, bool(self.expected))}')

    def beat(self) -> None:
        """Say the line when it is due (a waiting loop calls this as often as it likes)."""
        with self.lock:
            now = self.clock()
            if self.progress is None or now < self.due:
                return
            self.due = now + self.every
        self.progress(self.line())

    @contextlib.contextmanager
    def ticking(self) -> Iterator['Heartbeat']:
        """A thread that says the line every HeartbeatSettings.seconds while the block runs (its waits are the
        batches' and suites' own: nothing else of the run would say it)."""
        if self.progress is None:
            yield self
            return
        stop = threading.Event()

        def tick() -> None:
            while not stop.wait(max(0.05, self.due - self.clock())):
                self.beat()
        thread = threading.Thread(target=tick, name='heartbeat', daemon=True)
        thread.start()
        try:
            yield self
        finally:
            stop.set()
            thread.join()
