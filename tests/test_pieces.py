"""Pieces of a long suite (results/pieces.py): the identity the queue and the store use, and the plan."""

import pytest

from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.testsuite.results.pieces import PIECE_SECONDS, Piece, expected_of, key_of, piece_count, split
from eb_pytorch_cuda.testsuite.results.pieces import with_merged


def test_a_plain_suite_name_is_the_whole_suite():
    piece = Piece.parse('distributed/test_c10d')
    assert piece == Piece('distributed/test_c10d', 1, 1)
    assert piece.whole and piece.key == 'distributed/test_c10d' and piece.shard_args() == []


def test_a_piece_key_round_trips_and_gives_the_harness_shard_options():
    piece = Piece('inductor/test_torchinductor_opinfo', 3, 8)
    assert piece.key == 'inductor/test_torchinductor_opinfo#shard3/8'
    assert Piece.parse(piece.key) == piece
    assert piece.shard_args() == ['--shard-id=3', '--num-shards=8']  # 2.2+: pytest_shard_custom, 1-based
    assert piece.shard_args(zero_based=True) == ['--shard-id=2', '--num-shards=8']  # 2.1: pytest-shard


@pytest.mark.parametrize('key', ['x#shard', 'x#shard3', 'x#shard0/2', 'x#shard3/2', 'x#shard-1/2', '#shard1/2'])
def test_a_malformed_key_is_a_one_line_error(key):
    with pytest.raises(PluginError) as caught:
        Piece.parse(key)
    assert '\n' not in str(caught.value)


def test_suites_over_the_threshold_become_pytorchs_number_of_pieces():
    # PyTorch's own rule (tools/testing/test_selections.py): ceil(duration / 600) shards above 600 s
    assert PIECE_SECONDS == 600
    assert [piece_count(s) for s in (None, 0, 599, 600, 601, 1800, 77584.492)] == [1, 1, 1, 1, 2, 3, 130]
    expected = {'long': 1500.0, 'short': 10.0}
    pieces = split(['short', 'long', 'unknown'], expected)
    assert [piece.key for piece in pieces] == ['short', 'long#shard1/3', 'long#shard2/3', 'long#shard3/3', 'unknown']
    assert expected_of(pieces, expected) == {'short': 10.0, 'long#shard1/3': 500.0, 'long#shard2/3': 500.0,
                                             'long#shard3/3': 500.0}


def _record(suite, index, count, status='passed', passed=1, failed=(), seconds=2.0, note=None):
    counts = dict.fromkeys(('failed', 'errors', 'passed', 'skipped', 'xfailed', 'xpassed', 'rerun'), 0)
    counts.update(passed=passed, failed=len(failed))
    return {'suite': {'name': suite, 'status': status, 'counts': counts, 'sources': ['log'], 'signal': None,
                      'failed_tests': [{'test_id': test, 'state': 'failed', 'reruns': 0, 'rerun_outcome': None}
                                       for test in failed],
                      'rerun_outcome': None, 'seconds': seconds, 'note': note},
            'exit_code': 1 if failed else 0, 'seconds': seconds + 1, 'gpu': None, 'notes': [],
            'piece': {'suite': suite, 'index': index, 'count': count}}


def test_records_are_keyed_by_piece_and_old_records_by_suite():
    assert key_of(_record('a', 2, 3)) == 'a#shard2/3'
    old = _record('a', 1, 1)
    del old['piece']
    assert key_of(old) == 'a'


def test_a_suite_is_the_merge_of_all_its_pieces_and_only_then():
    records = {'a#shard1/3': _record('a', 1, 3, passed=4), 'a#shard3/3': _record('a', 3, 3, passed=5)}
    assert 'a' not in with_merged(records)  # a piece missing: the suite has no outcome yet (it runs again)
    records['a#shard2/3'] = _record('a', 2, 3, status='failed', passed=1, failed=['T.test_x'])
    suite = with_merged(records)['a']
    assert suite['suite']['status'] == 'failed'
    assert suite['suite']['counts']['passed'] == 10 and suite['suite']['counts']['failed'] == 1
    assert [test['test_id'] for test in suite['suite']['failed_tests']] == ['T.test_x']
    assert suite['suite']['seconds'] == 6.0 and suite['seconds'] == 9.0 and suite['exit_code'] == 1
    assert [piece['index'] for piece in suite['pieces']] == [1, 2, 3]


def test_a_piece_that_never_finished_keeps_the_suite_from_passing_and_says_which():
    records = {key_of(r): r for r in (_record('a', 1, 2), _record('a', 2, 2, status='timed out', note='slow'))}
    suite = with_merged(records)['a']['suite']
    assert suite['status'] == 'timed out' and suite['note'] == 'piece 2/2: slow'
