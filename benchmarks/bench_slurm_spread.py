"""Benchmark: one build's test suites spread over N Slurm jobs, against the same suites run serially.

Why: `test_suite_jobs = N` is only worth its setup if N jobs finish the test step close to N times
faster, and a site wants to know how far adding nodes helps a full PyTorch run.  Two measurements:

1. measured: a test tree of --suites suites, each a unittest file that sleeps --seconds (sleep-dominated
   on purpose: this machine has 2 cores, shared, so CPU-bound suites would measure the cores, not the
   spread), is run through run/here.HereExecutor one at a time and through spread/controller.SlurmExecutor on
   --jobs Slurm jobs of a real single-node Slurm started here (tests/slurm_cluster.py: several one-CPU job slots);
   wall times and results are compared.  Needs root and Debian's slurm-wlm + munge (tools/setup.sh).
2. simulated: from recorded per-suite times of a full PyTorch run (--times, default the stored
   benchmarks/data/riscv64-test-times.json: PyTorch's own test-times.json shape {build: {config: {suite:
   s}}}, or our results JSON with `suite_seconds` or `suites[].seconds`), the wall time on N = 1, 4, 16, 64,
   256 nodes of this queue, claimed with the worker's own claim rules (worker.claim_batch) and --overhead
   seconds of harness start-up per call, with suites as they are and with long suites split into pieces
   (results/pieces.py); efficiency is the speed-up over one node divided by N (issue 23; docs/benchmarks.md).

    python benchmarks/bench_slurm_spread.py [--suites 12] [--seconds 4] [--jobs 2]
    python benchmarks/bench_slurm_spread.py --simulate-only [--times test-times.json] [--config default] [--json]
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
from eb_pytorch_cuda.testsuite.spread import controller
from eb_pytorch_cuda.testsuite.run import solo
from eb_pytorch_cuda.testsuite.run.executor import execute
from eb_pytorch_cuda.testsuite.run.here import HereExecutor
from eb_pytorch_cuda.testsuite.run.plan import PieceRule, RunRequest, build_plan
from eb_pytorch_cuda.testsuite.run.store import ResultStore
from eb_pytorch_cuda.testsuite.run.command import TestCommand
from eb_pytorch_cuda.testsuite.run.harness import harness_of
from eb_pytorch_cuda.testsuite.results import pieces
from eb_pytorch_cuda.testsuite.results.previous import History
from eb_pytorch_cuda.testsuite.spread import worker
from eb_pytorch_cuda.testsuite.spread.workqueue import longest_first

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_HARNESS = os.path.join(HERE, '..', '.venvs', 'pytorch-src', 'pytorch-v2.6.0', 'test')


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
            store = ResultStore(os.path.join(workdir, 'serial.jsonl'), 'bench')
            plan = build_plan(RunRequest(command, env, os.path.join(workdir, 'serial-out'), sys.executable, {'': 600}))
            suites = list(plan.suites)  # discovered before the clock starts
            start = time.perf_counter()
            HereExecutor().run(plan, plan.units, store)
            serial = store.result(suites)
            serial_time = time.perf_counter() - start
            spread_dir = make_tree(os.path.join(workdir, 'spread'), args.suites, args.seconds)
            store = ResultStore(os.path.join(workdir, 'spread', 'results.jsonl'), 'bench')
            start = time.perf_counter()
            spread = controller.SpreadOptions(shared_paths=[workdir], slurm_settings={'cpus_per_job': 1}, poll=0.5)
            _plan, spread_result = execute(
                controller.SlurmExecutor(args.jobs, spread),
                RunRequest(TestCommand(spread_dir, {}, [sys.executable, 'run_test.py']), env,
                           os.path.join(workdir, 'spread-out'), sys.executable, {'': 600}, units=suites), store)
            spread_time = time.perf_counter() - start
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f'measured: {args.suites} suites sleeping {args.seconds}s each, {os.cpu_count()} CPUs, real Slurm')
    print(f'  serial (HereExecutor):       {serial_time:6.1f} s')
    print(f'  {args.jobs} Slurm jobs (SlurmExecutor): {spread_time:6.1f} s   speed-up '
          f'{serial_time / spread_time:.2f}x (goal >= {0.8 * args.jobs:.1f}x, ideal {args.jobs}x)')
    same = _outcomes(serial) == _outcomes(spread_result)
    print(f"  same results: {same} ({sum(s == 'failed' for s, _ in _outcomes(serial).values())} failed suites)")


REAL_TREE = os.path.join(HERE, '..', '.venvs', 'pytorch-src', 'pytorch-v2.6.0')
REAL_PYTHON = os.path.join(HERE, '..', '.venvs', 'harness', 'bin', 'python')


def _real_tree(root):
    for part in ('test', 'tools'):
        shutil.copytree(os.path.join(REAL_TREE, part), os.path.join(root, part),
                        ignore=shutil.ignore_patterns('test-reports'))
    shutil.copy(os.path.join(REAL_TREE, 'version.txt'), root)
    return os.path.join(root, 'test')


def measure_pieces(args):
    """A real suite of Debian's 2.6.0 harness run whole here, then as --pieces pieces on as many Slurm jobs."""
    sys.path.insert(0, os.path.join(HERE, '..', 'tests'))
    from slurm_cluster import running_slurm  # the tests' real single-node Slurm
    suite, count = args.real_suite, args.pieces
    workdir = tempfile.mkdtemp(prefix='bench-slurm-pieces-')
    env = {k: v for k, v in os.environ.items() if k not in ('PYTHONPATH', 'CI')}
    try:
        with running_slurm(os.path.join(workdir, 'slurm')):
            whole_dir = _real_tree(os.path.join(workdir, 'whole'))
            os.makedirs(os.path.join(workdir, 'whole-out'))
            start = time.perf_counter()
            plan = build_plan(RunRequest(TestCommand(whole_dir, {}, [REAL_PYTHON, 'run_test.py']), env,
                                         os.path.join(workdir, 'whole-out'), REAL_PYTHON, {'': 3600},
                                         units=[args.startup_suite, suite]))
            solo.run_suite(plan, args.startup_suite)
            startup_time = time.perf_counter() - start
            start = time.perf_counter()
            whole = solo.run_suite(plan, suite)
            whole_time = time.perf_counter() - start
            split_dir = _real_tree(os.path.join(workdir, 'split'))
            store = ResultStore(os.path.join(workdir, 'split-results', 'r.jsonl'), 'bench')
            start = time.perf_counter()
            spread = controller.SpreadOptions(shared_paths=[workdir], slurm_settings={'cpus_per_job': 1}, poll=1,
                                              pieces=PieceRule({suite: 600 * count - 1}))
            _plan, result = execute(controller.SlurmExecutor(count, spread),
                                    RunRequest(TestCommand(split_dir, {}, [REAL_PYTHON, 'run_test.py']), env,
                                               os.path.join(workdir, 'split-out'), REAL_PYTHON, {'': 3600},
                                               units=[suite]), store)
            split_time = time.perf_counter() - start
            pieces_seen = [record.seconds for key, record in store.load().items() if key != suite]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    merged = result.suites[suite]
    failed = sorted(test.test_id for test in whole.suite.failed_tests)
    same = (whole.suite.status, whole.suite.counts, failed) == \
        (merged.status, merged.counts, sorted(test.test_id for test in merged.failed_tests))
    print(f'measured: {suite} of Debian 2.6.0 whole, then as {count} pieces on {count} Slurm jobs, '
          f'{os.cpu_count()} CPUs, real Slurm')
    print(f"  whole (solo.run_suite):          {whole_time:6.1f} s  {whole.suite.status}, "
          f"{whole.suite.counts}")
    print(f'  {count} pieces (SlurmExecutor):         {split_time:6.1f} s  {merged.status}, {merged.counts}; '
          f'pieces {pieces_seen} s')
    goal = 1.3 * whole_time / count + startup_time
    print(f'  harness start-up: {startup_time:.1f} s (the whole call of {args.startup_suite}, 11 tests under 1 s)')
    print(f'  ratio split / (whole / {count}): {split_time / (whole_time / count):.2f}; goal: split <= 1.3 x whole / '
          f'{count} + one start-up = {goal:.1f} s: {split_time <= goal}; same results: {same}')


