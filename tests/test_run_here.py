"""testsuite/run/, running suites here: discovery, solo and batches (read through results/outcome), the results
store surviving a torn write, timeouts killing the process group, the suites' environment (run/command).
"""

import json
import os
import subprocess
import sys
import time

import pytest

from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.testsuite.run import discovery
from eb_pytorch_cuda.testsuite.run import solo
from eb_pytorch_cuda.testsuite.run.executor import execute
from eb_pytorch_cuda.testsuite.run.here import HereExecutor
from eb_pytorch_cuda.testsuite.run.plan import RunRequest, build_plan
from eb_pytorch_cuda.testsuite.policy.settings import DEFAULT_SUITE_TIMEOUT
from eb_pytorch_cuda.testsuite.run.store import ResultStore
from eb_pytorch_cuda.testsuite.results.reportdirs import Attempt
from eb_pytorch_cuda.testsuite.results.records import StoreRecord
from eb_pytorch_cuda.testsuite.results.xmlparse import parse_report_dir
from eb_pytorch_cuda.testsuite.run.command import TestCommand as Command  # not a pytest test class
from helpers import standin_test_tree


@pytest.fixture
def tree(tmp_path):
    test_dir = standin_test_tree(tmp_path)
    (test_dir / 'test_spawns_and_hangs.py').write_text(
        'import subprocess, sys, time\n'
        'child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])\n'
        'open("child.pid", "w").write(str(child.pid))\n'
        'time.sleep(600)\n')
    return test_dir


def _command(test_dir):
    return Command(str(test_dir), {}, [sys.executable, 'run_test.py', '-x', 'test_crash', 'test_hang', 'test_cudnn'])


def test_discovery_lists_the_selected_suites(tree):
    suites = discovery.discover(_command(tree), dict(os.environ))[0]
    assert 'test_flaky' in suites and 'test_cudnn' not in suites and 'distributed/test_c10d_standin' in suites


def test_discovery_of_a_command_that_is_no_harness_is_an_error(tmp_path):
    command = Command(str(tmp_path), {}, [sys.executable, '-c', 'print("nothing")'])
    with pytest.raises(PluginError, match="does not run a run_test.py: the test step asks PyTorch's harness"):
        discovery.discover(command, dict(os.environ))[0]


def test_discovery_without_selection_functions_names_command_and_error(tmp_path):
    (tmp_path / 'run_test.py').write_text('print("Selected tests:\\n test_a")\n')
    command = Command(str(tmp_path), {}, [sys.executable, 'run_test.py'])
    with pytest.raises(PluginError, match=r"run_test.py' \(in .*\): its run_test.py has no main\(\), parse_args\(\), "
                                          r"get_selected_tests\(\): the test step asks PyTorch's harness"):
        discovery.discover(command, dict(os.environ))[0]


def test_a_timed_out_suite_takes_its_children_down_and_keeps_its_partial_output(tree, tmp_path):
    (tmp_path / 'out').mkdir()
    start = time.time()
    plan = build_plan(RunRequest(_command(tree), dict(os.environ), str(tmp_path / 'out'), sys.executable,
                                 {'': 2}, units=['test_spawns_and_hangs']))
    record = solo.run_suite(plan, 'test_spawns_and_hangs')
    assert time.time() - start < 300  # its 2 s timeout, not its 600 s sleep (bounded for a loaded machine)
    assert record.suite.status == 'timed out' and record.suite.signal == 'timeout after 2s'
    assert 'Running test_spawns_and_hangs 1/1' in record.output_tail
    child = int((tree / 'child.pid').read_text())
    time.sleep(0.5)
    assert not os.path.exists(f'/proc/{child}') or 'Z' in open(f'/proc/{child}/stat').read().split()[2]


def test_the_store_keeps_finished_suites_of_this_build_only_and_ignores_a_torn_line(tmp_path):
    store = ResultStore(str(tmp_path / 'r' / 'results.jsonl'), 'fingerprint-a')
    store.append(StoreRecord.from_json({'suite': {'name': 'test_a', 'status': 'passed'}}))
    other = StoreRecord.from_json({'suite': {'name': 'test_b', 'status': 'passed'}})
    ResultStore(store.path, 'fingerprint-b').append(other)
    with open(store.path, 'a') as handle:
        handle.write(json.dumps({'suite': {'name': 'test_c'}, 'fingerprint': 'fingerprint-a'})[:20])
    assert set(store.load()) == {'test_a'}


