"""One build's test suites spread over N Slurm jobs: the Slurm executor (run/executor's protocol), which the
service chooses when test_suite_jobs > 1 instead of the batched run here (run/here.HereExecutor).

SlurmExecutor.prepare refuses a node-local path the jobs need (the results and test directories, the output
directory, the tested installation: slurm.refuse_node_local) and Slurm options it cannot use, before the
suites are discovered, and asks the plan (run/plan) to cut suites expected to take long into pieces
(results/pieces, run/piece_times).  run_spread then cancels the jobs a killed previous run left, writes the
queue's spec (from the plan: each job rebuilds the plan from it, spread/worker.plan_of_spec) and its units
longest expected first (workqueue.SuiteQueue), starts the jobs (a jobpool.JobPool: Slurm's, slurm.JobPool, unless
SpreadOptions.pool names another; each job runs spread/worker.py),
and waits (_wait): it copies each outcome into the build's ResultStore as it arrives, records a suite whose
jobs all died max_attempts times as never finished, marks the jobs that left Slurm dead (their claims go
back to the queue), submits replacements while unclaimed suites outnumber the live jobs' capacity, and
prints progress on change.  The outcome is the store's RunResult, as a run here gives it, so the verdict and
the report are the same; the isolated reruns of failed tests are the jobs' own (each reruns its suites' failures
on its node before it stores them), not the submitting node's.  A rerun after a killed `eb` resumes from
the store.  service.finish calls remove_queue.
"""

import os
import shutil
import sys
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.inputs import make_directory
from eb_pytorch_cuda.testsuite.results import pieces, previous
from eb_pytorch_cuda.testsuite.spread import slurm
from eb_pytorch_cuda.testsuite.spread.jobpool import JobPool, PoolFactory
from eb_pytorch_cuda.testsuite.spread.worker import CLAIM_SECONDS
from eb_pytorch_cuda.testsuite.run.heartbeat import Heartbeat
from eb_pytorch_cuda.testsuite.run.plan import PieceRule, RunPlan, RunRequest
from eb_pytorch_cuda.testsuite.run.store import ResultStore
from eb_pytorch_cuda.testsuite.results.records import StoreRecord, suite_record
from eb_pytorch_cuda.testsuite.results.model import SUITE_INCOMPLETE, SUITE_PASSED, Suite
from eb_pytorch_cuda.testsuite.spread.workqueue import (DEFAULT_MAX_ATTEMPTS, DEFAULT_STALE_AFTER, RecordReader,
                                                        QueueSpec, SuiteQueue, job_of, longest_first)


def queue_dir_of(store: ResultStore) -> str:
    """The queue lives next to the build's results file (same shared place, same lifetime), one per build
    fingerprint: EESSI's per-target builds of one easyconfig share the results file's name but not the
    fingerprint (their compiler flags differ), so each spreads its own suites over its own jobs."""
    return f'{store.path}.queue-{store.fingerprint[:16]}'


def remove_queue(store: ResultStore) -> None:
    """Drop the queue (claims, per-job results, job outputs) once the build's results are no longer needed."""
    shutil.rmtree(queue_dir_of(store), ignore_errors=True)


@dataclass(frozen=True)
class SpreadOptions:
    """How a run is spread over Slurm jobs, besides the plan.  slurm_settings: see slurm.job_options;
    shared_paths: paths all nodes see besides $EB_PYTORCH_CUDA_SHARED_PATHS; environ: where those and
    Slurm's own variables are read (default: this process's); poll: seconds between looks at the queue;
    stale_after: seconds without a heartbeat before a worker counts as dead; max_attempts: claims of a suite
    whose jobs all died before it is recorded as never finished (judged like a crashed suite); worker_python:
    the Python that runs the jobs' worker (default: this one); pieces: how long suites are cut when the
    service gives no previous times (run/plan.PieceRule); pool: what starts the jobs (spread/jobpool.PoolFactory;
    default: Slurm's, slurm.pool_factory, with slurm_settings)."""
    slurm_settings: Optional[dict] = None
    shared_paths: Sequence[str] = ()
    environ: Optional[Mapping[str, str]] = None
    poll: float = 10
    stale_after: float = DEFAULT_STALE_AFTER
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    worker_python: Optional[str] = None
    pieces: PieceRule = field(default_factory=PieceRule)
    pool: Optional[PoolFactory] = None

    def environment(self) -> Mapping[str, str]:
        """Where the Slurm settings and shared paths are read: environ, else this process's environment."""
        return os.environ if self.environ is None else self.environ

    def job_pool(self, queue: SuiteQueue, jobs: int) -> JobPool:
        """What starts (and cancels) the jobs of queue: pool, else Slurm's with slurm_settings."""
        factory = self.pool or slurm.pool_factory(self.slurm_settings, self.environment())
        return factory(queue, self.worker_python or sys.executable, jobs)


