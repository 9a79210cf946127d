"""Long suites cut into pieces that run side by side here (issue 33 item 5: use the node, not one process on it),
with PyTorch's real harness (Debian's 2.6.0 run_test.py, torch 2.6.0): a real suite (test_native_functions) and a
stand-in file in the real tree with a known failure (no real CPU suite of this tree fails by design), each cut in
two by the previous run's times (run/plan.here_piece_rule with 3 slots: a share of 999 s), run by the executor here
(run/here) in parallel slots, give the unsplit serial run's result: statuses, counts and failing test ids.
"""

import os

import pytest
from environment import missing
from test_slurm_pieces import KNOWN, PREVIOUS, REAL_PYTHON, REAL_TREE, SUITES, _comparable, _tree

from eb_pytorch_cuda.testsuite.policy.judging import KnownFailure, Policy, judge
from eb_pytorch_cuda.testsuite.results.pieces import SEPARATOR
from eb_pytorch_cuda.testsuite.run.command import TestCommand as Command  # not a pytest test class
from eb_pytorch_cuda.testsuite.run.executor import execute
from eb_pytorch_cuda.testsuite.run.here import HereExecutor
from eb_pytorch_cuda.testsuite.run.plan import RunRequest, here_piece_rule
from eb_pytorch_cuda.testsuite.run.store import ResultStore


@pytest.fixture(scope='module')
def harness():
    if not (os.path.exists(os.path.join(REAL_TREE, 'test', 'run_test.py')) and os.path.exists(REAL_PYTHON)):
        missing("PyTorch's real harness (.venvs/pytorch-src, .venvs/harness of tools/setup.sh's harness block)")


def test_long_suites_in_pieces_side_by_side_here_give_the_unsplit_result(harness, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ('PYTHONPATH', 'CI')}
    serial_dir = _tree(tmp_path / 'serial')
    _plan, serial = execute(HereExecutor(), RunRequest(Command(str(serial_dir), {}, [REAL_PYTHON, 'run_test.py']),
                                                       env, str(tmp_path / 'serial-out'), REAL_PYTHON, {'': 900},
                                                       units=SUITES),
                            ResultStore(str(tmp_path / 'serial-results' / 'r.jsonl'), 'real'))
    pieces_dir = _tree(tmp_path / 'pieces')
    lines = []
    rule = here_piece_rule(PREVIOUS, {}, 3)
    plan, result = execute(HereExecutor(lines.append),
                           RunRequest(Command(str(pieces_dir), {}, [REAL_PYTHON, 'run_test.py']), env,
                                      str(tmp_path / 'pieces-out'), REAL_PYTHON, {'': 900}, parallel=3, units=SUITES,
                                      pieces=rule),
                           ResultStore(str(tmp_path / 'pieces-results' / 'r.jsonl'), 'real'), lines.append)
    assert sorted(plan.units) == sorted(f'{suite}{SEPARATOR}{index}/2' for suite in SUITES for index in (1, 2))
    assert plan.parallel == 3 and any(line.startswith('2 long suite(s) run as pieces (4 in all)') for line in lines)
    assert _comparable(result) == _comparable(serial), lines
    assert result.suites['test_native_functions'].status == 'passed'
    assert result.suites['test_native_functions'].counts['passed'] == 11
    assert [t.test_id for t in result.suites['test_piece_standin'].failed_tests] == ['TestPieces.test_zz_known_failure']
    # each piece ran alone in a slot: its own output, named by its key
    assert sorted(os.listdir(tmp_path / 'pieces-out')) == sorted(f"{key.replace('/', '.')}.log" for key in plan.units)
    verdict = judge(result, Policy(known=[KnownFailure(KNOWN, 'fails by design')]))
    assert verdict.passed and [(suite, test) for suite, test, _ in verdict.known] == \
        [('test_piece_standin', 'TestPieces.test_zz_known_failure')]
