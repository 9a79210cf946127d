"""Run suites in batches: one run_test.py call for many suites, so its own pool and serial list apply.

One call per suite costs ~4.3 s before the suite starts (torch imported by run_test.py and by each of
its pool's workers), over an hour for ~1,000 suites, and loses the harness's own parallelism.  So
suites run as `run_test.py ... -i a b c ...` (one batch at a time by default: exactly what a plain
run_test.py call does, serial suites after its pool).  With parallel=N, N batches of non-serial suites
run at a time, then the suites the harness must run alone (its must_serial list) in one batch by
themselves.  Each batch runs in its own process group, killed when it outlives the sum of its suites'
timeouts; its suites' outcomes are stored when it ends, so a killed `eb` loses at most the batches
in flight; a suite the killed batch did not finish is run again alone with its own timeout.
"""

import os
import subprocess
import threading
import time
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from eb_pytorch_cuda import process
from eb_pytorch_cuda.testsuite.run import discovery
from eb_pytorch_cuda.testsuite.results import grammar
from eb_pytorch_cuda.testsuite.results.splitting import announced_runs, split_batch_output
from eb_pytorch_cuda.testsuite.results.testtimes import kept_times, node_prefix
from eb_pytorch_cuda.testsuite.results.model import SUITE_PASSED
from eb_pytorch_cuda.testsuite.results.outcome import build_outcome, remove_reports, report_files
from eb_pytorch_cuda.testsuite.results.records import StoreRecord
from eb_pytorch_cuda.testsuite.results.reportdirs import Attempt
from eb_pytorch_cuda.testsuite.run.command import TestCommand
from eb_pytorch_cuda.testsuite.run.harness import Harness
from eb_pytorch_cuda.testsuite.run.store import ResultStore

Solo = Callable[[str, float], StoreRecord]  # solo(suite, timeout): run a suite alone, return its record

OUTPUT_KEPT = 20000  # characters of a suite's output kept in the results file
DEFAULT_BATCH_SIZE = 50  # suites per run_test.py call: ~4 s of start-up per 50 suites, resume granularity
XML_VARIABLE = 'EASYBUILD_WRITE_PYTORCH_TEST_REPORTS'  # upstream EB_PyTorch's switch for XML reports


def batch_options(harness: Harness, save_xml: bool = True) -> List[str]:
    """Options added to each batch call: keep going after a failed suite, per-suite logs, XML reports."""
    options = ['--continue-through-error']
    if harness.pipe_logs:
        options.append('--pipe-logs')
    if save_xml and harness.forwards_unknown_args:
        options.append('--save-xml')  # passed on to every test file (common_utils), as in CI mode
    elif save_xml and harness.positional_unittest_args:
        options += ['--', '--save-xml']  # 2.1: after `--`, for every test file (discovery.run_argv keeps it last)
    return options


