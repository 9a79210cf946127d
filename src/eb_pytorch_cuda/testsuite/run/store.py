"""The results store of one build: every finished suite's record, kept outside the build directory.

A ten-hour test step must survive a killed `eb`: each suite's record is appended as the suite ends, and
a rerun of the same build (same fingerprint: sources, patches, build settings, compiler options, not
the failure policy) skips every suite already there.  It also keeps, for a run that failed only on its
verdict, the final result and the tested installation, so that a policy change re-judges without
running a suite or rebuilding.
"""

import contextlib
import fcntl
import json
import os
import shutil
import stat
import threading
from dataclasses import replace
from typing import Callable, Dict, List, Iterator, Optional, Sequence, Tuple

from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.inputs import file_kind, read_bytes, write_atomically
from eb_pytorch_cuda.testsuite.results.model import RunResult
from eb_pytorch_cuda.testsuite.results.pieces import key_of, record_problem, with_merged
from eb_pytorch_cuda.testsuite.results.records import OPTIONAL_TYPES, TIME_KEYS, StoreRecord
from eb_pytorch_cuda.testsuite.results.seconds import NotSeconds, seconds_of
from eb_pytorch_cuda.testsuite.results.saved import check_suite, mark_missing, no_constants


class ResultStore:
    """Append-only JSON-lines file of finished suites, for one build fingerprint.

    A record is one line, written by one write() of the whole line and fsync'ed, so a kill can only leave
    the last line unterminated; the reader ignores such a line (with a note) and the next append starts a
    new line after it, so a fragment never swallows the record that follows.  Every line is validated as a
    saved result's suite is (results/saved.check_suite): one that is not a record (a torn fragment in the middle,
    invalid UTF-8, a bare string, `[1, 2]`) is set aside with a note naming the file and the line, never a
    traceback, and its suite is simply run again.  One run at a time per store: exclusive() (flock).
    """

    def __init__(self, path: str, fingerprint: str, notice: Optional[Callable[[str], None]] = None):
        self.path, self.fingerprint = path, fingerprint
        self.notice = notice  # called with each note on a set-aside line, once per line; None: kept only
        self.set_aside: List[str] = []  # those notes, in the order found
        self._lock = threading.Lock()
        os.makedirs(os.path.dirname(path), exist_ok=True)

    def _set_aside(self, number, problem):
        note = f'{self.path}: line {number}: {problem}; set aside (a suite with no valid record runs again)'
        if note not in self.set_aside:
            self.set_aside.append(note)
            if self.notice is not None:
                self.notice(note)

    def load(self) -> Dict[str, StoreRecord]:
        """{suite name or piece key (results.pieces): record} already measured for this fingerprint; lines
        that are not valid records are set aside (see the class)."""
        if not os.path.lexists(self.path):
            return {}
        data = read_bytes(self.path)  # a directory or a FIFO there: PluginError naming it, not a traceback
        lines = data.split(b'\n')
        torn = lines.pop()  # what follows the last newline: nothing, unless a write was cut short
        records: Dict[str, StoreRecord] = {}
        for number, raw in enumerate(lines, 1):
            if not raw.strip():
                continue
            record, problem = parse_record(raw, self.path)
            if record is None:
                self._set_aside(number, str(problem))
            elif record.fingerprint == self.fingerprint:
                records[key_of(record)] = record
        if torn.strip():
            self._set_aside(len(lines) + 1, f'unterminated last line of {len(torn)} bytes (a write cut short)')
        return records

    def finished(self) -> Dict[str, StoreRecord]:
        """load()'s records less those of suites killed from outside (StoreRecord.interrupted): what a rerun of the
        build need not run again.  A suite stopped by a signal that was not its own failure (the OOM killer, a
        preemption, an operator's kill of its batch) says nothing about the suite, so it runs again; its record
        still judges the run that stored it."""
        return {key: record for key, record in self.load().items() if record.interrupted is None}

    def result(self, suites: Sequence[str]) -> RunResult:
        """RunResult of the stored outcomes of suites, in their order; a suite with none is marked missing,
        so it fails the verdict and never passes (the serial, batched and Slurm-spread runs alike).  A suite
        run as pieces is the merge of its pieces once all are stored (results.pieces.with_merged)."""
        records = with_merged(self.load())
        result = RunResult({records[suite].suite.name: records[suite].suite for suite in suites if suite in records})
        mark_missing(result, suites)
        return result

    def append(self, record: StoreRecord) -> None:
        """Add record as one line: one write() of the whole line (after a newline when the file ends in an
        unterminated fragment), then fsync; PluginError naming the file when it cannot be written.  The one
        place a record becomes JSON (results.records.StoreRecord.to_json: the bytes earlier versions wrote)."""
        line = (json.dumps(replace(record, fingerprint=self.fingerprint).to_json(), allow_nan=False) + '\n').encode()
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
    def lock_path(self) -> str:
        return self.path + '.lock'

    @contextlib.contextmanager
    def exclusive(self) -> Iterator['ResultStore']:
        """Hold this store's lock (flock on <path>.lock, released when the run ends or dies) for a run;
        PluginError naming the results directory when another run holds it: two runs on one store would
        both run every suite and count each other's XML reports."""
        try:  # non-blocking: a FIFO there must not wait for a writer (O_RDWR would not, O_NONBLOCK says so)
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY, 0o644)
        except OSError as err:
            raise PluginError(self.lock_path, f'cannot be created: {err.strerror}') from None
        try:
            mode = os.fstat(fd).st_mode
            if not stat.S_ISREG(mode):  # a FIFO or device: flock "works" but its pid cannot be written (ESPIPE)
                raise PluginError(self.lock_path, f'is {file_kind(mode)}, not a regular file (remove it)')
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 32, 0).decode('ascii', 'replace').strip()
                holder = holder if holder.isdigit() else 'unknown'
                raise PluginError(os.path.dirname(self.path), f'another run (pid {holder}) is using this results '
                                  f'directory ({os.path.basename(self.lock_path)} is locked); wait for it to end '
                                  f'or use another results directory') from None
            except OSError as err:
                raise PluginError(self.lock_path, f'cannot be locked: {err.strerror}') from None
            try:
                os.ftruncate(fd, 0)
                os.pwrite(fd, f'{os.getpid()}\n'.encode(), 0)
            except OSError as err:
                raise PluginError(self.lock_path, f'cannot be written: {err.strerror}') from None
            yield self
        finally:
            os.close(fd)  # releases the flock

    @property
    def final_path(self) -> str:
        return self.path + '.final.json'

    @property
    def cache_dir(self) -> str:
        """Where the tested installation of a run whose only problem was the verdict is kept."""
        return self.path + '.install'

    def save_final(self, result: RunResult) -> None:
        """The complete, rerun-classified result of this build, for a later re-judging."""
        write_atomically(self.final_path, json.dumps({'fingerprint': self.fingerprint, **result.to_dict()},
                                                     allow_nan=False))

    def load_final(self) -> Optional[RunResult]:
        """The kept complete result of this build (save_final), None when there is none or it is another
        build's; PluginError naming the file when it is not one save_final wrote (a directory, invalid JSON, a
        key we never write, `suites: 5`), never a traceback out of RunResult.from_dict."""
        if not os.path.lexists(self.final_path):
            return None
        path = self.final_path
        try:
            data = json.loads(read_bytes(path).decode('utf-8'), parse_constant=no_constants)
        except (ValueError, UnicodeDecodeError, RecursionError) as err:
            raise PluginError(path, f'is not a kept result ({" ".join(str(err).split())[:80]})') from None
        if not isinstance(data, dict) or not isinstance(data.get('fingerprint'), str):
            raise PluginError(path, 'is not a kept result (no fingerprint)')
        unknown = sorted(set(data) - {'fingerprint', 'suites'})
        if unknown:
            raise PluginError(path, f'is not a kept result (unknown key {unknown[0]!r:.60})')
        if not isinstance(data.get('suites'), list):
            raise PluginError(path, f"is not a kept result (suites: must be a list, got {data.get('suites')!r:.40})")
        for index, suite in enumerate(data['suites']):
            check_suite(path, f'suites[{index}]', suite)
        return RunResult.from_dict(data) if data['fingerprint'] == self.fingerprint else None

    def remove(self) -> None:
        for path in (self.path, self.final_path, self.path + '.children'):
            if os.path.lexists(path):
                try:
                    os.unlink(path)
                except OSError as err:  # a directory there: named, not a traceback
                    raise PluginError(path, f'cannot be removed: {err.strerror}') from None
        for kept in (self.cache_dir, self.cache_dir + '.partial'):
            if os.path.isdir(kept):
                shutil.rmtree(kept)


