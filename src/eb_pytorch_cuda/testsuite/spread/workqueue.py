"""A queue of test suites in a shared directory, from which several jobs on several nodes take work.

Why a directory and not a server: the only thing every node of an HPC cluster shares with the node that
runs `eb` is a file system (often NFS), and the queue must survive the `eb` that made it (a rerun
resumes).  So everything is a file, and every decision that two jobs could make at once is one atomic
file-system operation:

- `spec.json`: what a job needs (test command, environment, timeouts, Python, build fingerprint, the
  suites in the order they are handed out), written once by the submitting side (atomic rename);
- `claims/<suite>~<n>`: claim number n of a suite, made with os.link() of a private file (atomic and
  exclusive on NFS too, the classic NFS lock); it holds the claiming worker's id (job id, host, pid);
- `workers/<worker>`: the worker's heartbeat, touched every few seconds;
- `dead/<job id>`: written by the submitting side once a job has left Slurm's queue;
- `done/<suite>`: the suite's outcome is stored; `results/<worker>.jsonl`: the outcomes, one
  `run.store.ResultStore` file per worker (concurrent appends to one file from several NFS clients can tear).

A claim whose worker is dead (its job has a `dead/` marker, or its heartbeat is older than
`stale_after` seconds, measured against the shared file system's clock, not the local one) no longer
holds the suite: the next claim number can be taken, by exactly one worker.  After `max_attempts`
claims whose jobs all died (a suite that takes its node down, or outlasts the job's time limit), the
suite is no longer handed out: the submitting side records it as never finished (`exhausted`), so that
it is judged like a crashed suite instead of killing jobs forever.  The order is longest
expected first (seconds from a previous run), suites with no previous time before them, so the longest
suite never starts last.  EasyBuild- and Slurm-free.
"""

import contextlib
import json
import os
import socket
import time
import urllib.parse
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, TypedDict, cast

from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.inputs import write_atomically
from eb_pytorch_cuda.testsuite.results.pieces import key_of
from eb_pytorch_cuda.testsuite.results.records import StoreRecord
from eb_pytorch_cuda.testsuite.results.seconds import is_seconds
from eb_pytorch_cuda.testsuite.run.batches import DEFAULT_BATCH_SIZE
from eb_pytorch_cuda.testsuite.run.devicetests import DeviceTestMode, is_job_decision
from eb_pytorch_cuda.testsuite.run.store import ResultStore, parse_record

SPEC = 'spec.json'
DEFAULT_STALE_AFTER = 600  # seconds without a heartbeat before a worker counts as dead
DEFAULT_MAX_ATTEMPTS = 3  # claims of a suite whose job died each time before it is recorded as never finishing
HEARTBEAT_EVERY = 15  # seconds between a worker's heartbeats (a constant: no spec key sets it)


class _QueueCore(TypedDict):
    fingerprint: str  # the build whose suites these are (the store records' fingerprint)
    suites: List[str]  # suite names and piece keys (results.pieces), in the order they are handed out


class QueueSpec(_QueueCore, total=False):
    """spec.json: what every job of a spread run needs, written once by the controller (run_spread).

    Why typed: it is the one wire format between the `eb` that submits and the jobs on other nodes, possibly
    of another plugin version (a rerun resumes a queue), so its keys are named once here and read through
    spec_from_json only.  The keys with a default (DEFAULTS) are always there once read; the job's keys
    (JOB_KEYS) are what a worker needs (SuiteQueue.job_spec), absent from a queue made only to be claimed
    from."""

    cwd: str  # the test directory
    argv: List[str]  # the test command (run/command.TestCommand.argv), run there
    env: Dict[str, str]  # the submitter's test environment (the job's own Slurm and GPU variables win)
    timeouts: Dict[str, float]  # {suite: seconds, '': every other suite}
    output_dir: str  # where the jobs' outputs go
    slots: int  # suites at a time in each job (parallel_test_suites)
    stale_after: float  # seconds without a heartbeat before a worker counts as dead
    max_attempts: int  # claims of a suite whose job died each time before it is recorded as never finished
    serial: List[str]  # suites the harness runs alone (its must-serial list), run alone in their job too
    max_claim: int  # suites one claim holds at most
    reruns: int  # isolated reruns of a failed test, run by the job that ran its suite (run/reruns)
    python: Optional[str]  # the Python of those reruns: the test step's (null: the worker's own)
    sized_by_jobs: bool  # parallel_test_suites='auto': each job sizes its own node, slots is only an estimate
    expected_seconds: Dict[str, float]  # {suite or piece key: seconds of the previous run}
    # what each job decides the CUDA device tests' mode by, on its own node (run/devicetests.JobDecision); absent:
    # the submitter's environment as it is
    cuda_device_tests: Dict[str, Any]


