"""Run the test suites: per-suite timeouts, results saved as they end, resume after a killed eb.

A ten-hour test step must survive a hanging multiprocess test and a killed `eb`.  Suites run in
batches through run_test.py itself (batchrun: its pool and serial list apply, no per-suite start-up
cost), each batch in its own process group killed at the sum of its suites' timeouts; a suite its
killed batch did not finish runs again alone (run_suite) with its own timeout.  Each suite's outcome
(outcome: exit state, log, XML reports) is appended to a results file outside the build directory
as its batch ends, and a rerun of the same build (same fingerprint: sources, patches, build settings,
compiler options, not the failure policy) skips every suite already there.
"""

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import threading
import time
from dataclasses import asdict

from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.testsuite.run import batches
from eb_pytorch_cuda.testsuite.run import discovery
from eb_pytorch_cuda.testsuite.results.splitting import split_batch_output
from eb_pytorch_cuda.testsuite.run.command import harness_environment
from eb_pytorch_cuda.testsuite.run.harness import harness_of
from eb_pytorch_cuda.testsuite.results.model import RunResult
from eb_pytorch_cuda.testsuite.results.outcome import build_outcome, remove_reports
from eb_pytorch_cuda.testsuite.policy.judging import is_compute_capability
from eb_pytorch_cuda.testsuite.results.saved import check_suite, mark_missing, no_constants
from eb_pytorch_cuda.testsuite.run.reruns import kill_group

DEFAULT_TIMEOUT = 3 * 3600  # PyTorch's slowest suites take well under an hour on a build node
OUTPUT_KEPT = batches.OUTPUT_KEPT


class ResultStore:
    """Append-only JSON-lines file of finished suites, for one build fingerprint.

    A record is one line, written by one write() of the whole line and fsync'ed, so a kill can only leave
    the last line unterminated; the reader ignores such a line (with a note) and the next append starts a
    new line after it, so a fragment never swallows the record that follows.  Every line is validated as a
    saved result's suite is (results.check_suite): one that is not a record (a torn fragment in the middle,
    invalid UTF-8, a bare string, `[1, 2]`) is set aside with a note naming the file and the line, never a
    traceback, and its suite is simply run again.  One run at a time per store: exclusive() (flock).
    """

    def __init__(self, path, fingerprint, notice=None):
        self.path, self.fingerprint = path, fingerprint
        self.notice = notice  # called with each note on a set-aside line, once per line; None: kept only
        self.set_aside = []  # those notes, in the order found
        self._lock = threading.Lock()
        os.makedirs(os.path.dirname(path), exist_ok=True)

    def _set_aside(self, number, problem):
        note = f'{self.path}: line {number}: {problem}; set aside (a suite with no valid record runs again)'
        if note not in self.set_aside:
            self.set_aside.append(note)
            if self.notice is not None:
                self.notice(note)

    def load(self):
        """{suite name: record} already measured for this fingerprint; lines that are not valid records are
        set aside (see the class)."""
        try:
            with open(self.path, 'rb') as handle:
                data = handle.read()
        except FileNotFoundError:
            return {}
        lines = data.split(b'\n')
        torn = lines.pop()  # what follows the last newline: nothing, unless a write was cut short
        records = {}
        for number, raw in enumerate(lines, 1):
            if not raw.strip():
                continue
            record, problem = parse_record(raw, self.path)
            if problem:
                self._set_aside(number, problem)
            elif record['fingerprint'] == self.fingerprint:
                records[record['suite']['name']] = record
        if torn.strip():
            self._set_aside(len(lines) + 1, f'unterminated last line of {len(torn)} bytes (a write cut short)')
        return records

    def result(self, suites):
        """RunResult of the stored outcomes of suites, in their order; a suite with none is marked missing,
        so it fails the verdict and never passes (the serial, batched and Slurm-spread runs alike)."""
        records = self.load()
        result = RunResult.from_dict({'suites': [records[suite]['suite'] for suite in suites if suite in records]})
        mark_missing(result, suites)
        return result

    def append(self, record):
        """Add record as one line: one write() of the whole line (after a newline when the file ends in an
        unterminated fragment), then fsync; PluginError naming the file when it cannot be written."""
        line = (json.dumps(dict(record, fingerprint=self.fingerprint), allow_nan=False) + '\n').encode()
        with self._lock:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
            except OSError as err:
                raise PluginError(self.path, f'cannot be written: {err.strerror}') from None
            try:
                size = os.fstat(fd).st_size
                if size and os.pread(fd, 1, size - 1) != b'\n':
                    line = b'\n' + line  # the fragment a killed writer left becomes a line of its own
                view = memoryview(line)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            except OSError as err:
                raise PluginError(self.path, f'cannot be written: {err.strerror}') from None
            finally:
                os.close(fd)

    @property
    def lock_path(self):
        return self.path + '.lock'

    @contextlib.contextmanager
    def exclusive(self):
        """Hold this store's lock (flock on <path>.lock, released when the run ends or dies) for a run;
        PluginError naming the results directory when another run holds it: two runs on one store would
        both run every suite and count each other's XML reports."""
        try:
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as err:
            raise PluginError(self.lock_path, f'cannot be created: {err.strerror}') from None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 32, 0).decode('ascii', 'replace').strip()
                holder = holder if holder.isdigit() else 'unknown'
                raise PluginError(os.path.dirname(self.path), f'another run (pid {holder}) is using this results '
                                  f'directory ({os.path.basename(self.lock_path)} is locked); wait for it to end '
                                  f'or use another results directory') from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, f'{os.getpid()}\n'.encode(), 0)
            yield self
        finally:
            os.close(fd)  # releases the flock

    @property
    def final_path(self):
        return self.path + '.final.json'

    @property
    def cache_dir(self):
        """Where the tested installation of a run whose only problem was the verdict is kept."""
        return self.path + '.install'

    def save_final(self, result):
        """The complete, rerun-classified result of this build, for a later re-judging."""
        with open(self.final_path, 'w') as handle:
            json.dump({'fingerprint': self.fingerprint, **result.to_dict()}, handle)

    def load_final(self):
        try:
            with open(self.final_path) as handle:
                data = json.load(handle)
        except (OSError, ValueError):
            return None
        return RunResult.from_dict(data) if data.get('fingerprint') == self.fingerprint else None

    def remove(self):
        for path in (self.path, self.final_path):
            if os.path.exists(path):
                os.unlink(path)
        if os.path.isdir(self.cache_dir):
            shutil.rmtree(self.cache_dir)


