"""A log is complete or it says where it ends: every line prefix of every kept real run_test.py log.

A log cut by a full disk or a killed job is a prefix of the whole.  The real 2.6.0 plain log (itself a FAIL) cut
after 60, 85, 110 or 135 lines shows pool suites that ran only their `-m serial` session (0 tests), their main
sessions never started: read naively, a PASS.  Here each kept real log is
cut after each of its lines and in the middle of each (half its characters), read in this process (the reader
and the policy, as `report` runs them), and:
- a prefix that shows it is cut names the suite where it ends (SUITE_INCOMPLETE or SUITE_MISSING, with a note),
  so it fails under any policy that does not name that suite; a prefix that names no suite at all is refused
  (`report` exits 2) with the reason;
- where a 2.6 log's prefix shows no cut, it says all the whole log says (it ends after run_test.py's closing
  line: only the repeated `X failed!` list is left);
- the 2.1 line prints no selection and no closing line (tests/data/pytorch21/record.py's harness, its
  run_test.py main()): a 2.1 prefix that shows no cut ends between two suites, says of each suite what the
  whole log says, and carries the note that such a log cannot show its end;
- no prefix of a FAIL log passes.
The concatenation tests: a log holding two runs counts each failing test once, names the runs, and judges a run
cut inside the second copy as cut.  tests/test_log_cuts_cli.py runs the real console script on a few prefixes.
"""

import glob
import os
from typing import NamedTuple

import pytest

from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.testsuite.policy.judging import KnownFailure, Policy, judge
from eb_pytorch_cuda.testsuite.policy.report import to_text
from eb_pytorch_cuda.testsuite.results.logparse import parse_log_text
from eb_pytorch_cuda.testsuite.results import grammar
from eb_pytorch_cuda.testsuite.results.model import SUITE_INCOMPLETE, SUITE_MISSING, SUITE_TERMINATED
from helpers import run_main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, 'tests', 'data')
# the real run_test.py outputs kept verbatim: the 2.1-line harness's (record.py beside them) and PyTorch 2.6.0's
REAL_21 = sorted(glob.glob(os.path.join(DATA, 'pytorch21', '*.log')) +
                 glob.glob(os.path.join(DATA, 'pytorch21-pieces', '*.log')))
REAL_26 = [os.path.join(DATA, path) for path in (
    'pytorch26-plain/plain.log', 'pytorch26-plain/batch.log', 'pytorch26-interleaved-summary/plain.log',
    'pytorch26-start-after-test/plain-run6.log', 'pytorch26-start-after-test/plain-run21.log',
    'pytorch26-interleaved-headers/plain-run5.log', 'pytorch26-interleaved-headers/plain-run11.log',
    'pytorch_corpus/logs/real-run_test-2.6.0-plain.log', 'pytorch_corpus/logs/real-run_test-2.6.0-pipe-logs.log',
    'pytorch_corpus/real-2.6.0-ci/run_test.log')]
# written by hand (pytorch_corpus/CASES.md): the shape of the markers, no real run's whole output
HAND_WRITTEN = {'pytorch_corpus/logs/' + name for name in (
    'excerpt-assertion-list.log', 'excerpt-pytest-failed-line.log', 'excerpt-pytest-finished-marker.log',
    'excerpt-runtimeerror-signal.log', 'excerpt-unittest-failed-line.log', 'run_test-2.6-pipe-logs.log',
    'run_test-2.6-plain.log', 'truncated-between-shards.log')}
PLAIN26 = os.path.join(DATA, 'pytorch_corpus', 'logs', 'real-run_test-2.6.0-plain.log')
PLAIN21 = os.path.join(DATA, 'pytorch21', 'plain.log')
CUT = (SUITE_INCOMPLETE, SUITE_MISSING)
NOTHING_NAMED = ('no run_test.py output found', "no suite ran: the log ends at run_test.py's list")
NO_END_21 = 'run_test.py printed no list of the suites it would run'


def _read(path):
    with open(path, encoding='utf-8') as handle:
        return handle.read()


def _name(path):
    return os.path.relpath(path, DATA)


def _outcomes(result):
    """{suite: (status, counts, failed test ids)}: what a result says of each suite."""
    return {name: (suite.status, suite.counts.to_json(), [test.test_id for test in suite.failed_tests])
            for name, suite in result.suites.items()}