JOB_KEYS = ('cwd', 'argv', 'env', 'timeouts', 'output_dir')
DEFAULTS: Dict[str, Any] = {'slots': 1, 'stale_after': DEFAULT_STALE_AFTER, 'max_attempts': DEFAULT_MAX_ATTEMPTS,
                            'serial': [], 'max_claim': DEFAULT_BATCH_SIZE, 'expected_seconds': {}, 'reruns': 0,
                            'python': None, 'sized_by_jobs': False}


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_integer(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _strings(value) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _mapping(value, of) -> bool:
    return isinstance(value, dict) and all(isinstance(key, str) and of(item) for key, item in value.items())


_SPEC_RULES: Dict[str, tuple] = {
    'fingerprint': (lambda v: isinstance(v, str), 'a string'),
    'suites': (_strings, 'a list of strings'),
    'cwd': (lambda v: isinstance(v, str), 'a string'),
    'output_dir': (lambda v: isinstance(v, str), 'a string'),
    'argv': (lambda v: _strings(v) and bool(v), 'a non-empty list of strings'),
    'env': (lambda v: _mapping(v, lambda item: isinstance(item, str)), 'an object of strings'),
    'timeouts': (lambda v: _mapping(v, _is_number) and '' in v, "an object of seconds with a '' entry"),
    'slots': (_is_integer, 'an integer'),
    'stale_after': (_is_number, 'a number'),
    'max_attempts': (_is_integer, 'an integer'),
    'serial': (_strings, 'a list of strings'),
    'max_claim': (_is_integer, 'an integer'),
    'reruns': (lambda v: _is_integer(v) and v >= 0, 'an integer of at least 0'),
    'sized_by_jobs': (lambda v: isinstance(v, bool), 'true or false'),
    'python': (lambda v: v is None or (isinstance(v, str) and bool(v)), 'a non-empty string or null'),
    'expected_seconds': (lambda v: _mapping(v, is_seconds), 'an object of seconds (results.seconds)'),
    'cuda_device_tests': (is_job_decision, "an object of 'requested' ('auto', true, false), 'cuda_build' (a boolean) "
                                           "and 'runtest_sets' (names)"),
}


def spec_from_json(path: str) -> QueueSpec:
    """The queue spec in path, checked key by key; PluginError (one line naming the file and the key) when it
    cannot be read or is not a spec.  A key this version does not know is ignored (a newer `eb` may add one),
    a key with a default that is absent or null gets it (a queue written by an earlier version)."""
    try:
        with open(path, encoding='utf-8') as handle:
            data = json.load(handle)
    except (OSError, ValueError) as err:
        raise PluginError(path, f'not a suite queue ({err})') from None
    if not isinstance(data, dict):
        raise PluginError(path, f'not a suite queue (a JSON {type(data).__name__}, not an object)')
    for key, default in DEFAULTS.items():
        if data.get(key) is None:
            data[key] = default
    for key, (valid, what) in _SPEC_RULES.items():
        if key in ('fingerprint', 'suites') and key not in data:
            raise PluginError(path, f'not a suite queue (no {key})')
        if key in data and not valid(data[key]):
            raise PluginError(path, f'not a suite queue ({key}: must be {what}, got {data[key]!r:.40})')
    return cast(QueueSpec, data)  # every key checked above


def longest_first(suites: Iterable[str], expected_seconds: Optional[Dict[str, float]]) -> List[str]:
    """Suites without a previous time first (in their given order: any of them may be long), then the
    others by expected seconds, longest first (the classic longest-processing-time list schedule)."""
    expected = expected_seconds or {}
    suites = list(suites)
    unknown = [suite for suite in suites if suite not in expected]
    known = sorted((suite for suite in suites if suite in expected), key=lambda suite: -float(expected[suite]))
    return unknown + known


def _name(suite: str) -> str:
    """A file name for a suite name ('distributed/test_c10d' has a slash)."""
    return urllib.parse.quote(suite, safe='')


def _suite(name: str) -> str:
    return urllib.parse.unquote(name)


def worker_id(job_id: Optional[str] = None) -> str:
    """'<job id>.<host>.<pid>': unique per worker process, and names the job it belongs to ('local' outside one)."""
    job = job_id or 'local'
    return f'{job}.{socket.gethostname()}.{os.getpid()}'


def job_of(worker: str) -> str:
    return worker.split('.', 1)[0]


class SuiteQueue:
    """The queue directory; every method is safe to call from many processes on many hosts at once."""

    def __init__(self, directory: str, stale_after: float = DEFAULT_STALE_AFTER,
                 max_attempts: int = DEFAULT_MAX_ATTEMPTS):
        self.directory = str(directory)
        self.stale_after, self.max_attempts = stale_after, max_attempts
        self._spec: Optional[QueueSpec] = None
        self.last_attempt = 0  # which claim of its suite the last claim_next made (2+: an earlier job died)

    def path(self, *parts: str) -> str:
        return os.path.join(self.directory, *parts)

    # --- the submitting side ---

    def create(self, spec: Mapping[str, Any], suites: List[str]) -> None:
        """Write spec (with the ordered suites) atomically; keep claims, results and markers of a previous run,
        not its refusals: a job that refused to run (devices/, refused) stopped that run, and this run's jobs decide
        again on their own nodes (a refusal left there would stop every later run before a job starts)."""
        for sub in ('claims', 'workers', 'dead', 'done', 'results', 'output', 'devices'):
            os.makedirs(self.path(sub), exist_ok=True)
        for worker, facts in self.devices().items():
            if facts.get('refused'):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.path('devices', f'{worker}.json'))
        write_atomically(self.path(SPEC), json.dumps(dict(spec, suites=list(suites)), indent=1, allow_nan=False))
        self._spec = None

    def mark_dead(self, job_id: str) -> None:
        """Job job_id has left Slurm: its claims go back to the queue."""
        with open(self.path('dead', str(job_id)), 'w') as handle:
            handle.write(f'{time.time()}\n')

    # --- shared ---

    @property
    def spec(self) -> QueueSpec:
        """spec.json, read once (spec_from_json)."""
        if self._spec is None:
            self._spec = spec_from_json(self.path(SPEC))
        return self._spec

    @property
    def job_spec(self) -> QueueSpec:
        """The spec with every key a worker needs (JOB_KEYS); PluginError naming spec.json when one is missing."""
        missing = [key for key in JOB_KEYS if key not in self.spec]
        if missing:
            raise PluginError(self.path(SPEC), f"not a suite queue for jobs (no {', '.join(missing)})")
        return self.spec

    @property
    def suites(self) -> List[str]:
        return list(self.spec['suites'])

    def done(self) -> set:
        """Suites whose outcome is stored."""
        return {_suite(name) for name in os.listdir(self.path('done'))}

    def dead_jobs(self) -> set:
        return set(os.listdir(self.path('dead')))

    def _now(self) -> float:
        """The shared file system's clock (a file's mtime after touching it): heartbeats are compared
        with it, so a node whose clock is off does not make live workers look dead."""
        clock = self.path('workers', f'.clock.{socket.gethostname()}.{os.getpid()}')
        with open(clock, 'w'):
            pass
        try:
            return os.stat(clock).st_mtime
        finally:
            os.unlink(clock)

    def alive(self, worker: str, now: Optional[float] = None, dead_jobs: Optional[set] = None) -> bool:
        """A worker is alive while its job has no dead marker and its heartbeat is fresh."""
        if job_of(worker) in (self.dead_jobs() if dead_jobs is None else dead_jobs):
            return False
        try:
            beat = os.stat(self.path('workers', worker)).st_mtime
        except FileNotFoundError:
            return False
        return (self._now() if now is None else now) - beat <= self.stale_after

    def claims(self, skip: Iterable[str] = ()) -> Dict[str, tuple]:
        """{suite: (latest claim number, worker holding it)}, leaving out the suites in skip (done ones: their
        claim files are not read, which counts on NFS with a thousand suites)."""
        latest: Dict[str, tuple] = {}
        skipped = set(skip)
        for name in os.listdir(self.path('claims')):
            suite_name, _, count = name.rpartition('~')
            if not count.isdigit() or name.startswith('.'):
                continue
            suite = _suite(suite_name)
            if suite not in skipped and int(count) > latest.get(suite, (0, None))[0]:
                latest[suite] = (int(count), name)
        holders = {}
        for suite, (number, name) in latest.items():
            try:
                with open(self.path('claims', name)) as handle:
                    holders[suite] = (number, json.load(handle)['worker'])
            except (OSError, ValueError, KeyError):
                holders[suite] = (number, None)  # being written: counts as held by a live worker
        return holders

    def running(self) -> Dict[str, str]:
        """{suite: worker} of the suites claimed by live workers and not done yet."""
        done, dead, now = self.done(), self.dead_jobs(), self._now()
        return {suite: worker for suite, (_, worker) in self.claims(done).items()
                if worker and self.alive(worker, now, dead)}

    def exhausted(self) -> Dict[str, int]:
        """{suite: claims} of the suites not done whose last allowed claim's worker died too."""
        done, dead, now = self.done(), self.dead_jobs(), self._now()
        return {suite: number for suite, (number, worker) in self.claims(done).items()
                if number >= self.max_attempts and worker and not self.alive(worker, now, dead)}

    def unfinished(self) -> List[str]:
        done = self.done()
        return [suite for suite in self.suites if suite not in done]

    # --- the worker side ---

    def heartbeat(self, worker: str) -> None:
        with open(self.path('workers', worker), 'w') as handle:
            handle.write(f'{time.time()}\n')

    def claim_next(self, worker: str) -> Optional[str]:
        """Claim the first suite (in queue order) that is neither done nor held by a live worker; None
        when there is none.  Exactly one of several workers racing for a suite gets it."""
        done, dead, now = self.done(), self.dead_jobs(), self._now()
        claims = self.claims(done)
        private = self.path('claims', f'.{worker}')
        with open(private, 'w') as handle:
            json.dump({'worker': worker, 'host': socket.gethostname(), 'time': time.time()}, handle, allow_nan=False)
        try:
            for suite in self.suites:
                if suite in done:
                    continue
                number, holder = claims.get(suite, (0, None))
                if number and (holder is None or self.alive(holder, now, dead) or number >= self.max_attempts):
                    continue
                try:
                    os.link(private, self.path('claims', f'{_name(suite)}~{number + 1}'))
                except FileExistsError:
                    continue  # another worker was faster
                if os.path.exists(self.path('done', _name(suite))):
                    continue  # finished meanwhile by a worker judged dead too early: nothing to run
                self.last_attempt = number + 1
                return suite
            return None
        finally:
            os.unlink(private)

    def store(self, worker: str) -> ResultStore:
        """This worker's own results file (one writer per file)."""
        return ResultStore(self.path('results', f'{worker}.jsonl'), self.spec['fingerprint'])

    def record(self, store: ResultStore, record: StoreRecord) -> None:
        """Store a suite's (or a piece's: results.pieces) outcome, then mark it done (in that order: done
        means stored)."""
        store.append(record)
        with open(self.path('done', _name(key_of(record))), 'w') as handle:
            handle.write(os.path.basename(store.path) + '\n')

    def note_devices(self, worker: str, mode: DeviceTestMode, refused: Optional[str] = None) -> None:
        """What worker decided about the CUDA device tests on its node (refused: why it runs no suite there: the
        mode was True and the node cannot run CUDA tests), for the submitter's report."""
        facts = {'enabled': mode.enabled, 'gpus': list(mode.gpus), 'reason': mode.reason,
                 'environment': dict(mode.environment), 'refused': refused}
        write_atomically(self.path('devices', f'{worker}.json'), json.dumps(facts, allow_nan=False))

    def devices(self) -> Dict[str, Dict[str, Any]]:
        """{worker: what it decided (note_devices)}; a file that is not such a JSON object is left out."""
        found: Dict[str, Dict[str, Any]] = {}
        directory = self.path('devices')
        for name in sorted(os.listdir(directory)) if os.path.isdir(directory) else ():
            if not name.endswith('.json'):
                continue
            try:
                with open(os.path.join(directory, name), encoding='utf-8') as handle:
                    data = json.load(handle)
            except (OSError, ValueError):
                continue
            if isinstance(data, dict) and isinstance(data.get('enabled'), bool) and isinstance(data.get('gpus'), list):
                found[name[:-len('.json')]] = data
        return found

    # --- reading outcomes back ---

    def records(self) -> Dict[str, StoreRecord]:
        """{suite: record} from every worker's results file (the first stored outcome of a suite wins)."""
        records: Dict[str, StoreRecord] = {}
        for name in sorted(os.listdir(self.path('results'))):
            if name.endswith('.jsonl'):
                for suite, record in ResultStore(self.path('results', name), self.spec['fingerprint']).load().items():
                    records.setdefault(suite, record)
        return records


