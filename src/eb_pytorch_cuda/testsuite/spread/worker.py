"""What each job of a spread test step runs: `python -m eb_pytorch_cuda.testsuite.spread.worker [--job-id-variable
NAME] [--job-variable-prefix PREFIX] QUEUE_DIR` (the pool's job script passes the names its batch system sets:
spread/jobpool.JobVariables; slurm.JOB_VARIABLES for Slurm's).

It takes suites from the shared queue (workqueue.SuiteQueue) until none is left and runs them with the
same runner as a serial test step: several at a time through one run_test.py call (run/batches: its own
pool and handlers, each suite's own timeout, a process group pinned to one of the job's GPUs; about 4 s
of start-up saved per suite), a claim holding as many suites as add up to CLAIM_SECONDS of expected
time (previous installation's times; UNKNOWN_SECONDS for a suite without one), and at most
the spec's max_claim suites (about two claims per job slot of the whole queue), so long suites go one by
one, the short ones of the queue's tail together, and a short queue still reaches every job.  A batch's
outcomes are stored when it ends (the final ones: a record the batch's end corrects is never left
behind); a job killed mid-batch loses that batch, which goes back to the queue.  `slots` suites run at a time (the job's
parallel_test_suites), spread over the GPUs Slurm gave the job (its CUDA_VISIBLE_DEVICES); a suite the
harness must run alone (the spec's serial: its must-serial list, custom handlers, distributed suites) runs
alone in its job too, with all of the job's GPUs, as run_test.py runs them after its pool (alone in its
job: other jobs sharing the node still run theirs; ask Slurm for whole nodes, e.g. --exclusive in
EB_PYTORCH_CUDA_SLURM_EXTRA_OPTIONS, where that matters).  A heartbeat
thread keeps the worker's claims alive; if the job dies, its claims go back to the queue.

"""

import os
import sys
import threading
import traceback
from contextlib import contextmanager
from dataclasses import replace
from typing import Callable, Dict, Iterator, List, Mapping, Optional

from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.testsuite.results.pieces import SEPARATOR
from eb_pytorch_cuda.testsuite.run import solo
from eb_pytorch_cuda.testsuite.run.batches import run_batch_to_the_end
from eb_pytorch_cuda.testsuite.run.calls import DEFAULT_BATCH_SIZE
from eb_pytorch_cuda.testsuite.run.command import CI_MODE_VARIABLES, TestCommand
from eb_pytorch_cuda.testsuite.run.devicetests import DeviceTestMode, JobDecision
from eb_pytorch_cuda.testsuite.run.node import this_node
from eb_pytorch_cuda.testsuite.run.plan import RunPlan, RunRequest, build_plan
from eb_pytorch_cuda.testsuite.run.reruns import rerun_suite_in_plan
from eb_pytorch_cuda.testsuite.results.records import StoreRecord
from eb_pytorch_cuda.testsuite.spread.jobpool import JobVariables
from eb_pytorch_cuda.testsuite.spread.workqueue import HEARTBEAT_EVERY, QueueSpec, SuiteQueue, worker_id

# variables that describe the job, which must come from the job's own environment, not the submitter's
JOB_VARIABLES = ('CUDA_VISIBLE_DEVICES', 'ROCR_VISIBLE_DEVICES', 'GPU_DEVICE_ORDINAL', 'TMPDIR')


CLAIM_SECONDS = 300  # expected seconds of the suites one claim (one run_test.py call) takes at most
UNKNOWN_SECONDS = 60  # what a suite without a previous time counts for, in the claim's size