def parse_record(raw: bytes, path: str = 'results') -> Tuple[Optional[StoreRecord], Optional[str]]:
    """(record, None) for one store line that is a valid record (results.records.StoreRecord), else (None, what
    is wrong with it).  The one reader of a record from disk (ResultStore.load, and the spread controller's
    incremental RecordReader): the suite is checked as a saved result's is (results.saved.check_suite), the
    piece label and per-test times as results.pieces states them, every other key that is there by its type;
    then, and only then, the line becomes a typed record (results.records.StoreRecord.from_json)."""
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
    problem = record_problem(record)
    if problem:
        return None, f'not a record ({problem})'
    notes = record.get('notes', [])
    if notes is not None and not (isinstance(notes, list) and all(isinstance(n, str) for n in notes)):
        return None, 'not a record (notes: must be a list of strings)'
    for key, types in OPTIONAL_TYPES.items():
        value = record.get(key)
        if key in record and (not isinstance(value, types) or (isinstance(value, bool) and bool not in types)):
            names = ' or '.join('null' if kind is type(None) else _JSON_NAMES[kind] for kind in types)
            return None, f'not a record ({key}: must be {names}, got {value!r:.40})'
    for key in TIME_KEYS:
        if record.get(key) is not None:
            try:
                seconds_of(record[key])
            except NotSeconds as err:
                return None, f'not a record ({key}: {err})'
    return StoreRecord.from_json(record), None  # every key checked above


_JSON_NAMES = {int: 'an integer', float: 'a number', str: 'a string', bool: 'true or false'}
