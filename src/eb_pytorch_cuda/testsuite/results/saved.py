"""Load test results from logs, XML report directories and saved JSON, and merge them into one RunResult.

XML reports are the more precise source (every test case, its state and reruns); the log is the only
source for what XML cannot say: suites killed by a signal, suites that failed before writing a report,
suites that never finished.  Merging keeps XML counts and failed tests, and the log's status wherever
the log says the suite could not be judged.  Backend variants (`dist-gloo/<suite>` in XML, `<suite>`
in the log) stay apart; the log's word on the suite applies to each of them.

Completeness: every suite that was announced (a `Running X` line), listed by discovery (`run_test.py
--dry-run`) or otherwise expected must end with an outcome; mark_missing() adds the others as
SUITE_MISSING, which fails the verdict unless a known failure names the suite.  A saved result holds
those entries, so re-judging it applies the same rule.
"""

import json
import os
from typing import Any, Iterable, NoReturn, Optional

from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.inputs import read_bytes
from eb_pytorch_cuda.testsuite.results.logparse import parse_log_file
from eb_pytorch_cuda.testsuite.results.model import (COUNT_KEYS, CUDA_COUNT_KEYS, RERUN_OUTCOMES, SUITE_FAILED,
                                                     SUITE_MISSING, SUITE_STATES, SUITE_TERMINATED, TEST_STATES,
                                                     UNJUDGEABLE, RunResult, Suite)
from eb_pytorch_cuda.testsuite.results.reportdirs import variant_of
from eb_pytorch_cuda.testsuite.results.scopes import ScopeContext
from eb_pytorch_cuda.testsuite.results.seconds import NotSeconds, seconds_of
from eb_pytorch_cuda.testsuite.results.xmlparse import parse_report_dir

RESULT_FORMAT = 'eb-pytorch-cuda-test-results'
MAX_DEPTH = 8  # a saved result nests 5 deep (document, suites, suite, failed_tests, test)
MAX_COUNT = 10 ** 9


def _variant_index(result):
    """{suite: [its XML backend variants `dist-<backend>.../<suite>`]} of result."""
    index: dict = {}
    for key, suite in result.suites.items():
        plain = variant_of(key)
        if plain is not None:
            index.setdefault(plain, []).append(suite)
    return index


def merge(primary: RunResult, secondary: RunResult) -> RunResult:
    """Merge secondary (a log) into primary (XML); return primary.  No failure of either side is lost:
    failures the log counted and the reports lack are added, and a status the log could not judge wins
    (except over counted XML failures, unless the suite was killed by a signal).  secondary's notes (on its input
    as a whole) are kept too."""
    variants = _variant_index(primary)
    primary.notes += [note for note in secondary.notes if note not in primary.notes]
    for name, suite in secondary.suites.items():
        targets = [primary.suites[name]] if name in primary.suites else variants.get(name, [])
        if not targets:
            primary.suites[name] = suite
            continue
        xml_failing = sum(target.failing_count for target in targets)
        for target in targets:
            for source in suite.sources:
                if source not in target.sources:
                    target.sources.append(source)
            if target.status in UNJUDGEABLE and suite.status != SUITE_TERMINATED:
                continue  # the reports already say it cannot be judged; a signal from the log says more
            if suite.status in UNJUDGEABLE and not (suite.status != SUITE_TERMINATED and xml_failing):
                target.status, target.signal, target.note = suite.status, suite.signal, suite.note
        if not xml_failing and (suite.failing_count or suite.failed_tests):
            first = targets[0]  # failures only the log saw: keep them
            first.counts['failed'] += suite.counts['failed']
            first.counts['errors'] += suite.counts['errors']
            known = {t.test_id for t in first.failed_tests}
            first.failed_tests += [t for t in suite.failed_tests if t.test_id not in known]
            if first.status not in UNJUDGEABLE:
                first.status = SUITE_FAILED
    return primary


def mark_missing(result: RunResult, expected_suites: Iterable[str]) -> list:
    """Add every suite of expected_suites that has no outcome in result as SUITE_MISSING; return their names.

    expected_suites: suite names as run_test.py spells them ('dynamo/test_functions'), e.g. the list of
    `run_test.py --dry-run` (discovery) or the suites an easyconfig expects.  A suite counts as present
    when result holds it or one of its backend variants ('dist-gloo/<suite>').  A missing suite fails
    the verdict (policy/judging.judge treats it like a crash) unless a known failure names the whole suite.
    """
    missing, variants = [], _variant_index(result)
    for name in expected_suites:
        name = name.strip()
        if name and name not in result.suites and name not in variants:
            result.suites[name] = Suite(name, status=SUITE_MISSING, sources=['expected'],
                                        note='expected, but no outcome was recorded')
            missing.append(name)
    return missing


