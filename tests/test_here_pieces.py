"""Long suites cut into pieces that run side by side here (to use the node, not one process on it),
with PyTorch's real harness (Debian's 2.6.0 run_test.py, torch 2.6.0): a real suite (test_native_functions) and a
stand-in file in the real tree with a known failure (no real CPU suite of this tree fails by design), each cut in
two by the previous run's times (run/plan.here_piece_rule with 3 slots: a share of 999 s), run by the executor here
(run/here) in parallel slots, give the unsplit serial run's result: statuses, counts and failing test ids.
"""

import json
import os

from environment import REAL_PYTHON
from helpers import comparable
from test_slurm_pieces import KNOWN, PREVIOUS, SUITES, _tree

from eb_pytorch_cuda.testsuite.policy.judging import KnownFailure, Policy, judge
from eb_pytorch_cuda.testsuite.results.pieces import SEPARATOR
from eb_pytorch_cuda.testsuite.run.command import TestCommand as Command  # not a pytest test class
from eb_pytorch_cuda.testsuite.run.executor import execute
from eb_pytorch_cuda.testsuite.run.here import HereExecutor
from eb_pytorch_cuda.testsuite.run.plan import RunRequest, here_piece_rule
from eb_pytorch_cuda.testsuite.run.store import ResultStore


def test_long_suites_in_pieces_side_by_side_here_give_the_unsplit_result(harness26, tmp_path):
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
    assert comparable(result) == comparable(serial), lines
    assert result.suites['test_native_functions'].status == 'passed'
    assert result.suites['test_native_functions'].counts['passed'] == 11
    assert [t.test_id for t in result.suites['test_piece_standin'].failed_tests] == ['TestPieces.test_zz_known_failure']
    # each piece ran alone in a slot: its own output, named by its key
    assert sorted(os.listdir(tmp_path / 'pieces-out')) == sorted(f"{key.replace('/', '.')}.log" for key in plan.units)
    verdict = judge(result, Policy(known=[KnownFailure(KNOWN, 'fails by design')]))
    assert verdict.passed and [(suite, test) for suite, test, _ in verdict.known] == \
        [('test_piece_standin', 'TestPieces.test_zz_known_failure')]


def _plan_of(test_dir, rule, done=frozenset(), lines=None):
    from eb_pytorch_cuda.testsuite.run.plan import build_plan
    request = RunRequest(Command(str(test_dir), {}, [REAL_PYTHON, 'run_test.py']), {}, str(test_dir / 'out'),
                         REAL_PYTHON, {'': 900}, parallel=6, units=SUITES, pieces=rule, done=frozenset(done))
    return build_plan(request, (lines if lines is not None else []).append)


def test_a_resumed_run_keeps_the_count_its_stored_pieces_were_cut_into(harness26, tmp_path):
    test_dir = _tree(tmp_path / 'tree')
    six = here_piece_rule(PREVIOUS, {}, 6)  # a share of 500 s: test_native_functions in 4, the stand-in in 3
    assert sorted(_plan_of(test_dir, six).units) == sorted(
        [f'test_native_functions{SEPARATOR}{i}/4' for i in range(1, 5)]
        + [f'test_piece_standin{SEPARATOR}{i}/3' for i in range(1, 4)])
    # the first attempt (3 slots) stored one of test_native_functions' 2 pieces and the whole stand-in
    plan = _plan_of(test_dir, six, {f'test_native_functions{SEPARATOR}1/2', 'test_piece_standin'})
    assert list(plan.units) == [f'test_native_functions{SEPARATOR}2/2']
    with open(test_dir.parent / '.additional_ci_files' / 'test-times.json') as handle:
        assert json.load(handle)['default']['default'] == {'test_native_functions': 1199}  # 2 x 600 - 1: 2 pieces
    # all its pieces stored: done holds its name (results/pieces.with_merged), nothing of it runs again
    assert list(_plan_of(test_dir, six, {'test_native_functions', 'test_piece_standin'}).units) == []


def test_our_times_file_is_emptied_when_nothing_is_cut_unwritable_is_said(harness26, tmp_path):
    test_dir = _tree(tmp_path / 'tree')
    times = test_dir.parent / '.additional_ci_files' / 'test-times.json'
    _plan_of(test_dir, here_piece_rule(PREVIOUS, {}, 3))
    assert json.loads(times.read_text())['default']['default'] == {'test_native_functions': 1199,
                                                                   'test_piece_standin': 1199}
    short = here_piece_rule({'test_native_functions': 100, 'test_piece_standin': 50}, {}, 3)
    assert all(SEPARATOR not in unit for unit in _plan_of(test_dir, short).units)
    assert json.loads(times.read_text())['default']['default'] == {}  # the harness shards nothing of ours now
    blocked = _tree(tmp_path / 'blocked')
    (blocked.parent / '.additional_ci_files').write_text('a file where the directory would go')
    lines = []
    plan = _plan_of(blocked, here_piece_rule(PREVIOUS, {}, 3), lines=lines)
    assert sorted(plan.units) == sorted(SUITES)
    assert [line for line in lines if line.startswith('not splitting long suites: ')] == [
        f"not splitting long suites: {blocked.parent / '.additional_ci_files' / 'test-times.json'} cannot be "
        "written: File exists: suites run whole"], lines
