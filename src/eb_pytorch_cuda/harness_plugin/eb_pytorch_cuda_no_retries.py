"""A pytest plugin, loaded into every suite's pytest session through PYTEST_PLUGINS (run/retries), that
leaves a failed test to the step's own isolated rerun (rerun_failed_tests): PyTorch's harness runs it once.

- pytest-rerunfailures' `--reruns=2`, which run_test.py adds to every suite's pytest arguments after ours
  (2.1 and 2.6 get_pytest_args), is set to 0 once the arguments are parsed, so it cannot be outvoted by order.
- 2.6's run_test_retries retries the test that just failed alone (`--rs=<key>`, test/conftest.py's
  StepcurrentPlugin) until it has failed 3 times, then skips past it (`--scs`) and goes on: such a session
  ends here with exit status 1 before its test file is even imported and collected (the stepcurrent cache is
  left as it was, the session's XML report is written with no test in it, as common_utils then reads it), so
  the harness counts a failure without running the test again; the suite still fails and still goes on with
  its other tests.  Ended before collection, a `--rs` session of test_transformers.py takes 0.95 s where a
  session that collects the file takes 5.93 s on this project's VM (benchmarks/bench_single_retry_session.py),
  and two come with each failing test.

It imports nothing but pytest, and does nothing in a session where neither option exists (a plain pytest
started by a suite's own test), so it is safe in every pytest process of the suites.  Must run on the test
Python's pytest (7.3 for PyTorch 2.1/2.6's easyconfigs, 8.x).
"""

import pytest

# what a `--rs` session ends with (pytest's terminal reporter prints it in its `!!! Exit` line)
SINGLE_RETRY_REFUSED = 'eb-pytorch-cuda: the failed test is not run again here; rerun_failed_tests reruns it'


def pytest_configure(config):
    """Switch the reruns off (read by pytest-rerunfailures when each test runs, so any time before)."""
    if getattr(config.option, 'reruns', None):
        config.option.reruns = 0


@pytest.hookimpl(tryfirst=True)
def pytest_collection(session):
    """End a harness retry of a single failed test (2.6's `--rs`) before its file is collected."""
    if getattr(session.config.option, 'run_single', None):
        pytest.exit(SINGLE_RETRY_REFUSED, returncode=1)
