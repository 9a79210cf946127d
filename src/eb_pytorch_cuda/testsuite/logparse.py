"""Parse the console output of PyTorch's test/run_test.py (2.x) into the result model.

The markers, as run_test.py prints them (read from its source, 2.1 and 2.6.0; `X` is `suite i/n`, the
suite and its shard):
- `Running X ... [date]` when a suite starts; with the pool (two suites at a time) two of these come
  before either suite's log;
- 2.1: the log of a suite once it ended, between `##[group]PRINTING LOG FILE of X (path)` and
  `FINISHED PRINTING LOG FILE of X (path)`; for a failed suite only its last 100 lines, after
  `##[group]PRINTING BEGINNING OF LOG FILE of X (path)` ... `##[endgroup]`, or, for a short log, with
  no start marker at all;
- 2.6 with --pipe-logs (CI): `PRINTING LOG FILE of X (path)` ... `FINISHED PRINTING LOG FILE of X (path)`
  for a failed or rerun suite, `X was successful, full logs can be found in artifacts with path ...`
  for a passed one; without it (EasyBuild) the suite's output itself follows `Running X`;
- `X failed!`, `X failed! Received signal: SIGx` or `X failed! <exception>` when a suite failed,
  printed when it ends and again at the end of the run (and inside `RuntimeError: ...` when run_test.py stops).

The log is cut at these markers.  A piece of text belongs to the suite whose end marker (`FINISHED
PRINTING LOG FILE of X`, `X failed!`, `X was successful`) directly follows it, else to the suite whose
start marker directly precedes it, else to none: so a summary is tied to the lines that follow it
as well as those before, and a missing start marker loses nothing.  In each suite's text every
countable summary is added up (unittest "Ran N tests" + "OK"/"FAILED (...)", pytest "=== 2 failed,
128 passed, ... in 3.4s ===", run_test.py's "AssertionError: N unit test(s) failed:" list) and failed
test names are collected.  Every shard announced (`i/n`: shards 1..n) must end with an outcome (an end
marker or a countable summary); a suite with a shard that has none is SUITE_INCOMPLETE, as is a suite
that was announced and never summarised: never "0 failures".

Every pattern is linear in the line length (no nested or adjacent unbounded quantifiers that can
backtrack over one line): a 160 KB summary line parses in milliseconds.
"""

import re

from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.inputs import read_bytes
from eb_pytorch_cuda.testsuite.model import (ERROR, FAILED, SUITE_FAILED, SUITE_INCOMPLETE, SUITE_PASSED,
                                             SUITE_TERMINATED, SUITE_UNCOUNTED, RunResult, TestCase)

_NAME = r'(?P<name>[\w./-]+)(?: (?P<shard>\d+)/(?P<shards>\d+))?'
START, FINISHED, FAILED_LINE, SUCCESS = 'start', 'finished', 'failed', 'success'
END_KINDS = (FINISHED, FAILED_LINE, SUCCESS)
MARKERS = {
    START: re.compile(rf'^(?:Running {_NAME} \.\.\. \[|(?:##\[group\])?PRINTING (?:BEGINNING OF )?LOG FILE of '
                      rf'{_NAME.replace("(?P<", "(?P<p_")} \()', re.M),
    FINISHED: re.compile(rf'^FINISHED PRINTING LOG FILE of {_NAME} \(', re.M),
    FAILED_LINE: re.compile(rf'^(?:RuntimeError: )?{_NAME} failed!(?: Received signal: (?P<signal>\w+))?', re.M),
    SUCCESS: re.compile(rf'^{_NAME} was successful, full logs can be found', re.M),
}
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
PYTEST_WORDS = set(PYTEST_KEYS) | {'deselected', 'warning', 'warnings'}


def _test_id(test, where):
    """'Class.test' from unittest's '(module.Class)' or Python 3.11's '(module.Class.test)'."""
    parts = where.split('.')
    if parts[-1] == test and len(parts) > 1:
        parts.pop()
    return f'{parts[-1]}.{test}'


def _events(text):
    """[(start, end, kind, suite, shard, shards, signal)] of every marker line, in order."""
    events = []
    for kind, pattern in MARKERS.items():
        for match in pattern.finditer(text):
            groups = match.groupdict()
            name = groups.get('name') or groups.get('p_name')
            shard = groups.get('shard') or groups.get('p_shard') or '1'
            shards = groups.get('shards') or groups.get('p_shards') or '1'
            end = text.find('\n', match.end())
            events.append((match.start(), len(text) if end < 0 else end, kind, name, int(shard), int(shards),
                           groups.get('signal')))
    events.sort()
    return events


def _pytest_summaries(chunk):
    """The '2 failed, 128 passed' parts of pytest's final lines ('=== ... in 3.4s ===') in chunk."""
    for line in PYTEST_LINE.finditer(chunk):
        text = line.group()
        tail = PYTEST_TAIL.search(text)
        if not tail:
            continue
        items = PYTEST_ITEM.findall(text[:tail.start()].lstrip('= '))
        if items and any(word in PYTEST_KEYS for _, word in items):
            yield items