def test_the_fingerprint_ignores_the_policy_but_not_the_build():
    from eb_pytorch_cuda.testsuite.service import build_fingerprint
    base = {'name': 'PyTorch', 'sources': ['pytorch-v2.1.2.tar.gz'], 'max_failed_tests': 2,
            'known_test_failures': {'': [('test_x', 'r')]}}
    env = {'CFLAGS': '-O2 -march=haswell'}
    same = build_fingerprint(dict(base, max_failed_tests=5, known_test_failures={}, test_suite_timeout=60), env)
    assert same == build_fingerprint(base, env)
    assert build_fingerprint(dict(base, sources=['pytorch-v2.1.3.tar.gz']), env) != build_fingerprint(base, env)
    assert build_fingerprint(base, {'CFLAGS': '-O2 -march=znver3'}) != build_fingerprint(base, env)


def test_timeouts_come_from_the_previous_results_or_a_default(tmp_path):
    from eb_pytorch_cuda.testsuite.results.previous import History
    from eb_pytorch_cuda.testsuite.service import suite_timeouts
    previous = tmp_path / 'results.json'
    previous.write_text(json.dumps({'suite_seconds': {'test_nn': 1000.0, 'test_fast': 1.0}}))
    history = History.read(str(previous))
    assert suite_timeouts(None, history) == {'': DEFAULT_SUITE_TIMEOUT, 'test_nn': 4000, 'test_fast': 600}
    assert suite_timeouts(120, history) == {'': 120}
    assert suite_timeouts(None, History.read(str(tmp_path / 'missing.json'))) == {'': DEFAULT_SUITE_TIMEOUT}


def test_one_list_of_parameters_feeds_the_reader_the_fingerprint_and_the_settings(tmp_path):
    from eb_pytorch_cuda.eb import ecpolicy
    from eb_pytorch_cuda.testsuite.policy import settings
    from eb_pytorch_cuda.testsuite import service
    base = dict(dict.fromkeys(settings.NAMES), version='2.1.2')
    for name in settings.JUDGING:  # each judging parameter changed alone leaves the fingerprint as it is
        assert service.build_fingerprint(dict(base, **{name: 7}), {}) == service.build_fingerprint(base, {}), name
    for name in set(settings.NAMES) - set(settings.JUDGING) | {'version'}:  # what decides the build does not
        assert service.build_fingerprint(dict(base, **{name: 7}), {}) != service.build_fingerprint(base, {}), name
    easyconfig = tmp_path / 'PyTorch-2.1.2.eb'
    easyconfig.write_text("easyblock = 'PyTorch'\nname = 'PyTorch'\nversion = '2.1.2'\nhomepage = 'x'\n"
                          "description = 'x'\ntoolchain = SYSTEM\nmax_failed_tests = 3\nrerun_failed_tests = 2\n"
                          "parallel_test_suites = 2\ntest_suite_timeout = 900\nexcluded_tests = {'': ['test_x']}\n"
                          "known_test_failures = {'': [('test_y', 'why')]}\n")
    read = ecpolicy.read_settings(str(easyconfig))
    assert (read.max_failed_tests, read.rerun_failed_tests, read.parallel_test_suites, read.test_suite_timeout) == \
        (3, 2, 2, 900)
    from eb_pytorch_cuda.testsuite.results.scopes import detect_context
    context = detect_context((), cpu_family='x86_64', target='x86_64/generic')
    assert read.excluded(context) == ['test_x'] and read.policy(context).max_failed_tests == 3
    assert settings.TestSettings.from_values({}).policy(context, default_budget=10).max_failed_tests == 10


