"""Where the JUnit XML reports of suites live under a test directory (the test-reports layout): paths in, paths out.

PyTorch's common_utils writes a suite's reports to test-reports/<source>/<dotted.suite>/<file>.xml (its cwd is
test/), <source> being $TEST_REPORT_SOURCE_OVERRIDE or else python-unittest, and under pytest the path with
python-unittest renamed python-pytest (read in the 2.1 line's and 2.6.0's common_utils: the same two
functions); run_test.py sets the override itself to dist-<backend> for the distributed suites' configurations.
The test step adds runner directories of its own, each holding OWN, which the harness's never do:
- a piece's (results.pieces): python-pytest#shard<i>of<k>, as several jobs may run pieces of one suite at once;
- an attempt's: <source>#attempt-<id>.  Every run of suites (a batch, a suite alone, a piece) writes into a
  fresh one (Attempt: the override) and its outcome is read from that one only, so a report written late by
  an earlier, killed attempt (a process that outlived its group, a job on another node) is never
  counted.  Once the attempt's outcome is recorded, its files are moved to the harness's own place
  (publish), so the tree ends as the harness leaves it; a read of the whole tree (`report test-reports`)
  skips an attempt's directory that is still there (never published: killed, or running now).  The
  distributed suites' dist-<backend> directories are the harness's override, not ours: they are cleared
  before each attempt, as the harness's are.
"""

import os
import shutil
import uuid
from dataclasses import dataclass
from typing import Iterable, List, Optional, Tuple

REPORTS_DIR = 'test-reports'
UNITTEST_RUNNER = 'python-unittest'
PYTEST_RUNNER = 'python-pytest'
RUNNERS = (PYTEST_RUNNER, UNITTEST_RUNNER)
IGNORED_SUITE_DIRS = ('-c',)  # python -c subprocesses spawned by tests write here
OVERRIDE_VARIABLE = 'TEST_REPORT_SOURCE_OVERRIDE'  # common_utils' <source>
OWN = '#'  # in every runner directory of the test step's own, never in the harness's nor in a suite name
ATTEMPT_MARK = '#attempt-'


def reports_root(test_dir: str) -> str:
    """test_dir/test-reports."""
    return os.path.join(test_dir, REPORTS_DIR)


def suite_dir_name(suite: str) -> str:
    """The directory of a suite's reports: 'distributed/test_c10d_gloo' -> 'distributed.test_c10d_gloo'."""
    return suite.replace('/', '.')


def runner_of(name: str) -> str:
    """The runner directory an attempt's directory stands for ('python-pytest#attempt-x' -> 'python-pytest')."""
    return name.split(ATTEMPT_MARK, 1)[0]


def suite_of_report(path: str, root: str) -> Optional[str]:
    """'dynamo/test_dynamic_shapes' from .../python-pytest/dynamo.test_dynamic_shapes/<file>.xml,
    'dist-gloo/distributed/test_c10d_gloo' from .../dist-gloo/distributed.test_c10d_gloo/<file>.xml,
    None for a report of a `python -c` subprocess."""
    relative = os.path.relpath(path, root).split(os.sep)
    if len(relative) >= 2:
        if relative[-2] in IGNORED_SUITE_DIRS:
            return None
        name = relative[-2].replace('.', '/')
        if len(relative) >= 3 and runner_of(relative[-3]) not in RUNNERS:
            name = f'{relative[-3]}/{name}'
        return name
    name = os.path.basename(path)[:-len('.xml')]
    return name.rsplit('-', 1)[0].replace('.', '/')


VARIANT_PREFIX = 'dist-'  # run_test.py's overrides for the distributed configurations (dist-gloo, dist-nccl, ...)


def variant_of(key: str) -> Optional[str]:
    """The suite a backend variant's name stands for ('dist-gloo/distributed/test_c10d' -> 'distributed/test_c10d'),
    None for a plain suite name."""
    return key.split('/', 1)[1] if key.startswith(VARIANT_PREFIX) and '/' in key else None


def all_report_files(root: str) -> list:
    """Every *.xml below root, sorted (regular or not: reading refuses what is not a regular file), except in
    an attempt's directory: one that is still there was never published (its run was killed, or runs now)."""
    files = []
    for directory, subdirectories, names in os.walk(root):
        subdirectories[:] = [name for name in subdirectories if ATTEMPT_MARK not in name]
        files += [os.path.join(directory, name) for name in names if name.endswith('.xml')]
    return sorted(files)