def parse_record(raw: bytes, path: str = 'results') -> tuple:
    """(record, None) for one store line that is a valid record, else (None, what is wrong with it)."""
    try:
        record = json.loads(raw.decode('utf-8'), parse_constant=no_constants)
    except UnicodeDecodeError as err:
        return None, f'not UTF-8 (byte {err.start})'
    except (ValueError, RecursionError) as err:
        return None, f'not a JSON record ({" ".join(str(err).split())[:80]})'
    if not isinstance(record, dict):
        return None, f'not a record (a JSON {type(record).__name__}, not an object)'
    if not isinstance(record.get('fingerprint'), str):
        return None, 'not a record (no fingerprint)'
    try:
        check_suite(path, 'suite', record.get('suite'))
    except PluginError as err:
        return None, f'not a record ({err.problem})'
    notes = record.get('notes', [])
    if notes is not None and not (isinstance(notes, list) and all(isinstance(n, str) for n in notes)):
        return None, 'not a record (notes: must be a list of strings)'
    return record, None


def run_suite(command, suite, timeout, output_dir, env, gpu=None):
    """Run one suite alone (`run_test.py -i suite`) in its own process group; return its record."""
    harness = harness_of(command.cwd)
    remove_reports(command.cwd, suite)
    argv = discovery.run_argv(command.argv, [suite],
                              batches.batch_options(harness, batches.xml_reports_safe(harness, command, env)))
    output_path = os.path.join(output_dir, suite.replace('/', '.') + '.log')
    start = time.time()
    with open(output_path, 'w') as output:
        process = subprocess.Popen(argv, cwd=command.cwd, env=batches.batch_env(env, gpu), stdout=output,
                                   stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code, timed_out = process.wait(timeout=timeout), None
        except subprocess.TimeoutExpired:
            kill_group(process)
            code, timed_out = process.returncode, f'timeout after {timeout}s'
    with open(output_path, errors='replace') as handle:
        text = handle.read()
    out = split_batch_output(text, [suite], command.cwd)[suite]
    failed = out.failed or (code != 0 and timed_out is None)
    result, exit_code, notes = build_outcome(suite, out.text or text, True, failed, out.signal, timed_out,
                                             command.cwd)
    result.seconds = round(time.time() - start, 1)
    return {'suite': asdict(result), 'exit_code': code if timed_out is None else None, 'seconds': result.seconds,
            'gpu': gpu, 'notes': notes, 'output_tail': text[-OUTPUT_KEPT:], 'output_file': output_path}


def gpu_count(env):
    """GPUs to spread parallel suites over: CUDA_VISIBLE_DEVICES if set, else nvidia-smi -L."""
    visible = env.get('CUDA_VISIBLE_DEVICES')
    if visible:
        return [gpu for gpu in visible.split(',') if gpu]
    try:
        listing = subprocess.run(['nvidia-smi', '-L'], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [str(i) for i, line in enumerate(listing.splitlines()) if line.startswith('GPU ')]


def gpu_compute_capabilities(env) -> tuple:
    """Compute capabilities ('8.0', '9.0', sorted, once each) of the GPUs the suites will run on, from
    `nvidia-smi --query-gpu=index,compute_cap` (CUDA_VISIBLE_DEVICES applied when it lists indices); ()
    where no GPU can be seen.  Known failures scoped to a compute capability were seen on that hardware,
    so they apply to where the tests run, not to what the build was compiled for."""
    try:
        listing = subprocess.run(['nvidia-smi', '--query-gpu=index,compute_cap', '--format=csv,noheader'],
                                 capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return ()
    if listing.returncode != 0:
        return ()
    visible = [gpu.strip() for gpu in env.get('CUDA_VISIBLE_DEVICES', '').split(',') if gpu.strip()]
    found = set()
    for line in listing.stdout.splitlines():
        index, _, capability = (part.strip() for part in line.partition(','))
        if is_compute_capability(capability) and (not visible or not all(v.isdigit() for v in visible)
                                                  or index in visible):
            found.add(capability)
    return tuple(sorted(found))


def run_all(command, suites, store, output_dir, env, timeout_for, parallel=1, progress=None, harness=None,
            batch_size=batches.DEFAULT_BATCH_SIZE):
    """Run every suite not already in the store, in batches; return (RunResult of all, [suites run now])."""
    harness = harness or harness_of(command.cwd)
    env = harness_environment(env, command)  # also for callers other than step.run_suites
    gpus = gpu_count(env) if parallel > 1 else []
    todo = batches.run_batches(command, suites, store, output_dir, env, timeout_for, harness, parallel, progress,
                               gpus, solo=lambda suite, timeout: run_suite(command, suite, timeout, output_dir, env),
                               batch_size=batch_size)
    return store.result(suites), todo