def _bad(path, problem):
    """Bad input: one line naming the file, exit status 2."""
    print(f'bench_slurm_spread: {ascii(str(path))[1:-1]}: {problem}', file=sys.stderr)
    sys.exit(2)


def _times_of(data, build, config, path):
    """The {suite: value} table of one build and config of a test-times.json shaped {build: {config: ...}}."""
    try:
        build = build or next(iter(data))
        config = config or ('default' if 'default' in data[build] else next(iter(data[build])))
        return data[build][config], f'{build} / {config}'
    except (KeyError, StopIteration, TypeError, AttributeError):
        _bad(path, f'no test times for build {build!r}, config {config!r}')


def load_times(path, build=None, config=None):
    """{suite: seconds} from PyTorch's test-times.json ({build: {config: {suite: s}}}) or our results JSON."""
    try:
        with open(path) as handle:
            data = json.load(handle)
    except (OSError, ValueError) as err:
        _bad(path, f'not a readable times file ({err})')
    seconds = dict(History.read(path).suite_seconds)
    if seconds:
        return seconds, 'results JSON'
    table, label = _times_of(data, build, config, path)
    try:
        return {suite: float(s) for suite, s in table.items()}, label
    except (TypeError, ValueError, AttributeError):
        _bad(path, f'the times of {label} are not numbers')