def harness_runners(test_dir: str) -> List[str]:
    """The runner directories the harness itself writes (python-pytest, python-unittest, dist-<backend>)."""
    root = reports_root(test_dir)
    return sorted(name for name in os.listdir(root) if OWN not in name) if os.path.isdir(root) else []


def _runners(test_dir: str, runners: Optional[Iterable[str]]) -> List[str]:
    return list(runners) if runners is not None else harness_runners(test_dir)


def suite_report_files(test_dir: str, suite: str, runners: Optional[Iterable[str]] = None) -> List[str]:
    """The XML files of suite in those runner directories (None: the harness's own), sorted per directory."""
    root, dotted = reports_root(test_dir), suite_dir_name(suite)
    directories = [os.path.join(root, name, dotted) for name in _runners(test_dir, runners)]
    return [os.path.join(d, f) for d in directories if os.path.isdir(d) for f in sorted(os.listdir(d))
            if f.endswith('.xml')]


def remove_suite_reports(test_dir: str, suite: str, runners: Optional[Iterable[str]] = None) -> None:
    """Drop suite's XML files in those runner directories (None: the harness's own)."""
    for path in suite_report_files(test_dir, suite, runners):
        os.unlink(path)


def piece_runner(index: int, count: int) -> str:
    """The runner directory of the reports of piece index of count (results.pieces.Piece): pieces of one suite
    running at once in several jobs write to one tree, and each must read and clear only its own."""
    return f'{PYTEST_RUNNER}{OWN}shard{index}of{count}'


@dataclass(frozen=True)
class Attempt:
    """One run's own report directory (module docstring): source is what common_utils is given as its
    override; its suites' files are in runners, and publish moves them to the harness's place."""

    test_dir: str
    source: str

    @classmethod
    def new(cls, test_dir: str, shard: Optional[Tuple[int, int]] = None) -> 'Attempt':
        """A fresh attempt (a random id: jobs on several nodes share one tree) for a batch or a suite alone,
        or for a piece, shard (index, count) (under its piece_runner)."""
        base = piece_runner(*shard) if shard is not None else UNITTEST_RUNNER
        return cls(test_dir, f'{base}{ATTEMPT_MARK}{uuid.uuid4().hex[:16]}')

    @property
    def env(self) -> dict:
        """The environment that sends the attempt's reports here."""
        return {OVERRIDE_VARIABLE: self.source}

    @property
    def runners(self) -> List[str]:
        """Where its reports land: the source, and the source as pytest renames it."""
        renamed = self.source.replace(UNITTEST_RUNNER, PYTEST_RUNNER)
        return [self.source] if renamed == self.source else [renamed, self.source]

    def files(self, suite: str, with_variants: bool = False) -> List[str]:
        """suite's XML files of this attempt; with_variants: and of the harness's variant directories
        (dist-<backend>: the harness's own override, cleared before the attempt; their per-test times count)."""
        variants = [name for name in harness_runners(self.test_dir) if name not in RUNNERS] if with_variants else []
        return suite_report_files(self.test_dir, suite, self.runners + variants)

    def parse_root(self, files: List[str]) -> str:
        """Where suite names are read from for these files of one suite: their runner directory when they are
        all in one (a piece's attempt is no runner xmlparse knows), else test-reports (the runners are known)."""
        root = reports_root(self.test_dir)
        places = {os.path.relpath(path, root).split(os.sep)[0] for path in files}
        return os.path.join(root, places.pop()) if len(places) == 1 else root

    def publish(self, suite: str) -> None:
        """Move suite's files of this attempt to the harness's place (what is there first goes: only this
        attempt's stay), and drop its now empty directories."""
        root, dotted = reports_root(self.test_dir), suite_dir_name(suite)
        for runner in self.runners:
            source = os.path.join(root, runner, dotted)
            if not os.path.isdir(source):
                continue
            target = os.path.join(root, runner_of(runner), dotted)
            remove_suite_reports(self.test_dir, suite, [runner_of(runner)])
            os.makedirs(target, exist_ok=True)
            for name in sorted(os.listdir(source)):
                os.replace(os.path.join(source, name), os.path.join(target, name))
            for directory in (source, os.path.join(root, runner)):
                try:
                    os.rmdir(directory)
                except OSError:
                    pass  # not empty: another suite's files, or a late file of a killed process (never read)

    def discard(self) -> None:
        """Drop what is left of this attempt (a killed batch's unfinished suites: they run again alone)."""
        for runner in self.runners:
            shutil.rmtree(os.path.join(reports_root(self.test_dir), runner), ignore_errors=True)
