"""Benchmark: what one of 2.6's single-test retry sessions (`--rs`, run_test_retries) costs with the harness's
own retries off (run/retries), against a session that collects the test file as a retry session had to.

Why: with the retries off, our plugin (eb_pytorch_cuda/harness_plugin) ends each `--rs` session without running
its test; 2.6's run_test.py still starts two of them for every failing test.  Ended before collection, such a
session does not import the test file; ended after it, it paid the import and the collection of every item.

For each file: the wall time of `python -m pytest FILE --rs=KEY` with the plugin (no stepcurrent cache: it would
run every test, so the plugin is what ends it) and of `python -m pytest FILE --collect-only -q` (a session that
collects and runs nothing), in the real 2.6.0 tree's test/ directory, each --repeat times, the best of each kept.

    python benchmarks/bench_single_retry_session.py [--files test_transformers test_tensor_creation_ops] [--repeat 3]

Measured 2026-12-06 on this project's 2-CPU VM (torch 2.6.0 CPU, Debian's 2.6.0 tree), best of 3:
  test_tensor_creation_ops: --rs session 0.85 s (before collection), collecting session 5.22 s
  test_transformers:        --rs session 0.95 s (before collection), collecting session 5.93 s
On the GPU node a CUDA build collects more: test_transformers' 12373 CUDA items start up in about 24 s
(docs/validation/h100-2026-12-05-probe-cuda/), two such sessions a failing test.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TREE = os.path.join(REPO, '.venvs', 'pytorch-src', 'pytorch-v2.6.0')
PYTHON = os.path.join(REPO, '.venvs', 'harness', 'bin', 'python')
sys.path.insert(0, os.path.join(REPO, 'src'))
from eb_pytorch_cuda.testsuite.run.retries import retry_environment  # noqa: E402


def timed(argv, cwd, env):
    """(seconds, exit status) of one call, its output discarded."""
    start = time.monotonic()
    done = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.monotonic() - start, done.returncode


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--files', nargs='+', default=['test_tensor_creation_ops', 'test_transformers'])
    parser.add_argument('--repeat', type=int, default=3)
    parser.add_argument('--python', default=PYTHON)
    parser.add_argument('--tree', default=TREE)
    args = parser.parse_args()
    env = retry_environment({name: value for name, value in os.environ.items() if name != 'CI'}, False)
    with tempfile.TemporaryDirectory() as scratch:
        tree = os.path.join(scratch, 'pytorch')
        os.mkdir(tree)
        shutil.copytree(os.path.join(args.tree, 'test'), os.path.join(tree, 'test'), symlinks=True)
        test_dir = os.path.join(tree, 'test')
        for name in args.files:
            single, collecting = [], []
            for _ in range(args.repeat):
                shutil.rmtree(os.path.join(tree, '.pytest_cache'), ignore_errors=True)
                shutil.rmtree(os.path.join(test_dir, '.pytest_cache'), ignore_errors=True)
                seconds, code = timed([args.python, '-m', 'pytest', f'{name}.py', '--rs=eb-bench', '-q'], test_dir, env)
                if code != 1:
                    sys.exit(f'bench_single_retry_session: {name}: the --rs session ended with {code}, not 1')
                single.append(seconds)
                collecting.append(timed([args.python, '-m', 'pytest', f'{name}.py', '--collect-only', '-q',
                                         '-p', 'no:cacheprovider'], test_dir, env)[0])
            print(f'{name}: --rs session {min(single):.2f} s (before collection), collecting session '
                  f'{min(collecting):.2f} s')


if __name__ == '__main__':
    main()