class Prefix(NamedTuple):
    """A log cut: its first `lines` lines (a half: and half of the next one's characters)."""
    lines: float
    text: str


def _prefixes(text):
    """Each line prefix of text but text itself, and each prefix plus half of the next line."""
    position = 0
    for number, line in enumerate(text.splitlines(keepends=True)):
        half = position + len(line) // 2
        if position < half:
            yield Prefix(number + 0.5, text[:half])
        position += len(line)
        if position < len(text):
            yield Prefix(number + 1, text[:position])


def test_every_kept_log_is_real_or_known_to_be_hand_written():
    kept = {_name(path) for path in glob.glob(os.path.join(DATA, '**', '*.log'), recursive=True)}
    assert kept == {_name(path) for path in REAL_21 + REAL_26} | HAND_WRITTEN
    assert len(REAL_21) == 11 and len(REAL_26) == 10


@pytest.mark.parametrize('path', REAL_21 + REAL_26, ids=_name)
def test_every_prefix_of_a_real_log_fails_or_says_all_the_whole_log_says(path):
    text = _read(path)
    whole = parse_log_text(text, path)
    whole_passes = judge(whole, Policy()).passed
    has_selection = path in REAL_26
    checked, shown_cut, refused, uncut = 0, 0, 0, []
    for prefix in _prefixes(text):
        checked += 1
        where = (_name(path), prefix.lines)
        try:
            result = parse_log_text(prefix.text, path)
        except PluginError as err:  # `report` exits 2: only where the prefix names no suite
            assert any(reason in str(err) for reason in NOTHING_NAMED), (where, str(err))
            assert grammar.RUNNING_MARKER.search(prefix.text) is None, where  # not a suite announced
            refused += 1
            continue
        verdict = judge(result, Policy())
        cut = [suite for suite in result.suites.values() if suite.status in CUT]
        if cut:
            shown_cut += 1
            report = to_text(result, verdict)
            for suite in cut:  # named, with where the log ends
                assert suite.note and f'{suite.name} ({suite.status}: {suite.note})' in report, where
            assert not verdict.passed, where
            # a policy knowing every failed test still fails it: only naming the cut suite could pass it
            knowing = Policy(1 << 20, [KnownFailure(f'{suite.name}::*', 'known') for suite in result.suites.values()])
            assert not judge(result, knowing).passed, where
            continue
        uncut.append(prefix.lines)
        if has_selection:  # after run_test.py's closing line: all the whole log says
            assert _outcomes(result) == _outcomes(whole), where
        else:  # 2.1: between two suites, each as the whole log says, and the note that such a log cannot tell
            assert {name: _outcomes(whole)[name] for name in result.suites} == _outcomes(result), where
            assert any(NO_END_21 in note for note in result.notes), where
        assert verdict.passed <= whole_passes, where
    lines = text.splitlines(keepends=True)
    assert checked == len(lines) - 1 + sum(len(line) > 1 for line in lines)  # each line's end (but the last) and middle
    if has_selection:
        closing = max(number for number, line in enumerate(lines, 1) if line.startswith('Running test batch '))
        assert all(lines >= closing for lines in uncut)  # only after the closing line
    print(f'{_name(path)}: {checked} prefixes, {shown_cut} cut and named, {refused} refused, {len(uncut)} uncut')


@pytest.mark.parametrize('lines', [60, 85, 110, 135])
def test_the_real_26_plain_log_cut_where_it_used_to_pass_fails_naming_the_suites(tmp_path, lines):
    """The four cuts that said `verdict: PASS` before (and each plus half a line: the walk above)."""
    cut = tmp_path / 'cut.log'
    cut.write_text(''.join(_read(PLAIN26).splitlines(keepends=True)[:lines]))
    done = run_main('report', cut)
    assert done.returncode == 1 and 'verdict: FAIL' in done.stdout
    if lines == 60:  # only test_show_pickle of the 4 the selection lists has run
        for name in ('test_ebdemo_abort', 'test_ebdemo_fail', 'test_function_schema'):
            assert f'{name} (missing: listed by run_test.py (`Name: tests to run`, line 10), never ran)' in done.stdout
    else:  # the pool suites that ran only their `-m serial` session
        ran = {85: ['test_ebdemo_abort'], 110: ['test_ebdemo_abort', 'test_ebdemo_fail'],
               135: ['test_ebdemo_abort', 'test_ebdemo_fail', 'test_function_schema']}[lines]
        for name in ran:
            assert f'{name} (no summary: only its `-m serial` run ran: the log ends before its main run' \
                   in done.stdout


