"""Benchmark: the test step's runner against one plain run_test.py call, on a real PyTorch harness.

Why: running one run_test.py call per suite cost ~4.3 s per suite before it started and lost the
harness's own pool (3.2x a plain call on six suites).  The runner now hands batches of suites to
run_test.py itself.  This runs the same real CPU suites (by default Debian's pytorch 2.6.0 tree and torch
2.6.0 from tools/setup.sh; `--tree .venvs/pytorch-2.1-harness --python .venvs/harness-2.1/bin/python` for the
main job's 2.1 line) three ways, each --repeat times on a fresh copy of the tree:
  plain:      run_test.py --continue-through-error --save-xml -i <suites>   (XML so results can be compared;
              2.1: `-i <suites> -- --save-xml`, where that harness passes it on to the test files)
  serial:     eb-pytorch-cuda test-suite ... (one batch at a time: the same parallelism as plain)
  parallel N: eb-pytorch-cuda test-suite ... --parallel N
and prints the median wall times, their ratio to plain, the per-suite overhead, and whether the per-suite
results agree (failed suites from `X failed!` lines; passed counts from each suite's XML reports).

    python benchmarks/bench_real_harness.py [--repeat 3] [--parallel 2] [--suites a b ...] [--tree T --python P]
        [--profile]

--profile adds one profiled run of ours (in this process, cProfile's wall clock) and prints where the step's own
seconds go: the Python probe, the harness's selection (one more torch import), reading run_test.py, the CUDA
question, the suites themselves, the reruns, writing the store, the reports, and importing the CLI.

The start-up the runner adds over a plain call is its discovery (the harness asked for its selection: one
more torch import) and one run_test.py start-up per batch.  On the 2.1 line (6 suites, 2 CPUs, load 1.9, one
round): plain 28.5 s, test-suite 31.3 s (1.10), --parallel 2 34.4 s (1.21), same results; --profile: the
harness's selection 3.6 s, the suites 22.3 s, the reports 1.5 s (the SVG chart: matplotlib's import), run_step
26.0 s of the 27.7 s profiled run, importing the CLI 0.1 s.
"""

import argparse
import contextlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from eb_pytorch_cuda.testsuite.run.harness import read_harness
from eb_pytorch_cuda.testsuite.results.outcome import suite_reports

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TREE = os.path.join(REPO, '.venvs', 'pytorch-src', 'pytorch-v2.6.0')
PYTHON = os.path.join(REPO, '.venvs', 'harness', 'bin', 'python')
HARNESS = None  # read_harness of TREE, set in main()
CLI = os.path.join(os.path.dirname(sys.executable), 'eb-pytorch-cuda')
SUITES_21 = ['test_cuda_primary_ctx', 'test_license', 'test_per_overload_api', 'test_set_default_mobile_cpu_allocator',
             'test_show_pickle', 'test_type_info']  # every suite of ../shared/pytorch-2.1-harness
SUITES = ['test_show_pickle', 'test_per_overload_api', 'test_type_info', 'test_native_functions',
          'test_cuda_primary_ctx', 'test_ci_sanity_check_fail', 'test_logging', 'test_function_schema',
          'test_set_default_mobile_cpu_allocator', 'test_monitor', 'test_license', 'test_comparison_utils',
          'test_file_check']
_FAILED = re.compile(r'^([\w./-]+)(?: \d+/\d+)? failed!', re.M)


def fresh_tree(workdir):
    tree = os.path.join(workdir, 'pytorch')
    for part in ('test', 'tools'):
        shutil.copytree(os.path.join(TREE, part), os.path.join(tree, part),
                        ignore=shutil.ignore_patterns('test-reports'))
    for name in ('pytest.ini', 'version.txt'):  # the 2.1 tree's pytest configuration (its rootdir)
        if os.path.isfile(os.path.join(TREE, name)):
            shutil.copy(os.path.join(TREE, name), tree)
    return tree


def xml_passed(tree, suites):
    counts = {}
    for suite in suites:
        found = suite_reports(os.path.join(tree, 'test'), suite)
        counts[suite] = found.counts['passed'] if found else 0
    return counts


def plain(suites):
    with tempfile.TemporaryDirectory() as workdir:
        tree = fresh_tree(workdir)
        start = time.time()
        xml = ['-i', *suites, '--', '--save-xml'] if HARNESS.positional_unittest_args else ['--save-xml', '-i', *suites]
        done = subprocess.run([PYTHON, 'run_test.py', '--continue-through-error', *xml],
                              cwd=os.path.join(tree, 'test'), capture_output=True, text=True)
        seconds = time.time() - start
        failed = set(_FAILED.findall(done.stdout + done.stderr))
        return seconds, {'failed': sorted(failed), 'passed': xml_passed(tree, suites)}


def runner(suites, parallel):
    with tempfile.TemporaryDirectory() as workdir:
        tree = fresh_tree(workdir)
        results = os.path.join(workdir, 'results')
        runtest = 'cd test && %(python)s run_test.py --continue-through-error -i ' + ' '.join(suites)
        start = time.time()
        subprocess.run([CLI, 'test-suite', tree, '--python', PYTHON, '--runtest', runtest, '--parallel',
                        str(parallel), '--results', results, '--format', 'json'], capture_output=True, text=True)
        seconds = time.time() - start
        records = {}
        with open(os.path.join(results, 'results.jsonl')) as handle:
            for line in handle:
                record = json.loads(line)
                records[record['suite']['name']] = record
        failed = sorted(name for name, record in records.items() if record['exit_code'])
        passed = {suite: records[suite]['suite']['counts']['passed'] if suite in records else 0 for suite in suites}
        return seconds, {'failed': failed, 'passed': passed}


