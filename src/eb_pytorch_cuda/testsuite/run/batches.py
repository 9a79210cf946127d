"""Run suites in batches: one run_test.py call for many suites, so its own pool and serial list apply.

One call per suite costs ~4.3 s before the suite starts (torch imported by run_test.py and by each of
its pool's workers), over an hour for ~1,000 suites, and loses the harness's own parallelism.  So
suites run as `run_test.py ... -i a b c ...` (one batch at a time by default: exactly what a plain
run_test.py call does, serial suites after its pool).  With parallel=N, N batches of non-serial suites
run at a time, then the suites the harness must run alone (its must_serial list) in one batch by
themselves.  Each batch runs in its own process group, killed when it outlives the sum of its suites'
timeouts; its suites' outcomes are stored when it ends, so a killed `eb` loses at most the batches
in flight; a suite the killed batch did not finish is run again alone with its own timeout (run/solo).
The batches of a run here are planned and run by run/here; a Slurm job runs its claims the same way.

The run plan (run/plan) gives each call its command, environment, options, timeouts and harness facts;
the call is started through a launcher (run/launcher: real processes unless a test injects another).
"""

import time
from subprocess import TimeoutExpired
from dataclasses import replace
from typing import Callable, Dict, List, Optional, Protocol, Sequence, Tuple

from eb_pytorch_cuda.testsuite.results import grammar
from eb_pytorch_cuda.testsuite.results.splitting import SuiteOutput, announced_runs, split_batch_output
from eb_pytorch_cuda.testsuite.results.testtimes import kept_times, node_prefix
from eb_pytorch_cuda.testsuite.results.outcome import Ending, build_outcome, remove_reports, report_files
from eb_pytorch_cuda.testsuite.results.model import SUITE_TERMINATED
from eb_pytorch_cuda.testsuite.results.records import StoreRecord, suite_record
from eb_pytorch_cuda.testsuite.results.reportdirs import Attempt
from eb_pytorch_cuda.testsuite.run import discovery, solo
from eb_pytorch_cuda.testsuite.run.calls import DEFAULT_BATCH_SIZE, batch_env
from eb_pytorch_cuda.testsuite.run.calls import died_by, killed_from_outside
from eb_pytorch_cuda.testsuite.run.launcher import PROCESSES, Launcher
from eb_pytorch_cuda.testsuite.run.plan import RunPlan

POLL_SECONDS = 0.25  # how often a running batch's output is looked at for suites that have ended
WATCH_SECONDS = 5  # how often a running batch's started suites are checked against their own timeouts


class BatchSink(Protocol):
    """Where a batch's records go (the build's store here, the job's outcomes in a Slurm job)."""

    def settled(self, suite: str, record: StoreRecord) -> None:
        """suite's record, as soon as its outcome is final (stored at once: a killed step keeps it)."""

    def corrected(self, suite: str, record: StoreRecord) -> None:
        """A record the batch's end corrected after settled gave it (stored again: the last one counts)."""


def _stored(result, exit_code, notes, suite_seconds, batch_seconds, code, gpu, text, output_path) -> StoreRecord:
    """The store's record of one suite of a batch (results/records.suite_record, as for a suite run alone)."""
    return suite_record(result, output=text, output_file=output_path, exit_code=exit_code, seconds=suite_seconds,
                        gpu=gpu, notes=notes, batch_seconds=batch_seconds, batch_exit_code=code)


def _record(suite, out, seconds, code, gpu, output_path, test_dir, attempt):
    result, exit_code, notes = build_outcome(suite, out.text, Ending(True, out.failed, out.signal), test_dir=test_dir,
                                             attempt=attempt)
    times = (kept_times(result.seconds, report_files(test_dir, suite, attempt, True), node_prefix(out.text, test_dir),
                        notes) if test_dir else {})  # (a time that is no time adds a note)
    record = _stored(result, exit_code, notes, result.seconds, seconds, code, gpu, out.text, output_path)
    record = replace(record, interrupted=killed_from_outside(result.status, result.signal))
    # per-test times: how the next build splits this suite (results/testtimes)
    return replace(record, test_seconds=times) if times else record


