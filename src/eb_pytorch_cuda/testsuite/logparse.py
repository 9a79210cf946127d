"""Parse the console output of PyTorch's test/run_test.py (2.x) into the result model.

The log is cut into one chunk per suite at the lines run_test.py prints when it starts a suite
("Running test_nn 1/1 ... [time]") or replays a suite's log ("PRINTING LOG FILE of test_nn (...)").
Inside a chunk, every countable summary is added up (unittest "Ran N tests" + "OK"/"FAILED (...)",
pytest "=== 2 failed, 128 passed, ... in 3.4s ===") and failed test names are collected (unittest
"FAIL: test_x (mod.Class)", pytest "FAILED file.py::Class::test_x - ...", "AssertionError: N unit
test(s) failed:" lists).  The "<suite> [i/n] failed![ Received signal: SIGx]" lines decide which suites
failed, wherever they appear.  A suite that failed without anything countable, was killed by a signal,
or started and never finished, gets a status of its own: it is never "0 failures".
"""

import re

from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.inputs import read_bytes
from eb_pytorch_cuda.testsuite.model import (ERROR, FAILED, SUITE_FAILED, SUITE_INCOMPLETE, SUITE_PASSED,
                                             SUITE_TERMINATED, SUITE_UNCOUNTED, RunResult, TestCase)

MARKER = re.compile(r'^(?:Running (?P<run>\S+)(?: \d+/\d+)? \.\.\. \[|PRINTING LOG FILE of (?P<log>\S+) \()', re.M)
SUITE_FAILED_LINE = re.compile(
    r'^(?P<name>[\w./-]+) (?:\d+/\d+ )?failed!(?: Received signal: (?P<signal>\w+))?[^\n]*$', re.M)
UNITTEST_SUMMARY = re.compile(r'^Ran (?P<total>\d+) tests? in [\d.]+s[ \t]*\n(?:[ \t]*\n)*'
                              r'(?P<status>OK|FAILED)(?: \((?P<details>[^)\n]*)\))?[ \t]*$', re.M)
PYTEST_SUMMARY = re.compile(r'^=+ (?P<summary>[^=\n]*?\d+ (?:passed|failed|skipped|error|errors|xfailed|xpassed|'
                            r'deselected|rerun|warnings?)[^=\n]*?) in [\d.]+s(?: \([\d:]+\))? =+[ \t]*$', re.M)
UNITTEST_FAILED_TEST = re.compile(r'^(?P<kind>FAIL|ERROR): (?P<test>\w+) \((?P<where>[\w.]+)\)', re.M)
PYTEST_FAILED_TEST = re.compile(r'^(?P<kind>FAILED|ERROR) (?:\[[^\]\n]*\] )?[\w/.-]+\.py::(?:(?P<cls>\w+)::)?'
                                r'(?P<test>[^\s:]+)', re.M)
ASSERTION_LIST = re.compile(r'^AssertionError: (?P<count>\d+) unit test\(s\) failed:[ \t]*\n'
                            r'(?P<names>(?:[ \t]+\S[^\n]*\n?)+)', re.M)
PYTEST_KEYS = {'failed': 'failed', 'passed': 'passed', 'skipped': 'skipped', 'xfailed': 'xfailed',
               'xpassed': 'xpassed', 'rerun': 'rerun', 'error': 'errors', 'errors': 'errors'}


def _test_id(test, where):
    """'Class.test' from unittest's '(module.Class)' or Python 3.11's '(module.Class.test)'."""
    parts = where.split('.')
    if parts[-1] == test and len(parts) > 1:
        parts.pop()
    return f'{parts[-1]}.{test}'


def _chunks(text):
    """(suite name, chunk text) for each suite block of the log, in order."""
    marks = list(MARKER.finditer(text))
    for index, mark in enumerate(marks):
        end = marks[index + 1].start() if index + 1 < len(marks) else len(text)
        yield mark.group('run') or mark.group('log'), text[mark.end():end]


def _count(chunk, counts):
    """Add the countable summaries of a chunk to counts; return whether there was any."""
    found = False
    for match in UNITTEST_SUMMARY.finditer(chunk):
        found = True
        details = {k.strip(): int(v) for k, v in
                   (item.split('=') for item in (match.group('details') or '').split(',') if '=' in item)}
        failed, errors = details.get('failures', 0), details.get('errors', 0)
        skipped, xfailed = details.get('skipped', 0), details.get('expected failures', 0)
        xpassed = details.get('unexpected successes', 0)
        counts['failed'] += failed
        counts['errors'] += errors
        counts['skipped'] += skipped
        counts['xfailed'] += xfailed
        counts['xpassed'] += xpassed
        counts['passed'] += max(0, int(match.group('total')) - failed - errors - skipped - xfailed - xpassed)
    for match in PYTEST_SUMMARY.finditer(chunk):
        found = True
        for number, word in re.findall(r'(\d+) (\w+)', match.group('summary')):
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


def parse_log_text(text, source='log'):
    """RunResult of one run_test.py console output (text); raise PluginError when nothing in it is recognized."""
    result = RunResult()
    counted = set()
    for name, chunk in _chunks(text):
        suite = result.suite(name)
        if 'log' not in suite.sources:
            suite.sources.append('log')
        if _count(chunk, suite.counts):
            counted.add(name)
        known = {t.test_id for t in suite.failed_tests}
        suite.failed_tests += [TestCase(test_id, state) for test_id, state in _failed_tests(chunk).items()
                               if test_id not in known]
    failed = {}
    for match in SUITE_FAILED_LINE.finditer(text):
        failed[match.group('name')] = failed.get(match.group('name')) or match.group('signal')
    if not result.suites and not failed:
        raise PluginError(source, 'no run_test.py output found (no "Running <suite> ..." line and no summary)')
    for name, suite in result.suites.items():
        if name in failed:
            continue
        if name not in counted:
            suite.status = SUITE_INCOMPLETE
        elif suite.failing_count:
            suite.status = SUITE_FAILED
    for name, signal in failed.items():
        suite = result.suite(name)
        if 'log' not in suite.sources:
            suite.sources.append('log')
        if signal:
            suite.status, suite.signal = SUITE_TERMINATED, signal
        elif name in counted and (suite.failing_count or suite.failed_tests):
            suite.status = SUITE_FAILED
        else:
            suite.status = SUITE_UNCOUNTED
    for suite in result.suites.values():
        if suite.status == SUITE_PASSED and suite.failed_tests:
            suite.status = SUITE_FAILED
    return result


def parse_log_file(path):
    """RunResult of a run_test.py log (or an EasyBuild log holding it); PluginError for unreadable input."""
    data = read_bytes(path)
    if b'\0' in data[:8192]:
        raise PluginError(path, 'is a binary file, not a test log')
    return parse_log_text(data.decode('utf-8', 'replace'), source=str(path))