def load_class_times(path, build=None, config=None):
    """{suite: seconds} summed over the classes of PyTorch's test-class-times.json ({build: {config:
    {suite: {class: s}}}})."""
    try:
        with open(path) as handle:
            data = json.load(handle)
    except (OSError, ValueError) as err:
        _bad(path, f'not a readable class times file ({err})')
    table, _ = _times_of(data, build, config, path)
    try:
        return {suite: float(sum(classes.values())) for suite, classes in table.items() if isinstance(classes, dict)}
    except (TypeError, ValueError, AttributeError):
        _bad(path, 'the class times are not numbers')


class ListQueue:
    """The queue's claim order in memory (what workqueue.SuiteQueue.claim_next hands out when no job dies),
    so that the simulation claims through the real worker.claim_batch."""

    def __init__(self, order):
        self.order = list(order)
        self.next = 0
        self.last_attempt = 1

    def claim_next(self, worker):
        if self.next >= len(self.order):
            return None
        self.next += 1
        return self.order[self.next - 1]


def simulate(times, nodes, overhead=0.0, slots=1, serial=(), piece_seconds=None, order=None):
    """Wall seconds of the queue on `nodes` jobs of `slots` slots each: a free slot claims with the worker's
    own claim_batch (longest first, up to CLAIM_SECONDS of expected time, max_claim as the controller sets
    it, a must-serial suite or piece alone) and runs its claim as one harness call (`overhead` seconds of
    start-up per call, then the claimed suites one after another); a must-serial one waits until the job's
    other slots are idle and holds them (worker.SerialGate).  piece_seconds: split longer suites into
    pieces (pieces.split) first."""
    if piece_seconds:
        units = pieces.split(times, times, piece_seconds)
        expected = pieces.expected_of(units, times)
        serial_keys = {unit.key for unit in units if unit.suite in serial}
    else:
        expected, serial_keys = dict(times), set(serial)
    queue = ListQueue(order or longest_first(expected, expected))
    max_claim = max(1, len(queue.order) // (2 * nodes * slots))
    free = [[0.0] * slots for _ in range(nodes)]
    events = [(0.0, node, slot) for node in range(nodes) for slot in range(slots)]
    heapq.heapify(events)
    end = 0.0
    while events:
        now, node, slot = heapq.heappop(events)
        if free[node][slot] > now:  # held by a must-serial run of its job meanwhile
            heapq.heappush(events, (free[node][slot], node, slot))
            continue
        claimed, alone = worker.claim_batch(queue, 'simulated', serial_keys, expected, max_claim)
        if not claimed:
            continue
        together = [key for key in claimed if key not in alone]
        finish = now + (overhead + sum(expected[key] for key in together) if together else 0.0)
        for key in (key for key in claimed if key in alone):
            start = max([finish] + (free[node] if slots > 1 else []))
            finish = start + overhead + expected[key]
            if slots > 1:
                free[node] = [finish] * slots
        free[node][slot] = finish
        end = max(end, finish)
        heapq.heappush(events, (finish, node, slot))
    return end


def hours(seconds):
    return f'{seconds / 3600:7.2f} h'


def simulated(args):
    times, label = load_times(args.times, args.build, args.config)
    class_note = ''
    if args.class_times:
        by_class = load_class_times(args.class_times, args.build, args.config)
        added = {suite: seconds for suite, seconds in by_class.items() if suite not in times}
        times.update(added)
        class_note = f'; {len(added)} suites only in {args.class_times}'
    harness = harness_of(args.harness) if args.harness else None
    serial = {suite for suite in times if harness.must_serial(suite)} if harness else set()
    total, longest = sum(times.values()), max(times.items(), key=lambda item: item[1])
    split_count = len(pieces.split(times, times, args.piece_seconds))
    rows = {}
    base = simulate(times, 1, args.overhead, args.slots, serial)
    for nodes in args.nodes:
        unsplit = simulate(times, nodes, args.overhead, args.slots, serial)
        split = simulate(times, nodes, args.overhead, args.slots, serial, args.piece_seconds)
        rows[str(nodes)] = {'hours': round(split / 3600, 3), 'unsplit_hours': round(unsplit / 3600, 3),
                            'efficiency': round(base / split / nodes, 3),
                            'unsplit_efficiency': round(base / unsplit / nodes, 3),
                            'ideal_hours': round(base / nodes / 3600, 3)}
    if args.json:
        print(json.dumps({'times': args.times, 'label': label, 'suites': len(times), 'pieces': split_count,
                          'total_hours': round(total / 3600, 3), 'longest': longest[0],
                          'longest_hours': round(longest[1] / 3600, 3), 'overhead': args.overhead,
                          'piece_seconds': args.piece_seconds, 'slots': args.slots, 'serial': len(serial),
                          'nodes': rows}, indent=1))
        return
    print(f'simulated: {len(times)} suites of a full run ({label}; from {args.times}{class_note}), '
          f'{total / 3600:.1f} h in all, longest {longest[0]} {longest[1] / 3600:.2f} h; '
          f'+{args.overhead}s per harness call; {args.slots} slot(s) per node; {len(serial)} must-serial '
          f"({harness.path if harness else 'no harness given'}); split: {split_count} units, suites over "
          f'{args.piece_seconds:.0f}s in pieces of at most that')
    print('  nodes   unsplit (eff.)        split (eff.)          ideal')
    for nodes, row in rows.items():
        print(f"  {int(nodes):5d}   {row['unsplit_hours']:7.2f} h ({row['unsplit_efficiency']:4.2f})   "
              f"{row['hours']:7.2f} h ({row['efficiency']:4.2f})   {row['ideal_hours']:7.2f} h")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--suites', type=int, default=12)
    parser.add_argument('--seconds', type=float, default=4)
    parser.add_argument('--jobs', type=int, default=2)
    parser.add_argument('--times', help="recorded per-suite times (PyTorch's test-times.json or our results JSON)")
    parser.add_argument('--build', help='the build environment key in a test-times.json (default: the first)')
    parser.add_argument('--config', help="the test config key in a test-times.json (default: 'default')")
    parser.add_argument('--class-times', help="PyTorch's test-class-times.json: times of suites the --times file lacks")
    parser.add_argument('--harness', default=DEFAULT_HARNESS if os.path.isdir(DEFAULT_HARNESS) else None,
                        help='test/ directory whose run_test.py says which suites are must-serial '
                             '(default: Debian 2.6.0 from tools/setup.sh, where present)')
    parser.add_argument('--slots', type=int, default=1, help='suites at a time per node (parallel_test_suites)')
    parser.add_argument('--piece-seconds', type=float, default=pieces.PIECE_SECONDS,
                        help='split suites expected to take longer into pieces of at most this (default: '
                             "PyTorch's own THRESHOLD)")
    parser.add_argument('--json', action='store_true', help='print the simulated table as JSON')
    parser.add_argument('--nodes', type=int, nargs='+', default=[1, 4, 16, 64, 256])
    parser.add_argument('--overhead', type=float, default=4.3,
                        help="seconds per suite of run_test.py's own start (docs/design.md section 5: about 4.3 s)")
    parser.add_argument('--simulate-only', action='store_true')
    parser.add_argument('--real-suite', help="measure instead: a suite of Debian's 2.6.0 harness whole and in pieces")
    parser.add_argument('--pieces', type=int, default=2, help='pieces (and Slurm jobs) for --real-suite')
    parser.add_argument('--startup-suite', default='test_native_functions',
                        help="a suite of tests taking under a second: its whole call measures the harness's start-up")
    args = parser.parse_args()
    if args.real_suite:
        measure_pieces(args)
        return
    if not args.simulate_only:
        measure(args)
    if args.simulate_only and not args.times:
        args.times = os.path.join(HERE, 'data', 'riscv64-test-times.json')
    if args.times:
        simulated(args)


if __name__ == '__main__':
    main()