# The 2.1 forms below are written from run_test.py 2.1's print_log_file and run_test_module (read from its
# source; no 2.1 tree is installed here): a passed suite's log replayed whole after `##[group]PRINTING LOG
# FILE of X (path)`, a failed suite's short log with no start marker, a long one after `PRINTING BEGINNING
# OF`, each ending with `FINISHED PRINTING LOG FILE of X (path)`, and `X failed!` from the main process.
LOG_21 = '''Running test_a ... [2024-01-01 00:00:00]
Running test_b ... [2024-01-01 00:00:00]
Executing ['python', '-bb', 'test_a.py'] ... [2024-01-01 00:00:00]
Executing ['python', '-bb', 'test_b.py'] ... [2024-01-01 00:00:00]

Expand the folded group to see the log file of test_a
##[group]PRINTING LOG FILE of test_a (/t/test-reports/test_a_x.log)
Ran 4 tests in 0.1s

OK
##[endgroup]
FINISHED PRINTING LOG FILE of test_a (/t/test-reports/test_a_x.log)

Running test_c ... [2024-01-01 00:00:01]
Executing ['python', '-bb', 'test_c.py'] ... [2024-01-01 00:00:01]

======================================================================
FAIL: test_one (__main__.TestB.test_one)
----------------------------------------------------------------------
Ran 2 tests in 0.1s

FAILED (failures=1)
FINISHED PRINTING LOG FILE of test_b (/t/test-reports/test_b_y.log)

test_b failed!
Expand the folded group to see the beginning of the log file of test_c
##[group]PRINTING BEGINNING OF LOG FILE of test_c (/t/test-reports/test_c_z.log)
first lines
##[endgroup]
ERROR: test_two (__main__.TestC)
Ran 3 tests in 0.1s

FAILED (errors=1)
FINISHED PRINTING LOG FILE of test_c (/t/test-reports/test_c_z.log)

test_c failed!
'''


def test_the_21_replayed_logs_are_attributed_to_their_own_suites(tmp_path):
    from eb_pytorch_cuda.testsuite.results.splitting import split_batch_output
    from eb_pytorch_cuda.testsuite.results.outcome import Ending, build_outcome
    outputs = split_batch_output(LOG_21, ['test_a', 'test_b', 'test_c'], str(tmp_path), full_log_means_passed=True)
    a, b, c = (outputs[name] for name in ('test_a', 'test_b', 'test_c'))
    assert a.settled and not a.failed and 'Ran 4 tests' in a.text and 'test_one' not in a.text
    assert b.settled and b.failed and 'FAIL: test_one' in b.text and 'Ran 4' not in b.text and 'Executing' not in b.text
    assert c.settled and c.failed and 'ERROR: test_two' in c.text and 'Ran 2 tests' not in c.text
    suite, code, _notes = build_outcome('test_b', b.text, Ending(True, b.failed))
    assert (suite.status, suite.counts['failed'], suite.counts['passed'], code) == ('failed', 1, 1, 1)
    assert [t.test_id for t in suite.failed_tests] == ['TestB.test_one']


def test_21_gets_xml_switched_on_through_its_positional_unittest_args(tmp_path):
    from eb_pytorch_cuda.testsuite.run import calls
    from eb_pytorch_cuda.testsuite.run import discovery
    from eb_pytorch_cuda.testsuite.run.harness import read_harness
    run_test = tmp_path / 'run_test.py'  # the 2.1 argument parser's shape: no parse_known_args
    run_test.write_text('parser.add_argument(\n    "additional_unittest_args",\n    nargs="*",\n)\n'
                        'print_to_stderr(f"##[group]PRINTING BEGINNING OF LOG FILE of {test} ({file_path})")\n')
    harness = read_harness(str(run_test))
    assert harness.positional_unittest_args and not harness.forwards_unknown_args and harness.full_log_means_passed
    argv = discovery.run_argv(['python', 'run_test.py', '--shard', '1', '2', '-x', 'test_z'], ['test_a', 'test_b'],
                              calls.batch_options(harness))
    assert argv == ['python', 'run_test.py', '-x', 'test_z', '--continue-through-error', '-i', 'test_a', 'test_b',
                    '--', '--save-xml']


