"""Per-test times from a suite's XML reports, and what they predict for its pieces.

Why: a suite split into k pieces is split by the harness, by a hash of each test's pytest node id
(2.2+: test/pytest_shard_custom.py, `sha256(nodeid)` as a little-endian integer modulo k, shard i
holding the remainder i - 1; the 2.1 line's pytest-shard does the same, 0-based).  With each test's time
from an earlier run, the time of every piece is known before it runs, so the number of pieces can be
chosen so that the longest piece fits, and the queue can hand out pieces longest first.  The node id is
`file::classname::name` of the <testcase>, after the test directory's path from pytest's rootdir
(node_prefix): the XML's `file` is relative to the test directory, the hashed node id to the rootdir.
Measured: Debian's 2.6.0 (no pytest.ini, rootdir test/) and the 2.1-line tree (pytest.ini at its top,
rootdir the tree, node ids `test/test_native_functions.py::...`) each put all 11 tests of
test_native_functions in the shard the harness ran them in, the 2.1 line only with the `test/` prefix
(without it 3 of 11 land in the other of 2 pieces).  The reports are read with xmlparse's own checks (no
DTD, well-formed); a report it refuses gives no times.
"""

import hashlib
import os
import re
from typing import Dict, Iterable, List, Optional

from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.testsuite.results import xmlparse
from eb_pytorch_cuda.testsuite.results.seconds import NotSeconds, seconds_in_text

MOST_PIECES = 256  # a suite is never cut finer than this
KEPT_FROM = 300.0  # seconds: a suite at least this long keeps its tests' times in its record (a full run has
# ~500,000 tests; only the long suites, the ones that may be split, are worth their bytes)

_CASE = re.compile(rb'<testcase[\s/>]')
_ROOTDIR = re.compile(r'^rootdir: (.+?)(?:, (?:configfile|inifile): .*)?$', re.M)  # pytest's session header


# the files that make a directory pytest's rootdir, in the order it looks at them in one directory, and the
# section each must hold (pytest.ini counts even empty)
_CONFIGS = (('pytest.ini', ''), ('pyproject.toml', '[tool.pytest.ini_options]'), ('tox.ini', '[pytest]'),
            ('setup.cfg', '[tool:pytest]'))


def tree_rootdir(test_dir: str) -> str:
    """pytest's rootdir for a suite of test_dir, by pytest's documented rules, for a run whose output does not
    print it (the 2.6 harness shows a passing suite's pytest header nowhere): the first directory from test_dir
    up with a file of _CONFIGS that configures pytest, else the first with a setup.py, else test_dir."""
    start = os.path.realpath(test_dir)
    directories = [start]
    while os.path.dirname(directories[-1]) != directories[-1]:
        directories.append(os.path.dirname(directories[-1]))
    for directory in directories:
        for name, section in _CONFIGS:
            path = os.path.join(directory, name)
            try:
                with open(path, 'rb') as handle:
                    if not section or section.encode() in handle.read(1 << 20):
                        return directory
            except OSError:
                continue
    return next((directory for directory in directories if os.path.isfile(os.path.join(directory, 'setup.py'))),
                start)


def node_prefix(output: str, test_dir: str) -> str:
    """What comes before the XML's `file` in the node ids pytest shards by: the test directory's path
    from pytest's rootdir, the one it printed in output (its `rootdir:` line) or else tree_rootdir's
    ('test/' in the 2.1-line tree, '' where the rootdir is the test directory itself)."""
    found = _ROOTDIR.findall(output or '')
    rootdir = found[-1].strip() if found else tree_rootdir(test_dir)
    relative = os.path.relpath(os.path.realpath(test_dir), os.path.realpath(rootdir))
    if relative == '.' or relative == '..' or relative.startswith('..' + os.sep) or os.path.isabs(relative):
        return ''
    return relative.replace(os.sep, '/') + '/'


def case_times(paths: Iterable[str], prefix: str = '', notes: Optional[List[str]] = None) -> Dict[str, float]:
    """{node id: seconds} of every test case in the report files (a test in several files, e.g. rerun:
    its times added), each id after prefix (node_prefix); files that are not trustworthy reports are
    left out, and so is a test whose `time` is not a time (results.seconds: inf, nan, -5), with one note
    per file in notes."""
    times: Dict[str, float] = {}
    for path in paths:
        try:
            data = xmlparse._read(path)  # noqa: SLF001 - the same refusal rules as the counts
        except (PluginError, xmlparse._Refused, OSError):  # noqa: SLF001
            continue
        if not isinstance(data, bytes):  # xmlparse._EMPTY: a file with no element
            continue
        bad: List[str] = []
        for match in _CASE.finditer(data):
            values = xmlparse._attributes(data, match.start())  # noqa: SLF001
            if not values.get('file') or not values.get('name'):
                continue
            node = prefix + (f"{values['file']}::{values['classname']}::{values['name']}" if values.get('classname')
                             else f"{values['file']}::{values['name']}")
            try:
                seconds = seconds_in_text(values.get('time') or '0')
            except NotSeconds as err:
                bad.append(f'{node}: {err}')
                continue
            times[node] = round(times.get(node, 0.0) + seconds, 3)
        if bad and notes is not None:
            more = f' (and {len(bad) - 1} more)' if len(bad) > 1 else ''
            notes.append(f"{path}: test {bad[0][:300]}{more}: its time set aside (the next build's split "
                         f"does without it)")
    return times


def kept_times(suite_seconds: Optional[float], paths: Iterable[str], prefix: str = '',
               notes: Optional[List[str]] = None) -> Dict[str, float]:
    """The times a record keeps: case_times(paths, prefix, notes) for a suite of at least KEPT_FROM seconds,
    else none."""
    if suite_seconds is None or float(suite_seconds) < KEPT_FROM:
        return {}
    return case_times(paths, prefix, notes)


def shard_of(node: str, count: int) -> int:
    """The 1-based piece of `count` that the harness runs test `node` in."""
    return int.from_bytes(hashlib.sha256(node.encode()).digest(), 'little') % count + 1


def piece_times(times: Dict[str, float], count: int) -> List[float]:
    """Seconds of each of the `count` pieces (index 0: piece 1) by the tests' times."""
    pieces = [0.0] * count
    for node, seconds in times.items():
        pieces[shard_of(node, count) - 1] += seconds
    return pieces


def pieces_for(times: Dict[str, float], longest: float, most: int = MOST_PIECES) -> int:
    """The fewest pieces whose longest is at most `longest` seconds by the tests' times (most at most: a
    single test longer than that cannot be split)."""
    total = sum(times.values())
    count = max(1, int(total // longest))
    while count < most and max(piece_times(times, count)) > longest:
        count += 1
    return count