class RecordReader:
    """Reads the workers' results files incrementally (only what was appended since the last call), so
    that a wait loop polling a thousand suites' outputs over NFS does not reread megabytes each time.
    Each line goes through the store's one reader (run/store.parse_record): a line that is not a valid
    record is set aside with a note naming the file and the line (notice, once per line), never a
    traceback in the controller."""

    def __init__(self, queue: SuiteQueue, notice: Optional[Callable[[str], None]] = None):
        self.queue = queue
        self.notice = notice
        self._offsets: Dict[str, int] = {}
        self._lines: Dict[str, int] = {}  # lines of each file read so far: the number a note names

    def new_records(self, accept: Callable[[StoreRecord], bool] = lambda record: True) -> List[StoreRecord]:
        fingerprint = self.queue.spec['fingerprint']
        found = []
        directory = self.queue.path('results')
        for name in sorted(os.listdir(directory)):
            if not name.endswith('.jsonl'):
                continue
            path = os.path.join(directory, name)
            with open(path, 'rb') as handle:
                handle.seek(self._offsets.get(path, 0))
                data = handle.read()
            complete = data[:data.rfind(b'\n') + 1]  # a line being written waits for the next call
            self._offsets[path] = self._offsets.get(path, 0) + len(complete)
            for line in complete.split(b'\n')[:-1]:
                self._lines[path] = number = self._lines.get(path, 0) + 1
                if not line.strip():
                    continue
                record, problem = parse_record(line, path)
                if record is None:
                    if self.notice is not None:
                        self.notice(f'{path}: line {number}: {problem}; set aside')
                elif record.fingerprint == fingerprint and accept(record):
                    found.append(record)
        return found