def plan_of_spec(spec: QueueSpec, env: Mapping[str, str],
                 progress: Optional[Callable[[str], None]] = None, slots: Optional[int] = None) -> RunPlan:
    """The run plan of a job, rebuilt from its queue's spec through the submitter's own builder (run/plan):
    the units given (not discovered), the spec's serial ones run alone, its timeouts (the pieces' included),
    its slots (or those of this job's node: work) over the job's GPUs, env (job_environment) the suites'
    environment, with OMP_NUM_THREADS for those slots on this node's CPUs unless it is set.  The runtest line's own
    CI-mode setting is the only one the submitter's environment kept (run.command.harness_environment), so it
    is the command's again here."""
    command = TestCommand(spec['cwd'], {name: spec['env'][name] for name in CI_MODE_VARIABLES if name in spec['env']},
                          list(spec['argv']))
    # the reruns' Python: the test step's (spec python), not this worker's, which is the one that runs eb
    return build_plan(RunRequest(command, env, spec['output_dir'], spec['python'] or sys.executable, spec['timeouts'],
                                 parallel=max(1, slots or spec['slots']), reruns=spec['reruns'], units=spec['suites'],
                                 serial=frozenset(spec['serial'])), progress)


def run_one(plan: RunPlan, key: str, gpu: Optional[str], alone: bool = False) -> StoreRecord:
    """Run `key` (a suite, or a piece of one: results.pieces) alone at its own timeout; return its record
    (solo.run_suite's, labelled with its piece).  alone: the job runs nothing beside it (its threads and GPU
    memory are the harness's own: RunPlan.call_env)."""
    return solo.run_suite(plan, key, gpu=gpu, alone=alone)


class _Finals:
    """A job's batch sink: each suite's final record (a corrected one replaces the early one)."""

    def __init__(self) -> None:
        self.records: Dict[str, StoreRecord] = {}

    def settled(self, suite: str, record: StoreRecord) -> None:
        self.records[suite] = record

    def corrected(self, suite: str, record: StoreRecord) -> None:
        self.records[suite] = record


def run_together(plan: RunPlan, suites: list, gpu: Optional[str], output_path: str,
                 log: Callable[[str], None]) -> Dict[str, StoreRecord]:
    """Run suites in one run_test.py call (a suite its killed batch did not finish runs alone after it, on
    the same GPU); return {suite: final record}."""
    finals = _Finals()
    run_batch_to_the_end(plan, suites, finals, output_path=output_path, gpu=gpu, alone_gpu=gpu, progress=log)
    return finals.records


def claim_batch(queue: SuiteQueue, worker: str, serial: set, expected: dict,
                max_claim: int = DEFAULT_BATCH_SIZE) -> tuple:
    """(suites, those to run alone) for one claim, in queue order: the next suite, then more while their
    expected time adds up to less than CLAIM_SECONDS, max_claim at most.  A must-serial suite, or one
    claimed again because the job that ran it died (it may be what killed the job: alone, it cannot take
    others down with it, and it uses up its own attempts only), ends the claim and runs alone after the
    rest.  A piece of a suite (results.pieces) runs alone too (its own `--shard` call), without holding
    the job unless it is must-serial or claimed again."""
    claimed: list = []
    alone: set = set()
    total = 0.0
    most = min(max_claim, DEFAULT_BATCH_SIZE)
    while len(claimed) < most and (not claimed or total < CLAIM_SECONDS):
        suite = queue.claim_next(worker)
        if suite is None:
            break
        claimed.append(suite)
        total += float(expected.get(suite, UNKNOWN_SECONDS))
        if suite in serial or queue.last_attempt > 1 or SEPARATOR in suite:
            alone.add(suite)
            break
    return claimed, alone


