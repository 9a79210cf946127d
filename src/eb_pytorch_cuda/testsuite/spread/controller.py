"""One build's test suites spread over N Slurm jobs: what service.run_suites runs when jobs > 1, instead of
the batched run here (run/solo.run_all).

run_spread refuses a node-local path the jobs need (the results and test directories, the output directory,
the tested installation: slurm.refuse_node_local), discovers the suites unless given, cancels the jobs a
killed previous run left, cuts suites expected to take long into pieces (results/pieces, run/piece_times),
writes the queue's spec and its suites longest expected first (workqueue.SuiteQueue), starts the jobs
(slurm.JobPool; each runs spread/worker.py), and waits (_wait): it copies each outcome into the build's
ResultStore as it arrives, records a suite whose jobs all died max_attempts times as never finished, marks
the jobs that left Slurm dead (their claims go back to the queue), submits replacements while unclaimed suites
outnumber the live jobs' capacity, and prints progress on change.  The outcome
is the store's RunResult, as a serial run's is, so the verdict and the report are the same; failures are
then rerun here (run/reruns).  A rerun after a killed `eb` resumes from the store.

The callers (the easyblock's test step with test_suite_jobs > 1, `eb-pytorch-cuda test-suite --jobs N`)
reach it through service.run_suites; service.finish calls remove_queue.
"""

import os
import shutil
import sys
import time
from typing import Callable, Dict, List, Mapping, Optional, Sequence

from eb_pytorch_cuda.testsuite.results import pieces, previous
from eb_pytorch_cuda.testsuite.run import discovery, piece_times
from eb_pytorch_cuda.testsuite.spread import slurm
from eb_pytorch_cuda.testsuite.policy.settings import piece_timeouts, timeout_of
from eb_pytorch_cuda.testsuite.run.store import ResultStore
from eb_pytorch_cuda.testsuite.run.command import harness_environment
from eb_pytorch_cuda.testsuite.run.harness import harness_of
from eb_pytorch_cuda.testsuite.run.reruns import rerun_failures
from eb_pytorch_cuda.testsuite.results.records import StoreRecord
from eb_pytorch_cuda.testsuite.results.model import SUITE_INCOMPLETE, SUITE_PASSED, RunResult, Suite
from eb_pytorch_cuda.testsuite.spread.workqueue import (DEFAULT_MAX_ATTEMPTS, DEFAULT_STALE_AFTER, RecordReader,
                                                        QueueSpec, SuiteQueue, job_of, longest_first)


def previous_suite_seconds(results_json: Optional[str]) -> Dict[str, float]:
    """{suite: seconds} from a previous results JSON (`suite_seconds`), or from its suites' `seconds`
    (results.previous; what is not a time was said by service.suite_timeouts, which reads the same)."""
    return previous.suite_seconds(results_json, previous.load(results_json))


def previous_test_seconds(results_json: Optional[str],
                          progress: Optional[Callable[[str], None]] = None) -> Dict[str, Dict[str, float]]:
    """{suite: {node id: seconds}} from a previous results JSON's `test_seconds` (what the records of its long
    suites kept: results/testtimes), {} when it has none or cannot be read; what is not a time is left out
    and said through progress (results.previous)."""
    return previous.test_seconds(results_json, previous.load(results_json), progress or (lambda note: None))


def queue_dir_of(store: ResultStore) -> str:
    """The queue lives next to the build's results file (same shared place, same lifetime), one per build
    fingerprint: EESSI's per-target builds of one easyconfig share the results file's name but not the
    fingerprint (their compiler flags differ), so each spreads its own suites over its own jobs."""
    return f'{store.path}.queue-{store.fingerprint[:16]}'


def remove_queue(store: ResultStore) -> None:
    """Drop the queue (claims, per-job results, job outputs) once the build's results are no longer needed."""
    shutil.rmtree(queue_dir_of(store), ignore_errors=True)


