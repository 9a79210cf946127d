"""The whole-text run_test.py log reader as it was before streaming (commit 98e28aa), kept as the reference
tests/test_logparse_streaming.py compares the streaming reader against.  Not used by the package."""

import re
from bisect import bisect_right
from typing import List, NamedTuple, Optional

from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.inputs import read_bytes
from eb_pytorch_cuda.testsuite.results import grammar
from eb_pytorch_cuda.testsuite.results.model import (ERROR, FAILED, SUITE_FAILED, SUITE_INCOMPLETE, SUITE_PASSED,
                                                     SUITE_TERMINATED, SUITE_UNCOUNTED, RunResult, TestCase)

START, REPLAY, FINISHED, FAILED_LINE, SUCCESS = 'start', 'replay', 'finished', 'failed', 'success'
STARTS = (START, REPLAY)  # REPLAY: a whole log replayed (`PRINTING LOG FILE of X`, not `BEGINNING OF`)
MARKERS = [  # (kind, pattern): a suite's run starts with either start line
    (START, grammar.RUNNING_MARKER),  # at a line's start or after other output (grammar.RUNNING)
    (START, re.compile(rf'^{grammar.LOG_START}', re.M)),
    (FINISHED, re.compile(rf'^{grammar.LOG_END} \(', re.M)),
    (FAILED_LINE, re.compile(rf'^(?:{grammar.FAILED_RAISED_PREFIX})?{grammar.FAILED}', re.M)),
    (SUCCESS, re.compile(rf'^{grammar.SUCCESS}', re.M)),
]
UNITTEST_SUMMARY = re.compile(r'^Ran (?P<total>\d+) tests? in [\d.]+s[ \t]*\n(?:[ \t]*\n)*'
                              r'(?P<status>OK|FAILED)(?: \((?P<details>[^)\n]*)\))?[ \t]*$', re.M)
PYTEST_LINE = re.compile(r'^=+ [^\n]*', re.M)  # candidate lines; the summary is checked with str methods
PYTEST_TAIL = re.compile(r' in [\d.]+s(?: \([\d:]+\))? =+[ \t]*$')
PYTEST_ITEM = re.compile(r'(\d+) (\w+)')
UNITTEST_FAILED_TEST = re.compile(r'^(?P<kind>FAIL|ERROR): (?P<test>\w+) \((?P<where>[\w.]+)\)', re.M)
PYTEST_FAILED_TEST = re.compile(r'^(?P<kind>FAILED|ERROR) (?:\[[^\]\n]*\] )?(?P<path>[\w/.-]+?\.py)::'
                                r'(?:(?P<cls>\w+)::)?(?P<test>[^\s:]+)', re.M)
ASSERTION_LIST = re.compile(r'^AssertionError: (?P<count>\d+) unit test\(s\) failed:[ \t]*\n'
                            r'(?P<names>(?:[ \t]+\S[^\n]*\n?)+)', re.M)
PYTEST_KEYS = {'failed': 'failed', 'passed': 'passed', 'skipped': 'skipped', 'xfailed': 'xfailed',
               'xpassed': 'xpassed', 'rerun': 'rerun', 'error': 'errors', 'errors': 'errors'}
# a test named by its file, as pytest prints it; the look-behind keeps the search linear in the line length
_TEST_FILE = re.compile(r'(?<![\w/.-])([\w/.-]+?\.py)::')
PYTEST_END_WORDS = set(PYTEST_KEYS) | {'deselected', 'warning', 'warnings'}  # a session's last line has one
# 2.3+ (run_test_retries): a failing test is retried alone in new processes, each printing its own `1 failed`
# summary, and the suite's log ends with the tests that failed every time (measured on 2.6.0 with torch 2.11 on
# the H200: 10 failing tests, 30 `1 failed` summaries): that list, not the sum, is what failed
CONSISTENT_FAILURES = re.compile(r"^The following tests failed consistently: \[(?P<tests>[^\]\n]*)\]", re.M)
_QUOTED_TEST = re.compile(r"'(?P<path>[\w/.-]+?\.py)::(?:(?P<cls>\w+)::)?(?P<test>[^':]+)'")


def _pytest_test_id(cls, test):
    """'Class.test' (or 'test' for a module-level test) of a pytest node id's class and test parts."""
    return f'{cls}.{test}' if cls else test


def _test_id(test, where):
    """'Class.test' from unittest's '(module.Class)' or Python 3.11's '(module.Class.test)'."""
    parts = where.split('.')
    if parts[-1] == test and len(parts) > 1:
        parts.pop()
    return f'{parts[-1]}.{test}'


class Marker(NamedTuple):
    """One harness marker line of a log: where it is, what it says (grammar.MARKERS' kind), about which suite."""
    start: int
    end: int
    kind: str
    suite: str
    shard: int
    shards: int
    signal: Optional[str]


class FailedMention(NamedTuple):
    """A failed test named in a chunk of a suite's output: where, its test file (pytest only), id and state."""
    position: int
    path: Optional[str]
    test_id: str
    state: str


