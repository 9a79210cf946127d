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
  cpu:  --cpu-suites with the GPU hidden (CUDA_VISIBLE_DEVICES=''): plain (its own pool of 3), ours auto.

    python benchmarks/bench_gpu_node.py --harness TREE --python PY --workdir DIR --out DIR [--case conv cpu]

TREE: a PyTorch tree whose test/run_test.py imports with PY's torch (the GPU kit's .gpu/harness, extracted by
binary_torch.make_harness_tarball, or a source tree).  Writes DIR/bench-gpu-node.json; prints a table.  Measured
figures go to docs/benchmarks.md with the command that made them.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

CONV_EXPR = 'DeviceTypeCUDA and not 64bit_indexing'
# 22 CPU suites of Debian's 2.6.0 tree that import with a newer torch (2.14.1 here; the issue measured 22 of its
# own choice there: plain 518.6 s); tools/validate-gpu/make_kit.sh carries them
CPU_SUITES = ('test_type_promotion test_view_ops test_indexing test_shape_ops test_sort_and_select '
              'test_segment_reductions test_tensor_creation_ops test_scatter_gather_ops test_stateless test_subclass '
              'test_per_overload_api test_type_info test_license test_show_pickle test_function_schema test_itt '
              'test_logging test_native_functions test_complex test_dlpack test_masked test_functional_optim').split()


def _env(hide_gpu):
    env = {key: value for key, value in os.environ.items() if key not in ('SANDCASTLE', 'IS_CI', 'CI')}
    env['PYTHONUNBUFFERED'] = '1'
    if hide_gpu:
        env['CUDA_VISIBLE_DEVICES'] = ''
    return env


def plain(tree, python, suites, pytest_args, log_path, hide_gpu):
    """One plain run_test.py call (no SANDCASTLE: both device bases where a GPU is seen); (seconds, log path)."""
    argv = [python, 'run_test.py', '--continue-through-error', '-i', *suites, *pytest_args]
    start = time.perf_counter()
    with open(log_path, 'wb') as log:
        subprocess.run(argv, cwd=os.path.join(tree, 'test'), env=_env(hide_gpu), stdout=log,
                       stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start, log_path


def ours(tree, python, suites, pytest_args, results, parallel, hide_gpu):
    """`eb-pytorch-cuda test-suite` on the same selection; (seconds, its results JSON)."""
    runtest = ' '.join(['cd test && %(python)s run_test.py --continue-through-error -i', *suites,
                        *(_quoted(arg) for arg in pytest_args)])
    argv = [sys.executable, '-m', 'eb_pytorch_cuda.cli', 'test-suite', tree, '--python', python, '--runtest', runtest,
            '--results', results, '--format', 'json'] + (['--parallel', str(parallel)] if parallel else [])
    start = time.perf_counter()
    done = subprocess.run(argv, env=_env(hide_gpu), capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          check=False)
    seconds = time.perf_counter() - start
    with open(os.path.join(results, 'bench-stdout.txt'), 'w') as out:
        out.write(done.stdout + done.stderr)
    found = [os.path.join(results, name) for name in os.listdir(results) if name.endswith('results.json')]
    # exit 0 (pass) or 1 (fail: a verdict); anything else wrote no results of its own (a copied-in file stays)
    return seconds, (found[0] if found and done.returncode in (0, 1) else None)


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
    """The same of our results JSON."""
    if path is None:
        return None
    with open(path) as handle:
        data = json.load(handle)
    return {suite['name']: _row(suite['counts'], [test['test_id'] for test in suite.get('failed_tests', [])])
            for suite in data['suites']}


def _row(counts, failing):
    return [counts.get('passed', 0), counts.get('failed', 0) + counts.get('errors', 0), counts.get('skipped', 0),
            sorted(failing)]


def conv_case(args, work):
    suites, pytest_args = ['nn/test_convolution'], ['-k', args.conv_expr]
    runs = {}
    seconds, log = plain(args.harness, args.python, suites, pytest_args, os.path.join(work, 'conv-plain.log'), False)
    runs['plain'] = {'seconds': round(seconds, 1), 'results': results_of_log(log)}
    serial_dir = os.path.join(work, 'conv-serial')
    os.makedirs(serial_dir)
    seconds, path = ours(args.harness, args.python, suites, pytest_args, serial_dir, 1, False)
    runs['ours_serial'] = {'seconds': round(seconds, 1), 'results': results_of_json(path)}
    pieces_dir = os.path.join(work, 'conv-pieces')
    os.makedirs(pieces_dir)
    if path is not None:  # the previous run's results (per-test times): how a second build splits the suite
        shutil.copy(path, pieces_dir)
    seconds, path = ours(args.harness, args.python, suites, pytest_args, pieces_dir, None, False)  # auto
    runs['ours_pieces'] = {'seconds': round(seconds, 1), 'results': results_of_json(path)}
    return runs


def cpu_case(args, work):
    suites = args.cpu_suites
    runs = {}
    seconds, log = plain(args.harness, args.python, suites, [], os.path.join(work, 'cpu-plain.log'), True)
    runs['plain'] = {'seconds': round(seconds, 1), 'results': results_of_log(log)}
    auto_dir = os.path.join(work, 'cpu-auto')
    os.makedirs(auto_dir)
    seconds, path = ours(args.harness, args.python, suites, [], auto_dir, None, True)  # auto: the node's count
    runs['ours_auto'] = {'seconds': round(seconds, 1), 'results': results_of_json(path)}
    return runs


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--harness', required=True)
    parser.add_argument('--python', required=True)
    parser.add_argument('--workdir', required=True)
    parser.add_argument('--out', required=True)
    parser.add_argument('--case', nargs='+', choices=('conv', 'cpu'), default=['conv', 'cpu'])
    parser.add_argument('--conv-expr', default=CONV_EXPR)
    parser.add_argument('--cpu-suites', nargs='+', default=CPU_SUITES)
    args = parser.parse_args()
    args.harness, args.python = os.path.abspath(args.harness), os.path.abspath(args.python)  # run from test/
    shutil.rmtree(args.workdir, ignore_errors=True)
    os.makedirs(args.workdir)
    os.makedirs(args.out, exist_ok=True)
    figures = {'cpus': os.cpu_count(), 'python': args.python, 'cases': {}}
    for case in args.case:
        figures['cases'][case] = (conv_case if case == 'conv' else cpu_case)(args, args.workdir)
        base = figures['cases'][case]['plain']
        for name, run in figures['cases'][case].items():
            run['ratio'] = round(run['seconds'] / base['seconds'], 2) if base['seconds'] else None
            run['same_results'] = run['results'] == base['results']
            print(f"{case:5} {name:12} {run['seconds']:8.1f} s  {run['ratio']}x  same results: {run['same_results']}",
                  flush=True)
        with open(os.path.join(args.out, 'bench-gpu-node.json'), 'w') as handle:
            json.dump(figures, handle, indent=1)


if __name__ == '__main__':
    main()