def run_spread(command, env: dict, store: ResultStore, output_dir: str, python: str,
               timeouts: Dict[str, int], jobs: int, parallel: int = 1, reruns: int = 0,
               suites: Optional[List[str]] = None, previous_seconds: Optional[Dict[str, float]] = None,
               tested_installation: Optional[str] = None, slurm_settings: Optional[dict] = None,
               shared_paths: Sequence[str] = (), progress: Optional[Callable[[str], None]] = None,
               poll: float = 10, stale_after: float = DEFAULT_STALE_AFTER, max_attempts: int = DEFAULT_MAX_ATTEMPTS,
               worker_python: Optional[str] = None, environ: Optional[Mapping[str, str]] = None,
               piece_seconds: Optional[float] = pieces.PIECE_SECONDS,
               previous_test_seconds: Optional[Dict[str, Dict[str, float]]] = None) -> RunResult:
    """Run every suite not yet in store on `jobs` Slurm jobs, then rerun failures here; return the RunResult.

    command: run.command.TestCommand (cwd, argv); env: the full test environment; timeouts: {suite: s, '': s};
    parallel: suites at a time inside each job (over its GPUs); slurm_settings: see slurm.job_options;
    stale_after: seconds without a heartbeat before a worker counts as dead; max_attempts: claims of a suite
    whose jobs all died before it is recorded as never finished (judged like a crashed suite);
    worker_python: the Python that runs the jobs' worker (default: this one); piece_seconds: a suite expected
    (previous_seconds) to take longer is run as pieces of at most about this (results.pieces; None: never),
    cut by its tests' times where previous_test_seconds ({suite: {node id: s}}) has them.
    Raises PluginError (one line)
    when a path the jobs need is node-local, or sbatch refuses."""
    progress = progress or (lambda message: None)
    environ = os.environ if environ is None else environ
    env = harness_environment(env, command)  # also for callers other than service.run_suites
    queue = SuiteQueue(queue_dir_of(store), stale_after, max_attempts)
    checks = [(os.path.dirname(store.path), 'the results directory'), (command.cwd, 'the test directory'),
              (output_dir, 'the test output directory')]
    if tested_installation:
        checks.append((tested_installation, 'the tested installation'))
    for path, what in checks:
        slurm.refuse_node_local(path, what, shared_paths, environ)
    options = slurm.job_options(slurm_settings, environ)
    harness = harness_of(command.cwd)
    if suites is None:
        suites, listed_serial = discovery.discover(command, env)
        harness.serial |= listed_serial or set()  # what this very harness says it runs alone
    done = store.load()
    os.makedirs(queue.directory, exist_ok=True)
    pool = slurm.JobPool(queue, options, worker_python or sys.executable, jobs)
    cancelled = pool.cancel_previous()
    units = _plan(command.cwd, harness, [suite for suite in suites if suite not in done], previous_seconds or {},
                  piece_seconds, progress, previous_test_seconds)
    expected = dict(previous_seconds or {}, **pieces.expected_of(units, previous_seconds or {}, previous_test_seconds))
    todo = longest_first([unit.key for unit in units if unit.key not in done], expected)
    spec: QueueSpec = {
        'cwd': command.cwd, 'argv': list(command.argv), 'env': dict(env),
        # a piece's timeout: its share of its suite's (policy.settings.piece_timeouts)
        'timeouts': dict(timeouts, **piece_timeouts(timeouts, expected, units)),
        'output_dir': output_dir, 'fingerprint': store.fingerprint, 'suites': todo, 'slots': max(1, int(parallel)),
        'stale_after': stale_after, 'max_attempts': max_attempts,
        'serial': [key for key in todo if harness.must_serial(pieces.Piece.parse(key).suite)],
        # claims small enough that every job slot gets about two: a short queue keeps all jobs busy
        'max_claim': max(1, len(todo) // (2 * max(1, int(jobs)) * max(1, int(parallel)))),
        'expected_seconds': {key: expected[key] for key in todo if key in expected}}
    queue.create(spec, todo)
    os.makedirs(output_dir, exist_ok=True)
    reader = RecordReader(queue, progress)  # a worker's line that is no record is named, then set aside
    failed = [sum(1 for record in done.values() if record.suite.status != SUITE_PASSED)]

    def collect():
        for record in reader.new_records(lambda record: pieces.key_of(record) not in done):
            store.append(record)
            done[pieces.key_of(record)] = record
            failed[0] += record.suite.status != SUITE_PASSED

    collect()  # outcomes a killed eb's jobs stored after it died
    if done and (todo or cancelled):
        progress(f'resuming: {sum(1 for s in suites if s in done)} suite(s) already measured for this build, '
                 f'{sum(1 for s in suites if s not in done)} to run'
                 + (f' (cancelled {len(cancelled)} job(s) left by the previous run)' if cancelled else ''))
    left = [key for key in todo if key not in done]
    if left:
        pool.start(len(left))
        asked = ' '.join(options.sbatch_options()) or 'default options'
        progress(f"running {len(left)} suites on {len(pool.live)} Slurm job(s) ({asked}; {max(1, int(parallel))} "
                 f"at a time per job): {' '.join(command.argv)} -i <suites> in {command.cwd}; queue {queue.directory}; "
                 f"results kept in {store.path}")
        try:
            _wait(queue, pool, [suite for suite in suites if suite in done] + [unit.key for unit in units], done,
                  failed, collect, progress, poll)
        finally:
            pool.finish()
    result = store.result(suites)
    rerun_failures(result, command, python, env, reruns,
                   timeout_of(timeouts), progress)
    return result


def _plan(test_dir: str, harness, suites: List[str], expected: Mapping[str, float], piece_seconds, progress,
          test_seconds=None):
    """The units to queue: suites expected to take longer than piece_seconds as their pieces, when the harness
    can split them (a times file for its `--shard`: run/piece_times); a suite with a custom handler stays whole
    (its handler runs the file its own way, and sets its own report directory)."""
    splittable = {suite: seconds for suite, seconds in expected.items() if not harness.has_handler(suite)}
    units = (pieces.split(suites, splittable, piece_seconds, test_seconds) if piece_seconds
             else [pieces.Piece(suite) for suite in suites])
    if all(unit.whole for unit in units):
        return units
    why_not = piece_times.write_times(test_dir, harness, units)
    if why_not:
        progress(f'not splitting long suites: {why_not}')
        return [pieces.Piece(suite) for suite in suites]
    split = sorted({unit.suite for unit in units if not unit.whole})
    progress(f"{len(split)} long suite(s) run as pieces ({sum(not unit.whole for unit in units)} in all): "
             + ', '.join(split))
    return units


def _never_finished(key: str, attempts: int) -> StoreRecord:
    """The record of a suite (or a piece of one) whose every job died while running it (solo.run_suite's form)."""
    piece = pieces.Piece.parse(key)
    result = Suite(piece.suite, status=SUITE_INCOMPLETE, sources=[],
                   signal=f'its Slurm job ended {attempts} times while running it (node failure, time limit, scancel)')
    return pieces.mark(StoreRecord(suite=result), piece)  # no notes: none was recorded


def _wait(queue, pool, suites, done, failed, collect, progress, poll):
    """Until every suite has an outcome: collect outcomes, replace dead jobs, print progress on change."""
    shown = None
    while True:
        collect()
        finished = sum(1 for suite in suites if suite in done)
        if finished == len(suites):
            progress(f'suites {finished}/{len(suites)} done on {len(pool.live) + len(pool.gone)} job(s); '
                     f'{failed[0]} failed')
            return
        for suite, attempts in queue.exhausted().items():
            queue.record(queue.store('submitter'), _never_finished(suite, attempts))
            progress(f'{suite}: its job ended before it finished, {attempts} times: recorded as never finished')
            collect()
        unfinished = [suite for suite in suites if suite not in done]
        running = queue.running()
        died = pool.check(sum(1 for suite in unfinished if suite not in running))
        for job in died:
            lost = [suite for suite, (_, holder) in queue.claims(done).items()
                    if holder and job_of(holder) == job and suite not in done]
            if lost:
                progress(f"job {job} ended with {len(lost)} suite(s) unfinished ({', '.join(sorted(lost))}): "
                         f"back in the queue")
        line = f'suites {finished}/{len(suites)} done on {len(pool.live)} job(s); {failed[0]} failed so far'
        if line != shown:
            progress(line)
            shown = line
        time.sleep(poll)
