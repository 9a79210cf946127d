"""Re-record the 2.1-line harness's outputs of test_native_functions whole and as 2 pieces (run by hand).

    PYTHONPATH=$PWD/src .venvs/eb-5.4.1/bin/python tests/data/pytorch21-pieces/record.py

In a scratch copy of .venvs/pytorch-2.1-harness (tools/setup.sh copies it from ../shared/pytorch-2.1-harness),
with .venvs/harness-2.1's Python (torch 2.1.2 from PyPI, pytest-shard 0.1.2) and without CI or PYTHONPATH in
the environment, each run goes through the test step's own `solo.run_suite`: `whole` without a test-times file,
then `pieceIof2` (I = 1, 2) with the file run/piece_times writes (the suite at 1199 s: 2 pytest shards) and
`--shard I 2`.  Kept verbatim: NAME.log (the run's output, stdout and stderr as one stream) and NAME-xml/ (its
XML reports, as the harness wrote them under test/test-reports/).
"""

import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
TREE = os.path.join(ROOT, '.venvs', 'pytorch-2.1-harness')
PYTHON = os.path.join(ROOT, '.venvs', 'harness-2.1', 'bin', 'python')
SUITE = 'test_native_functions'


def main():
    from eb_pytorch_cuda.testsuite.results.pieces import Piece
    from eb_pytorch_cuda.testsuite.run import piece_times, solo
    from eb_pytorch_cuda.testsuite.run.command import TestCommand, harness_environment
    from eb_pytorch_cuda.testsuite.run.harness import harness_of
    from eb_pytorch_cuda.testsuite.run.plan import RunRequest, build_plan
    scratch = tempfile.mkdtemp(prefix='record21-pieces-')
    try:
        shutil.copytree(TREE, os.path.join(scratch, 'tree'), ignore=shutil.ignore_patterns('test-reports'))
        test_dir = os.path.join(scratch, 'tree', 'test')
        command = TestCommand(test_dir, {}, [PYTHON, 'run_test.py', '--continue-through-error'])
        env = harness_environment({k: v for k, v in os.environ.items() if k not in ('PYTHONPATH', 'CI')}, command)
        pieces = [Piece(SUITE, index, 2) for index in (1, 2)]
        for name, piece in [('whole', Piece(SUITE))] + [(f'piece{p.index}of2', p) for p in pieces]:
            if not piece.whole:
                assert piece_times.write_times(test_dir, harness_of(test_dir), pieces) is None
            out = os.path.join(scratch, 'out', name)
            os.makedirs(out)
            plan = build_plan(RunRequest(command, env, out, PYTHON, {'': 900}, units=[piece.key]))
            record = solo.run_suite(plan, piece.key)
            shutil.copy(record['output_file'], os.path.join(HERE, f'{name}.log'))
            reports = os.path.join(test_dir, 'test-reports', piece.reports_dir if not piece.whole else 'python-pytest')
            target = os.path.join(HERE, f'{name}-xml')
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(reports, target)
            print(name, record['suite']['status'], record['suite']['counts'], file=sys.stderr)
    finally:
        shutil.rmtree(scratch)


if __name__ == '__main__':
    main()
