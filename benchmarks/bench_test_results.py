"""Benchmark: parsing a PyTorch-scale test run, ours against the upstream EB_PyTorch easyblock's parser.

Why: the verdict of a ten-hour test step must not take long to compute or re-compute, and a maintainer
re-judges saved results after changing the policy.

It generates a run the size of PyTorch 2.1's (--suites 1000 XML files, --tests 207000 test cases in
all, a few failures, skips, xfails and reruns, plus the matching run_test.py console log), then times,
each in a fresh process, upstream and ours alternating in every round so that both see the same load
(median of --rounds; wall and CPU time; peak RSS from getrusage of that process):
  upstream  easybuild.easyblocks.pytorch: get_test_results(dir) + parse_test_log(log) + find_failed_test_names(log)
  ours      eb_pytorch_cuda: load_results([dir, log]) + judge(...)
  report    `eb-pytorch-cuda report saved.json` on our saved JSON result (whole command, Python start included)
  long line the time our log parser takes on one 160 KB line of '= ' + '1 passed, ' * 16000 (linear patterns)

    python benchmarks/bench_test_results.py [--suites 1000] [--tests 207000] [--rounds 3]
"""

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

UPSTREAM = """
import sys, time, resource
from pathlib import Path
from easybuild.easyblocks.pytorch import get_test_results, parse_test_log, find_failed_test_names
start, cpu = time.perf_counter(), time.process_time()
results = get_test_results(Path(sys.argv[1]))
text = open(sys.argv[2]).read()
parsed = parse_test_log(text)
names = find_failed_test_names(text)
elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
failed = sum(s.failures + s.errors for s in results.values())
print(elapsed, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, failed, sum(s.num_tests for s in results.values()),
      cpu)
"""

OURS = """
import sys, time, resource
from eb_pytorch_cuda.testsuite.results.saved import load_results
from eb_pytorch_cuda.testsuite.policy.judging import Policy, judge
start, cpu = time.perf_counter(), time.process_time()
result = load_results([sys.argv[1], sys.argv[2]])
verdict = judge(result, Policy(10, []))
elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
counts = [s.counts for s in result.suites.values()]
total = sum(c['failed'] + c['errors'] + c['passed'] + c['skipped'] + c['xfailed'] + c['xpassed'] for c in counts)
failed = sum(c['failed'] + c['errors'] for c in counts)
print(elapsed, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, failed, total, cpu)
"""


def generate(directory, suites, tests, seed=1):
    """Write test-reports/python-pytest/<suite>/<suite>-<hash>.xml files and run.log; return (dir, log)."""
    rng = random.Random(seed)
    reports = os.path.join(directory, 'test-reports')
    per_suite = tests // suites
    log = []
    for index in range(suites):
        suite = f'area{index % 37}/test_module_{index}'
        dotted = suite.replace('/', '.')
        cases, counts = [], {'failed': 0, 'passed': 0, 'skipped': 0, 'xfailed': 0, 'rerun': 0}
        failed_names = []
        for number in range(per_suite + (1 if index < tests % suites else 0)):
            name, cls = f'test_case_{number}', f'Test{index % 11}'
            roll = rng.random()
            if roll < 0.00025:
                child, state = '<failure message="boom">trace</failure><rerun message="x"/>', 'failed'
                counts['rerun'] += 1
                failed_names.append(f'{cls}::{name}')
            elif roll < 0.06:
                child, state = '<skipped message="needs GPU"/>', 'skipped'
            elif roll < 0.07:
                child, state = '<skipped type="pytest.xfail" message="xfail"/>', 'xfailed'
            else:
                child, state = '', 'passed'
            counts[state] += 1
            cases.append(f'<testcase classname="test.{dotted}.{cls}" name="{name}" file="{suite}.py" '
                         f'time="0.01">{child}</testcase>')
        path = os.path.join(reports, 'python-pytest', dotted, f'{dotted}-{index:08x}.xml')
        os.makedirs(os.path.dirname(path), exist_ok=True)
        skipped = counts['skipped'] + counts['xfailed']
        with open(path, 'w') as handle:
            handle.write(f'<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" '
                         f'errors="0" failures="{counts["failed"]}" skipped="{skipped}" tests="{len(cases)}" '
                         f'time="1.0">{"".join(cases)}</testsuite></testsuites>')
        log.append(f'Running {suite} 1/1 ... [2024-01-10 10:00:00.000000]')
        log += [f'FAILED [0.01s] {suite}.py::{n} - AssertionError: boom' for n in failed_names]
        summary = ', '.join(f'{v} {k}' for k, v in counts.items() if v)
        log.append(f'{"=" * 20} {summary} in 12.34s {"=" * 20}')
        if failed_names:
            log.append(f'{suite} 1/1 failed!')
    log_path = os.path.join(directory, 'run.log')
    with open(log_path, 'w') as handle:
        handle.write('\n'.join(log) + '\n')
    return reports, log_path