# where the step's own seconds go: (label, module, function) whose cumulative wall time a profiled run reports
PHASES = (('the Python probe (check_inputs)', 'sourcetree', 'check_inputs'),
          ("the harness's selection (its --dry-run)", 'discovery', 'select'),
          ("reading run_test.py's lists", 'harness', 'read_harness'),
          ('the CUDA build asked (torch_has_cuda)', 'sourcetree', 'torch_has_cuda'),
          ('the suites (run_test.py calls)', 'batches', 'run_batch_to_the_end'),
          ('isolated reruns', 'reruns', 'rerun_failures'),
          ('writing the store', 'store', 'append'),
          ('the reports', 'service', 'report_texts'),
          ('the whole step (run_step)', 'service', 'run_step'))


def profiled(suites):
    """One `test-suite` run in this process under cProfile (wall clock: time.perf_counter), the cumulative seconds
    of each of PHASES, and the seconds of importing the CLI in a fresh process."""
    import cProfile
    import pstats
    from eb_pytorch_cuda import cli
    with tempfile.TemporaryDirectory() as workdir:
        tree = fresh_tree(workdir)
        runtest = 'cd test && %(python)s run_test.py --continue-through-error -i ' + ' '.join(suites)
        profile = cProfile.Profile()
        start = time.time()
        with open(os.devnull, 'w') as quiet, contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
            profile.runcall(cli.main, ['test-suite', tree, '--python', PYTHON, '--runtest', runtest, '--parallel',
                                       '1', '--results', os.path.join(workdir, 'results'), '--format', 'json'])
        total = time.time() - start
    stats = pstats.Stats(profile).stats  # {(file, line, function): (calls, calls, tottime, cumtime, callers)}
    found = {}
    for label, module, function in PHASES:
        found[label] = sum(entry[3] for (path, _line, name), entry in stats.items()
                           if name == function and os.path.basename(path) == f'{module}.py')
    start = time.time()
    subprocess.run([sys.executable, '-c', 'import eb_pytorch_cuda.cli'], check=True)
    found['importing the CLI (a fresh process)'] = time.time() - start
    return total, found


def main():
    global TREE, PYTHON, HARNESS  # noqa: PLW0603 - one benchmark run, one tree
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--repeat', type=int, default=3)
    parser.add_argument('--parallel', type=int, default=2)
    parser.add_argument('--suites', nargs='+')
    parser.add_argument('--tree', default=TREE, help='a PyTorch tree with test/run_test.py (default: the 2.6.0 one)')
    parser.add_argument('--python', default=PYTHON, help="a Python that imports the tree's torch")
    parser.add_argument('--profile', action='store_true', help="after the timed runs, one profiled run of ours: "
                                                               "where the step's own seconds go")
    args = parser.parse_args()
    TREE, PYTHON = os.path.abspath(args.tree), os.path.abspath(args.python)
    if not os.path.isfile(os.path.join(TREE, 'test', 'run_test.py')):
        sys.exit(f'{TREE}: missing; run tools/setup.sh')
    HARNESS = read_harness(os.path.join(TREE, 'test', 'run_test.py'))
    args.suites = args.suites or (SUITES_21 if HARNESS.positional_unittest_args else SUITES)
    with open(os.path.join(TREE, 'version.txt')) as handle:
        version = handle.read().strip()
    ways = {'plain run_test.py': lambda: plain(args.suites),
            'test-suite (1 batch at a time)': lambda: runner(args.suites, 1),
            f'test-suite --parallel {args.parallel}': lambda: runner(args.suites, args.parallel)}
    times, results = {name: [] for name in ways}, {}
    for repeat in range(args.repeat):
        for name, way in ways.items():  # interleaved, so load changes on the machine hit every way alike
            seconds, result = way()
            times[name].append(seconds)
            results.setdefault(name, result)
            print(f'run {repeat + 1}: {name}: {seconds:.1f}s', flush=True)
    base = statistics.median(times['plain run_test.py'])
    print(f'\n{len(args.suites)} real suites of the PyTorch {version} tree {TREE}, median of {args.repeat}, '
          f'{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}:')
    for name in ways:
        median = statistics.median(times[name])
        print(f'  {name:32} {median:7.1f}s  ratio {median / base:.2f}  '
              f'overhead {(median - base) / len(args.suites):+.2f}s per suite')
    reference = results['plain run_test.py']
    for name, result in results.items():
        same = result == reference
        print(f"  results of {name}: {'same as plain' if same else 'DIFFERENT'}"
              f"{'' if same else ': ' + json.dumps(result) + ' vs ' + json.dumps(reference)}")
    print(f"  failed suites: {', '.join(reference['failed']) or 'none'}; "
          f"tests passed: {sum(reference['passed'].values())}")
    if args.profile:
        total, phases = profiled(args.suites)
        print(f'\none profiled test-suite run ({total:.1f}s wall, cumulative wall seconds of each phase):')
        for label, seconds in phases.items():
            print(f'  {label:45} {seconds:6.1f}s')


if __name__ == '__main__':
    main()
