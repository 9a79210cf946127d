"""Pieces of a long suite (spread/pieces.py): the identity the queue and the store use, and the plan."""

import pytest

from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.testsuite.spread.pieces import PIECE_SECONDS, Piece, expected_of, piece_count, split


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
