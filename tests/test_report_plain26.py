"""`report` on a PLAIN run_test.py log of the 2.6 line, the log a maintainer copies from a failed EasyBuild bot
job.

The log is real and kept verbatim (tests/data/pytorch26-plain, README.md there): Debian's PyTorch 2.6.0 harness
with its own pytest.ini, a pool of 3, torch 2.14.1, 13 suites, two tests failing consistently (each run three
times by run_test_retries), a suite that collects no test and exits 0, three pool workers' output interleaved
mid-line.  TRUTH is each suite's outcome as the log's own lines show it, worked out by hand from every pytest
session in it (README.md lists them); the batch log that `test-suite` wrote for the same selection
(`--pipe-logs`) must give the same tests ran, where it prints their number.
"""

import json
import os
import re

import pytest

from eb_pytorch_cuda.cli import main
from eb_pytorch_cuda.testsuite.results.logparse import parse_log_file, parse_log_text

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'data', 'pytorch26-plain')
PLAIN = os.path.join(DATA, 'plain.log')
BATCH = os.path.join(DATA, 'batch.log')
# suite: (status, non-zero counts, failing test ids)
TRUTH = {
    'test_cuda_primary_ctx': ('passed', {}, []),  # `no tests collected`, exit 0 (no GPU)
    'test_function_schema': ('failed', {'failed': 1, 'passed': 14, 'rerun': 6},
                             ['TestFunctionSchema.test_serialize_and_deserialize']),
    'test_import_stats': ('passed', {'passed': 2}, []),
    'test_itt': ('passed', {'passed': 1}, []),
    'test_license': ('failed', {'failed': 1, 'skipped': 1, 'rerun': 6}, ['TestLicense.test_distinfo_license']),
    'test_logging': ('passed', {'passed': 1}, []),
    'test_mkl_verbose': ('passed', {'passed': 2}, []),
    'test_mkldnn_verbose': ('passed', {'passed': 2}, []),
    'test_native_functions': ('passed', {'passed': 11}, []),
    'test_per_overload_api': ('passed', {'passed': 3}, []),
    'test_set_default_mobile_cpu_allocator': ('passed', {'passed': 2}, []),
    'test_show_pickle': ('passed', {'passed': 1}, []),
    'test_type_info': ('passed', {'passed': 5}, []),
}
FAILING = sum(len(ids) for _status, _counts, ids in TRUTH.values())  # 2


def outcomes(suites):
    """{suite: (status, non-zero counts, failing ids)} of report's JSON suites."""
    return {suite['name']: (suite['status'], {key: value for key, value in suite['counts'].items() if value},
                            [test['test_id'] for test in suite['failed_tests']]) for suite in suites}


def _report(capsys, *args):
    code = main(['report', *args, '--format', 'json'])
    return code, json.loads(capsys.readouterr().out)


def test_the_kept_log_is_the_real_interleaved_pool_output():
    with open(PLAIN) as handle:
        text = handle.read()
    assert 'Running parallel tests on 3 processes' in text
    # interleaved: a worker's summary list glued to another's test line, as the issue saw it
    assert "test_mkldnn_verbose.py::TestMKLDNNVerbose::test_verbose_off The following tests failed consistently: " \
           "['test/test_license.py::TestLicense::test_distinfo_license']" in text
    assert text.count('Retrying single test...') == 4 and 'no tests collected in ' in text
    assert text.rstrip().endswith('test_function_schema 1/1 failed!\ntest_license 1/1 failed!')


def test_report_gives_the_true_suites_counts_and_failing_ids(capsys):
    _code, data = _report(capsys, PLAIN)
    assert outcomes(data['suites']) == TRUTH
    assert sum(sum(counts.get(key, 0) for key in ('passed', 'failed', 'skipped'))
               for _status, counts, _ids in TRUTH.values()) == 47


@pytest.mark.parametrize('budget, code', [(FAILING, 0), (FAILING - 1, 1)])
def test_the_verdict_passes_at_the_true_number_of_failing_tests_and_fails_below(capsys, budget, code):
    got, data = _report(capsys, PLAIN, '--max-failed-tests', str(budget))
    assert got == code and data['verdict'] == ('pass' if code == 0 else 'fail')
    assert sorted((item['suite'], item['test']) for item in data['unknown_failures']) == [
        ('test_function_schema', 'TestFunctionSchema.test_serialize_and_deserialize'),
        ('test_license', 'TestLicense.test_distinfo_license')]


def test_each_consistent_failure_counts_once_and_a_zero_test_suite_passes():
    result = parse_log_file(PLAIN)
    # each failing test printed three `1 failed` summaries (the first run and two isolated reruns)
    assert [result.suites[name].failing_count for name in ('test_function_schema', 'test_license')] == [1, 1]
    assert result.suites['test_cuda_primary_ctx'].note == 'exit 0 without a countable summary: passed with 0 tests'


