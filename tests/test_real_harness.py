"""The test step's runner against PyTorch's REAL test harness: Debian's pytorch 2.6.0 source tree
(test/run_test.py, tools/testing/) run with torch 2.6.0 from PyPI, both set up by tools/setup.sh.

One `eb-pytorch-cuda test-suite` run (two batches at a time) over real CPU suites is shared by most tests:
test_show_pickle (on the harness's must-serial list), test_cuda_primary_ctx (custom handler; 0 tests and
exit 0 without a GPU), test_ci_sanity_check_fail (custom handler; fails for real outside PyTorch's CI mode:
its test passes, so its handler returns 1), and fast CPU suites.  The run is made with CI=true, as GitLab and
GitHub runners set it: the test step must still test as a build node does (CI mode would make the handler pass,
pipe logs to files and skip suites by target determination).  A hang, a crash and a killed `eb` are only
shown by the stand-in (tests/test_eb_easyblock_tests.py, tests/test_run_here.py).
"""

import json
import os
import re
import subprocess
import sys

import pytest
from environment import REAL_PYTHON as PYTHON, REAL_TREE as TREE
from helpers import cli, real_tree, stored_records

from eb_pytorch_cuda.cli import main
from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.testsuite.run import discovery
from eb_pytorch_cuda.testsuite.run import reruns
from eb_pytorch_cuda.testsuite.run import solo
from eb_pytorch_cuda.testsuite.run.plan import RunRequest, build_plan
from eb_pytorch_cuda.testsuite.run.command import TestCommand as Command  # not a pytest test class
from eb_pytorch_cuda.testsuite.run.harness import read_harness
from eb_pytorch_cuda.testsuite.results.outcome import Ending, build_outcome, remove_reports

SUITES = ['test_show_pickle', 'test_per_overload_api', 'test_type_info', 'test_native_functions',
          'test_cuda_primary_ctx', 'test_ci_sanity_check_fail', 'test_logging']
NOT_SERIAL = ['test_per_overload_api', 'test_type_info', 'test_native_functions', 'test_logging']


@pytest.fixture(scope='module')
def tree(harness26, tmp_path_factory):
    """A private copy of the real tree (the harness writes test/test-reports into it)."""
    copy = tmp_path_factory.mktemp('real') / 'pytorch'
    real_tree(copy)
    return copy


def _runtest(*extra):
    return 'cd test && %(python)s run_test.py --continue-through-error ' + ' '.join(extra)


@pytest.fixture(scope='module')
def suite_run(tree, tmp_path_factory):
    results = tmp_path_factory.mktemp('results')
    argv = ['test-suite', str(tree), '--python', PYTHON, '--runtest', _runtest('-i', *SUITES),
            '--parallel', '2', '--results', str(results), '--format', 'json']
    done = cli(*argv, timeout=1500, env=dict(os.environ, CI='true'))  # as in a CI runner; the step must not take it on
    return done, stored_records(results), results, argv


def test_every_selected_suite_ran_with_its_real_outcome(suite_run):
    done, records, _results, _argv = suite_run
    assert set(records) == set(SUITES), done.stderr
    report = json.loads(done.stdout)
    assert done.returncode == 1 and report['verdict'] == 'fail'
    assert records['test_native_functions']['suite']['counts']['passed'] == 11
    assert records['test_type_info']['suite']['counts']['passed'] == 5
    assert records['test_per_overload_api']['suite']['counts']['passed'] == 3
    assert all(records[s]['suite']['status'] == 'passed' for s in SUITES if s != 'test_ci_sanity_check_fail')


def test_exit_0_without_a_summary_is_a_pass_with_0_tests_noted(suite_run):
    _done, records, _results, _argv = suite_run
    record = records['test_cuda_primary_ctx']  # no GPU here: 0 tests, run_test.py says it succeeded
    assert record['suite']['status'] == 'passed' and record['exit_code'] == 0
    assert sum(record['suite']['counts'].values()) == 0
    assert record['notes'] == ['exit 0 without a countable summary: passed with 0 tests']


def test_a_suite_its_handler_fails_fails_the_run_although_its_tests_passed(suite_run):
    done, records, _results, _argv = suite_run
    record = records['test_ci_sanity_check_fail']
    assert record['exit_code'] == 1 and record['suite']['status'] == 'failed without countable summary'
    assert record['suite']['counts']['passed'] == 1  # from its XML report
    assert 'test_ci_sanity_check_fail: failed without countable summary, and not a known failure' in done.stdout