class SerialGate:
    """Lets the job's slots run suites side by side, except a must-serial suite: it waits until the other
    slots are idle, and no slot starts a suite while it waits or runs."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._running = 0
        self._alone = False

    def wait_open(self) -> None:
        """Wait while a must-serial suite waits or runs: a slot claims its next suite only then, so that no
        claimed suite sits idle in this job (other jobs could run it) while a serial one has the job."""
        with self._changed:
            self._changed.wait_for(lambda: not self._alone)

    @contextmanager
    def hold(self, alone: bool) -> Iterator[None]:
        with self._changed:
            self._changed.wait_for(lambda: not self._alone)
            if alone:
                self._alone = True
                self._changed.wait_for(lambda: self._running == 0)
            self._running += 1
        try:
            yield
        finally:
            with self._changed:
                self._running -= 1
                if alone:
                    self._alone = False
                self._changed.notify_all()


def job_environment(spec: QueueSpec, own: Mapping[str, str], job: JobVariables = JobVariables()) -> dict:
    """The submitter's test environment, with the job's own batch-system (job.owns) and GPU variables."""
    env = {name: value for name, value in spec['env'].items() if not job.owns(name) and name not in JOB_VARIABLES}
    env.update({name: value for name, value in own.items() if job.owns(name) or name in JOB_VARIABLES})
    return env


def job_device_tests(queue: SuiteQueue, worker: str, decision: JobDecision, env: Mapping[str, str],
                     log: Callable[..., None]) -> DeviceTestMode:
    """The CUDA device tests' variables of this job, decided on its own node (its GPUs as Slurm gave them:
    CUDA_VISIBLE_DEVICES), noted in the queue for the submitter's report and said in the job's log.  A mode of
    True on a node that cannot run CUDA tests: noted as refused, PluginError (the job runs no suite; the
    submitter stops the run naming the job)."""
    try:
        mode = decision.on_this_node(env)
    except PluginError as err:
        queue.note_devices(worker, DeviceTestMode(decision.requested, decision.cuda_build, (), False, err.problem),
                           refused=str(err))
        raise PluginError(queue.directory, f'worker {worker}: {err}') from None
    queue.note_devices(worker, mode)
    log(f'{worker}: {mode.describe()}', flush=True)
    return mode


def work(queue_dir: str, worker: Optional[str] = None, log: Callable[..., None] = print,
         job: JobVariables = JobVariables()) -> int:
    """Claim and run suites until none is left; return how many this worker ran.  job: the variables the batch
    system set in this job (its id names the worker where worker is not given)."""
    queue = SuiteQueue(queue_dir)
    spec = queue.job_spec
    queue.stale_after, queue.max_attempts = spec['stale_after'], spec['max_attempts']
    worker = worker or worker_id(job.job_id(os.environ))
    env = job_environment(spec, os.environ, job)
    if spec.get('cuda_device_tests') is not None:  # decided here, on this job's node and GPUs
        mode = job_device_tests(queue, worker, JobDecision.from_json(spec['cuda_device_tests']), env, log)
        env = dict(env, **mode.environment)
    # parallel_test_suites='auto' (sized_by_jobs): this job's node (run/node: its CPUs as Slurm's cgroup and
    # affinity leave them, its memory, its GPUs' memory), not the submitting node
    size = this_node(env) if spec['sized_by_jobs'] else None
    if size is not None:
        log(f'{worker}: {size.describe()}', flush=True)
    plan = plan_of_spec(spec, env, slots=size.slots() if size is not None else None)
    slots, gpus = plan.parallel, plan.gpus
    os.makedirs(spec['output_dir'], exist_ok=True)
    store = queue.store(worker)
    stop = threading.Event()
    queue.heartbeat(worker)

    def beat():
        while not stop.wait(HEARTBEAT_EVERY):
            queue.heartbeat(worker)

    lock, ran, calls = threading.Lock(), [0], [0]
    serial, gate = set(spec['serial']), SerialGate()
    expected = spec['expected_seconds']

    def finish(suite, record):
        record = replace(record, job=worker)  # the per-job CUDA counts of the report (service.job_device_tests)
        # its failed tests rerun here, on the node and GPUs they failed on, with the job's CUDA device tests' mode
        # (the submitting node may have no GPU: a CUDA test rerun there would fail to exist, not to pass)
        rerun_suite_in_plan(record.suite, plan, lambda message: log(f'{worker}: {message}', flush=True))
        with lock:
            queue.record(store, record)
            ran[0] += 1
        log(f"{worker}: {suite} {record.suite.status} ({record.seconds}s)", flush=True)

    broken: list = []

    def slot(index):
        try:
            run_slot(index)
        except BaseException as err:  # noqa: BLE001 - a broken slot must stop the worker, not vanish
            broken.append(err)
            log(f'{worker}: slot {index} failed, claiming no more suites: '
                + ''.join(traceback.format_exception(type(err), err, err.__traceback__)), flush=True)

    def holds_job(suite):
        """Whether suite runs with the job to itself: must-serial, or claimed again (see the loop)."""
        return suite in serial or SEPARATOR not in suite or suite in again

    again: set = set()

    def run_slot(index):
        gpu = gpus[index % len(gpus)] if gpus else None
        on = f' on GPU {gpu}' if gpu is not None else ''
        while not broken:
            gate.wait_open()
            with lock:  # one claim at a time per worker: claims of one worker never race each other
                claimed, alone_ones = claim_batch(queue, worker, serial, expected, spec['max_claim'])
                if claimed and queue.last_attempt > 1:
                    again.add(claimed[-1])
                calls[0] += 1
                call = calls[0]
            if not claimed:
                return
            together = [suite for suite in claimed if suite not in alone_ones]
            if together:
                with gate.hold(False):
                    log(f"{worker}: running {' '.join(together)}{on}", flush=True)
                    path = os.path.join(spec['output_dir'], f'{worker}-{call:04d}.log')
                    finals = run_together(plan, together, gpu, path,
                                          lambda message: log(f'{worker}: {message}', flush=True))
                    for suite in together:
                        if suite not in finals:  # cannot happen (a suite alone always gives a record): run it
                            log(f'{worker}: {suite}: no outcome from its call; running it alone', flush=True)
                            finals[suite] = run_one(plan, suite, gpu)
                        finish(suite, finals[suite])
            for suite in (suite for suite in claimed if suite in alone_ones):
                # alone in the job: a must-serial suite with every GPU of the job, as the harness gives it; a
                # suite claimed again after its job died on its own slot's GPU, so that if it kills this job
                # too, no other slot's suites lose an attempt with it
                alone = slots > 1 and holds_job(suite)
                pinned = None if suite in serial else gpu
                with gate.hold(alone):
                    log(f'{worker}: running {suite}' + (' alone' if alone else '')
                        + (f' on GPU {pinned}' if pinned is not None else ''), flush=True)
                    finish(suite, run_one(plan, suite, pinned, alone))

    heart = threading.Thread(target=beat, daemon=True)
    heart.start()
    try:
        threads = [threading.Thread(target=slot, args=(index,)) for index in range(slots)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        stop.set()
    if broken:
        raise PluginError(queue.directory, f'worker {worker} stopped after an error in one of its slots '
                                           f'({type(broken[0]).__name__}: {broken[0]}); ran {ran[0]} suite(s)')
    log(f'{worker}: no suite left to claim; ran {ran[0]}', flush=True)
    return ran[0]


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    names: Dict[str, str] = {}
    while len(argv) > 2 and argv[0] in ('--job-id-variable', '--job-variable-prefix') and argv[0] not in names:
        option, value = argv.pop(0), argv.pop(0)
        names[option] = value
    if len(argv) != 1 or argv[0].startswith('--'):
        print('usage: python -m eb_pytorch_cuda.testsuite.spread.worker [--job-id-variable NAME] '
              '[--job-variable-prefix PREFIX] QUEUE_DIR', file=sys.stderr)
        return 2
    try:
        work(argv[0], job=JobVariables(names.get('--job-id-variable'), names.get('--job-variable-prefix')))
    except PluginError as err:
        print(f'eb_pytorch_cuda.testsuite.spread.worker: {err}', file=sys.stderr)
        return 2
    return 0


if __name__ == '__main__':
    sys.exit(main())
