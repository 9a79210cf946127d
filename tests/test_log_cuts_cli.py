"""The console script's exit status on cut and doubled real run_test.py logs: 1 for a cut log,
naming where it ends; 2, one line, for a cut that names no suite; 0 for a log holding two runs whose failures, each
counted once, fit the budget.  tests/test_log_cuts.py walks every prefix in its own process; these are the few
runs of the real `eb-pytorch-cuda report` that check what a caller sees."""

import os

from helpers import cli

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'data')
PLAIN26 = os.path.join(DATA, 'pytorch_corpus', 'logs', 'real-run_test-2.6.0-plain.log')
PLAIN21 = os.path.join(DATA, 'pytorch21', 'plain.log')


def _lines(path, count):
    with open(path, encoding='utf-8') as handle:
        return ''.join(handle.readlines()[:count])


def test_the_26_log_cut_after_one_suite_exits_1_naming_the_three_missing(tmp_path):
    cut = tmp_path / 'cut.log'
    cut.write_text(_lines(PLAIN26, 60))  # was: `verdict: PASS`, exit 0
    done = cli('report', cut)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.count('(missing: listed by run_test.py (`Name: tests to run`, line 10), never ran)') == 3
    assert done.stdout.splitlines()[-1].startswith('verdict: FAIL: test_ebdemo_abort: missing')


def test_the_26_log_cut_after_a_serial_session_exits_1_naming_the_suite(tmp_path):
    cut = tmp_path / 'cut.log'
    cut.write_text(_lines(PLAIN26, 85) + 'Running test_ebdemo_fail 1/1 ... [2026-1')  # and half the next line
    done = cli('report', cut)
    assert done.returncode == 1
    assert 'test_ebdemo_abort (no summary: only its `-m serial` run ran: the log ends before its main run' \
           in done.stdout


def test_a_cut_inside_the_selection_exits_2_in_one_line(tmp_path):
    cut = tmp_path / 'cut.log'
    cut.write_text(_lines(PLAIN26, 11))  # `Name: tests to run ...`, `  Serial tests (1):`, no suite yet
    done = cli('report', cut)
    assert (done.returncode, done.stdout) == (2, '')
    assert done.stderr == (f"eb-pytorch-cuda: error: {cut}: no suite ran: the log ends at run_test.py's list of the "
                           f"suites it would run (`Name: tests to run`, line 10)\n")


def test_a_21_log_twice_counts_its_failure_once(tmp_path):
    twice = tmp_path / 'twice.log'
    with open(PLAIN21, encoding='utf-8') as handle:
        twice.write_text(handle.read() * 2)
    done = cli('report', twice, '--max-failed-tests', '1')  # was: `2 unknown failure(s), budget 1`, exit 1
    assert done.returncode == 0, done.stdout
    assert f'note: {twice} holds 2 runs of run_test.py (from lines 4, 187)' in done.stdout