def read_expected_suites(path: str) -> list:
    """Suite names, one a line ('#' comments), or the `Selected tests:` list of run_test.py --dry-run."""
    text = read_bytes(path).decode('utf-8', 'replace')
    names = []
    for line in text.splitlines():
        line = line.split('#', 1)[0].strip()
        if not line or line.endswith(':'):
            continue
        if any(c.isspace() for c in line) or len(line) > 300:
            raise PluginError(path, f'line {line[:60]!r} is not a suite name')
        names.append(line)
    return names


def _refuse(path, where, problem):
    raise PluginError(path, f'{where}: {problem}')


def _is_count(value):
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT


def _check_depth(path, data):
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            _refuse(path, 'document', f'nested deeper than {MAX_DEPTH} levels')
        if isinstance(value, dict):
            stack += [(item, depth + 1) for item in value.values()]
        elif isinstance(value, list):
            stack += [(item, depth + 1) for item in value]


def _check_text(path, where, value, optional=False):
    """A non-empty string, of any length and any characters: what the parsers take from a log or an XML
    report (a parametrized test id of 10,000 characters, an XML name holding a newline) is written as it
    is, so it must read back; whatever prints it escapes it (eb_pytorch_cuda.escape)."""
    if value is None and optional:
        return
    if not isinstance(value, str) or not value:
        _refuse(path, where, f'must be a non-empty string, got {value!r:.60}')


def _check_scope(path, scope):
    """The scope a judged run recorded (report.to_json): where its known failures applied, and the target a
    --suggest-policy run of it gets (ScopeContext.json_problem says what it may hold)."""
    problem = ScopeContext.json_problem(scope)
    if problem:
        _refuse(path, *problem)


def _check_test(path, where, test):
    if not isinstance(test, dict):
        _refuse(path, where, 'must be an object')
    unknown = set(test) - {'test_id', 'state', 'reruns', 'rerun_outcome'}
    if unknown or 'test_id' not in test or 'state' not in test:
        _refuse(path, where, f"needs test_id and state, and no other key than reruns, rerun_outcome "
                             f"(unknown: {', '.join(sorted(unknown)) or 'none'})")
    _check_text(path, f'{where}.test_id', test['test_id'])
    if test['state'] not in TEST_STATES:
        _refuse(path, f'{where}.state', f"{test['state']!r:.40} is not one of {', '.join(TEST_STATES)}")
    if not _is_count(test.get('reruns', 0)):
        _refuse(path, f'{where}.reruns', f"must be an integer from 0 to {MAX_COUNT}, got {test['reruns']!r:.40}")
    if test.get('rerun_outcome') not in (None,) + RERUN_OUTCOMES:
        _refuse(path, f'{where}.rerun_outcome', f"{test['rerun_outcome']!r:.40} is not flaky or reproducible")


SUITE_KEYS = {'name', 'status', 'counts', 'failed_tests', 'signal', 'sources', 'rerun_outcome', 'seconds', 'note',
              'cuda_counts'}


def check_suite(path: str, where: str, suite: Any) -> None:
    """PluginError (path: where...: problem) unless suite is a suite of the model's shape, as a saved result and
    a results-store record (run/store, results/records) hold it."""
    if not isinstance(suite, dict):
        _refuse(path, where, 'must be an object')
    unknown = set(suite) - SUITE_KEYS
    if unknown or 'name' not in suite:
        _refuse(path, where, f"needs a name and no unknown key (unknown: {', '.join(sorted(unknown)) or 'none'})")
    _check_text(path, f'{where}.name', suite['name'])
    if suite.get('status', 'passed') not in SUITE_STATES:
        _refuse(path, f'{where}.status', f"{suite['status']!r:.40} is not one of {', '.join(SUITE_STATES)}")
    counts = suite.get('counts', {})
    if not isinstance(counts, dict) or set(counts) - set(COUNT_KEYS):
        _refuse(path, f'{where}.counts', f"must map only {', '.join(COUNT_KEYS)} to counts")
    for key, value in counts.items():
        if not _is_count(value):
            _refuse(path, f'{where}.counts.{key}', f'must be an integer from 0 to {MAX_COUNT}, got {value!r:.40}')
    tests = suite.get('failed_tests', [])
    if not isinstance(tests, list):
        _refuse(path, f'{where}.failed_tests', 'must be a list')
    for number, test in enumerate(tests):
        _check_test(path, f'{where}.failed_tests[{number}]', test)
    _check_text(path, f'{where}.signal', suite.get('signal'), optional=True)
    _check_text(path, f'{where}.note', suite.get('note'), optional=True)
    sources = suite.get('sources', [])
    if not isinstance(sources, list) or not all(isinstance(s, str) and len(s) < 64 for s in sources):
        _refuse(path, f'{where}.sources', 'must be a list of short strings')
    if suite.get('rerun_outcome') not in (None,) + RERUN_OUTCOMES:
        _refuse(path, f'{where}.rerun_outcome', f"{suite['rerun_outcome']!r:.40} is not flaky or reproducible")
    cuda = suite.get('cuda_counts')
    if cuda is not None and (not isinstance(cuda, dict) or set(cuda) != set(CUDA_COUNT_KEYS)
                             or not all(_is_count(value) for value in cuda.values())):
        _refuse(path, f'{where}.cuda_counts', f"must be null or map {', '.join(CUDA_COUNT_KEYS)} to integers from 0 "
                                              f'to {MAX_COUNT}')
    seconds = suite.get('seconds')
    if seconds is not None:
        try:
            seconds_of(seconds)
        except NotSeconds as err:
            _refuse(path, f'{where}.seconds', str(err))


