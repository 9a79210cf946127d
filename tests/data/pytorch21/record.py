"""Re-record the real outputs of the 2.1-line harness kept here (run by hand; the tests only read them).

    .venvs/eb-5.4.1/bin/python tests/data/pytorch21/record.py

Each recording runs the real run_test.py of .venvs/pytorch-2.1-harness (tools/setup.sh copies it from
../shared/pytorch-2.1-harness) with .venvs/harness-2.1's Python (torch 2.1.2 from PyPI), in a scratch copy
of that tree with the two stand-in suites of suites/ added (a crash and a long failure: what no real suite
of this tree does on a CPU), without CI in the environment.  It writes NAME.log (stdout and stderr as one
stream, verbatim), NAME.json (the argv, the exit code, the XML reports the run wrote, relative to test/)
and, for XML recordings, NAME-xml/ (the reports themselves).
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
TREE = os.path.join(ROOT, '.venvs', 'pytorch-2.1-harness')
PYTHON = os.path.join(ROOT, '.venvs', 'harness-2.1', 'bin', 'python')
REAL = ['test_cuda_primary_ctx', 'test_license', 'test_per_overload_api', 'test_set_default_mobile_cpu_allocator',
        'test_show_pickle', 'test_type_info']
RECORDINGS = {
    # one plain call over the tree's real suites: pool, serial suites after it, a real failure, a 0-test suite
    'plain': ['--continue-through-error', '--verbose', '-i', *REAL],
    'shard-1-of-2': ['--continue-through-error', '-i', *REAL, '--shard', '1', '2'],
    'shard-2-of-2': ['--continue-through-error', '-i', *REAL, '--shard', '2', '2'],
    'exclude': ['--continue-through-error', '-i', *REAL, '-x', 'test_license', 'test_show_pickle'],
    'xml-after-dashes': ['--continue-through-error', '-i', *REAL, '--', '--save-xml'],
    'xml-before-dashes': ['--continue-through-error', '--save-xml', '-i', 'test_type_info'],
    'killed-and-long-failure': ['--continue-through-error', '-i', 'test_abort_standin', 'test_long_failure_standin',
                                'test_type_info'],
    # unittest mode, broken in this harness: the pool's suites are announced and never run, the serial one
    # stops run_test.py (AttributeError: 'Namespace' object has no attribute 'pytest')
    'unittest-mode': ['--continue-through-error', '-i', 'test_type_info', 'test_per_overload_api', 'test_show_pickle'],
}
ENVIRONMENTS = {'unittest-mode': {'PYTORCH_TEST_DO_NOT_USE_PYTEST': '1'}}


def record(name, args, scratch):
    test_dir = os.path.join(scratch, 'test')
    reports = os.path.join(test_dir, 'test-reports')
    shutil.rmtree(reports, ignore_errors=True)
    argv = [PYTHON, 'run_test.py', *args]
    env = dict({k: v for k, v in os.environ.items() if k != 'CI'}, **ENVIRONMENTS.get(name, {}))
    with open(os.path.join(HERE, f'{name}.log'), 'w') as log:
        code = subprocess.call(argv, cwd=test_dir, env=env, stdout=log, stderr=subprocess.STDOUT)
    xml = sorted(os.path.relpath(os.path.join(d, f), test_dir) for d, _, files in os.walk(reports)
                 for f in files if f.endswith('.xml'))
    if xml:
        target = os.path.join(HERE, f'{name}-xml')
        shutil.rmtree(target, ignore_errors=True)
        for path in xml:
            os.makedirs(os.path.dirname(os.path.join(target, path)), exist_ok=True)
            shutil.copy(os.path.join(test_dir, path), os.path.join(target, path))
    with open(os.path.join(HERE, f'{name}.json'), 'w') as meta:
        json.dump({'argv': ['python', 'run_test.py', *args], 'cwd': 'test', 'exit_code': code, 'xml_reports': xml,
                   'tree': '../shared/pytorch-2.1-harness (+ suites/ here)', 'python': 'torch 2.1.2 (PyPI), CPU',
                   'environment': ' '.join(['CI unset', *(f'{k}={v}' for k, v in ENVIRONMENTS.get(name, {}).items())])},
                  meta, indent=1)
    print(f'{name}: exit {code}, {len(xml)} XML report(s)')


def main():
    with tempfile.TemporaryDirectory() as scratch:
        shutil.copytree(TREE, scratch, dirs_exist_ok=True)
        for suite in os.listdir(os.path.join(HERE, 'suites')):
            shutil.copy(os.path.join(HERE, 'suites', suite), os.path.join(scratch, 'test', suite))
        for name, args in RECORDINGS.items():
            if len(sys.argv) < 2 or name in sys.argv[1:]:
                record(name, args, scratch)


if __name__ == '__main__':
    main()
