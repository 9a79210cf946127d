"""Benchmark: `report --suggest-policy` over one saved result per EESSI target, at PyTorch's scale.

Why: the suggestion is what a maintainer runs on a failed bot job (or on all targets' jobs at once); it
judges every run twice (as it is, and with the suggested entries) and must stay a matter of seconds.

It writes --targets saved JSON results (as the easyblock writes them, each recording its target), each
with --suites suites of about 207 tests and --failures failures (half named, half only counted), a
quarter of them shared by every target, then times in fresh processes (median of --rounds):
  report     `eb-pytorch-cuda report *.json` (the whole command, Python start included)
  suggest    `eb-pytorch-cuda report *.json --suggest-policy`

    python benchmarks/bench_suggest_policy.py [--targets 8] [--suites 1000] [--failures 20] [--rounds 5]
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

TARGETS = ['aarch64/generic', 'aarch64/neoverse_n1', 'aarch64/neoverse_v1', 'aarch64/nvidia/grace',
           'x86_64/intel/haswell', 'x86_64/intel/icelake', 'x86_64/intel/sapphirerapids', 'x86_64/amd/zen4']


def saved_result(target, suites, failures, seed):
    rng = random.Random(seed)
    shared = [f'test_suite_{i}' for i in range(0, suites, max(1, suites // max(1, failures // 4)))][:failures // 4]
    failing = shared + rng.sample([f'test_suite_{i}' for i in range(suites)], failures - len(shared))
    data = {'format': 'eb-pytorch-cuda-test-results', 'scope': {'target': target, 'compute_capabilities': []},
            'suites': []}
    for i in range(suites):
        name = f'test_suite_{i}'
        fails = failing.count(name)
        named = [{'test_id': f'TestX.test_{name}_{k}', 'state': 'failed'} for k in range(fails // 2)]
        data['suites'].append({'name': name, 'status': 'failed' if fails else 'passed',
                               'counts': {'failed': fails, 'errors': 0, 'passed': 207 - fails, 'skipped': 3,
                                          'xfailed': 1, 'xpassed': 0, 'rerun': 2 * fails},
                               'failed_tests': named, 'sources': ['xml'], 'seconds': 12.0})
    return data


def timed(command, rounds):
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True)
        times.append(time.perf_counter() - start)
        if done.returncode not in (0, 1):
            sys.exit(done.stderr)
    return statistics.median(times), done.stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--targets', type=int, default=8)
    parser.add_argument('--suites', type=int, default=1000)
    parser.add_argument('--failures', type=int, default=20)
    parser.add_argument('--rounds', type=int, default=5)
    args = parser.parse_args()
    script = shutil.which('eb-pytorch-cuda', path=os.path.dirname(sys.executable) + os.pathsep + os.environ['PATH'])
    workdir = tempfile.mkdtemp(prefix='bench-suggest-')
    try:
        paths = []
        for index, target in enumerate((TARGETS * args.targets)[:args.targets]):
            path = os.path.join(workdir, f"{index}-{target.replace('/', '_')}.json")
            with open(path, 'w') as handle:
                json.dump(saved_result(target, args.suites, args.failures, index), handle)
            paths.append(path)
        base, _ = timed([script, 'report', *paths, '--max-failed-tests', '0'], args.rounds)
        full, out = timed([script, 'report', *paths, '--max-failed-tests', '0', '--suggest-policy'], args.rounds)
        entries = sum(1 for line in out.splitlines() if line.startswith("        ('"))
        print(f'{args.targets} targets x {args.suites} suites, {args.failures} failures each; median of '
              f'{args.rounds} fresh processes')
        print(f'  report                  {base:.2f} s')
        print(f'  report --suggest-policy {full:.2f} s  ({entries} merged entries, '
              f"{out.count('with these entries: PASS')} of {args.targets} runs pass with them)")
    finally:
        shutil.rmtree(workdir)


if __name__ == '__main__':
    main()
