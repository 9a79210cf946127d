"""Who retries a failed test: by default only the step's isolated rerun (rerun_failed_tests, run/reruns), so a
test that fails every time costs at most 1 + rerun_failed_tests runs; harness_retries = True keeps PyTorch's
own retries as well (up to 9 runs of it in each 2.6 run_test.py call, then ours on top).

What retries a failed test in PyTorch's harnesses, and how the suites' environment (retry_environment) turns it
off.  The 2.1 line: the 2.1-line tree's test/run_test.py and torch 2.1.2's torch/testing/_internal/common_utils.py;
2.6: Debian's 2.6.0 test/run_test.py and torch 2.6.0's common_utils.py.

- pytest-rerunfailures' `--reruns=2` on every suite run under pytest (the default: run_test.py runs a suite
  under pytest unless PYTORCH_TEST_DO_NOT_USE_PYTEST=1, can_run_in_pytest 2.1 :1288, 2.6 :1728): 2.1
  get_pytest_args run_test.py:966-968 (`--reruns=2` with --continue-through-error, `-x --reruns=2` without),
  2.6 run_test.py:1387 (`-x --reruns=2` always), both appended after the caller's arguments (2.1 :997, 2.6
  :1411), so a `--reruns=0` of ours loses; test_public_bindings alone is spared (PYTEST_SKIP_RETRIES).  Off:
  the plugin (eb_pytorch_cuda/harness_plugin, loaded through PYTEST_PLUGINS) sets it to 0 after
  parsing.
- 2.6's run_test_retries (run_test.py:913-1000, used when should_retry, :843-848: every Python suite not
  run with `--subprocess` or `-n`): with `-x`, the first failure ends the pytest session; the test is then
  run alone again (`--rs=<key>`, "Retrying single test...", :992-993) until it has failed 3 times (:981),
  then skipped (`--scs`) while the suite goes on: 3 sessions of 3 runs each.  Off: the plugin ends a `--rs`
  session at once with status 1, before the test file is collected, so the harness counts its 3 failures
  without running the test again (two extra start-ups of pytest, no test file imported, no test run).  Left:
  the session after it (`--scs`) starts and collects the file again, one per failing test.
- PYTORCH_RETRY_TEST_CASES=1 (2.1 common_utils.py:186, TestCase.run :2531, _run_with_retry :2481): each
  test up to 4 runs in its process, under unittest only, which is how our exact rerun runs a test
  (run/reruns); 2.6's common_utils no longer has it.  Off: removed from the environment.
- PYTORCH_TEST_RERUN_DISABLED_TESTS=1 (2.1 run_test.py:61, :957-965; 2.6 :84, :1375-1383):
  pytest-flakefinder, 50 runs of every test.  Off: removed from the environment.
- Whole-file retries: 2.1 run_test.py:601-624 retry_shell(retries=2) only without --continue-through-error,
  which every call of ours passes (run/calls.batch_options): never on.  CI (IS_CI) gates no retry of a call
  with --continue-through-error (2.1 `--sc` at :981-982 needs it absent; 2.6 :1595-1607 switch on log
  piping, timeouts and TD); NUM_PARALLEL_PROCS (2.6 :2077, common_utils.py:1535) only shares GPU memory.
- Left as it is: a `--subprocess` suite (the custom handlers' run_test_with_subprocess) runs each test in a
  process of its own and retries a failed one once (common_utils retry_shell(retries=1): 2.1 :892, 2.6
  :1261): 2 runs of such a test per call, with its reruns off.
"""

from typing import Dict, Mapping

from eb_pytorch_cuda.testsuite.run.plugins import with_plugin

PLUGIN = 'eb_pytorch_cuda_no_retries'  # the module eb_pytorch_cuda/harness_plugin holds, named in PYTEST_PLUGINS
# variables that make PyTorch's own code run a test again (see above)
RETRY_VARIABLES = ('PYTORCH_RETRY_TEST_CASES', 'PYTORCH_TEST_RERUN_DISABLED_TESTS')


def retry_environment(env: Mapping[str, str], harness_retries: bool) -> Dict[str, str]:
    """The suites' environment with PyTorch's own retries off (harness_retries False): the plugin added to
    PYTEST_PLUGINS and its directory to the end of PYTHONPATH, RETRY_VARIABLES removed; env as it is with
    harness_retries True.  Applying it twice changes nothing (a Slurm job gets the submitter's result)."""
    env = dict(env)
    if harness_retries:
        return env
    for name in RETRY_VARIABLES:
        env.pop(name, None)
    return with_plugin(env, PLUGIN)


def planned(harness_retries: bool, reruns: int) -> str:
    """The dry run's line on who retries a failed test."""
    ours = f'then up to {reruns} isolated rerun(s) (rerun_failed_tests)' if reruns else \
        'no isolated rerun (rerun_failed_tests = 0)'
    if harness_retries:
        return (f"retries: PyTorch's own kept (harness_retries = True: pytest-rerunfailures' --reruns=2, 2.6's "
                f'single-test retries: up to 9 runs of a failing test per run_test.py call), {ours}')
    return (f"retries: PyTorch's own off (PYTEST_PLUGINS={PLUGIN}: no --reruns, no single-test retries; "
            f'{", ".join(RETRY_VARIABLES)} unset): a failing test runs once, {ours}')
