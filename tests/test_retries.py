"""Who retries a failed test (run/retries, issue 49 item 2): the suites' environment turns PyTorch's own retries
off unless harness_retries keeps them, the dry run says which, and an isolated rerun's line names the test once
with the runs it took.  The runs counted on PyTorch's real harness are tests/test_harness_retries.py's."""

import os

from eb_pytorch_cuda.testsuite.results.model import RunResult, Suite, SuiteStatus
from eb_pytorch_cuda.testsuite.results.model import TestCase as Case  # not a pytest test class
from eb_pytorch_cuda.testsuite.run import retries
from eb_pytorch_cuda.testsuite.run.plugins import PLUGIN_DIR
from eb_pytorch_cuda.testsuite.run.reruns import apply_reruns


def test_the_harness_retries_are_off_by_the_environment():
    env = {'PYTORCH_RETRY_TEST_CASES': '1', 'PYTORCH_TEST_RERUN_DISABLED_TESTS': '1', 'PYTHONPATH': '/inst/lib',
           'PYTEST_PLUGINS': 'site_plugin', 'HOME': '/home/me'}
    off = retries.retry_environment(env, harness_retries=False)
    assert off == {'PYTHONPATH': '/inst/lib' + os.pathsep + PLUGIN_DIR,
                   'PYTEST_PLUGINS': 'site_plugin,eb_pytorch_cuda_no_retries', 'HOME': '/home/me'}
    assert retries.retry_environment(off, harness_retries=False) == off  # a Slurm job applies it to the spec's again
    assert env['PYTORCH_RETRY_TEST_CASES'] == '1'  # the caller's mapping is left as it was
    assert os.path.isfile(os.path.join(PLUGIN_DIR, retries.PLUGIN + '.py'))


def test_an_empty_environment_gets_the_plugin_alone():
    off = retries.retry_environment({}, harness_retries=False)
    assert off == {'PYTEST_PLUGINS': retries.PLUGIN, 'PYTHONPATH': PLUGIN_DIR}


def test_harness_retries_true_keeps_the_environment_as_it_is():
    env = {'PYTORCH_RETRY_TEST_CASES': '1', 'PYTHONPATH': '/inst/lib'}
    assert retries.retry_environment(env, harness_retries=True) == env


def test_the_dry_run_line_says_who_retries():
    off = retries.planned(False, 1)
    assert off.startswith("retries: PyTorch's own off (PYTEST_PLUGINS=eb_pytorch_cuda_no_retries")
    assert off.endswith('a failing test runs once, then up to 1 isolated rerun(s) (rerun_failed_tests)')
    kept = retries.planned(True, 0)
    assert "PyTorch's own kept (harness_retries = True" in kept and 'up to 9 runs of a failing test' in kept
    assert kept.endswith('no isolated rerun (rerun_failed_tests = 0)')


def _result(*tests):
    suite = Suite('test_x', SuiteStatus.FAILED, failed_tests=list(tests))
    return RunResult({'test_x': suite})


def test_a_reproducible_failure_is_named_once_with_its_runs():
    result = _result(Case('T.test_always', 'failed'), Case('T.test_flaky', 'failed', reruns=2))
    runs = []

    def rerun(suite, test):
        runs.append(test)
        return test == 'T.test_flaky' and runs.count(test) == 2, ''
    done = apply_reruns(result, 2, rerun)
    assert done == [('test_x', 'T.test_always', 'reproducible: failed 1 run in its suite and 2 alone'),
                    ('test_x', 'T.test_flaky', "flaky: passed alone on rerun 2 of 2, after failing at least 3 runs "
                                               "in its suite (the harness's own retries)")]
    assert runs == ['T.test_always', 'T.test_always', 'T.test_flaky', 'T.test_flaky']
    assert [t.rerun_outcome for t in result.suites['test_x'].failed_tests] == ['reproducible', 'flaky']