def test_the_batch_log_counts_the_tests_each_passed_suite_ran(capsys):
    """test-suite's own batch log (--pipe-logs) prints `X 1/1 was successful, full logs ...` and the suite's
    `Running N items in this shard` lines for a passed suite: N tests ran (how many were skipped is only in the
    suite's own log: said in a note), the failed ones' whole logs."""
    code, data = _report(capsys, BATCH, '--max-failed-tests', str(FAILING))
    assert code == 0, data
    got = outcomes(data['suites'])
    assert set(got) == set(TRUTH)
    for name, (status, counts, ids) in TRUTH.items():
        ran = sum(counts.get(key, 0) for key in ('passed', 'skipped', 'xfailed'))
        assert got[name][0] == status and got[name][2] == ids, name
        assert sum(got[name][1].get(key, 0) for key in ('passed', 'skipped', 'xfailed')) == ran, name
    notes = {suite['name']: suite['note'] for suite in data['suites']}
    assert notes['test_type_info'].startswith('passed counts the 5 test(s) it ran')


def test_without_the_harness_list_each_rerun_failing_test_still_counts_once():
    """The log cut before test_function_schema's `The following tests failed consistently` line: its first run and
    two isolated reruns printed `1 failed` each; the failing test counts once, not three times."""
    from eb_pytorch_cuda.testsuite.results.logparse import parse_log_text
    with open(PLAIN) as handle:
        text = handle.read()
    cut = text[:text.index("The following tests failed consistently: ['test/test_function_schema.py")]
    assert cut.count('1 failed, 14 deselected, 2 rerun') == 2  # its two isolated reruns are in the cut log
    suite = parse_log_text(cut).suites['test_function_schema']
    assert (suite.counts['failed'], suite.counts['errors']) == (1, 0)
    assert [test.test_id for test in suite.failed_tests] == ['TestFunctionSchema.test_serialize_and_deserialize']


INTERLEAVED = os.path.join(os.path.dirname(DATA), 'pytorch26-interleaved-summary', 'plain.log')


def test_a_summary_written_after_another_workers_unfinished_line_is_credited_to_the_session_it_fits():
    """A real plain log of the 2.6 pool (tests/data/pytorch26-interleaved-summary, README.md there) where
    test_native_functions' summary follows test_piece_standin's unfinished test line: it is credited to the one open
    session it fits (test_native_functions': 11 selected, 11 passed), not to the suite the line names, and
    test_piece_standin keeps its own counts and its failure."""
    with open(INTERLEAVED) as handle:
        lines = handle.read().splitlines()
    assert lines[133] == ('test_piece_standin.py::TestPieces::test_12 ======================== 11 passed, 2 warnings '
                          'in 0.75s ========================')
    result = parse_log_file(INTERLEAVED)
    native, standin = result.suites['test_native_functions'], result.suites['test_piece_standin']
    assert native.status == 'passed' and (native.counts.passed, native.counts.failed) == (11, 0) and not native.note
    assert standin.status == 'failed' and (standin.counts.passed, standin.counts.failed) == (16, 1)
    assert [test.test_id for test in standin.failed_tests] == ['TestPieces.test_zz_known_failure']


def test_a_summary_after_another_workers_line_that_fits_no_single_session_is_nobodys():
    """The same log with test_native_functions' summary changed to counts no open session selected (12 passed), then
    with test_piece_standin's header made to select 11 too (two sessions fit), then also without its ids (a session
    whose suite is not known fits too): in each the summary is credited to nobody, so test_native_functions reads
    `no summary` (a failure, never passed).  (Edited copies of the real log, for the cases no run showed.)"""
    with open(INTERLEAVED) as handle:
        text = handle.read()
    summary = '======================== 11 passed, 2 warnings in 0.75s ========================'
    assert text.count(summary) == 1
    unfitting = text.replace(summary, summary.replace(' 11 passed', ' 12 passed'))
    assert 'collecting ... collected 17 items\n' in text
    two_fit = text.replace('collecting ... collected 17 items\n', 'collecting ... collected 11 items\n', 1)
    # test_piece_standin's header without its ids: a session of a suite not known, that could be the one it fits
    header = re.search(r'^Running 17 items in this shard: [^\n]*$', text, re.M)
    assert header is not None
    unnamed_fits = two_fit.replace(header.group(), 'Running 11 items in this shard', 1)
    for edited in (unfitting, two_fit, unnamed_fits):
        native = parse_log_text(edited).suites['test_native_functions']
        assert native.status == 'no summary' and native.counts.passed == 0


def _outcomes_of(result):
    """outcomes() of a parsed RunResult's suites, as report's JSON gives them."""
    return outcomes(suite.to_json() for suite in result.suites.values())


