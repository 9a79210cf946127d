"""Benchmark: `eb-pytorch-cuda report` on one huge run_test.py console log (issue 28, item 6).

Why: an EasyBuild log of a full PyTorch test step, kept by a site or attached to a bot job, reaches a
gigabyte; `report` must judge it without taking minutes or the node's memory (goal: 1 GB in under 30 s
and under 300 MB peak).

It writes a log of --size-mb MB: suites in the form run_test.py 2.1 prints (`Running X`, the suite's log
replayed between `##[group]PRINTING LOG FILE of X` and `FINISHED PRINTING LOG FILE of X`), unittest and
pytest output alternating, one suite in 50 with a failure (`X failed!`), then runs the real command
`eb-pytorch-cuda report LOG --format json` in a fresh process --rounds times and prints the median wall
time, the peak RSS of that process (getrusage of the child) and whether the verdict counts are the ones
written.  The log is written once to --workdir (default: a temporary directory, removed afterwards).

    python benchmarks/bench_big_log.py [--size-mb 1024] [--tests-per-suite 2000] [--rounds 1]

Measured on the project's 2-core VM shared with other sessions (load average about 7): the whole-text
reader 330 s and 2,099 MB peak RSS for 1 GiB (9,200 suites, 18.4 million tests); the streaming reader
(issue 28 item 6) 22.9 s median of 3 (22.0-25.7 s) and 111 MB, counts right.
"""

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

MEASURE = """
import resource, subprocess, sys, time
start = time.perf_counter()
done = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
elapsed = time.perf_counter() - start
sys.stderr.buffer.write(done.stderr)
sys.stdout.buffer.write(done.stdout)
print(f'\\nMEASURED {elapsed} {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss} {done.returncode}')
"""


def _unittest_suite(name, tests, failed):
    lines = [f'Running {name} 1/1 ... [2024-01-01 00:00:00]',
             f"Executing ['python', '-bb', '{name}.py', '-v'] ... [2024-01-01 00:00:00]", '',
             f'Expand the folded group to see the log file of {name} 1/1',
             f'##[group]PRINTING LOG FILE of {name} 1/1 ({name}_1.log)']
    lines += [f'test_case_{i} (__main__.TestThing.test_case_{i}) ... ok' for i in range(tests - failed)]
    lines += [f'test_broken_{i} (__main__.TestThing.test_broken_{i}) ... FAIL' for i in range(failed)]
    for i in range(failed):
        lines += ['', '=' * 70, f'FAIL: test_broken_{i} (__main__.TestThing.test_broken_{i})', '-' * 70,
                  'Traceback (most recent call last):', '  File "x.py", line 1, in test', 'AssertionError: no']
    lines += ['-' * 70, f'Ran {tests} tests in 12.345s', '', f'FAILED (failures={failed})' if failed else 'OK',
              '##[endgroup]', f'FINISHED PRINTING LOG FILE of {name} 1/1 ({name}_1.log)', '']
    if failed:
        lines.append(f'{name} 1/1 failed!')
    return '\n'.join(lines) + '\n'


def _pytest_suite(name, tests, failed):
    lines = [f'Running {name} 1/1 ... [2024-01-01 00:00:00]',
             f"Executing ['python', '-bb', '{name}.py', '-v'] ... [2024-01-01 00:00:00]", '',
             f'##[group]PRINTING LOG FILE of {name} 1/1 ({name}_1.log)',
             '============================= test session starts ==============================']
    lines += [f'{name}.py::TestThing::test_case_{i} PASSED [  1%]' for i in range(tests - failed)]
    lines += [f'{name}.py::TestThing::test_broken_{i} FAILED [ 99%]' for i in range(failed)]
    lines += ['=========================== short test summary info ============================']
    lines += [f'FAILED {name}.py::TestThing::test_broken_{i} - AssertionError: no' for i in range(failed)]
    summary = f'{failed} failed, {tests - failed} passed' if failed else f'{tests} passed'
    lines += [f'======================== {summary} in 12.34s =========================', '##[endgroup]',
              f'FINISHED PRINTING LOG FILE of {name} 1/1 ({name}_1.log)', '']
    if failed:
        lines.append(f'{name} 1/1 failed!')
    return '\n'.join(lines) + '\n'


def generate(path, size_mb, tests):
    """Write the log; return (suites, tests, failed tests) written."""
    limit, written, suites, total, failures = size_mb * 2 ** 20, 0, 0, 0, 0
    with open(path, 'w') as handle:
        while written < limit:
            failed = 1 if suites % 50 == 49 else 0
            make = _pytest_suite if suites % 2 else _unittest_suite
            block = make(f'test_suite_{suites}', tests, failed)
            handle.write(block)
            written += len(block)
            suites, total, failures = suites + 1, total + tests, failures + failed
    return suites, total, failures


def measure(log):
    script = shutil.which('eb-pytorch-cuda', path=os.path.dirname(sys.executable)) or 'eb-pytorch-cuda'
    done = subprocess.run([sys.executable, '-c', MEASURE, script, 'report', log, '--format', 'json',
                           '--max-failed-tests', '1000000'], capture_output=True, text=True)
    text, _, tail = done.stdout.rpartition('\nMEASURED ')
    elapsed, peak_kb, code = tail.split()
    return float(elapsed), int(peak_kb) / 1024, int(code), text, done.stderr


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--size-mb', type=int, default=1024)
    parser.add_argument('--tests-per-suite', type=int, default=2000)
    parser.add_argument('--rounds', type=int, default=1)
    parser.add_argument('--workdir')
    args = parser.parse_args()
    if args.workdir and not os.path.isdir(args.workdir):
        parser.error(f'--workdir {args.workdir}: no such directory')
    workdir = args.workdir or tempfile.mkdtemp(prefix='bench-big-log-')
    try:
        log = os.path.join(workdir, 'run.log')
        start = time.perf_counter()
        suites, tests, failed = generate(log, args.size_mb, args.tests_per_suite)
        print(f'log: {os.path.getsize(log) / 2 ** 20:.0f} MiB, {suites} suites, {tests} tests, {failed} failed '
              f'(written in {time.perf_counter() - start:.1f} s)')
        runs = []
        for _ in range(args.rounds):
            elapsed, peak, code, out, err = measure(log)
            if code not in (0, 1):
                raise SystemExit(f'report failed (exit {code}): {err.strip()[-500:]}')
            data = json.loads(out)
            right = (len(data['suites']), data['tests'], data['failed_tests']) == (suites, tests, failed)
            runs.append((elapsed, peak))
            print(f'report: {elapsed:.1f} s, peak RSS {peak:.0f} MiB, counts {"right" if right else "WRONG"}')
        print(f'median of {len(runs)}: {statistics.median(r[0] for r in runs):.1f} s, '
              f'{statistics.median(r[1] for r in runs):.0f} MiB peak RSS')
    finally:
        if not args.workdir:
            shutil.rmtree(workdir)


if __name__ == '__main__':
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    main()