def _run(script, reports, log):
    out = subprocess.run([sys.executable, '-c', script, reports, log], check=True, capture_output=True,
                         text=True).stdout.split()
    return float(out[0]), int(out[1]), int(out[2]), int(out[3]), float(out[4])


def measure(reports, log, rounds):
    """Upstream and ours, alternating in each round so that both see the same machine load (a shared
    machine's load changes by the minute); per side: median wall s, max peak RSS, failed, tests, median CPU s;
    and the median of the per-round wall and CPU ratios."""
    runs = {'upstream': [], 'ours': []}
    for _ in range(rounds):
        runs['upstream'].append(_run(UPSTREAM, reports, log))
        runs['ours'].append(_run(OURS, reports, log))
    summary = {side: (statistics.median(r[0] for r in rs), max(r[1] for r in rs), rs[0][2], rs[0][3],
                      statistics.median(r[4] for r in rs)) for side, rs in runs.items()}
    ratios = [(u[0] / o[0], u[4] / o[4]) for u, o in zip(runs['upstream'], runs['ours'])]
    return summary, (statistics.median(r[0] for r in ratios), statistics.median(r[1] for r in ratios))


def long_line_seconds():
    """Time to parse a log whose only summary-like line is 160 KB long and has no ' in Xs ===' tail."""
    from eb_pytorch_cuda.testsuite.results.logparse import parse_log_text
    text = 'Running test_x 1/1 ... [2024-01-10 10:00:00.000000]\n= ' + '1 passed, ' * 16000 + '\n'
    start = time.perf_counter()
    parse_log_text(text)
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--suites', type=int, default=1000)
    parser.add_argument('--tests', type=int, default=207000)
    parser.add_argument('--rounds', type=int, default=3)
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix='bench-results-')
    try:
        reports, log = generate(workdir, args.suites, args.tests)
        summary, (wall_ratio, cpu_ratio) = measure(reports, log, args.rounds)
        upstream, ours = summary['upstream'], summary['ours']
        print(f'{args.suites} XML files, {ours[3]} test cases (upstream counts {upstream[3]}), '
              f'failed: ours {ours[2]}, upstream {upstream[2]}; median of {args.rounds} rounds, each a fresh '
              f'process of upstream then of ours')
        print(f'  upstream get_test_results+parse_test_log: {upstream[0]:6.2f} s wall, {upstream[4]:6.2f} s CPU, '
              f'peak RSS {upstream[1] / 1024:6.0f} MB')
        print(f'  ours load_results+judge:                  {ours[0]:6.2f} s wall, {ours[4]:6.2f} s CPU, '
              f'peak RSS {ours[1] / 1024:6.0f} MB')
        print(f'  speed-up (median of per-round ratios) {wall_ratio:.1f}x wall, {cpu_ratio:.1f}x CPU; '
              f'peak memory ratio {ours[1] / upstream[1]:.2f}')
        saved = os.path.join(workdir, 'saved.json')
        report = shutil.which('eb-pytorch-cuda', path=os.path.dirname(sys.executable)) or 'eb-pytorch-cuda'
        with open(saved, 'w') as handle:
            handle.write(subprocess.run([report, 'report', reports, log, '--format', 'json', '--max-failed-tests',
                                         '100000'], capture_output=True, text=True, check=True).stdout)
        times = []
        for _ in range(args.rounds):
            start = time.perf_counter()
            subprocess.run([report, 'report', saved, '--max-failed-tests', '5'], capture_output=True)
            times.append(time.perf_counter() - start)
        size = os.path.getsize(saved) / 1e6
        print(f'  report re-judging the saved JSON ({size:.1f} MB): {statistics.median(times):.2f} s (whole command)')
        json.load(open(saved))
        print(f'  one 160 KB pytest-summary-like line (\'= \' + \'1 passed, \' * 16000, no tail): '
              f'{long_line_seconds():.4f} s to parse (the pattern is linear in the line length)')
    finally:
        shutil.rmtree(workdir)


if __name__ == '__main__':
    main()
