"""Benchmark (issue 33, item 5): suite processes side by side with torch's default threads against the thread
count our test step gives them (run/node.threads_per_suite), on this node.

Why: with more than one run_test.py call at a time, each call's pool runs up to NUM_PROCS suite processes, and
torch gives each a thread per core unless OMP_NUM_THREADS says otherwise; on the H200 node two pieces of
test_masked side by side took 844.5 s of pytest time where the whole suite took 194 s
(docs/validation/h200-2026-12-03-bench-cpu-pool-ours/).  This measures the mechanism on any node: one process of
a real selection alone, then PROCS of it side by side, once with OMP_NUM_THREADS unset, once with the rule's
count for PROCS processes, and checks that each run passes the same tests.

    python benchmarks/bench_suite_threads.py --python PY --test-dir TREE/test [--procs N]
        [--file test_masked.py] [--k mask_layout] [--out JSON]

PY: a Python with torch and the harness's test needs (tools/setup.sh's .venvs/harness); TREE/test: its PyTorch
tree's test directory (.venvs/pytorch-src/pytorch-v2.6.0/test).  Figures go to docs/benchmarks.md.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'src'))

from eb_pytorch_cuda.testsuite.run.node import threads_per_suite, usable_cpus  # noqa: E402

SUMMARY = re.compile(r'^=*\s*(.*\b(?:passed|failed)\b.*) in [\d.]+s', re.M)


def side_by_side(args, procs, threads):
    """(wall seconds, each process's pytest summary) of procs processes of the selection at once."""
    env = {name: value for name, value in os.environ.items() if name != 'OMP_NUM_THREADS'}
    if threads is not None:
        env['OMP_NUM_THREADS'] = str(threads)
    argv = [args.python, '-m', 'pytest', '-p', 'no:cacheprovider', '-q', args.file, '-k', args.k]
    with tempfile.TemporaryDirectory() as logs:
        outputs = [open(os.path.join(logs, f'{index}.log'), 'w+') for index in range(procs)]
        start = time.perf_counter()
        children = [subprocess.Popen(argv, cwd=args.test_dir, env=env, stdout=out, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL) for out in outputs]
        try:
            for child in children:
                child.wait()
        finally:
            for child in children:
                if child.poll() is None:
                    child.kill()
                    child.wait()
        seconds = time.perf_counter() - start
        summaries = []
        for out in outputs:
            out.seek(0)
            found = SUMMARY.findall(out.read())
            summaries.append(found[-1] if found else None)
            out.close()
    return seconds, summaries


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--python', required=True)
    parser.add_argument('--test-dir', required=True)
    parser.add_argument('--procs', type=int, default=2 * usable_cpus())
    parser.add_argument('--file', default='test_masked.py')
    parser.add_argument('--k', default='mask_layout')
    parser.add_argument('--out')
    args = parser.parse_args()
    args.python, args.test_dir = os.path.abspath(args.python), os.path.abspath(args.test_dir)  # run in test/
    cpus = usable_cpus()
    # PROCS processes as the rule sees them: PROCS // 3 calls of a 2.6 pool of 3 (at least one call)
    rule = threads_per_suite(cpus, max(1, args.procs // 3), 3 if args.procs >= 3 else args.procs)
    runs = {}
    for name, procs, threads in (('alone, default threads', 1, None), ('alone, the rule', 1, rule),
                                 (f'{args.procs} side by side, default threads', args.procs, None),
                                 (f'{args.procs} side by side, the rule', args.procs, rule)):
        seconds, summaries = side_by_side(args, procs, threads)
        runs[name] = {'seconds': round(seconds, 1), 'threads': threads, 'summaries': summaries}
        print(f'{name:40} {seconds:7.1f} s  OMP_NUM_THREADS={threads}  {summaries[0]}', flush=True)
    same = len({summary for run in runs.values() for summary in run['summaries']}) == 1
    print(f'cpus {cpus}; every process gave the same summary: {same}')
    if args.out:
        with open(args.out, 'w') as handle:
            json.dump({'cpus': cpus, 'file': args.file, 'k': args.k, 'runs': runs, 'same_summaries': same}, handle,
                      indent=1)


if __name__ == '__main__':
    main()