def xml_reports_safe(harness: Harness, command: TestCommand, env: Mapping[str, str]) -> bool:
    """Whether the suites can be asked for XML reports (--save-xml).  Under pytest they always can (pytest
    writes them); under unittest (a harness older than 2.1, or PYTORCH_TEST_DO_NOT_USE_PYTEST set)
    common_utils.run_tests imports xmlrunner on --save-xml, so every suite would die of an ImportError
    where the test Python lacks unittest-xml-reporting (PyTorch 2.1.2's easyconfigs do not bring it)."""
    if harness.pytest_by_default and env.get('PYTORCH_TEST_DO_NOT_USE_PYTEST', '0') == '0':
        return True
    key = (command.argv[0], command.cwd, tuple(sorted(env.items())))
    if key not in _XMLRUNNER_FOUND:
        try:
            done = process.capture([command.argv[0], '-c', 'import xmlrunner'], timeout=300, cwd=command.cwd,
                                   env=dict(env), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        except (OSError, subprocess.SubprocessError):
            return False  # not a Python, or it hung: no XML this time, asked again next time
        _XMLRUNNER_FOUND[key] = done.returncode == 0
    return _XMLRUNNER_FOUND[key]


_XMLRUNNER_FOUND: dict = {}  # (test command's program, its directory, environment) -> imports xmlrunner


def call_options(harness: Harness, command: TestCommand, env: Mapping[str, str], save_xml: bool = True
                 ) -> List[str]:
    """The options of every run_test.py call of this command (a batch, a suite alone, a Slurm job's claim):
    batch_options, XML reports asked for where the suites can write them (xml_reports_safe)."""
    return batch_options(harness, save_xml and xml_reports_safe(harness, command, env))


def batch_env(env: Mapping[str, str], gpu: Optional[str] = None, attempt: Optional[Attempt] = None
              ) -> Dict[str, str]:
    """The suites' environment: XML reports on (into attempt's own directory, when given), the GPU."""
    env = dict(env)
    if attempt is not None:
        env.update(attempt.env)
    env[XML_VARIABLE] = '1'  # test files of a torch built by EB_PyTorch >= 1.10 write XML reports with it
    if gpu is not None:
        env['CUDA_VISIBLE_DEVICES'] = str(gpu)
    return env


POLL_SECONDS = 0.25  # how often a running batch's output is looked at for suites that have ended
WATCH_SECONDS = 5  # how often a running batch's started suites are checked against their own timeouts


def _stored(result, exit_code, notes, suite_seconds, batch_seconds, code, gpu, text, output_path) -> StoreRecord:
    """The store's record of one suite of a batch (the form solo.run_suite gives a suite run alone)."""
    return StoreRecord(suite=result, exit_code=exit_code, seconds=suite_seconds, batch_seconds=batch_seconds,
                       batch_exit_code=code, gpu=gpu, notes=tuple(notes), output_tail=text[-OUTPUT_KEPT:],
                       output_file=output_path)


def _record(suite, out, seconds, code, gpu, output_path, test_dir, attempt):
    result, exit_code, notes = build_outcome(suite, out.text, True, out.failed, out.signal, test_dir=test_dir,
                                             attempt=attempt)
    times = (kept_times(result.seconds, report_files(test_dir, suite, attempt, True), node_prefix(out.text, test_dir),
                        notes) if test_dir else {})  # (a time that is no time adds a note)
    record = _stored(result, exit_code, notes, result.seconds, seconds, code, gpu, out.text, output_path)
    # per-test times: how the next build splits this suite (results/testtimes)
    return replace(record, test_seconds=times) if times else record


def run_batch(command: TestCommand, suites: Sequence[str], timeout: float, output_path: str,
              env: Mapping[str, str], options: Sequence[str], gpu: Optional[str] = None,
              harness: Optional[Harness] = None, on_settled: Optional[Callable[[str, StoreRecord], None]] = None,
              timeout_for: Optional[Callable[[str], float]] = None
              ) -> Tuple[dict, bool]:
    """Run suites in one run_test.py call.  on_settled(suite, record) is called as soon as the output says a
    suite's outcome is final (its `failed!` or `was successful` line; with a serial inline harness, the next
    suite's start), so it can be stored before the batch ends.  Returns ({suite: record or None when the
    killed batch had not finished it}, killed); records already given to on_settled are included.

    timeout is the whole batch's limit; with timeout_for(suite), a suite that has run longer than its own
    timeout since the harness announced it is a hang: the batch is killed at once and that suite recorded
    `timed out` (the batch's other unfinished suites come back as None, to be run alone), so one hanging
    suite costs its own timeout, not the sum of the batch's."""
    for suite in suites:
        remove_reports(command.cwd, suite)
    attempt = Attempt.new(command.cwd)  # its reports, and only they, are read (results/reportdirs)
    argv = discovery.run_argv(command.argv, suites, options)
    inline_is_serial = harness is not None and not harness.replays_logs
    start = time.time()
    killed = False
    settled: dict = {}
    overdue: dict = {}
    first_seen: dict = {}
    next_watch = start + WATCH_SECONDS

    def read_output():
        with open(output_path, errors='replace') as handle:
            return handle.read()

    seen = [0]

    def something_ended():
        """Whether output written since the last look may settle a suite (cheap: reads only the new part)."""
        with open(output_path, 'rb') as handle:
            handle.seek(max(0, seen[0] - 100))
            new = handle.read().decode('utf-8', 'replace')
            seen[0] = handle.tell()
        return any(word in new for word in grammar.SETTLING_TEXTS)

    def settle(text, code=None):
        outputs = split_batch_output(text, suites, command.cwd, inline_is_serial,
                                     harness.runs_of if harness is not None else None,
                                     harness is not None and harness.full_log_means_passed)
        for suite in suites:
            if suite not in settled and outputs[suite].settled:
                settled[suite] = _record(suite, outputs[suite], round(time.time() - start, 1), code, gpu,
                                         output_path, command.cwd, attempt)
                if on_settled:
                    on_settled(suite, settled[suite])
        return outputs

    with open(output_path, 'w') as output:
        child = process.start(argv, cwd=command.cwd, env=batch_env(env, gpu, attempt), stdout=output,
                              stderr=subprocess.STDOUT)
        deadline = start + timeout
        while True:
            try:
                code: Optional[int] = child.wait(timeout=max(0.1, min(POLL_SECONDS, deadline - time.time())))
                break
            except subprocess.TimeoutExpired:
                if time.time() >= deadline:
                    code, killed = child.stop(), True
                    break
                if something_ended():
                    settle(read_output())
                if timeout_for is not None and time.time() >= next_watch:
                    next_watch = time.time() + WATCH_SECONDS
                    text = read_output()
                    overdue = _overdue(text, split_batch_output(text, suites, command.cwd, inline_is_serial,
                                                                harness.runs_of if harness is not None else None,
                                                                harness is not None and harness.full_log_means_passed),
                                       settled, first_seen, timeout_for)
                    if overdue:
                        code, killed = child.stop(), True
                        break
    seconds = round(time.time() - start, 1)
    text = read_output()
    outputs = settle(text, code)
    started = [suite for suite in suites if outputs[suite].sources]
    records = {}
    for suite in suites:
        out = outputs[suite]
        if suite in settled:
            final = _record(suite, out, seconds, code, gpu, output_path, command.cwd, attempt)
            early = settled[suite]
            same = (final.exit_code, final.suite.status, final.suite.counts) == \
                (early.exit_code, early.suite.status, early.suite.counts)
            records[suite] = early if same else replace(final, corrected=True)  # stored again: the last one counts
            continue
        if suite in overdue:  # hung: its own timeout passed inside the batch
            result, _code, notes = build_outcome(suite, out.text, True, False, None, overdue[suite], command.cwd,
                                                 attempt=attempt)
            records[suite] = _stored(result, None, notes, None, seconds, code, gpu, out.text, output_path)
            continue
        # a batch that ended by itself finished every suite; a killed one only those it reported as ended
        if killed and not (out.settled or ('inline' in out.sources and started[-1] != suite)):
            records[suite] = None
            continue
        records[suite] = _record(suite, out, seconds, code, gpu, output_path, command.cwd, attempt)
    if not killed and code != 0 and not any(r and r.exit_code for r in records.values()):
        # the harness failed without naming a failed suite (bad option, import error): nothing can be judged
        for suite in suites:
            if not outputs[suite].sources and not outputs[suite].finished:
                result, _code, _notes = build_outcome(suite, '', False, False, test_dir=command.cwd, attempt=attempt)
                records[suite] = _stored(result, code, [f'run_test.py exited {code} without naming a failed suite'],
                                         None, seconds, code, gpu, text, output_path)
    for suite in suites:
        if records.get(suite) is not None:
            attempt.publish(suite)
    attempt.discard()  # what a killed batch's unfinished suites wrote: they run again, alone
    return records, killed


def run_batch_to_the_end(command: TestCommand, batch: Sequence[str], output_path: str, env: Mapping[str, str],
                         options: Sequence[str], gpu: Optional[str], harness: Optional[Harness],
                         timeout_for: Callable[[str], float], report: Callable[[str, StoreRecord], None],
                         amend: Callable[[StoreRecord], None], solo: Optional[Solo] = None,
                         progress: Optional[Callable[[str], None]] = None) -> None:
    """One batch, every suite of it accounted for: report(suite, record) as each settles; amend(record) when
    the batch's end corrected a record reported early (stored again: the last one counts); a suite the killed
    batch did not finish runs alone through solo(suite, timeout) and is reported then.  Shared by the serial
    and batched runs here and by the jobs of a Slurm-spread run (worker)."""
    stored = set()

    def settled(suite, record):
        stored.add(suite)
        report(suite, record)
    records, _killed = run_batch(command, batch, sum(timeout_for(s) for s in batch), output_path, env, options, gpu,
                                 harness, settled, timeout_for)
    for suite in batch:
        if suite in stored:
            if records[suite].corrected:
                amend(records[suite])
            continue
        if records[suite] is None and solo is not None:
            if progress:
                progress(f'{suite}: not finished when its batch was killed; running it alone')
            records[suite] = solo(suite, timeout_for(suite))
        if records[suite] is not None:
            report(suite, records[suite])


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


def run_batches(command: TestCommand, suites: Sequence[str], store: ResultStore, output_dir: str,
                env: Mapping[str, str], timeout_for: Callable[[str], float], harness: Harness, parallel: int = 1,
                progress: Optional[Callable[[str], None]] = None, gpus: Sequence[str] = (),
                solo: Optional[Solo] = None, batch_size: int = DEFAULT_BATCH_SIZE, save_xml: bool = True
                ) -> List[str]:
    """Run every suite not in store, in batches; store each record as its batch ends.  solo(suite, timeout)
    runs a suite its killed batch did not finish, alone.  Returns the list of suites run now."""
    done = store.load()
    todo = [suite for suite in suites if suite not in done]
    if progress and done:
        progress(f'resuming: {len(done)} suite(s) already measured for this build, {len(todo)} to run')
    options = call_options(harness, command, env, save_xml)
    lock, counter = threading.Lock(), {'finished': len(done), 'failing': sum(
        1 for record in done.values() if record.suite.status != SUITE_PASSED), 'batch': 0}
    os.makedirs(output_dir, exist_ok=True)

    def report(suite, record):
        store.append(record)
        with lock:
            counter['finished'] += 1
            state = record.suite.status
            counter['failing'] += state != SUITE_PASSED
            if progress:
                notes = f" [{'; '.join(record.notes)}]" if record.notes else ''
                progress(f"suite {counter['finished']}/{len(suites)}: {suite} {state}{notes} "
                         f"({counter['failing']} suite(s) failed so far)")

    def one(batch):
        with lock:
            counter['batch'] += 1
            index = counter['batch']
        gpu = gpus[index % len(gpus)] if gpus else None
        path = os.path.join(output_dir, f'batch-{os.getpid()}-{index:04d}.log')
        run_batch_to_the_end(command, batch, path, env, options, gpu, harness, timeout_for, report, store.append,
                             solo, progress)

    batches = plan_batches(todo, harness.must_serial, parallel, batch_size)
    together = [batch for batch, alone in batches if not alone]
    alone = [batch for batch, alone_ in batches if alone_]
    if parallel > 1 and len(together) > 1:
        with ThreadPoolExecutor(max_workers=parallel) as pool:
            list(pool.map(one, together))
    else:
        for batch in together:
            one(batch)
    for batch in alone:
        one(batch)
    return todo
