"""Isolated reruns of failed tests: each one alone, without a shell, to tell flaky from reproducible."""

import errno
import subprocess
import tempfile
from typing import Callable, List, Mapping, Optional, Tuple

from eb_pytorch_cuda import process
from eb_pytorch_cuda.testsuite.run import discovery
from eb_pytorch_cuda.testsuite.run.calls import XML_VARIABLE, batch_env
from eb_pytorch_cuda.testsuite.run.command import TestCommand
from eb_pytorch_cuda.testsuite.run.harness import Harness
from eb_pytorch_cuda.testsuite.run.plan import RunPlan
from eb_pytorch_cuda.testsuite.results.model import UNJUDGEABLE, RerunOutcome, RunResult, Suite


SHOWN_ID = 200  # characters of a test id in a progress line


def rerun_argv(command: TestCommand, python: str, suite: str, test_id: Optional[str], harness: Harness) -> List[str]:
    """The command that reruns exactly one test: `python -bb <suite>.py Class.test_method` (unittest's exact
    id; `-k` would also run every test whose name contains it); the whole suite through run_test.py (so its
    custom handler's environment applies) when the test is not named by class and method, or the suite has a
    custom handler."""
    if test_id and '.' in test_id and not harness.has_handler(suite):
        return [python, '-bb', f'{suite}.py', test_id]
    return discovery.run_argv(command.argv, [suite], ['--continue-through-error'])


def rerun_isolated(command: TestCommand, python: str, suite: str, test_id: Optional[str], harness: Harness,
                   env: Mapping[str, str], timeout: float = 3600) -> Tuple[Optional[bool], str]:
    """Rerun one failed test (or its whole suite) alone, in its own process group killed at the timeout;
    return (passed, output), passed None when it could not be rerun (output then says why)."""
    argv = rerun_argv(command, python, suite, test_id, harness)
    with tempfile.TemporaryFile('w+') as output:
        try:
            code, timed_out = process.run(argv, timeout=timeout, cwd=command.cwd, env=dict(env), stdout=output,
                                          stderr=subprocess.STDOUT)
        except OSError as err:
            if err.errno != errno.E2BIG:
                raise
            # the kernel takes no argument over 128 KiB: a 200,000-character test id (as a generated test
            # may have) stopped the whole step before its verdict, on every run again
            return None, f'skipped: its command line is too long for the kernel ({err.strerror})'
        if timed_out:
            return False, f'timed out after {timeout}s'
        output.seek(0)
        return code == 0, output.read()


def apply_reruns(result: RunResult, times: int, rerun: Callable[[str, Optional[str]], Tuple[Optional[bool], str]]
                 ) -> List[Tuple[str, Optional[str], Optional[str]]]:
    """Rerun each failed test of result (or its suite when names are missing) up to `times` times, in isolation
    (rerun_suite_failures, suite by suite in name order)."""
    done: list = []
    for suite in sorted(result.suites.values(), key=lambda s: s.name):
        done.extend(rerun_suite_failures(suite, times, rerun))
    return done


def rerun_suite_failures(suite: Suite, times: int,
                         rerun: Callable[[str, Optional[str]], Tuple[Optional[bool], str]]
                         ) -> List[Tuple[str, Optional[str], Optional[str]]]:
    """Rerun each failed test of suite (or the suite whole when names are missing) up to `times` times.

    rerun(suite, test_id or None) -> (passed, output), passed None when it cannot be rerun.  Sets
    rerun_outcome to FLAKY (passed on a rerun) or REPRODUCIBLE on each failed TestCase, and on a suite
    that could only be rerun whole; one that cannot be rerun keeps none (judged as not rerun).
    Returns [(suite, test_id or None, the outcome's word, or the note of a rerun that was skipped)].
    """
    done: list = []
    if times <= 0:
        return done
    for test in suite.failed_tests:
        test.rerun_outcome, said = _outcome(rerun, suite.name, test.test_id, times, test.reruns)
        done.append((suite.name, test.test_id, said))
    if suite.status in UNJUDGEABLE or suite.failing_count > len(suite.failed_tests):
        suite.rerun_outcome, said = _outcome(rerun, suite.name, None, times)
        done.append((suite.name, None, said))
    return done