def test_a_cut_inside_a_suite_names_it():
    lines = _read(PLAIN26).splitlines(keepends=True)
    result = parse_log_text(''.join(lines[:200]))  # the pool: three main runs begun, none ended
    suite = result.suites['test_ebdemo_abort']
    assert suite.status == SUITE_INCOMPLETE and suite.note.startswith('the log ends inside it')
    # 2.1: a passed suite's log replayed whole, its summary read, its FINISHED line not
    lines = _read(PLAIN21).splitlines(keepends=True)
    end = next(number for number, line in enumerate(lines)
               if line.startswith('FINISHED PRINTING LOG FILE of test_per_overload_api '))
    suite = parse_log_text(''.join(lines[:end])).suites['test_per_overload_api']
    assert suite.counts.passed == 3 and suite.status == SUITE_INCOMPLETE
    assert suite.note == ('the log ends inside its replayed log (`PRINTING LOG FILE of test_per_overload_api 1/1`, '
                          'no `FINISHED PRINTING LOG FILE of test_per_overload_api 1/1`)')


def test_a_cut_before_the_closing_line_names_the_suite_that_ended_last():
    lines = _read(PLAIN26).splitlines(keepends=True)
    closing = next(number for number, line in enumerate(lines) if line.startswith('Running test batch '))
    result = parse_log_text(''.join(lines[:closing]))
    assert result.suites['test_function_schema'].status == SUITE_INCOMPLETE
    assert "before run_test.py's last line" in result.suites['test_function_schema'].note
    assert result.suites['test_function_schema'].failed_tests  # its failure still counts
    assert _outcomes(parse_log_text(''.join(lines[:closing + 1]))) == _outcomes(parse_log_text(''.join(lines)))


@pytest.mark.parametrize('path, runs_at', [(PLAIN26, (10, 411)), (PLAIN21, (4, 187))], ids=['2.6', '2.1'])
def test_a_log_holding_two_runs_counts_each_failing_test_once_and_names_the_runs(path, runs_at):
    text = _read(path)
    once, twice = parse_log_text(text), parse_log_text(text + text, 'twice.log')
    assert _outcomes(twice) == _outcomes(once)  # before: 2.6: 4 failures, 2 of them without a test id
    assert f'twice.log holds 2 runs of run_test.py (from lines {runs_at[0]}, {runs_at[1]})' in twice.notes[0]
    failing = sum(suite.failing_count for suite in once.suites.values())
    assert failing == 2 if path == PLAIN26 else failing == 1
    aborts = [KnownFailure('test_ebdemo_abort', 'aborts by design')]  # killed by SIGIOT: known, so the budget decides
    assert judge(twice, Policy(failing, aborts)).passed and not judge(twice, Policy(failing - 1, aborts)).passed


def test_the_second_run_cut_fails_though_the_first_is_whole():
    text = _read(PLAIN26)
    lines = text.splitlines(keepends=True)
    result = parse_log_text(text + ''.join(lines[:85]))  # the second copy cut where a naive read passes
    assert {result.suites[name].status for name in ('test_ebdemo_fail', 'test_function_schema')} == {SUITE_MISSING}
    abort = result.suites['test_ebdemo_abort']  # killed in the first run: the worse of its two outcomes
    assert (abort.status, abort.signal) == (SUITE_TERMINATED, 'SIGIOT')
    assert 'holds 2 runs' in result.notes[0]


def test_the_step_output_of_three_batches_is_three_runs():
    """The H200 record's test-step output: one run_test.py run per batch, appended (docs/validation)."""
    path = os.path.join(ROOT, 'docs', 'validation', 'h200-2026-12-02-eb-complete', 'output-unpatched.log')
    result = parse_log_text(_read(path), 'output.log')
    assert 'output.log holds 3 runs of run_test.py (from lines 7, 798, 831)' in result.notes[0]
    assert not any(suite.status in CUT for suite in result.suites.values())