def _events(text) -> List[Marker]:
    """Every marker line, in order."""
    events = []
    for kind, pattern in MARKERS:
        for match in pattern.finditer(text):
            groups = match.groupdict()
            name, shard, shards = groups['name'], groups['shard'] or '1', groups['shards'] or '1'
            end = text.find('\n', match.end())
            if 'beginning' in groups and not groups['beginning']:
                kind = REPLAY
            events.append(Marker(match.start(), len(text) if end < 0 else end, kind, name, int(shard), int(shards),
                                 groups.get('signal')))
    events.sort()
    return events


def _unittest_counts(match):
    details = {k.strip(): int(v) for k, v in
               (item.split('=', 1) for item in (match.group('details') or '').split(',') if '=' in item)
               if v.strip().isdigit()}
    counts = {'failed': details.get('failures', 0), 'errors': details.get('errors', 0),
              'skipped': details.get('skipped', 0), 'xfailed': details.get('expected failures', 0),
              'xpassed': details.get('unexpected successes', 0)}
    counts['passed'] = max(0, int(match.group('total')) - sum(counts.values()))
    return counts


def _summaries(chunk):
    """[(position, {count key: n}, from pytest)] of every countable summary in chunk, in order; run_test.py's
    own "AssertionError: N unit test(s) failed:" count only where neither unittest nor pytest printed one."""
    found = [(match.start(), _unittest_counts(match), False) for match in UNITTEST_SUMMARY.finditer(chunk)]
    for line in PYTEST_LINE.finditer(chunk):
        text = line.group()
        tail = PYTEST_TAIL.search(text)
        items = PYTEST_ITEM.findall(text[:tail.start()].lstrip('= ')) if tail else ()
        if any(word in PYTEST_END_WORDS for _, word in items):
            counts: dict = {}
            for number, word in items:
                if word in PYTEST_KEYS:
                    counts[PYTEST_KEYS[word]] = counts.get(PYTEST_KEYS[word], 0) + int(number)
            found.append((line.start(), counts, True))
    if not found:
        found = [(match.start(), {'failed': int(match.group('count'))}, False)
                 for match in ASSERTION_LIST.finditer(chunk)]
    return sorted(found, key=lambda item: item[0])


def _failed_tests(chunk):
    """The failed tests a chunk names."""
    tests: List[FailedMention] = []
    for match in UNITTEST_FAILED_TEST.finditer(chunk):
        tests.append(FailedMention(match.start(), None, _test_id(match.group('test'), match.group('where')),
                                   ERROR if match.group('kind') == 'ERROR' else FAILED))
    for match in PYTEST_FAILED_TEST.finditer(chunk):
        test_id = _pytest_test_id(match.group('cls'), match.group('test'))
        tests.append(FailedMention(match.start(), match.group('path'), test_id,
                                   ERROR if match.group('kind') == 'ERROR' else FAILED))
    for match in ASSERTION_LIST.finditer(chunk):
        for line in match.group('names').splitlines()[:int(match.group('count'))]:
            tests.append(FailedMention(match.start(), None, line.strip(), FAILED))
    return tests


def _owner(preceding, following):
    """(suite, shard) the text between two markers belongs to, or None (see the module docstring)."""
    other_started = preceding and following and preceding[2] in STARTS and preceding[3] != following[3]
    # "X failed!" after another suite's "Running Y" is run_test.py's closing list, not X's own output
    if following and (following[2] in (FINISHED, SUCCESS) or (following[2] == FAILED_LINE and not other_started)):
        return following[3:5]
    if preceding and preceding[2] in STARTS:
        return preceding[3:5]
    return None


