"""Benchmark (issue 33, item 5): our test step on a whole GPU node against one plain run_test.py call, same selection.

Why: a test step that runs one process on a 16-core GPU node wastes the node; the figures a maintainer needs are
how long the same selection takes through `eb-pytorch-cuda test-suite` (the test step's own runner) serially,
with the node's own batch count (`parallel_test_suites = 'auto'`), and, for one long suite, as parallel pieces
(cut by the per-test times of the previous run, as a second build of the same target would), each against one
plain `run_test.py` call, and that the results are the same (per suite: passed, failed, skipped and the failing
test ids, read from the plain run's log by our parser, from our results JSON for ours).

Cases (each a list of runs, timed by wall clock, one after the other, nothing else on the node):
  conv: `-i nn/test_convolution -k EXPR` (default: the CUDA set without the two 64-bit-indexing tests that take
        93% of its time, docs/validation/gpu.md 2026-12-02): plain, ours --parallel 1, ours pieces (previous
        results from ours --parallel 1, the node's own batch count);
  cpu:  --cpu-suites with the GPU hidden (CUDA_VISIBLE_DEVICES=''): plain (its own pool of 3; or --plain-from an
        earlier JSON of the same node and kit: it took 1413 s there), ours auto, then ours auto again after it (its
        results' per-test times: a second build cuts its long suites into pieces).
  cpu-pool: the same runs on pool_suites, the 19 of CPU_SUITES off 2.6's serial list (what parallel batches can
        change: the serial list's files run alone in every run).
  gpu:  the CUDA selection --gpu-selection names (tools/validate-gpu/probe_cuda.py chose it on the node: about 13
        minutes of plain run_test.py), the GPU seen: plain, ours auto, ours auto after it.

--seed-from-plain (cpu, cpu-pool, gpu): the plain call also writes PyTorch's JUnit reports (`--save-xml`, which
every call of ours passes too), and ours' first run plans with the times they hold (previous_of_plain: each suite's
seconds and its tests' seconds under the node ids ours records), as a second build of the same target would with
its first build's results.  Why: ours cuts a long suite into pieces only by previous times (run/plan.py
here_piece_rule), so without them its first run lasts about as long as its longest suite; a device session of 30
minutes holds no plain run of 10 minutes, a first run of ours and a second one, but holds plain and one seeded run.

    python benchmarks/bench_gpu_node.py --harness TREE --python PY --workdir DIR --out DIR
        [--case conv cpu cpu-pool gpu] [--plain-from JSON] [--gpu-selection JSON] [--previous-from JSON]
        [--runs plain ours_auto ours_second (in the order they run)] [--seed-from-plain]

TREE: a PyTorch tree whose test/run_test.py imports with PY's torch (the GPU kit's .gpu/harness, extracted by
binary_torch.make_harness_tarball, or a source tree).  Writes DIR/bench-gpu-node.json; prints a table.  Measured
figures go to docs/benchmarks.md with the command that made them.  The JSON is rewritten after every run, so a run
cut short by the machine's time still leaves the figures of what finished.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

RUNS = ('plain', 'ours_auto', 'ours_second')
CONV_EXPR = 'DeviceTypeCUDA and not 64bit_indexing'
# 22 CPU suites of Debian's 2.6.0 tree that import with a newer torch (2.14.1 here; the issue measured 22 of its
# own choice there: plain 518.6 s); tools/validate-gpu/make_kit.sh carries them
CPU_SUITES = ('test_type_promotion test_view_ops test_indexing test_shape_ops test_sort_and_select '
              'test_segment_reductions test_tensor_creation_ops test_scatter_gather_ops test_stateless test_subclass '
              'test_per_overload_api test_type_info test_license test_show_pickle test_function_schema test_itt '
              'test_logging test_native_functions test_complex test_dlpack test_masked test_functional_optim').split()


def pool_suites(tree):
    """The cpu-pool case's suites: CPU_SUITES less the files the tree's run_test.py runs alone (its must_serial, as
    our runner reads it: run/harness), 19 of 22 in Debian 2.6.0 (test_show_pickle, test_sort_and_select and
    test_tensor_creation_ops run alone).  Why: those took 862 of the plain run's 1413 s on the H200
    (docs/validation/h200-2026-12-02-bench-cpu/), in every run, so the cpu case cannot show what parallel batches
    give."""
    from eb_pytorch_cuda.testsuite.run.harness import harness_of
    harness = harness_of(os.path.join(tree, 'test'))
    return [suite for suite in CPU_SUITES if not harness.must_serial(suite)]


def _env(hide_gpu):
    env = {key: value for key, value in os.environ.items() if key not in ('SANDCASTLE', 'IS_CI', 'CI')}
    env['PYTHONUNBUFFERED'] = '1'
    if hide_gpu:
        env['CUDA_VISIBLE_DEVICES'] = ''
    return env


def plain(tree, python, suites, pytest_args, log_path, hide_gpu, save_xml=False):
    """One plain run_test.py call (no SANDCASTLE: both device bases where a GPU is seen), with PyTorch's JUnit
    reports where save_xml (passed on to every test file, as ours passes it); (seconds, log path)."""
    argv = [python, 'run_test.py', '--continue-through-error', *(['--save-xml'] if save_xml else []), '-i', *suites,
            *pytest_args]
    start = time.perf_counter()
    with open(log_path, 'wb') as log:
        subprocess.run(argv, cwd=os.path.join(tree, 'test'), env=_env(hide_gpu), stdout=log,
                       stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start, log_path


def ours(tree, python, suites, pytest_args, results, parallel, hide_gpu, reruns=0):
    """`eb-pytorch-cuda test-suite` on the same selection, each failed test rerun alone up to reruns times (the
    main easyconfig's rerun_failed_tests is 1); (seconds, its results JSON)."""
    runtest = ' '.join(['cd test && %(python)s run_test.py --continue-through-error -i', *suites,
                        *(_quoted(arg) for arg in pytest_args)])
    argv = [sys.executable, '-m', 'eb_pytorch_cuda.cli', 'test-suite', tree, '--python', python, '--runtest', runtest,
            '--results', results, '--format', 'json', '--rerun', str(reruns)] + (
                ['--parallel', str(parallel)] if parallel else [])
    start = time.perf_counter()
    done = subprocess.run(argv, env=_env(hide_gpu), capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          check=False)
    seconds = time.perf_counter() - start
    with open(os.path.join(results, 'bench-stdout.txt'), 'w') as out:
        out.write(done.stdout + done.stderr)
    from eb_pytorch_cuda.testsuite.policy.report import RESULTS_JSON
    # exit 0 (pass) or 1 (fail: a verdict) wrote its results over the copied-in previous ones; anything else did not
    found = os.path.join(results, RESULTS_JSON)
    return seconds, (found if os.path.isfile(found) and done.returncode in (0, 1) else None)


def _quoted(arg):
    """arg as the easyconfig's runtest line needs it (the test step splits it with shlex, never a shell)."""
    import shlex
    return shlex.quote(arg)


def results_of_log(path):
    """{suite: (passed, failed, skipped, sorted failing ids)} of a plain run's log, by our parser."""
    from eb_pytorch_cuda.testsuite.results.logparse import parse_log_file
    result = parse_log_file(path)
    return {name: _row(suite.counts, [test.test_id for test in suite.failed_tests])
            for name, suite in result.suites.items()}


def results_of_json(path):
    """The same of our results JSON, a test that passed on its isolated rerun (rerun_outcome 'flaky') counted as
    passed, as the plain call counts a test that passed on the harness's own retry (pytest-rerunfailures)."""
    if path is None:
        return None
    with open(path) as handle:
        data = json.load(handle)
    rows = {}
    for suite in data['suites']:
        failed = suite.get('failed_tests', [])
        flaky = sum(test.get('rerun_outcome') == 'flaky' for test in failed)
        counts = dict(suite['counts'])
        counts['passed'] = counts.get('passed', 0) + flaky
        counts['failed'] = counts.get('failed', 0) + counts.pop('errors', 0) - flaky
        rows[suite['name']] = _row(counts, [test['test_id'] for test in failed if test.get('rerun_outcome') != 'flaky'])
    return rows


def _row(counts, failing):
    return [counts.get('passed', 0), counts.get('failed', 0) + counts.get('errors', 0), counts.get('skipped', 0),
            sorted(failing)]


def previous_of_plain(tree, suites, log_path, reports_to):
    """The results JSON a previous build of ours would have left, from a plain call's log and JUnit reports
    (plain(save_xml=True)): {'suite_seconds': {suite: s}, 'test_seconds': {suite: {node id: s}}} (the two keys
    results/previous.History reads), the node ids as ours records them (results/testtimes.case_times after
    node_prefix).  A suite's seconds are its tests' sum: a plain log times no suite (2.6's run_test.py runs three
    side by side and prints no duration), and the sum only sets which suites are cut, against the same sum of the
    others.  The reports are moved to reports_to, so that ours' runs start from a tree without them."""
    from eb_pytorch_cuda.testsuite.results.reportdirs import reports_root, suite_report_files
    from eb_pytorch_cuda.testsuite.results.testtimes import case_times, node_prefix
    test_dir = os.path.join(tree, 'test')
    with open(log_path, errors='replace') as handle:
        prefix = node_prefix(handle.read(), test_dir)
    test_seconds = {suite: times for suite in suites
                    for times in (case_times(suite_report_files(test_dir, suite), prefix),) if times}
    if os.path.isdir(reports_root(test_dir)):
        shutil.rmtree(reports_to, ignore_errors=True)
        shutil.move(reports_root(test_dir), reports_to)
    return {'suite_seconds': {suite: round(sum(times.values()), 3) for suite, times in test_seconds.items()},
            'test_seconds': test_seconds, 'seeded_from': os.path.basename(log_path)}


def _ours_after(args, suites, pytest_args, work, name, previous, parallel, hide_gpu):
    """One run of ours in work/name, seeing the previous run's results JSON (its per-test times: how a second
    build of the same target cuts long suites) where given; (seconds, its results JSON)."""
    from eb_pytorch_cuda.testsuite.policy.report import RESULTS_JSON
    results = os.path.join(work, name)
    os.makedirs(results)
    if previous is not None:  # under the name the test step reads a previous build's results by
        shutil.copy(previous, os.path.join(results, RESULTS_JSON))
    return ours(args.harness, args.python, suites, pytest_args, results, parallel, hide_gpu, args.rerun)


def conv_case(args, work, record):
    suites, pytest_args = ['nn/test_convolution'], ['-k', args.conv_expr]
    seconds, log = plain(args.harness, args.python, suites, pytest_args, os.path.join(work, 'conv-plain.log'), False)
    record('plain', seconds, results_of_log(log))
    seconds, path = _ours_after(args, suites, pytest_args, work, 'conv-serial', None, 1, False)
    record('ours_serial', seconds, results_of_json(path))
    seconds, path = _ours_after(args, suites, pytest_args, work, 'conv-pieces', path, None, False)  # auto
    record('ours_pieces', seconds, results_of_json(path))


def cpu_case(args, work, record, case='cpu'):
    """The cpu case (--cpu-suites) or the cpu-pool case (pool_suites): plain, ours auto, ours auto after it."""
    suites = args.cpu_suites if case == 'cpu' else pool_suites(args.harness)
    _side_by_side(args, work, record, case, suites, [], True)


def gpu_case(args, work, record):
    """The gpu case: the CUDA selection tools/validate-gpu/probe_cuda.py chose on this node (--gpu-selection):
    plain, ours auto, ours auto after it, the GPU seen by all three."""
    try:
        with open(args.gpu_selection) as handle:
            selection = json.load(handle)
        suites, expr = list(selection['suites']), str(selection['expr'])
    except (OSError, ValueError, KeyError, TypeError) as err:
        sys.exit(f'bench_gpu_node: {args.gpu_selection}: no GPU selection ({type(err).__name__}: {err})')
    _side_by_side(args, work, record, 'gpu', suites, ['-k', expr], False)


def _side_by_side(args, work, record, case, suites, pytest_args, hide_gpu):
    """plain (or --plain-from's), ours with the node's batch count (after --previous-from's results, a previous
    build's, where given), ours again after its own results: those of them --runs names, in its order.  Why the
    order: a run cut short by the session's device time leaves the ones before it whole, so ours first (planned
    with --previous-from's times) keeps ours whole where the plain call after it is cut."""
    path = args.previous_from
    for name in args.runs:
        if name == 'plain' and args.plain_from:  # measured before on the same node, kit and suites
            seconds, results = _recorded_plain(args.plain_from, case, suites)
            record('plain', seconds, results, reused_from=args.plain_from)
        elif name == 'plain':
            seconds, log = plain(args.harness, args.python, suites, pytest_args,
                                 os.path.join(work, f'{case}-plain.log'), hide_gpu, save_xml=args.seed_from_plain)
            record('plain', seconds, results_of_log(log), save_xml=args.seed_from_plain)
            if args.seed_from_plain:
                seed = previous_of_plain(args.harness, suites, log, os.path.join(work, f'{case}-plain-reports'))
                path = args.previous_from = os.path.join(work, f'{case}-plain-results.json')
                with open(path, 'w') as handle:
                    json.dump(seed, handle, indent=1)
        elif name == 'ours_auto':
            seconds, path = _ours_after(args, suites, pytest_args, work, f'{case}-auto', args.previous_from, None,
                                        hide_gpu)
            record('ours_auto', seconds, results_of_json(path), previous_from=args.previous_from)
        else:
            seconds, path = _ours_after(args, suites, pytest_args, work, f'{case}-second', path, None, hide_gpu)
            record('ours_second', seconds, results_of_json(path))


def _recorded_plain(path, case, suites):
    """(seconds, results) of case's plain run in an earlier bench-gpu-node.json; exits in one line naming the file
    where it has none, or its results name other suites than this run selects."""
    try:
        with open(path) as handle:
            run = json.load(handle)['cases'][case]['plain']
        seconds, results = float(run['seconds']), run['results']
    except (OSError, ValueError, KeyError, TypeError) as err:
        sys.exit(f'bench_gpu_node: {path}: no plain run of the {case} case ({type(err).__name__}: {err})')
    if not isinstance(results, dict) or sorted(results) != sorted(suites):
        sys.exit(f'bench_gpu_node: {path}: its {case} plain run has other suites than this run selects')
    return seconds, results


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--harness', required=True)
    parser.add_argument('--python', required=True)
    parser.add_argument('--workdir', required=True)
    parser.add_argument('--out', required=True)
    parser.add_argument('--case', nargs='+', choices=('conv', 'cpu', 'cpu-pool', 'gpu'), default=['conv', 'cpu'])
    parser.add_argument('--conv-expr', default=CONV_EXPR)
    parser.add_argument('--cpu-suites', nargs='+', default=CPU_SUITES)
    parser.add_argument('--gpu-selection', metavar='JSON', help="the gpu case's suites and -k expression "
                        '(tools/validate-gpu/probe_cuda.py)')
    parser.add_argument('--plain-from', metavar='JSON',
                        help="the cpu or cpu-pool case's plain run from an earlier bench-gpu-node.json, not run again")
    parser.add_argument('--previous-from', metavar='JSON', help="a previous build's results JSON of the same "
                        "selection (an earlier round's ours): ours' first run plans with its times")
    parser.add_argument('--runs', nargs='+', choices=RUNS, default=list(RUNS),
                        help='which runs of the cpu, cpu-pool and gpu cases (a session holds 30 device minutes)')
    parser.add_argument('--rerun', type=int, default=0, metavar='N',
                        help="ours reruns each failed test alone up to N times (test-suite --rerun; the main "
                        "easyconfig's rerun_failed_tests is 1); a test passed on it counts as passed, as plain counts "
                        "one passed on the harness's own retry")
    parser.add_argument('--seed-from-plain', action='store_true', help="the plain call writes JUnit reports and ours' "
                        'first run plans with their times (previous_of_plain)')
    args = parser.parse_args()
    if args.seed_from_plain and (args.previous_from or args.plain_from or 'plain' not in args.runs):
        parser.error('--seed-from-plain needs the plain run measured here, and no --previous-from or --plain-from')
    if args.plain_from and 'plain' not in args.runs:  # read back as the plain run: the ratios are against it
        parser.error('--plain-from is the plain run read back: --runs must name plain')
    if len(set(args.runs)) != len(args.runs):
        parser.error('--runs names a run twice')
    if args.seed_from_plain and any(args.runs.index(n) < args.runs.index('plain') for n in args.runs):
        parser.error("--seed-from-plain: ours plans with the plain call's times, so --runs must name plain first")
    if {'ours_auto', 'ours_second'} <= set(args.runs) and args.runs.index('ours_second') < args.runs.index('ours_auto'):
        parser.error('--runs: ours_second plans with the times of ours_auto, so it comes after it')
    args.harness, args.python = os.path.abspath(args.harness), os.path.abspath(args.python)  # run from test/
    shutil.rmtree(args.workdir, ignore_errors=True)
    os.makedirs(args.workdir)
    os.makedirs(args.out, exist_ok=True)
    figures = {'cpus': os.cpu_count(), 'python': args.python, 'cases': {}}
    for case in args.case:
        runs = figures['cases'][case] = {}

        def record(name, seconds, results, runs=runs, case=case, reused_from=None, previous_from=None,
                   save_xml=False):
            run = runs[name] = {'seconds': round(seconds, 1), 'results': results}
            base = runs.get('plain')
            for each in runs.values():  # against plain: the runs before it too, where --runs names it later
                each['ratio'] = round(each['seconds'] / base['seconds'], 2) if base and base['seconds'] else None
                each['same_results'] = each['results'] == base['results'] if base else None
            if reused_from:
                run['reused_from'] = os.path.basename(reused_from)
            if previous_from:
                run['previous_from'] = os.path.basename(previous_from)
            if save_xml:
                run['save_xml'] = True  # the plain call wrote JUnit reports (--seed-from-plain)
            for shown in ([name] if name != 'plain' else list(runs)):  # plain after ours: their ratios now
                print(f"{case:5} {shown:12} {runs[shown]['seconds']:8.1f} s  {runs[shown]['ratio']}x  "
                      f"same results: {runs[shown]['same_results']}", flush=True)
            partial = os.path.join(args.out, 'bench-gpu-node.json.part')
            with open(partial, 'w') as handle:
                json.dump(figures, handle, indent=1)
            os.replace(partial, os.path.join(args.out, 'bench-gpu-node.json'))

        if case == 'conv':
            conv_case(args, args.workdir, record)
        elif case == 'gpu':
            gpu_case(args, args.workdir, record)
        else:
            cpu_case(args, args.workdir, record, case)


if __name__ == '__main__':
    main()