def test_a_hang_in_a_batch_costs_its_own_timeout_and_the_others_still_run(tree, tmp_path):
    """A stand-in hang (no real suite can be made to hang on demand) in one run_test.py batch with other
    suites: the batch is killed once the hanging suite has run its own timeout, that suite is `timed out`
    with its children gone, and the batch's unfinished suites are run alone and judged as usual."""
    command = Command(str(tree), {}, [sys.executable, 'run_test.py', '-x', 'test_crash', 'test_hang', 'test_cudnn',
                                      'test_kills_eb'])
    (tree / 'test_spawns_and_hangs.py').rename(tree / 'test_a_spawns_and_hangs.py')  # suites follow it
    env = dict(os.environ)
    suites = discovery.discover(command, env)[0]
    assert suites.index('test_a_spawns_and_hangs') < suites.index('test_known_failure')
    timeouts = {'': 300, 'test_a_spawns_and_hangs': 3}
    store = ResultStore(str(tmp_path / 'r' / 'r.jsonl'), 'build')
    lines = []
    start = time.time()
    _plan, result = execute(HereExecutor(lines.append),
                            RunRequest(command, env, str(tmp_path / 'out'), sys.executable, timeouts, units=suites),
                            store)
    elapsed = time.time() - start
    # the batch's own limit is the sum of its suites' timeouts (over 1,000 s); bounded well below it, and well
    # above what a loaded machine takes
    assert elapsed < 600, lines
    assert result.suites['test_a_spawns_and_hangs'].status == 'timed out'
    assert result.suites['test_a_spawns_and_hangs'].signal == 'timeout after 3s'
    assert result.suites['test_known_failure'].status == 'failed' and set(result.suites) == set(suites)
    child = int((tree / 'child.pid').read_text())
    time.sleep(0.5)
    assert not os.path.exists(f'/proc/{child}') or 'Z' in open(f'/proc/{child}/stat').read().split()[2]


def test_suites_run_outside_pytorchs_ci_mode_unless_the_runtest_line_asks_for_it(tmp_path):
    # CI=true (set by GitLab/GitHub runners) switches run_test.py into PyTorch's CI mode; the real harness
    # run with CI=true is in tests/test_real_harness.py
    from eb_pytorch_cuda.testsuite.run.command import harness_environment, parse_runtest
    plain = parse_runtest('cd test && %(python)s run_test.py', str(tmp_path), sys.executable)
    env = harness_environment({'CI': 'true', 'OMP_NUM_THREADS': '4'}, plain)
    assert env == {'OMP_NUM_THREADS': '4'}
    asked = parse_runtest('cd test && CI=1 %(python)s run_test.py', str(tmp_path), sys.executable)
    assert harness_environment({'CI': 'true'}, asked) == {'CI': '1'}


def test_in_unittest_mode_without_xmlrunner_the_step_says_xml_reports_are_off(tree, tmp_path):
    # this Python has no xmlrunner; with PYTORCH_TEST_DO_NOT_USE_PYTEST=1 the harness runs unittest, where
    # --save-xml would make common_utils import it (tests/test_real_harness.py: the real harness's side)
    from eb_pytorch_cuda.testsuite import service
    command = Command(str(tree), {}, [sys.executable, 'run_test.py', '-i', 'test_flaky'])
    lines = []
    for env, off in ((dict(os.environ), False), (dict(os.environ, PYTORCH_TEST_DO_NOT_USE_PYTEST='1'), True)):
        lines.clear()
        store = ResultStore(str(tmp_path / f'r{off}' / 'r.jsonl'), 'f')
        service.run_suites(RunRequest(command, env, str(tmp_path / f'out{off}'), sys.executable, {'': 120}), store,
                           HereExecutor(lines.append), lines.append)
        assert any(line.startswith('XML reports off') for line in lines) is off, lines


def test_dropping_ci_mode_keeps_what_the_caller_set_over_the_runtest_line(tmp_path):
    # the easyblock puts the tested installation on PYTHONPATH after merging the runtest line's assignments;
    # removing CI must not bring the runtest line's PYTHONPATH back over it
    from eb_pytorch_cuda.testsuite.run.command import harness_environment, parse_runtest
    command = parse_runtest('cd test && PYTHONPATH=/src CI=1 %(python)s run_test.py', str(tmp_path), sys.executable)
    env = dict(os.environ, **command.env)
    env['PYTHONPATH'] = '/install/lib/python3.11/site-packages:/src'
    assert harness_environment(env, command)['PYTHONPATH'] == '/install/lib/python3.11/site-packages:/src'
    assert harness_environment(env, command)['CI'] == '1'