def _interrupted(suite, out, seconds, code, gpu, output_path, test_dir, attempt, signal_name) -> StoreRecord:
    """The record of a suite that had started when its batch's run_test.py (or our supervisor of it) was killed by
    signal_name from outside: terminated, whatever its finished sessions counted (2.6's `-m serial` session ends
    with a summary of 0 tests before the main one starts), and marked interrupted, so a rerun of the same build
    runs it again (run/store.ResultStore.finished) while this run's verdict names it with the signal."""
    result, _code, notes = build_outcome(suite, out.text, Ending(True, True, signal_name), test_dir=test_dir,
                                         attempt=attempt)
    notes.append(f"its batch's run_test.py was killed by {signal_name} before the suite ended "
                 f"({out.ends} of its session(s) had reported an end)")
    return replace(_stored(result, None, notes, result.seconds, seconds, code, gpu, out.text, output_path),
                   interrupted=signal_name)


class _Call:
    """One run_test.py call of a batch, looked at while it runs: which suites settled (each given to
    on_settled at once; whether each runs now, to on_running: run/heartbeat), which started suite outlived its
    own timeout (first_seen: when each run of a suite was first announced), how far the output was read (seen)."""

    def __init__(self, plan: RunPlan, suites: Sequence[str], output_path: str, gpu: Optional[str],
                 on_settled: Optional[Callable[[str, StoreRecord], None]],
                 on_running: Optional[Callable[[str, bool], None]] = None) -> None:
        self.plan, self.suites, self.output_path, self.gpu, self.on_settled = plan, suites, output_path, gpu, on_settled
        self.on_running = on_running
        self.attempt = Attempt.new(plan.command.cwd)  # its reports, and only they, are read (results/reportdirs)
        self.start = time.time()
        self.settled: Dict[str, StoreRecord] = {}
        self.overdue: Dict[str, str] = {}
        self.first_seen: Dict[Tuple[str, int], float] = {}
        self.seen = 0

    def text(self) -> str:
        with open(self.output_path, errors='replace') as handle:
            return handle.read()

    def something_ended(self) -> bool:
        """Whether output written since the last look may settle a suite (cheap: reads only the new part)."""
        with open(self.output_path, 'rb') as handle:
            handle.seek(max(0, self.seen - 100))
            new = handle.read().decode('utf-8', 'replace')
            self.seen = handle.tell()
        return any(word in new for word in grammar.SETTLING_TEXTS)

    def outputs(self, text: str) -> Dict[str, SuiteOutput]:
        harness = self.plan.harness
        return split_batch_output(text, self.suites, self.plan.command.cwd, not harness.replays_logs,
                                  harness.runs_of, harness.full_log_means_passed)

    def record(self, suite: str, out: SuiteOutput, code: Optional[int]) -> StoreRecord:
        return _record(suite, out, round(time.time() - self.start, 1), code, self.gpu, self.output_path,
                       self.plan.command.cwd, self.attempt)

    def settle(self, text: str, code: Optional[int] = None) -> Dict[str, SuiteOutput]:
        outputs = self.outputs(text)
        if self.on_running:  # a run's start and end are among the texts that bring us here (grammar.SETTLING_TEXTS)
            runs = announced_runs(text)
            for suite in runs.keys() & set(self.suites) - set(self.settled):
                self.on_running(suite, runs[suite] > outputs[suite].ends)  # a run of it announced and not ended
        for suite in self.suites:
            if suite not in self.settled and outputs[suite].settled:
                self.settled[suite] = self.record(suite, outputs[suite], code)
                if self.on_settled:
                    self.on_settled(suite, self.settled[suite])
        return outputs

    def late(self) -> bool:
        """Whether a started suite has run longer than its own timeout (self.overdue then names it)."""
        text = self.text()
        self.overdue = _overdue(text, self.outputs(text), self.settled, self.first_seen, self.plan.timeout_for)
        return bool(self.overdue)


