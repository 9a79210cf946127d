"""Benchmark: one build's test suites spread over N Slurm jobs, against the same suites run serially.

Why: `test_suite_jobs = N` is only worth its setup if N jobs finish the test step close to N times
faster, and a site wants to know how far adding nodes helps a full PyTorch run.  Two measurements:

1. measured: a test tree of --suites suites, each a unittest file that sleeps --seconds (sleep-dominated
   on purpose: this machine has 2 cores, shared, so CPU-bound suites would measure the cores, not the
   spread), is run through solo.run_all one at a time and through controller.run_spread on --jobs Slurm
   jobs of a real single-node Slurm started here (tests/slurm_cluster.py: several one-CPU job slots);
   wall times and results are compared.  Needs root and Debian's slurm-wlm + munge (tools/setup.sh).
2. simulated: from recorded per-suite times of a full PyTorch run (--times: PyTorch's own
   test-times.json shape {build: {config: {suite: s}}}, or our results JSON with `suite_seconds` or
   `suites[].seconds`), the wall time on N = 1, 4, 16, 64 nodes of this queue (suites handed out longest
   first, each node taking the next one when free, --overhead seconds per suite for run_test.py's own
   start), against the floor: the longest single suite, and the total divided by N.

    python benchmarks/bench_slurm_spread.py [--suites 12] [--seconds 4] [--jobs 2]
    python benchmarks/bench_slurm_spread.py --simulate-only --times test-times.json [--config default]
"""

import argparse
import heapq
import json
import os
import shutil
import sys
import tempfile
import time

from eb_pytorch_cuda import standins
from eb_pytorch_cuda.testsuite.run import discovery
from eb_pytorch_cuda.testsuite.spread import controller
from eb_pytorch_cuda.testsuite.run import solo
from eb_pytorch_cuda.testsuite.run.store import ResultStore
from eb_pytorch_cuda.testsuite.run.command import TestCommand
from eb_pytorch_cuda.testsuite.spread.workqueue import longest_first


def make_tree(root, suites, seconds):
    """A fresh stand-in tree of sleeping suites (standins.sleeping_suite_tree)."""
    return standins.sleeping_suite_tree(root, suites, seconds)


def _outcomes(result):
    return {name: (s.status, s.summary()) for name, s in result.suites.items()}


def measure(args):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'tests'))
    from slurm_cluster import running_slurm  # the tests' real single-node Slurm
    workdir = tempfile.mkdtemp(prefix='bench-slurm-spread-')
    try:
        with running_slurm(os.path.join(workdir, 'slurm')):
            env = dict(os.environ)
            serial_dir = make_tree(os.path.join(workdir, 'serial'), args.suites, args.seconds)
            command = TestCommand(serial_dir, {}, [sys.executable, 'run_test.py'])
            suites = discovery.discover(command, env)[0]
            store = ResultStore(os.path.join(workdir, 'serial.jsonl'), 'bench')
            start = time.perf_counter()
            serial, _ = solo.run_all(command, suites, store, os.path.join(workdir, 'serial-out'), env,
                                     lambda suite: 600)
            serial_time = time.perf_counter() - start
            spread_dir = make_tree(os.path.join(workdir, 'spread'), args.suites, args.seconds)
            store = ResultStore(os.path.join(workdir, 'spread', 'results.jsonl'), 'bench')
            start = time.perf_counter()
            spread_result = controller.run_spread(TestCommand(spread_dir, {}, [sys.executable, 'run_test.py']), env,
                                                  store, os.path.join(workdir, 'spread-out'), sys.executable, {'': 600},
                                                  args.jobs, suites=suites, shared_paths=[workdir],
                                                  slurm_settings={'cpus_per_job': 1}, poll=0.5)
            spread_time = time.perf_counter() - start
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f'measured: {args.suites} suites sleeping {args.seconds}s each, {os.cpu_count()} CPUs, real Slurm')
    print(f'  serial (solo.run_all):      {serial_time:6.1f} s')
    print(f'  {args.jobs} Slurm jobs (controller.run_spread): {spread_time:6.1f} s   speed-up '
          f'{serial_time / spread_time:.2f}x (goal >= {0.8 * args.jobs:.1f}x, ideal {args.jobs}x)')
    same = _outcomes(serial) == _outcomes(spread_result)
    print(f"  same results: {same} ({sum(s == 'failed' for s, _ in _outcomes(serial).values())} failed suites)")


def load_times(path, build=None, config=None):
    """{suite: seconds} from PyTorch's test-times.json ({build: {config: {suite: s}}}) or our results JSON."""
    with open(path) as handle:
        data = json.load(handle)
    seconds = controller.previous_suite_seconds(path)
    if seconds:
        return seconds, 'results JSON'
    build = build or next(iter(data))
    config = config or ('default' if 'default' in data[build] else next(iter(data[build])))
    return {suite: float(s) for suite, s in data[build][config].items()}, f'{build} / {config}'


def simulate(times, nodes, overhead=0.0, order=None):
    """Wall time of the queue on `nodes` workers: each free worker takes the next suite (list scheduling)."""
    order = order or longest_first(times, times)
    free = [0.0] * nodes
    heapq.heapify(free)
    end = 0.0
    for suite in order:
        start = heapq.heappop(free)
        finish = start + times[suite] + overhead
        end = max(end, finish)
        heapq.heappush(free, finish)
    return end


def hours(seconds):
    return f'{seconds / 3600:7.2f} h'


def simulated(args):
    times, label = load_times(args.times, args.build, args.config)
    total, longest = sum(times.values()), max(times.items(), key=lambda item: item[1])
    print(f'simulated: {len(times)} suites of a full run ({label}; from {args.times}), {total / 3600:.1f} h in all, '
          f'longest {longest[0]} {longest[1] / 3600:.2f} h; +{args.overhead}s per suite')
    print('  nodes   longest-first   in listed order   floor max(longest, total/N)   vs floor')
    for nodes in args.nodes:
        queue = simulate(times, nodes, args.overhead)
        listed = simulate(times, nodes, args.overhead, sorted(times))
        floor = max(longest[1] + args.overhead, (total + args.overhead * len(times)) / nodes)
        print(f'  {nodes:5d}   {hours(queue)}     {hours(listed)}       {hours(floor)}                  '
              f'{queue / floor:5.2f}x')


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--suites', type=int, default=12)
    parser.add_argument('--seconds', type=float, default=4)
    parser.add_argument('--jobs', type=int, default=2)
    parser.add_argument('--times', help="recorded per-suite times (PyTorch's test-times.json or our results JSON)")
    parser.add_argument('--build', help='the build environment key in a test-times.json (default: the first)')
    parser.add_argument('--config', help="the test config key in a test-times.json (default: 'default')")
    parser.add_argument('--nodes', type=int, nargs='+', default=[1, 4, 16, 64])
    parser.add_argument('--overhead', type=float, default=4.3,
                        help="seconds per suite of run_test.py's own start (docs/design.md section 5: about 4.3 s)")
    parser.add_argument('--simulate-only', action='store_true')
    args = parser.parse_args()
    if not args.simulate_only:
        measure(args)
    if args.times:
        simulated(args)


if __name__ == '__main__':
    main()
