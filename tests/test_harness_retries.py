"""How many times PyTorch's real harnesses run a failing test under `test-suite` (issue 49 item 2): with the
harness's own retries off (the default: run/retries), a test that fails every time runs once in its suite and
once more per isolated rerun, and a flaky one still passes on its rerun; with `--harness-retries`
(harness_retries = True) the harness's own runs are kept: 9 on the 2.6.0 harness (3 sessions of 3), 3 on the
2.1 line (--reruns=2; with --continue-through-error it retries no session).

The suite is tests/data/retry_probe/test_eb_retry_probe.py, put into a scratch copy of the real tree with
upstream's top-level pytest.ini (tests/data/pytorch26-plain/README.md: without it pytest's rootdir is test/,
run_test_retries finds no stepcurrent cache and a suite stops at its first failing test).  The runs are counted
from the harness's own JUnit XML reports (one test case per pytest session that ran the test, a <rerun> per
pytest-rerunfailures rerun) and its console output; the probe's own count of its runs (a line per run, our
rerun included) must agree.
"""

import glob
import json
import os
import shutil
import xml.etree.ElementTree as ElementTree

import pytest
from environment import HARNESS21_TREE, REAL_PYTHON as PYTHON, REPO, need_harness21
from helpers import cli, real_tree
from scratch import scratch_dir

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'data')
PROBE = os.path.join(DATA, 'retry_probe', 'test_eb_retry_probe.py')
PYTEST_INI = os.path.join(DATA, 'pytorch26-plain', 'pytest.ini')
SUITE = 'test_eb_retry_probe'
ALWAYS, ONCE = 'TestRetryProbe.test_b_always_fails', 'TestRetryProbe.test_c_fails_once'
PYTHON21 = os.path.join(REPO, '.venvs', 'harness-2.1', 'bin', 'python')
REFUSED = 'eb-pytorch-cuda: the failed test is not run again here; rerun_failed_tests reruns it'


def _tree26(tree):
    real_tree(tree)
    shutil.copy(PYTEST_INI, tree / 'pytest.ini')


def _tree21(tree):
    need_harness21()
    shutil.copytree(HARNESS21_TREE, tree, ignore=shutil.ignore_patterns('test-reports'))


def _run(root, make_tree=_tree26, python=PYTHON, *options):
    """`test-suite --rerun 1` of the probe suite in a fresh copy of the tree; (its CompletedProcess, JSON report,
    {test method: runs the XML shows}, {probe file: runs the probe counted}, the batch output)."""
    tree, counts, results = root / 'pytorch', root / 'counts', root / 'results'
    make_tree(tree)
    shutil.copy(PROBE, tree / 'test')
    counts.mkdir()
    env = {name: value for name, value in os.environ.items() if name != 'CI'}
    env.update(EB_RETRY_PROBE_DIR=str(counts), EB_RETRY_PROBE_SECONDS='0')
    done = cli('test-suite', tree, '--python', python, '--runtest',
               f'cd test && %(python)s run_test.py --continue-through-error -i {SUITE}', '--rerun', '1',
               '--parallel', '1', '--results', results, '--format', 'json', *options, timeout=1500, env=env)
    xml_runs: dict = {}
    for path in glob.glob(str(tree / 'test' / 'test-reports' / '*' / SUITE / '*.xml')):
        for case in ElementTree.parse(path).iter('testcase'):
            runs = 1 + sum(1 for child in case if child.tag == 'rerun')
            xml_runs[case.get('name')] = xml_runs.get(case.get('name'), 0) + runs
    probe_runs = {name: len((counts / name).read_text().splitlines()) for name in os.listdir(counts)}
    output = ''.join(open(path, errors='replace').read() for path in glob.glob(str(results / 'output' / '*.log')))
    return done, json.loads(done.stdout), xml_runs, probe_runs, output


@pytest.fixture(scope='module')
def retries_off(harness26, tmp_path_factory):
    with scratch_dir(tmp_path_factory, 'retries-off') as root:
        yield _run(root)