def test_xml_reports_are_written_and_read_for_each_suite_that_has_tests(suite_run, tree):
    _done, records, _results, _argv = suite_run
    for suite in ('test_show_pickle', 'test_per_overload_api', 'test_native_functions', 'test_ci_sanity_check_fail'):
        assert 'xml' in records[suite]['suite']['sources'], suite
        assert os.listdir(tree / 'test' / 'test-reports' / 'python-pytest' / suite)


def test_the_harness_serial_list_is_kept_with_two_batches_at_a_time(suite_run):
    _done, records, _results, _argv = suite_run
    serial = {records[s]['output_file'] for s in ('test_show_pickle', 'test_cuda_primary_ctx',
                                                  'test_ci_sanity_check_fail')}
    assert len(serial) == 1  # one batch, run after the others, alone
    with open(serial.pop()) as handle:
        text = handle.read()
    assert not any(f'Running {suite} ' in text for suite in NOT_SERIAL)
    assert len({records[s]['output_file'] for s in NOT_SERIAL}) == 2  # two batches of the others


def test_the_same_command_again_runs_nothing_and_a_known_failure_passes_it(suite_run, tmp_path):
    _done, records, results, argv = suite_run
    easyconfig = tmp_path / 'PyTorch-2.6.0.eb'
    easyconfig.write_text("easyblock = 'PyTorch'\nname = 'PyTorch'\nversion = '2.6.0'\nhomepage = 'x'\n"
                          "description = 'x'\ntoolchain = SYSTEM\nmax_failed_tests = 0\n"
                          "known_test_failures = {'': [('test_ci_sanity_check_fail', 'passes outside CI, "
                          "so its handler reports a failure')]}\n")
    done = cli(*argv[:-2], '--format', 'text', '--easyconfig', easyconfig, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f'resuming: {len(SUITES)} suite(s) already measured for this build, 0 to run' in done.stderr
    assert 'verdict: PASS' in done.stdout
    with open(results / 'results.jsonl') as handle:
        assert len(handle.readlines()) == len(SUITES)  # nothing ran again


def test_bad_input_is_exit_2_naming_the_file(tmp_path):
    assert main(['test-suite', str(tmp_path), '--python', PYTHON]) == 2
    assert main(['test-suite', TREE, '--python', str(tmp_path / 'python')]) == 2


def test_discovery_reads_the_26_batch_listing_without_verbose():
    command = Command(os.path.join(TREE, 'test'), {}, [PYTHON, 'run_test.py', '-i', *SUITES])
    suites, serial = discovery.discover(command, dict(os.environ))
    assert sorted(suites) == sorted(SUITES)
    assert serial == {'test_show_pickle', 'test_cuda_primary_ctx', 'test_ci_sanity_check_fail'}


def test_an_exclusion_of_a_missing_file_is_said_and_left_out():
    """PyTorch-2.9.1's easyconfigs exclude distributed/test_nvshmem_triton, which 2.6.0 has no file of: its
    run_test.py stops on it (`invalid choice`, exit 2); the step says it in one line and leaves it out."""
    alone = subprocess.run([PYTHON, 'run_test.py', '-x', 'distributed/test_nvshmem_triton', '--dry-run'],
                           cwd=os.path.join(TREE, 'test'), capture_output=True, text=True, timeout=300)
    assert alone.returncode == 2 and "invalid choice: 'distributed/test_nvshmem_triton'" in alone.stderr
    argv = [PYTHON, 'run_test.py', '-i', *SUITES, '-x', 'distributed/test_nvshmem_triton', 'test_type_info']
    said = []
    plan = build_plan(RunRequest(Command(os.path.join(TREE, 'test'), {}, argv), dict(os.environ), '/nonexistent',
                                 PYTHON), said.append)
    assert said == ["excluded_tests: 'distributed/test_nvshmem_triton': no such test file in this tree (its "
                    "run_test.py's TESTS), so nothing to exclude; left out of -x"]
    assert sorted(plan.suites) == sorted(set(SUITES) - {'test_type_info'})
    assert plan.command.argv == [PYTHON, 'run_test.py', '-i', *SUITES, '-x', 'test_type_info']


def test_an_empty_selection_is_an_error_not_a_pass():
    command = Command(os.path.join(TREE, 'test'), {}, [PYTHON, 'run_test.py', '-i', 'test_type_info',
                                                       '-x', 'test_type_info'])
    with pytest.raises(PluginError, match='selected no test suite'):
        discovery.discover(command, dict(os.environ))


def test_a_sharded_runtest_runs_its_shard_without_passing_shard_to_each_suite(tree, tmp_path):
    argv = [PYTHON, 'run_test.py', '--continue-through-error', '-i', *SUITES]
    first, _ = discovery.discover(Command(str(tree / 'test'), {}, argv + ['--shard', '1', '2']), dict(os.environ))
    second, _ = discovery.discover(Command(str(tree / 'test'), {}, argv + ['--shard', '2', '2']), dict(os.environ))
    assert sorted(first + second) == sorted(SUITES) and not set(first) & set(second)
    suite = next(s for s in second if s in NOT_SERIAL)
    command = Command(str(tree / 'test'), {}, argv + ['--shard', '2', '2'])
    assert '--shard' not in discovery.run_argv(command.argv, [suite])
    plan = build_plan(RunRequest(command, dict(os.environ), str(tmp_path), PYTHON, {'': 600}, units=[suite]))
    record = solo.run_suite(plan, suite)
    assert record.suite.status == 'passed' and record.suite.counts.passed > 0, record.output_tail


def test_a_rerun_runs_exactly_the_one_failed_test(tree):
    harness = read_harness(str(tree / 'test' / 'run_test.py'))
    command = Command(str(tree / 'test'), {}, [PYTHON, 'run_test.py', '--continue-through-error'])
    passed, output = reruns.rerun_isolated(command, PYTHON, 'test_per_overload_api',
                                           'TestPerOverloadAPI.test_basics_opoverload', harness, dict(os.environ),
                                           timeout=600)
    assert passed and re.search(r'^Ran 1 test in', output, re.M), output
    assert 'test_basics_opoverloadpacket' not in output  # `-k test_basics_opoverload` would run it too
    # a suite with a custom handler is rerun through run_test.py, so the handler's environment applies
    assert reruns.rerun_argv(command, PYTHON, 'test_cuda_primary_ctx', 'TestCudaPrimaryCtx.test_x', harness)[:2] == \
        [PYTHON, 'run_test.py']


def test_a_failure_only_the_xml_shows_counts_and_is_noted(tree):
    # a real failure: test_ci_sanity_check_fail's test fails when CI is set (run directly, not via run_test.py)
    test_dir = tree / 'test'
    remove_reports(str(test_dir), 'test_ci_sanity_check_fail')  # as before each run: only this run's reports
    done = subprocess.run([PYTHON, 'test_ci_sanity_check_fail.py', '--save-xml'], cwd=test_dir,
                          env=dict(os.environ, CI='1'), capture_output=True, text=True, timeout=600)
    assert done.returncode != 0
    log = done.stdout + done.stderr
    assert re.search(r'^FAIL .*test_env_vars_exist', log, re.M) and 'FAILED (failures=1' in log
    lost = '\n'.join(line for line in log.splitlines() if 'FAIL' not in line and not line.startswith('Ran '))
    suite, code, notes = build_outcome('test_ci_sanity_check_fail', lost + '\nRan 1 test in 0.1s\n\nOK\n',
                                       Ending(True, True), test_dir=str(test_dir))
    assert suite.status == 'failed' and suite.counts['failed'] == 1 and code == 1
    assert any('log and XML reports differ' in note for note in notes)
    assert any('failed only in the XML: TestCISanityCheck.test_env_vars_exist' in note for note in notes)


def test_xml_reports_are_asked_for_only_where_the_suites_can_write_them():
    # common_utils.run_tests imports xmlrunner on --save-xml in unittest mode (2.1.2's and 2.6's alike, read
    # from torch's own file): without unittest-xml-reporting every suite would die of an ImportError
    from eb_pytorch_cuda.testsuite.run.calls import xml_reports_safe
    harness = read_harness(os.path.join(TREE, 'test', 'run_test.py'))
    assert harness.pytest_by_default  # can_run_in_pytest(): pytest writes the XML itself
    without = sys.executable  # the test runner's Python: no xmlrunner
    assert subprocess.run([without, '-c', 'import xmlrunner'], capture_output=True).returncode != 0
    assert subprocess.run([PYTHON, '-c', 'import xmlrunner'], capture_output=True).returncode == 0

    def safe(python, **env):
        command = Command(os.path.join(TREE, 'test'), {}, [python, 'run_test.py'])
        return xml_reports_safe(harness, command, dict(os.environ, **env))

    assert safe(without) and safe(PYTHON)
    assert not safe(without, PYTORCH_TEST_DO_NOT_USE_PYTEST='1')  # unittest mode, no xmlrunner: no --save-xml
    assert safe(PYTHON, PYTORCH_TEST_DO_NOT_USE_PYTEST='1')