def _count(chunk, counts):
    """Add the countable summaries of a chunk to counts; return whether there was any."""
    found = False
    for match in UNITTEST_SUMMARY.finditer(chunk):
        found = True
        details = dict((k.strip(), int(v)) for k, v in
                       (item.split('=', 1) for item in (match.group('details') or '').split(',') if '=' in item)
                       if v.strip().isdigit())
        failed, errors = details.get('failures', 0), details.get('errors', 0)
        skipped, xfailed = details.get('skipped', 0), details.get('expected failures', 0)
        xpassed = details.get('unexpected successes', 0)
        counts['failed'] += failed
        counts['errors'] += errors
        counts['skipped'] += skipped
        counts['xfailed'] += xfailed
        counts['xpassed'] += xpassed
        counts['passed'] += max(0, int(match.group('total')) - failed - errors - skipped - xfailed - xpassed)
    for items in _pytest_summaries(chunk):
        found = True
        for number, word in items:
            if word in PYTEST_KEYS:
                counts[PYTEST_KEYS[word]] += int(number)
    if not found:  # run_test.py's own count, printed when the unittest/pytest summary is not
        for match in ASSERTION_LIST.finditer(chunk):
            found = True
            counts['failed'] += int(match.group('count'))
    return found


def _failed_tests(chunk):
    tests = {}
    for match in UNITTEST_FAILED_TEST.finditer(chunk):
        test_id = _test_id(match.group('test'), match.group('where'))
        tests.setdefault(test_id, ERROR if match.group('kind') == 'ERROR' else FAILED)
    for match in PYTEST_FAILED_TEST.finditer(chunk):
        test_id = f"{match.group('cls')}.{match.group('test')}" if match.group('cls') else match.group('test')
        tests.setdefault(test_id, ERROR if match.group('kind') == 'ERROR' else FAILED)
    for match in ASSERTION_LIST.finditer(chunk):
        for line in match.group('names').splitlines()[:int(match.group('count'))]:
            tests.setdefault(line.strip(), FAILED)
    return tests


def _owned_chunks(text, events):
    """((suite, shard), text) for every piece of text between markers that belongs to a suite."""
    previous_end = 0
    for index in range(len(events) + 1):
        following = events[index] if index < len(events) else None
        chunk = text[previous_end:following[0] if following else len(text)]
        preceding = events[index - 1] if index else None
        owner = None
        other_started = preceding and preceding[2] == START and following and preceding[3] != following[3]
        # "X failed!" after another suite's "Running Y" is run_test.py's closing list, not X's own output
        if following and (following[2] in (FINISHED, SUCCESS) or (following[2] == FAILED_LINE and not other_started)):
            owner = following[3:5]
        elif preceding and preceding[2] == START:
            owner = preceding[3:5]
        if owner and chunk.strip():
            yield owner, chunk
        if following:
            previous_end = following[1]


def parse_log_text(text: str, source: str = 'log') -> RunResult:
    """RunResult of one run_test.py console output (text); raise PluginError when nothing in it is recognized."""
    events = _events(text)
    result = RunResult()
    shards, ended, counted, failed, success = {}, set(), set(), {}, set()
    for _start, _end, kind, name, shard, total, signal in events:
        shards[name] = max(shards.get(name, 1), total)
        result.suite(name)
        if kind in END_KINDS:
            ended.add((name, shard))
        if kind == FAILED_LINE:
            failed[name] = failed.get(name) or signal or ''
        elif kind == SUCCESS:
            success.add(name)
    for (name, shard), chunk in _owned_chunks(text, events):
        suite = result.suites[name]
        if _count(chunk, suite.counts):
            counted.add(name)
            ended.add((name, shard))
        known = {t.test_id for t in suite.failed_tests}
        suite.failed_tests += [TestCase(test_id, state) for test_id, state in _failed_tests(chunk).items()
                               if test_id not in known]
    if not result.suites:
        raise PluginError(source, 'no run_test.py output found (no "Running <suite> ..." line and no summary)')
    for name, suite in result.suites.items():
        suite.sources.append('log')
        missing = [shard for shard in range(1, shards[name] + 1) if (name, shard) not in ended]
        if failed.get(name):
            suite.status, suite.signal = SUITE_TERMINATED, failed[name]
        elif missing:
            suite.status = SUITE_INCOMPLETE
            if shards[name] > 1:
                suite.note = f"shard(s) {', '.join(map(str, missing))} of {shards[name]} never ended"
        elif name in failed:
            suite.status = SUITE_FAILED if name in counted and (suite.failing_count or suite.failed_tests) \
                else SUITE_UNCOUNTED
        elif name not in counted and name not in success:
            suite.status = SUITE_INCOMPLETE
        elif suite.failing_count or suite.failed_tests:
            suite.status = SUITE_FAILED
        else:
            suite.status = SUITE_PASSED
    return result


def parse_log_file(path: str) -> RunResult:
    """RunResult of a run_test.py log (or an EasyBuild log holding it); PluginError for unreadable input."""
    data = read_bytes(path)
    if b'\0' in data[:8192]:
        raise PluginError(path, 'is a binary file, not a test log')
    return parse_log_text(data.decode('utf-8', 'replace'), source=str(path))
