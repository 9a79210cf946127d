"""Benchmark: what a consistently failing test costs on PyTorch's real 2.6.0 harness, with its own retries kept
(harness_retries = True, the behaviour before issue 49 item 2) and off (the default: rerun_failed_tests the only
retry, run/retries).

Why: 2.6's run_test.py runs a failing test in up to 3 pytest sessions (run_test_retries' single-test retries)
of 3 runs each (pytest-rerunfailures' --reruns=2): 9 runs, and `rerun_failed_tests` adds its own on top; on the
H200 one 251-287 s test cost about 42 minutes.  Off, it must cost at most 1 + rerun_failed_tests runs: with a
20 s test and --rerun 1, at most 2 x 20 s plus start-up.

Each mode runs `eb-pytorch-cuda test-suite --rerun 1` once on a fresh copy of the tree (with upstream's
pytest.ini) holding one suite, tests/data/retry_probe/test_eb_retry_probe.py: two passing tests, one failing
on its first run only (flaky) and one failing every run after sleeping --seconds.  It prints the wall time
and the runs of each (the probe's own count, our rerun included, and what the harness's XML shows).

    python benchmarks/bench_harness_retries.py [--seconds 20] [--modes kept off]

Measured 2026-12-04 on this project's CPU VM (2 CPUs shared with other work, load 13-14; torch 2.6.0, Debian's
2.6.0 harness), one run each:
  --seconds 20: kept 371.6 s, the failing test run 10 times (9 in the harness's XML: 3 sessions of 3, then our
                rerun); off 225.9 s and 236.6 s, run 2 times (1 in the XML, then our rerun).
  --seconds 0 (start-up alone): kept 158.3 s; off 146.3 s and 179.7 s.
So kept pays about 10 x 20 s over its start-up (213 s), off 2 x 20 s plus start-up noise (47-80 s).  Off starts 10
test-file processes to kept's 6: 2.6's `--rs` sessions (4, ended before their test runs, to kept's 2 that run
it), one more session to go on past the flaky test (with its reruns off it ends the session it failed in), and
the flaky test's own isolated rerun (where it passes).
"""

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TREE = os.path.join(REPO, '.venvs', 'pytorch-src', 'pytorch-v2.6.0')
PYTHON = os.path.join(REPO, '.venvs', 'harness', 'bin', 'python')
CLI = os.path.join(os.path.dirname(sys.executable), 'eb-pytorch-cuda')
DATA = os.path.join(REPO, 'tests', 'data')
PROBE = os.path.join(DATA, 'retry_probe', 'test_eb_retry_probe.py')
PYTEST_INI = os.path.join(DATA, 'pytorch26-plain', 'pytest.ini')  # upstream's (its README says where from)
SUITE = 'test_eb_retry_probe'


def fresh_tree(workdir):
    tree = os.path.join(workdir, 'pytorch')
    for part in ('test', 'tools'):
        shutil.copytree(os.path.join(TREE, part), os.path.join(tree, part),
                        ignore=shutil.ignore_patterns('test-reports'))
    shutil.copy(os.path.join(TREE, 'version.txt'), tree)
    shutil.copy(PYTEST_INI, tree)
    shutil.copy(PROBE, os.path.join(tree, 'test'))
    return tree


def xml_runs(tree):
    """{test method: runs} as the harness's JUnit XML reports show them (a test case per session, a <rerun>
    per pytest-rerunfailures rerun)."""
    runs: dict = {}
    for path in glob.glob(os.path.join(tree, 'test', 'test-reports', '*', SUITE, '*.xml')):
        for case in ElementTree.parse(path).iter('testcase'):
            runs[case.get('name')] = runs.get(case.get('name'), 0) + 1 + sum(1 for c in case if c.tag == 'rerun')
    return runs


def measure(mode, seconds, workdir):
    tree = fresh_tree(os.path.join(workdir, mode))
    counts = os.path.join(workdir, mode, 'counts')
    os.makedirs(counts)
    env = {name: value for name, value in os.environ.items() if name != 'CI'}
    env.update(EB_RETRY_PROBE_DIR=counts, EB_RETRY_PROBE_SECONDS=str(seconds))
    argv = [CLI, 'test-suite', tree, '--python', PYTHON, '--runtest',
            f'cd test && %(python)s run_test.py --continue-through-error -i {SUITE}', '--rerun', '1',
            '--parallel', '1', '--results', os.path.join(workdir, mode, 'results'), '--format', 'text']
    if mode == 'kept':
        argv.append('--harness-retries')
    start = time.monotonic()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=3600)
    wall = time.monotonic() - start
    probe = {}
    for name in os.listdir(counts):
        with open(os.path.join(counts, name)) as handle:
            probe[name] = len(handle.readlines())
    return wall, done.returncode, probe, xml_runs(tree)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--seconds', type=float, default=20.0, help='how long the failing test takes')
    parser.add_argument('--modes', nargs='+', default=['kept', 'off'], choices=('kept', 'off'))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix='bench-retries-') as workdir:
        for mode in args.modes:
            wall, code, probe, harness = measure(mode, args.seconds, workdir)
            print(f"{mode}: {wall:.1f} s (exit {code}); failing test ({args.seconds:g} s): "
                  f"{probe.get('always', 0)} runs in all, {harness.get('test_b_always_fails', 0)} in the harness's "
                  f"XML; flaky test: {probe.get('once', 0)} runs, {harness.get('test_c_fails_once', 0)} in the XML",
                  flush=True)


if __name__ == '__main__':
    main()