def run_batch(plan: RunPlan, suites: Sequence[str], output_path: str, *, gpu: Optional[str] = None,
              on_settled: Optional[Callable[[str, StoreRecord], None]] = None,
              launcher: Launcher = PROCESSES,
              on_running: Optional[Callable[[str, bool], None]] = None, alone: bool = False
              ) -> Tuple[Dict[str, Optional[StoreRecord]], bool]:
    """Run suites in one run_test.py call.  on_settled(suite, record) is called as soon as the output says a
    suite's outcome is final (its `failed!` or `was successful` line; with a serial inline harness, the next
    suite's start), so it can be stored before the batch ends; on_running(suite, True) as soon as the harness
    announces a run of it (`Running X ...`), on_running(suite, False) when that run ended and another is to come
    (the heartbeat's running suites, run/heartbeat); alone: no other call runs beside this one (its threads:
    RunPlan.call_env).  Returns ({suite: record or
    None when the killed batch had not finished it}, killed); records already given to on_settled are included.

    The whole batch's limit is the sum of its suites' timeouts; a suite that has run longer than its own
    timeout since the harness announced it is a hang: the batch is killed at once and that suite recorded
    `timed out` (the batch's other unfinished suites come back as None, to be run alone), so one hanging
    suite costs its own timeout, not the sum of the batch's."""
    command = plan.command
    for suite in suites:
        remove_reports(command.cwd, suite)
    call = _Call(plan, suites, output_path, gpu, on_settled, on_running)
    argv = discovery.run_argv(command.argv, suites, plan.options)
    killed = False
    next_watch = call.start + WATCH_SECONDS
    with open(output_path, 'w') as output:
        env = plan.call_env(min(len(suites), plan.harness.pool_size), alone)
        child = launcher.start(argv, command.cwd, batch_env(env, gpu, call.attempt), output)
        deadline = call.start + sum(plan.timeout_for(suite) for suite in suites)
        while True:
            try:
                code: Optional[int] = child.wait(timeout=max(0.1, min(POLL_SECONDS, deadline - time.time())))
                break
            except TimeoutExpired:
                if time.time() >= deadline:
                    code, killed = child.stop(), True
                    break
                if call.something_ended():
                    call.settle(call.text())
                if time.time() >= next_watch:
                    next_watch = time.time() + WATCH_SECONDS
                    if call.late():
                        code, killed = child.stop(), True
                        break
    return _accounted(call, code, killed)


def _accounted(call: _Call, code: Optional[int], killed: bool) -> Tuple[Dict[str, Optional[StoreRecord]], bool]:
    """run_batch's records once its call ended: the final ones (a record settled early and changed by the
    end is marked corrected), the hung suite's, None for what a killed call did not finish or never started.

    A suite passes only when it ended by itself: when run_test.py (or our supervisor of it) died by a signal
    from outside, a started suite whose sessions had not all ended is terminated with that signal and marked
    interrupted (a rerun of the build runs it again), and one never started is run again alone; when run_test.py
    exited non-zero on its own, a suite with only some of its sessions ended (2.6's `-m serial` one before the
    main one) has no summary, and one it never started after a named failure is run again alone."""
    suites, cwd, attempt, output_path, gpu = (call.suites, call.plan.command.cwd, call.attempt, call.output_path,
                                              call.gpu)
    seconds = round(time.time() - call.start, 1)
    signal_name = None if killed else died_by(code)  # stopped from outside: the OOM killer, scancel, kill
    text = call.text()
    outputs = call.settle(text, code)
    started = [suite for suite in suites if outputs[suite].sources]
    named_failure = any(outputs[suite].failed for suite in suites)
    inline_serial = not call.plan.harness.replays_logs
    records: Dict[str, Optional[StoreRecord]] = {}
    for suite in suites:
        out = outputs[suite]
        if suite in call.settled:
            final = _record(suite, out, seconds, code, gpu, output_path, cwd, attempt)
            early = call.settled[suite]
            same = (final.exit_code, final.suite.status, final.suite.counts) == \
                (early.exit_code, early.suite.status, early.suite.counts)
            records[suite] = early if same else replace(final, corrected=True)  # stored again: the last one counts
            if signal_name and final.suite.status == SUITE_TERMINATED:  # its own process died of the batch's kill
                records[suite] = replace(final, corrected=True, interrupted=signal_name)
            continue
        if suite in call.overdue:  # hung: its own timeout passed inside the batch
            result, _code, notes = build_outcome(suite, out.text, Ending(timed_out=call.overdue[suite]), test_dir=cwd,
                                                 attempt=attempt)
            records[suite] = _stored(result, None, notes, None, seconds, code, gpu, out.text, output_path)
            continue
        # a batch that ended by itself finished every suite; a killed one only those it reported as ended
        # (a harness printing suites inline one after another ended one when it started the next)
        whole = out.settled or (inline_serial and 'inline' in out.sources and started[-1] != suite)
        if (killed or signal_name) and not whole:
            if killed or not (out.sources or out.finished):
                records[suite] = None  # never started (or stopped by us): run again alone
                continue
            records[suite] = _interrupted(suite, out, seconds, code, gpu, output_path, cwd, attempt, signal_name)
            continue
        if code and named_failure and not (out.sources or out.finished):
            records[suite] = None  # run_test.py stopped at a failure before starting it: run again alone
            continue
        if code and out.finished and not out.settled and not out.failed:
            result, _code, notes = build_outcome(suite, out.text, Ending(finished=False), test_dir=cwd, attempt=attempt)
            notes.append(f'run_test.py exited {code} after {out.ends} of the suite\'s sessions ended, not all of them')
            records[suite] = _stored(result, None, notes, None, seconds, code, gpu, out.text, output_path)
            continue
        records[suite] = _record(suite, out, seconds, code, gpu, output_path, cwd, attempt)
    if not killed and not signal_name and code != 0 and not any(r and r.exit_code for r in records.values()):
        # the harness failed without naming a failed suite (bad option, import error): nothing can be judged
        for suite in suites:
            if not outputs[suite].sources and not outputs[suite].finished:
                result, _code, _notes = build_outcome(suite, '', Ending(finished=False), test_dir=cwd, attempt=attempt)
                records[suite] = _stored(result, code, [f'run_test.py exited {code} without naming a failed suite'],
                                         None, seconds, code, gpu, text, output_path)
    for suite in suites:
        if records.get(suite) is not None:
            attempt.publish(suite)
    attempt.discard()  # what a killed batch's unfinished suites wrote: they run again, alone
    return records, killed