LATE_SUITE = '''import os, time, unittest
from common import run_tests


class TestLate(unittest.TestCase):
    def test_waits(self):
        time.sleep(float(os.environ.get("LATE_SLEEP", "0")))

    @unittest.skipUnless(os.environ.get("LATE_FAILS"), "fails in the earlier attempt only")
    def test_regression(self):
        self.fail("the earlier attempt failed")


if __name__ == "__main__":
    run_tests(__file__)
'''


@pytest.mark.parametrize('alone', [True, False], ids=['alone', 'in a batch'])
def test_a_report_an_earlier_attempt_writes_late_never_counts(tree, tmp_path, alone):
    """A process of an earlier, killed attempt that outlived it (here: the stand-in harness run by
    hand, in a session of its own, as a job on another node or an escaped child would go on) writes its
    XML report while this attempt of the same suite runs.  This attempt reads only its own report directory
    (results/reportdirs.Attempt), so the late report's failure is not counted (counted, a failure in one file
    beats a skip in another: "1 failed" and a false "log and XML reports differ" note).
    Afterwards the harness's place holds this attempt's report only."""
    (tree / 'test_late.py').write_text(LATE_SUITE)
    (tmp_path / 'out').mkdir()
    command = Command(str(tree), {}, [sys.executable, 'run_test.py', '-i', 'test_late'])
    earlier = subprocess.Popen([sys.executable, 'run_test.py', '-i', 'test_late'], cwd=tree, start_new_session=True,
                               env=dict(os.environ, LATE_SLEEP='1.5', LATE_FAILS='1'),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        start = time.time()
        env = dict(os.environ, LATE_SLEEP='6')
        request = RunRequest(command, env, str(tmp_path / 'out'), sys.executable, {'': 120}, units=['test_late'])
        if alone:
            record = solo.run_suite(build_plan(request), 'test_late')
        else:
            store = ResultStore(str(tmp_path / 'r' / 'r.jsonl'), 'build')
            execute(HereExecutor(), request, store)
            record = store.load()['test_late']
        assert earlier.wait(timeout=60) == 1  # it ran, and failed
    finally:
        if earlier.poll() is None:
            earlier.kill()
            earlier.wait()
    assert record.suite.status == 'passed' and record.suite.counts.passed == 1
    assert record.suite.counts.skipped == 1
    assert record.suite.counts.failed == 0 and 'xml' in record.suite.sources
    assert record.notes == ()
    reports = tree / 'test-reports' / 'python-unittest' / 'test_late'
    late = [path for path in reports.iterdir() if '<failure' in path.read_text()]
    assert not late  # the harness's place holds this attempt's report alone
    assert list(reports.iterdir()) and all(path.stat().st_mtime >= start for path in reports.iterdir())
    assert sorted(os.listdir(tree / 'test-reports')) == ['python-unittest']  # no attempt directory is left


def test_a_killed_attempts_reports_never_count_in_a_read_of_the_tree(tree, tmp_path):
    """An attempt killed before its outcome was recorded leaves its own report directory (never published);
    `report test-reports` (parse_report_dir) reads the harness's places only.  Its report here is the
    stand-in suite's own, written into that attempt's directory as common_utils does with the override."""
    (tmp_path / 'out').mkdir()
    command = Command(str(tree), {}, [sys.executable, 'run_test.py', '-i', 'test_known_failure'])
    plan = build_plan(RunRequest(command, dict(os.environ), str(tmp_path / 'out'), sys.executable, {'': 120},
                                 units=['test_known_failure']))
    record = solo.run_suite(plan, 'test_known_failure')
    assert record.suite.counts.failed == 1
    killed = Attempt.new(str(tree))
    done = subprocess.run([sys.executable, 'test_known_failure.py'], cwd=tree, capture_output=True, text=True,
                          env=dict(os.environ, STANDIN_UNKNOWN_FAILURE='1', **killed.env), timeout=120)
    assert done.returncode == 1 and killed.files('test_known_failure')  # its report is there
    suite = parse_report_dir(str(tree / 'test-reports')).suites['test_known_failure']
    assert suite.counts['failed'] == 1 and suite.counts['skipped'] == 1
    assert [test.test_id for test in suite.failed_tests] == ['TestKnown.test_always_fails']