@pytest.fixture(scope='module')
def retries_kept(harness26, tmp_path_factory):
    with scratch_dir(tmp_path_factory, 'retries-kept') as root:
        yield _run(root, _tree26, PYTHON, '--harness-retries')


def _failed(report):
    """{test id: its entry} of the probe suite's failed tests, in the report's order; each id must be there once."""
    suite = next(suite for suite in report['suites'] if suite['name'] == SUITE)
    ids = [test['test_id'] for test in suite['failed_tests']]
    assert len(ids) == len(set(ids)), ids
    return {test['test_id']: test for test in suite['failed_tests']}


def test_a_consistently_failing_test_runs_once_in_its_suite_and_once_alone(retries_off):
    done, report, xml_runs, probe_runs, output = retries_off
    assert done.returncode == 0 and report['verdict'] == 'pass', done.stderr[-3000:]  # default budget holds 1
    assert xml_runs['test_b_always_fails'] == 1  # the harness's own XML: one pytest session ran it, no rerun
    assert probe_runs['always'] == 2  # 1 + rerun_failed_tests, all retries included
    assert output.count('Retrying single test...') == 4  # 2.6's retries of b and c, each ended before it ran
    assert output.count(REFUSED) == 4 and '--reruns=2' in output  # run_test.py still asks for them
    # each ended before its file was collected (stepcurrent names the one item it keeps once collection ends)
    assert 'Running only' not in output, output
    assert 'The following tests failed consistently' in output
    failed = _failed(report)
    assert list(failed) == [ALWAYS, ONCE]  # each named once, in the order the log shows them fail
    assert failed[ALWAYS]['rerun_outcome'] == 'reproducible' and failed[ALWAYS]['reruns'] == 0
    assert (f'rerun of {SUITE}::{ALWAYS}: reproducible: failed 1 run in its suite and 1 alone') in done.stderr


def test_a_flaky_test_still_passes_on_its_rerun(retries_off):
    done, report, xml_runs, probe_runs, _output = retries_off
    assert xml_runs['test_c_fails_once'] == 1 and probe_runs['once'] == 2
    assert _failed(report)[ONCE]['rerun_outcome'] == 'flaky'
    assert report['flaky_failures'] == [{'suite': SUITE, 'test': ONCE}]
    assert xml_runs['test_a_passes'] == 1 and xml_runs['test_d_passes'] == 1  # the suite went on past them


def test_harness_retries_keep_the_harness_own_nine_runs(retries_kept):
    done, report, xml_runs, probe_runs, output = retries_kept
    assert done.returncode == 0, done.stderr[-3000:]
    assert xml_runs['test_b_always_fails'] == 9  # 3 sessions (run_test_retries) of 3 runs (--reruns=2)
    assert probe_runs['always'] == 10  # then our rerun on top
    assert output.count('Retrying single test...') == 2 and REFUSED not in output
    assert probe_runs['once'] == 2 and xml_runs['test_c_fails_once'] == 2  # passed on pytest's own rerun
    assert list(_failed(report)) == [ALWAYS]


@pytest.mark.harness21
@pytest.mark.parametrize('kept', [False, True], ids=['off', 'kept'])
def test_the_21_line_reruns_a_failing_test_only_where_harness_retries_keep_them(tmp_path, kept):
    done, report, xml_runs, probe_runs, _output = _run(tmp_path, _tree21, PYTHON21,
                                                       *(['--harness-retries'] if kept else []))
    assert done.returncode == 0, done.stderr[-3000:]
    assert xml_runs['test_b_always_fails'] == (3 if kept else 1)  # --reruns=2 of its one session, or none
    assert probe_runs['always'] == xml_runs['test_b_always_fails'] + 1  # and our one rerun
    assert _failed(report)[ALWAYS]['rerun_outcome'] == 'reproducible'
    assert probe_runs['once'] == 2 and (ONCE in _failed(report)) is not kept  # off: flaky on our rerun