def no_constants(name: str) -> NoReturn:
    """json.loads parse_constant: NaN and Infinity are no number JSON allows (nor a count or a time)."""
    raise ValueError(f'{name} is not a number JSON allows')


def validate_saved(path: str, data: Any) -> None:
    """PluginError (one line, naming the file and the place) unless data is a saved result we wrote:
    the format tag, suites of the model's shape, known states, counts that are integers in range,
    finite non-negative seconds, unique suite names, at most MAX_DEPTH levels of nesting."""
    if not isinstance(data, dict) or data.get('format') != RESULT_FORMAT or 'suites' not in data:
        raise PluginError(path, f'is not a saved {RESULT_FORMAT} JSON file')
    _check_depth(path, data)
    if not isinstance(data['suites'], list):
        _refuse(path, 'suites', 'must be a list')
    if 'scope' in data:
        _check_scope(path, data['scope'])
    names = set()
    for index, suite in enumerate(data['suites']):
        check_suite(path, f'suites[{index}]', suite)
        if suite['name'] in names:
            _refuse(path, f'suites[{index}].name', f"{suite['name']!r:.60} appears twice")
        names.add(suite['name'])


def load_saved(path: str) -> RunResult:
    """The RunResult of a JSON document written by `report --format json` or the test step; strict."""
    return RunResult.from_dict(read_saved(path))


def read_saved(path: str) -> dict:
    """The JSON document at path, checked as a saved result (validate_saved): its other keys (the terms it was
    judged by: policy/settings.terms_of) are for their readers to check."""
    raw = read_bytes(path)
    try:
        data = json.loads(raw.decode('utf-8'), parse_constant=no_constants)
    except RecursionError:
        raise PluginError(path, f'is not a saved result: nested deeper than {MAX_DEPTH} levels') from None
    except (ValueError, UnicodeDecodeError) as err:
        raise PluginError(path, f'is not a readable JSON result ({err})') from None
    validate_saved(path, data)
    return data


def recorded_context(path: str) -> Optional[ScopeContext]:
    """Where the judged run saved at path ran, as it recorded it (scopes.ScopeContext.from_json): None for a log,
    an XML report directory, or a saved result that recorded no target."""
    if os.path.isdir(path) or not str(path).endswith('.json'):
        return None
    scope = read_saved(path).get('scope')
    return ScopeContext.from_json(scope) if isinstance(scope, dict) else None


def common_context(paths: Iterable[str]) -> Optional[ScopeContext]:
    """Where the runs saved among paths ran, when each saved result that recorded it recorded the same: a report
    judges them there (their known failures of compute capability 9.0 apply, wherever the report runs); None
    when none recorded one, or they differ (each is then a run of its own for a suggestion)."""
    found = {context for context in map(recorded_context, paths) if context is not None}
    return found.pop() if len(found) == 1 else None


def load_results(paths: Iterable[str], parsed: Optional[dict] = None) -> RunResult:
    """One RunResult from any mix of run_test.py logs, XML report directories and saved JSON results;
    parsed: {log path: its RunResult} of logs a caller has already read (not read again)."""
    xml, logs, saved = RunResult(), [], []
    for path in paths:
        if os.path.isdir(path):
            merge(xml, parse_report_dir(path))
        elif str(path).endswith('.json'):
            saved.append(load_saved(path))
        elif os.path.lexists(path):
            logs.append(parsed[path] if parsed and path in parsed else parse_log_file(path))
        else:
            raise PluginError(path, 'no such file or directory')
    result = xml
    for other in logs + saved:
        result = merge(result, other) if result.suites else other
    return result