class SlurmExecutor:
    """Runs a plan's units on `jobs` Slurm jobs (executor protocol: run/executor.Executor): the suites run on
    the jobs' nodes, so nothing of this node is probed, and the tested installation is made in the build
    directory, which the jobs must see."""

    name = 'slurm'
    on_this_node = False

    def __init__(self, jobs: int, options: Optional[SpreadOptions] = None,
                 progress: Optional[Callable[[str], None]] = None) -> None:
        self.jobs = int(jobs)
        self.options = options or SpreadOptions()
        self.progress = progress or (lambda message: None)

    def installation_parent(self, build_dir: Optional[str]) -> Optional[str]:
        return build_dir

    def piece_rule(self, history: previous.History, slots: int) -> Optional[PieceRule]:
        return PieceRule(dict(history.suite_seconds), dict(history.test_seconds))

    def prepare(self, request: RunRequest, store: ResultStore) -> RunRequest:
        """Refuse a node-local path the jobs need and Slurm options it cannot use (PluginError, one line);
        the request with long suites cut into pieces (those already in store left as they are)."""
        environ = self.options.environment()
        checks = [(os.path.dirname(store.path), 'the results directory'), (request.command.cwd, 'the test directory'),
                  (request.output_dir, 'the test output directory')]
        if request.tested_installation:
            checks.append((request.tested_installation, 'the tested installation'))
        for path, what in checks:
            slurm.refuse_node_local(path, what, self.options.shared_paths, environ)
        slurm.job_options(self.options.slurm_settings, environ)
        if request.pieces is None:
            request = replace(request, pieces=self.options.pieces)
        return request  # what is stored: run/executor.execute fills it in

    def run(self, plan: RunPlan, units: Sequence[str], store: ResultStore) -> None:
        run_spread(plan, units, store, jobs=self.jobs, options=self.options, progress=self.progress)

    def describe(self, build_dir: Optional[str]) -> List[str]:
        asked = slurm.job_options(self.options.slurm_settings, self.options.environment())
        gpus = (f'{asked.gpus_per_job} GPU(s) a job' if asked.gpus_per_job else
                'no GPU asked for (EB_PYTORCH_CUDA_SLURM_GPUS_PER_JOB; a job sees only what its partition gives '
                'without --gres)')
        return [f"spread over {self.jobs} Slurm jobs (sbatch {' '.join(asked.sbatch_options()) or 'with no options'}; "
                f'{gpus}; claims of up to {CLAIM_SECONDS // 60} minutes of '
                f'suites from a shared queue, longest first, each claim one run_test.py call; tested installation '
                f'and results under {build_dir})']

    def finish(self, store: ResultStore) -> None:
        remove_queue(store)

    def discard(self, store: ResultStore) -> List[str]:
        """Cancel the jobs an earlier run of this build left (the queue's list of them) and drop its queue: its
        stored outcomes would otherwise be copied back into the new store, and no suite would run again."""
        directory = queue_dir_of(store)
        if not os.path.isdir(directory):
            return []
        cancelled = self.options.job_pool(SuiteQueue(directory), self.jobs).cancel_previous()
        if cancelled:
            self.progress(f"cancelled {len(cancelled)} job(s) of the earlier run: {' '.join(cancelled)}")
        remove_queue(store)
        return [directory]

    def node_devices(self, store: ResultStore) -> Dict[str, Dict[str, Any]]:
        """{worker: the CUDA device tests' mode it decided on its node} (workqueue.SuiteQueue.devices)."""
        return SuiteQueue(queue_dir_of(store)).devices()


