"""Run the test command without a shell, stream its output to a file, report progress as suites finish.

The hours-long PyTorch test step should show on the console how far it is, not only in the log:
run() calls progress(message) whenever a suite starts or fails, with "suites done of total" (the total
from run_test.py's "Selected tests:" list) and the failures so far.
"""

import os
import re
import subprocess
import time

from .logparse import MARKER, SUITE_FAILED_LINE

_SELECTED = re.compile(r'^Selected tests:\s*$')


def run(command, output_path, progress=None, extra_env=None, timeout=None):
    """Run TestCommand; write all output to output_path; return (exit code, output text)."""
    env = dict(os.environ)
    env.update(command.env)
    env.update(extra_env or {})
    total, started, failed, collecting = None, 0, [], False
    lines = []
    start = time.time()
    with open(output_path, 'w') as log, subprocess.Popen(command.argv, cwd=command.cwd, env=env, text=True,
                                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                                        errors='replace', bufsize=1) as process:
        for line in process.stdout:
            log.write(line)
            lines.append(line)
            if collecting:
                if line.startswith(' ') and line.strip():
                    total = (total or 0) + 1
                    continue
                collecting = False
            if _SELECTED.match(line):
                collecting, total = True, 0
                continue
            marker = MARKER.match(line)
            suite_failed = SUITE_FAILED_LINE.match(line.rstrip('\n'))
            if marker:
                started += 1
                name = marker.group('run') or marker.group('log')
                if progress:
                    progress(f"suite {started}{'/' + str(total) if total else ''}: {name} "
                             f"({len(failed)} failed so far, {int(time.time() - start)}s)")
            elif suite_failed and suite_failed.group('name') not in failed:
                failed.append(suite_failed.group('name'))
                if progress:
                    progress(f"{suite_failed.group('name')} failed"
                             + (f" ({suite_failed.group('signal')})" if suite_failed.group('signal') else ''))
        code = process.wait(timeout=timeout)
    return code, ''.join(lines)


def rerun_isolated(command_cwd, python, suite, test_id, env_overrides=None, timeout=3600):
    """Rerun one failed test (or its whole suite when test_id is None) alone; True when it passed."""
    env = dict(os.environ)
    env.update(env_overrides or {})
    if test_id:
        argv = [python, f'{suite}.py', '-k', test_id.rsplit('.', 1)[-1]]
    else:
        argv = [python, 'run_test.py', '-i', suite]
    try:
        done = subprocess.run(argv, cwd=command_cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, errors='replace', timeout=timeout)
    except subprocess.TimeoutExpired:
        return False, f'timed out after {timeout}s'
    return done.returncode == 0, done.stdout


def apply_reruns(result, times, rerun):
    """Rerun each failed test (or its suite when names are missing) up to `times` times, in isolation.

    rerun(suite, test_id or None) -> (passed, output).  Sets rerun_outcome to 'flaky' (passed on a
    rerun) or 'reproducible' on each failed TestCase, and on suites that could only be rerun whole.
    Returns [(suite, test_id or None, outcome)].
    """
    from .model import UNJUDGEABLE
    done = []
    if times <= 0:
        return done
    for suite in sorted(result.suites.values(), key=lambda s: s.name):
        for test in suite.failed_tests:
            test.rerun_outcome = 'flaky' if any(rerun(suite.name, test.test_id)[0] for _ in range(times)) \
                else 'reproducible'
            done.append((suite.name, test.test_id, test.rerun_outcome))
        if suite.status in UNJUDGEABLE or suite.failing_count > len(suite.failed_tests):
            suite.rerun_outcome = 'flaky' if any(rerun(suite.name, None)[0] for _ in range(times)) \
                else 'reproducible'
            done.append((suite.name, None, suite.rerun_outcome))
    return done