def run_batch_to_the_end(plan: RunPlan, batch: Sequence[str], sink: BatchSink, *, output_path: str,
                         gpu: Optional[str] = None, alone_gpu: Optional[str] = None,
                         progress: Optional[Callable[[str], None]] = None, launcher: Launcher = PROCESSES,
                         on_running: Optional[Callable[[str, bool], None]] = None, alone: bool = False) -> None:
    """One batch, every suite of it accounted for: on_running(suite, bool) as each starts and waits (run_batch;
    alone: no other call beside it);
    sink.settled(suite, record) as each settles;
    sink.corrected(suite, record) when the batch's end corrected a record given early; a suite the killed
    batch did not finish runs alone (run/solo.run_suite, on alone_gpu) and is given to sink.settled then.
    Shared by the batched run here (run/here) and by the jobs of a Slurm-spread run (spread/worker)."""
    stored = set()

    def settled(suite: str, record: StoreRecord) -> None:
        stored.add(suite)
        sink.settled(suite, record)
    records, _killed = run_batch(plan, batch, output_path, gpu=gpu, on_settled=settled, launcher=launcher,
                                 on_running=on_running, alone=alone)
    for suite in batch:
        record = records[suite]
        if suite in stored:
            if record is not None and record.corrected:
                sink.corrected(suite, record)
            continue
        if record is None:
            if progress:
                progress(f'{suite}: not finished when its batch was killed; running it alone')
            if on_running:
                on_running(suite, True)
            record = solo.run_suite(plan, suite, gpu=alone_gpu, launcher=launcher, alone=alone)
        sink.settled(suite, record)


def plan_batches(suites: List[str], must_serial: Callable[[str], bool], parallel: int,
                 batch_size: int = DEFAULT_BATCH_SIZE) -> List[Tuple[List[str], bool]]:
    """[(batch, runs alone)]: with parallel 1 one batch after another as run_test.py orders them itself;
    with parallel > 1 the non-serial suites in batches spread over the workers, then the serial ones alone."""
    size = max(1, batch_size)
    if parallel <= 1:
        return [(suites[i:i + size], False) for i in range(0, len(suites), size)]
    free = [suite for suite in suites if not must_serial(suite)]
    alone = [suite for suite in suites if must_serial(suite)]
    per_worker = max(1, min(size, -(-len(free) // parallel)))
    batches = [(free[i:i + per_worker], False) for i in range(0, len(free), per_worker)]
    batches += [(alone[i:i + size], True) for i in range(0, len(alone), size)]
    return batches


def _overdue(text, outputs, settled, first_seen, timeout_for):
    """{suite: 'timeout after Ns'} of the suites whose current run (announced by a `Running X` line and not
    ended yet) has lasted at least their own timeout; first_seen ((suite, run): when that announcement was
    first seen) is updated in place.  A suite the harness runs twice (2.6: `-m serial`, then in its pool)
    is timed per run, so waiting for a pool slot between its runs is not counted."""
    now, late = time.time(), {}
    for suite, runs in announced_runs(text).items():
        out = outputs.get(suite)
        if out is None or suite in settled or out.settled or out.ends >= runs:
            continue
        first_seen.setdefault((suite, runs), now)
        limit = timeout_for(suite)
        if now - first_seen[(suite, runs)] >= limit:
            late[suite] = f'timeout after {limit}s'
    return late