def run_spread(plan: RunPlan, units: Sequence[str], store: ResultStore, *, jobs: int,
               options: Optional[SpreadOptions] = None, progress: Optional[Callable[[str], None]] = None) -> None:
    """Run every one of units (the plan's, pieces included) not yet in store on `jobs` Slurm jobs, each
    record into store as it arrives.  Raises PluginError (one line) when sbatch refuses."""
    options = options or SpreadOptions()
    progress = progress or (lambda message: None)
    command, parallel = plan.command, plan.parallel
    queue = SuiteQueue(queue_dir_of(store), options.stale_after, options.max_attempts)
    done = store.finished()
    os.makedirs(queue.directory, exist_ok=True)
    pool = options.job_pool(queue, jobs)
    cancelled = pool.cancel_previous()
    todo = longest_first([key for key in units if key not in done], dict(plan.expected))
    spec: QueueSpec = {
        'cwd': command.cwd, 'argv': list(command.argv), 'env': dict(plan.env),
        # a piece's timeout: its share of its suite's (policy.settings.piece_timeouts, in the plan)
        'timeouts': dict(plan.timeouts), 'output_dir': plan.output_dir, 'fingerprint': store.fingerprint,
        'suites': todo, 'slots': parallel, 'stale_after': options.stale_after, 'max_attempts': options.max_attempts,
        'serial': [key for key in todo if plan.harness.must_serial(pieces.Piece.parse(key).suite)],
        'reruns': plan.reruns, 'python': plan.python,  # each job reruns its own suites' failures, on its node
        'sized_by_jobs': plan.request.sized_by_jobs,  # 'auto': each job sizes its node (slots, OMP_NUM_THREADS)
        # claims small enough that every job slot gets about two: a short queue keeps all jobs busy
        'max_claim': max(1, len(todo) // (2 * max(1, int(jobs)) * parallel)),
        'expected_seconds': {key: plan.expected[key] for key in todo if key in plan.expected}}
    if plan.request.job_devices is not None:  # each job decides the CUDA device tests on its own node
        spec['cuda_device_tests'] = plan.request.job_devices.to_json()
    queue.create(spec, todo)
    make_directory(plan.output_dir)  # a dangling symlink there is named so, not "File exists"
    reader = RecordReader(queue, progress)  # a worker's line that is no record is named, then set aside
    failed = [sum(1 for record in done.values() if record.suite.status != SUITE_PASSED)]

    def collect() -> None:
        for record in reader.new_records(lambda record: pieces.key_of(record) not in done):
            store.append(record)
            done[pieces.key_of(record)] = record
            failed[0] += record.suite.status != SUITE_PASSED

    collect()  # outcomes a killed eb's jobs stored after it died
    suites = plan.suites
    if done and (todo or cancelled):
        progress(f'resuming: {sum(1 for s in suites if s in done)} suite(s) already measured for this build, '
                 f'{sum(1 for s in suites if s not in done)} to run'
                 + (f' (cancelled {len(cancelled)} job(s) left by the previous run)' if cancelled else ''))
    left = [key for key in todo if key not in done]
    if left:
        pool.start(len(left))
        progress(f"running {len(left)} suites on {len(pool.live)} {pool.noun} ({pool.asked()}; {parallel} "
                 f"at a time per job): {' '.join(command.argv)} -i <suites> in {command.cwd}; queue {queue.directory}; "
                 f"results kept in {store.path}")
        heartbeat = Heartbeat(plan.heartbeat, units, progress, done, plan.expected)
        try:
            _wait(queue, pool, list(dict.fromkeys([suite for suite in suites if suite in done] + list(units))), done,
                  failed, collect, progress, options.poll, heartbeat)
        finally:
            pool.finish()


def _never_finished(key: str, attempts: int) -> StoreRecord:
    """The record of a suite (or a piece of one) whose every job died while running it (solo.run_suite's form)."""
    piece = pieces.Piece.parse(key)
    result = Suite(piece.suite, status=SUITE_INCOMPLETE, sources=[],
                   signal=f'its Slurm job ended {attempts} times while running it (node failure, time limit, scancel)')
    return pieces.mark(suite_record(result), piece)  # no notes: none was recorded


def _wait(queue: SuiteQueue, pool: JobPool, suites, done, failed, collect, progress, poll, heartbeat):
    """Until every suite has an outcome: collect outcomes, replace dead jobs, print progress on change, and the
    heartbeat's line (run/heartbeat: the live jobs' claims, since this loop first saw them) when it is due."""
    shown = None
    while True:
        refused = {worker: facts['refused'] for worker, facts in queue.devices().items() if facts.get('refused')}
        if refused:  # cuda_device_tests = True and a job's node cannot run CUDA tests: the run stops here
            worker, reason = sorted(refused.items())[0]
            raise PluginError(queue.directory, f'Slurm job {job_of(worker)} ran no suite: {reason}')
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
        heartbeat.running_now(running, done)
        heartbeat.beat()
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
