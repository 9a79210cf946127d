"""Benchmark: the test step's suites run serially and N at a time give the same results, N times faster.

Why: parallel_test_suites is opt-in; a maintainer should know what it buys on their machine.  A test
tree of --suites suites (each one unittest file whose tests sleep --seconds in all, plus one failure
in every fifth suite) is run through the same code the easyblock uses (run/here.HereExecutor), serially
and with --parallel workers, and the wall times and results are compared.

    python benchmarks/bench_parallel_suites.py [--suites 8] [--seconds 2] [--parallel 2]
"""

import argparse
import os
import shutil
import sys
import tempfile
import time

from eb_pytorch_cuda import standins
from eb_pytorch_cuda.testsuite.run.here import HereExecutor
from eb_pytorch_cuda.testsuite.run.plan import RunRequest, build_plan
from eb_pytorch_cuda.testsuite.run.store import ResultStore
from eb_pytorch_cuda.testsuite.run.command import TestCommand


def make_tree(root, suites, seconds):
    """A fresh stand-in tree of sleeping suites (standins.sleeping_suite_tree)."""
    return standins.sleeping_suite_tree(root, suites, seconds)


def run(test_dir, parallel, workdir):
    command = TestCommand(test_dir, {}, [sys.executable, 'run_test.py'])
    env = dict(os.environ)
    store = ResultStore(os.path.join(workdir, f'store-{parallel}.jsonl'), 'bench')
    plan = build_plan(RunRequest(command, env, os.path.join(workdir, f'out-{parallel}'), sys.executable, {'': 600},
                                 parallel))  # the suites discovered before the clock starts
    start = time.perf_counter()
    HereExecutor().run(plan, plan.units, store)
    result = store.result(plan.suites)
    return time.perf_counter() - start, {name: (s.status, s.summary()) for name, s in result.suites.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--suites', type=int, default=8)
    parser.add_argument('--seconds', type=float, default=2)
    parser.add_argument('--parallel', type=int, default=2)
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix='bench-parallel-')
    try:
        serial_time, serial = run(make_tree(os.path.join(workdir, 'serial'), args.suites, args.seconds), 1, workdir)
        parallel_time, parallel = run(make_tree(os.path.join(workdir, 'parallel'), args.suites, args.seconds),
                                      args.parallel, workdir)
        print(f'{args.suites} suites of {args.seconds}s on {os.cpu_count()} CPUs')
        print(f'  serial:             {serial_time:6.1f} s')
        print(f'  {args.parallel} at a time:        {parallel_time:6.1f} s   '
              f'speed-up {serial_time / parallel_time:.2f}x (ideal {args.parallel:.2f}x)')
        print(f"  same results: {serial == parallel} ({sum(s == 'failed' for s, _ in serial.values())} failed suites)")
    finally:
        shutil.rmtree(workdir)


if __name__ == '__main__':
    main()