def _started_on_one_line(text):
    """text with its first two pool starts (`Running test_function_schema 1/1 ... [date]`, `Running test_import_stats
    1/1 ... [date]`, 3 ms apart) written as 2.6's pool wrote two starts on 2026-12-07 (module test below)."""
    pool_start = r"\](\n)(?=SCRIBE_[^\n]*\nExecuting [^\n]*'-m', 'not serial')"
    first, second = (re.search(rf'^Running {name} 1/1 \.\.\. \[[^\]\n]*{pool_start}', text, re.M)
                     for name in ('test_function_schema', 'test_import_stats'))
    assert first is not None and second is not None and first.end() < second.start()
    return (text[:first.end() - 1] + second.group()[:-1] + '\n\n' + text[first.end():second.start()]
            + text[second.end():])


def test_two_suites_started_on_one_line_are_both_read():
    """2.6's pool workers print `Running X i/n ... [date]` and its newline in two writes (PYTHONUNBUFFERED=1), so two
    suites started at once can share a line: `Running test_itt 1/1 ... [2026-12-07 09:09:28.451325]Running
    test_function_schema 1/1 ... [2026-12-07 09:09:28.451325]` and an empty line came from the real harness in
    test_real_harness_plain26's batch log in a full test run on 2026-12-07 (2 cores, 3 pytest workers; not kept: the
    test's directory was removed), and that suite's main run read `no summary`.  Both starts are read now: the kept
    log with its first two pool starts written so (an edited copy of the real log, the race being rare) reads as the
    log itself, in the streaming reader and in the whole-text reference, and the batch splitter counts both runs."""
    import logparse_whole_text as reference
    from eb_pytorch_cuda.testsuite.results.splitting import announced_runs
    with open(PLAIN) as handle:
        text = handle.read()
    joined = _started_on_one_line(text)
    assert re.search(r'^Running test_function_schema 1/1 \.\.\. \[[^\]\n]*\]Running test_import_stats 1/1 \.\.\. '
                     r'\[[^\]\n]*\]\n\n', joined, re.M)
    assert _outcomes_of(parse_log_text(joined)) == _outcomes_of(parse_log_text(text)) == TRUTH
    assert _outcomes_of(reference.parse_log_text(joined)) == _outcomes_of(reference.parse_log_text(text))
    assert announced_runs(joined) == announced_runs(text)
    assert announced_runs(text)['test_import_stats'] == 2  # its `-m serial` run and its main run


START_AFTER_TEST = os.path.join(os.path.dirname(DATA), 'pytorch26-start-after-test')


@pytest.mark.parametrize('name, line, suite', [
    ('plain-run6.log', 788, 'test_type_info'), ('plain-run21.log', 482, 'test_logging')])
def test_a_suite_started_after_another_workers_unfinished_test_line_is_read(name, line, suite):
    """Real plain runs of the same selection on this 2-core VM under load (tests/data/pytorch26-start-after-test,
    README.md there): a suite's pool start came after another worker's test line still waiting for its result
    (`test_x.py::C::t Running Y 1/1 ... [date]`), and that suite read `no summary`.  It is read as started, and
    each run reads as the kept plain log does: every suite's status, counts and failing ids (TRUTH)."""
    path = os.path.join(START_AFTER_TEST, name)
    with open(path) as handle:
        text = handle.read().splitlines()[line - 1]
    assert re.fullmatch(rf'test_\w+\.py::\w+::\w+ Running {suite} 1/1 \.\.\. \[[^\]]*\]', text)
    assert _outcomes_of(parse_log_file(path)) == TRUTH


INTERLEAVED_HEADERS = os.path.join(os.path.dirname(DATA), 'pytorch26-interleaved-headers')


@pytest.mark.parametrize('name, lines', [('plain-run5.log', [254]), ('plain-run11.log', [269, 490])])
def test_session_headers_begun_inside_another_are_read_each_for_its_own_session(name, lines):
    """Real plain runs of the same selection under load (tests/data/pytorch26-interleaved-headers, README.md there):
    a session's `=== test session starts ===` came inside another's header or after another worker's unfinished test
    line, and the header lines after it finish the session begun first.  Each header line goes to the oldest open
    session still lacking it, so every suite reads as in the kept plain log (TRUTH): before, a `1 passed` summary went
    to the wrong session, test_function_schema counted too many tests and test_logging read `no summary`."""
    path = os.path.join(INTERLEAVED_HEADERS, name)
    with open(path) as handle:
        text = handle.read().splitlines()
    assert all(re.fullmatch(r'(?:collecting \.\.\. |test_\w+\.py::\w+::\w+ )=+ test session starts =+', text[line - 1])
               for line in lines)
    assert _outcomes_of(parse_log_file(path)) == TRUTH
