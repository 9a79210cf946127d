"""Pieces of a long suite: one pytest shard of one test file, a unit of the spread queue (issue 23).

Why: the spread stops scaling at its longest suite (a full PyTorch run has a suite of 21.5 h on a slow
machine), so a suite expected to take longer than PIECE_SECONDS is handed out as k pieces, each run by
the harness's own file sharding: run_test.py passes `--shard-id=i --num-shards=k` to the suite's pytest
(2.2+: test/pytest_shard_custom.py, 1-based, sha256 of the node id modulo k; the 2.1 line: the external
pytest-shard package, 0-based, the same idea), which is how PyTorch's own CI cuts a file longer than its
THRESHOLD (tools/testing/test_selections.py: 600 s, ceil(duration / 600) shards).  A Piece is the typed
identity of such a unit; its `key` is the string the queue and the results store use, and a plain suite
name is the key of a whole suite, so queues and results of earlier versions read as whole suites.
"""

import math
from dataclasses import dataclass
from typing import Dict, Iterable, List, Mapping, Optional

from eb_pytorch_cuda.errors import PluginError

PIECE_SECONDS = 600.0  # PyTorch's own THRESHOLD: a longer suite is split, into pieces of at most this
SEPARATOR = '#shard'  # never in a suite name (a path under test/ without '.py'); quoted in claim file names


@dataclass(frozen=True)
class Piece:
    """Shard `index` (1-based) of `count` of `suite`; count 1 is the whole suite."""

    suite: str
    index: int = 1
    count: int = 1

    def __post_init__(self) -> None:
        if not self.suite or SEPARATOR in self.suite or not 1 <= self.index <= self.count:
            raise PluginError(self.suite or '(empty)',
                              f'is not a piece of a suite (shard {self.index} of {self.count})')

    @property
    def whole(self) -> bool:
        return self.count == 1

    @property
    def key(self) -> str:
        """'suite' for a whole suite, 'suite#shard3/8' for its third of eight pieces."""
        return self.suite if self.whole else f'{self.suite}{SEPARATOR}{self.index}/{self.count}'

    @classmethod
    def parse(cls, key: str) -> 'Piece':
        """The piece a key names (a plain suite name: the whole suite); PluginError for a malformed key."""
        suite, separator, shard = key.partition(SEPARATOR)
        if not separator:
            return cls(key)
        index, slash, count = shard.partition('/')
        if not (slash and index.isdigit() and count.isdigit()):
            raise PluginError(key, 'is not a piece of a suite (expected SUITE#shardI/K)')
        return cls(suite, int(index), int(count))

    def shard_args(self, zero_based: bool = False) -> List[str]:
        """The pytest options that select this piece: 1-based ids for pytest_shard_custom (2.2+), 0-based
        for the external pytest-shard of the 2.1 line."""
        if self.whole:
            return []
        return [f'--shard-id={self.index - 1 if zero_based else self.index}', f'--num-shards={self.count}']


def piece_count(seconds: Optional[float], piece_seconds: float = PIECE_SECONDS) -> int:
    """How many pieces a suite expected to take `seconds` is run as (1: unknown or short enough)."""
    if not seconds or seconds <= piece_seconds or piece_seconds <= 0:
        return 1
    return int(math.ceil(float(seconds) / piece_seconds))


def split(suites: Iterable[str], expected: Mapping[str, float],
          piece_seconds: float = PIECE_SECONDS) -> List[Piece]:
    """Every suite as its pieces, in the given order (a suite's pieces next to each other)."""
    return [Piece(suite, index, count) for suite in suites
            for count in (piece_count(expected.get(suite), piece_seconds),) for index in range(1, count + 1)]


def expected_of(pieces: Iterable[Piece], expected: Mapping[str, float]) -> Dict[str, float]:
    """{piece key: expected seconds}: a suite's time shared equally by its pieces (a hash of the test ids
    spreads tests evenly when there are many; per-test times, where known, are better)."""
    return {piece.key: float(expected[piece.suite]) / piece.count for piece in pieces if piece.suite in expected}