class _Runs:
    """What the log says per suite: counts, failed tests, runs still open, shards, failed lines.

    A `Running X i/n` or `PRINTING ... LOG FILE of X i/n` line opens a run of shard i of X; a summary
    credited to X or an end marker of X closes one.  In a pool the output of two or three suites is
    interleaved (2.6 without --pipe-logs): a summary is credited to the suite whose test file
    (`dir/test_x.py::Class::test`) was named last before it, when that suite was announced, else to
    the piece's owner; a `FAILED dir/test_x.py::...` line names its own suite.
    """

    def __init__(self, result, events):
        self.result = result
        self.open: dict = {}
        self.shards: dict = {}
        self.seen: set = set()
        self.failed: dict = {}
        self.success: set = set()
        self.counted: set = set()
        self.last_shard, self.replaying = {}, set()
        self.consistent = {}  # suite: {test ids} its run_test_retries reported as failing every time
        for _start, _end, _kind, name, shard, total, _signal in events:
            result.suite(name)
            self.shards[name] = max(self.shards.get(name, 1), total)

    def suite_of(self, path):
        """The announced suite a test file path names ('test/dynamo/test_x.py' -> 'dynamo/test_x'), or None."""
        name = path[:-3] if path.endswith('.py') else path
        for candidate in (name, name[5:] if name.startswith('test/') else None):
            if candidate in self.result.suites:
                return candidate
        return None

    def event(self, kind, name, shard, signal):
        key = (name, shard)
        self.seen.add(key)
        if kind in STARTS:
            if kind == START or not self.open.get(key):  # a replay of an announced run is that same run
                self.open[key] = self.open.get(key, 0) + 1
            self.last_shard[name] = shard
            (self.replaying.add if kind == REPLAY else self.replaying.discard)(key)
            return
        self.open[key] = max(0, self.open.get(key, 0) - 1)
        if kind == FINISHED and key in self.replaying:
            self.success.add(name)  # 2.1 replays a log whole only when the suite's process exited 0
            self.replaying.discard(key)
        elif kind == FAILED_LINE:
            self.failed[name] = self.failed.get(name) or signal or ''
        elif kind == SUCCESS:
            self.success.add(name)

    def chunk(self, owner, chunk):
        mentions = [(match.start(), self.suite_of(match.group(1))) for match in _TEST_FILE.finditer(chunk)]
        mentions = [(position, name) for position, name in mentions if name]
        positions = [position for position, _ in mentions]
        for position, counts, _pytest in _summaries(chunk):
            index = bisect_right(positions, position) - 1
            name = mentions[index][1] if index >= 0 else (owner[0] if owner else None)
            if name is None:
                continue
            shard = owner[1] if owner and owner[0] == name else self.last_shard.get(name, 1)
            for key, value in counts.items():
                self.result.suites[name].counts[key] += value
            self.counted.add(name)
            self.seen.add((name, shard))
            self.open[(name, shard)] = max(0, self.open.get((name, shard), 0) - 1)
        for match in CONSISTENT_FAILURES.finditer(chunk):
            for test in _QUOTED_TEST.finditer(match.group('tests')):
                name = self.suite_of(test.group('path')) or (owner[0] if owner else None)
                if name is not None:
                    self.consistent.setdefault(name, set()).add(_pytest_test_id(test.group('cls'), test.group('test')))
        for _position, path, test_id, state in _failed_tests(chunk):
            name = (self.suite_of(path) if path else None) or (owner[0] if owner else None)
            if name is None:
                continue
            suite = self.result.suites[name]
            if all(test.test_id != test_id for test in suite.failed_tests):
                suite.failed_tests.append(TestCase(test_id, state))

    def judge(self):
        """Set each suite's status from what was seen."""
        for name, suite in self.result.suites.items():
            suite.sources.append('log')
            if name in self.consistent:  # retries counted once: the harness's own list of what failed
                failing = len(self.consistent[name])
                suite.counts['errors'] = min(suite.counts['errors'], failing)
                suite.counts['failed'] = failing - suite.counts['errors']
                suite.failed_tests = [test for test in suite.failed_tests if test.test_id in self.consistent[name]]
            missing = [shard for shard in range(1, self.shards[name] + 1)
                       if (name, shard) not in self.seen or self.open.get((name, shard))]
            if self.failed.get(name):
                suite.status, suite.signal = SUITE_TERMINATED, self.failed[name]
            elif missing:
                suite.status = SUITE_INCOMPLETE
                if self.shards[name] > 1:
                    suite.note = f"shard(s) {', '.join(map(str, missing))} of {self.shards[name]} never ended"
            elif name in self.failed:
                suite.status = SUITE_FAILED if name in self.counted and (suite.failing_count or suite.failed_tests) \
                    else SUITE_UNCOUNTED
            elif name not in self.counted and name not in self.success:
                suite.status = SUITE_INCOMPLETE
            elif suite.failing_count or suite.failed_tests:
                suite.status = SUITE_FAILED
            else:
                suite.status = SUITE_PASSED
                if name not in self.counted:
                    suite.note = 'exit 0 without a countable summary: passed with 0 tests'


def parse_log_text(text: str, source: str = 'log') -> RunResult:
    """RunResult of one run_test.py console output (text); raise PluginError when nothing in it is recognized."""
    events = _events(text)
    result = RunResult()
    runs = _Runs(result, events)
    if not result.suites:
        raise PluginError(source, 'no run_test.py output found (no "Running <suite> ..." line and no summary)')
    previous_end = 0
    for index in range(len(events) + 1):
        following = events[index] if index < len(events) else None
        chunk = text[previous_end:following[0] if following else len(text)]
        if chunk.strip():
            runs.chunk(_owner(events[index - 1] if index else None, following), chunk)
        if following:
            runs.event(following[2], following[3], following[4], following[6])
            previous_end = following[1]
    runs.judge()
    return result


def parse_log_file(path: str) -> RunResult:
    """RunResult of a run_test.py log (or an EasyBuild log holding it); PluginError for unreadable input."""
    data = read_bytes(path)
    if b'\0' in data[:8192]:
        raise PluginError(path, 'is a binary file, not a test log')
    return parse_log_text(data.decode('utf-8', 'replace'), source=str(path))