def _outcome(rerun, suite, test_id, times, harness_reruns=0):
    """(the RerunOutcome, its words with the runs it took) after up to `times` reruns; (None, why) when one cannot
    run.  harness_reruns: the harness's own reruns of the test in its suite (its XML's <rerun>s)."""
    # exact with the harness's retries off (run/retries); with them on, its 2.6 single-test sessions are not counted
    before = '1 run in its suite' if not harness_reruns else \
        f"at least {1 + harness_reruns} runs in its suite (the harness's own retries)"
    for attempt in range(1, times + 1):
        passed, output = rerun(suite, test_id)
        if passed is None:
            return None, output
        if passed:
            return RerunOutcome.FLAKY, (f'{RerunOutcome.FLAKY.value}: passed alone on rerun {attempt} of {times}, '
                                        f'after failing {before}')
    return RerunOutcome.REPRODUCIBLE, f'{RerunOutcome.REPRODUCIBLE.value}: failed {before} and {times} alone'


def rerun_failures(result: RunResult, plan: RunPlan, progress: Callable[[str], None]) -> None:
    """Rerun each failed test of result alone (exact test id, the suite's handler environment), up to the
    plan's reruns times, marking it flaky or reproducible; once per run, after the suites ran on this node
    (the service calls it; a spread run's jobs rerun their own suites' failures: rerun_suite_in_plan)."""
    for name, test, outcome in apply_reruns(result, plan.reruns, _rerunner(plan, alone=True)):
        progress(_rerun_line(name, test, outcome))


def rerun_suite_in_plan(suite: Suite, plan: RunPlan, progress: Callable[[str], None]) -> None:
    """Rerun suite's failed tests (rerun_suite_failures) as rerun_failures does, on the node that ran it: a Slurm
    job reruns its own failures before it stores the suite's record (spread/worker), where its GPUs and its CUDA
    device tests' mode are; the submitting node may have neither."""
    for name, test, outcome in rerun_suite_failures(suite, plan.reruns, _rerunner(plan)):
        progress(_rerun_line(name, test, outcome))


def rerun_lines_of_jobs(result: RunResult) -> List[str]:
    """The lines that say what the Slurm jobs' own reruns (rerun_suite_in_plan in spread/worker) showed, in
    rerun_failures' words, for the submitting node's output: the jobs' outputs go with their queue."""
    lines = []
    for suite in sorted(result.suites.values(), key=lambda s: s.name):
        outcomes = [(test.test_id, test.rerun_outcome) for test in suite.failed_tests] + [(None, suite.rerun_outcome)]
        lines += [_rerun_line(suite.name, test, f'{outcome.value} (rerun in the Slurm job that ran it)')
                  for test, outcome in outcomes if outcome is not None]
    return lines


def _rerunner(plan: RunPlan, alone: bool = False) -> Callable[[str, Optional[str]], Tuple[Optional[bool], str]]:
    """rerun(suite, test_id or None) of apply_reruns with plan's command, Python, environment and timeouts; alone:
    nothing runs beside the reruns (on this node, after its suites), so they keep torch's own threads and the
    harness's own GPU memory share (RunPlan.call_env), not the shares of the calls that ran side by side."""
    # no XML switch: a rerun's verdict is its exit status, and an exact rerun runs under unittest, where a
    # common_utils patched by upstream's configure step would import xmlrunner (2.1.2's easyconfigs lack it)
    rerun_env = {name: value for name, value in batch_env(plan.call_env(1, alone)).items() if name != XML_VARIABLE}
    return lambda name, test: rerun_isolated(plan.command, plan.python, name, test, plan.harness, rerun_env,
                                             timeout=plan.timeout_for(name))


def _rerun_line(suite: str, test_id: Optional[str], said: Optional[str]) -> str:
    """'rerun of suite[::test]: said', a long test id cut to SHOWN_ID characters."""
    shown = '' if not test_id else test_id if len(test_id) <= SHOWN_ID else \
        f'{test_id[:SHOWN_ID]}... ({len(test_id)} characters)'
    return f"rerun of {suite}{'::' + shown if shown else ''}: {said}"
