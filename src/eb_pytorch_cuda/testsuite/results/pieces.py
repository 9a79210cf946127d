"""Pieces of a long suite: one pytest shard of one test file, a unit of the spread queue.

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
from dataclasses import dataclass, replace
from typing import Dict, Iterable, List, Mapping, Optional

from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.testsuite.results.model import (COUNT_KEYS, SUITE_BAD_REPORT, SUITE_FAILED, SUITE_INCOMPLETE,
                                                     SUITE_PASSED, SUITE_REPORT_INCOMPLETE, SUITE_TERMINATED,
                                                     SUITE_TIMED_OUT, SUITE_UNCOUNTED, Counts, Suite, TestCase)
from eb_pytorch_cuda.testsuite.results.cudatests import add_counts
from eb_pytorch_cuda.testsuite.results.records import PieceLabel, StoreRecord
from eb_pytorch_cuda.testsuite.results.seconds import NotSeconds, seconds_of
from eb_pytorch_cuda.testsuite.results.testtimes import piece_times, pieces_for

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


def split(suites: Iterable[str], expected: Mapping[str, float], piece_seconds: float = PIECE_SECONDS,
          test_seconds: Optional[Mapping[str, Dict[str, float]]] = None) -> List[Piece]:
    """Every suite as its pieces, in the given order (a suite's pieces next to each other): a suite with its
    tests' times in as many as keep its longest piece within piece_seconds (results.testtimes), another one
    longer than piece_seconds in ceil(t / piece_seconds)."""
    def count_of(suite: str) -> int:
        times = (test_seconds or {}).get(suite)
        if times and suite in expected and piece_count(expected[suite], piece_seconds) > 1:
            return pieces_for(times, piece_seconds)
        return piece_count(expected.get(suite), piece_seconds)
    return [Piece(suite, index, count) for suite in suites for count in (count_of(suite),)
            for index in range(1, count + 1)]


def expected_of(pieces: Iterable[Piece], expected: Mapping[str, float],
                test_seconds: Optional[Mapping[str, Dict[str, float]]] = None) -> Dict[str, float]:
    """{piece key: expected seconds}: by its tests' times where known (results.testtimes: the harness's own
    hash puts each test in its piece), else its suite's time shared equally by its pieces."""
    found: Dict[str, float] = {}
    shares: Dict[tuple, List[float]] = {}
    for piece in pieces:
        times = (test_seconds or {}).get(piece.suite)
        if times and not piece.whole:
            share = shares.setdefault((piece.suite, piece.count), piece_times(times, piece.count))
            found[piece.key] = round(share[piece.index - 1], 3)
        elif piece.suite in expected:
            found[piece.key] = float(expected[piece.suite]) / piece.count
    return found


def key_of(record: StoreRecord) -> str:
    """The queue and store key of a stored record: its piece's key, or its suite's name (records written
    before pieces existed have no 'piece' and are whole suites)."""
    piece = record.piece
    if piece:
        return Piece(piece.suite, piece.index, piece.count).key
    return record.suite.name


def mark(record: StoreRecord, piece: Piece) -> StoreRecord:
    """record (a suite's, from a run of one piece) labelled with its piece."""
    if not piece.whole:
        return replace(record, piece=PieceLabel(suite=piece.suite, index=piece.index, count=piece.count))
    return record


# what a suite is when its pieces end differently: the worst first (a piece that never finished keeps the
# suite from passing, as a shard left open does in logparse)
_WORST_FIRST = (SUITE_TIMED_OUT, SUITE_TERMINATED, SUITE_BAD_REPORT, SUITE_REPORT_INCOMPLETE, SUITE_INCOMPLETE,
                SUITE_UNCOUNTED, SUITE_FAILED)


def _label(record: StoreRecord) -> PieceLabel:
    assert record.piece is not None, 'only the records of pieces are merged (with_merged)'
    return record.piece


def merged(suite: str, records: List[StoreRecord]) -> StoreRecord:
    """The record of `suite` from the records of all its pieces: counts added, failed tests in piece order
    (each test id once), the worst status, seconds added, the pieces' notes and signals named by piece."""
    ordered = sorted(records, key=lambda record: _label(record).index)
    states = [record.suite.status for record in ordered]
    status = next((state for state in _WORST_FIRST if state in states), SUITE_PASSED)
    counts = Counts(**{key: sum(record.suite.counts[key] for record in ordered) for key in COUNT_KEYS})
    failed: List[TestCase] = []
    seen = set()
    for record in ordered:
        for test in record.suite.failed_tests:
            if test.test_id not in seen:
                seen.add(test.test_id)
                failed.append(replace(test))

    def labelled(values: List[Optional[str]]) -> Optional[str]:
        parts = [f'piece {_label(record).index}/{_label(record).count}: {value}'
                 for record, value in zip(ordered, values) if value]
        return '; '.join(parts) or None

    seconds = [record.suite.seconds for record in ordered if record.suite.seconds is not None]
    cuda = None
    for record in ordered:
        cuda = add_counts(cuda, record.suite.cuda_counts)
    first = ordered[0].suite
    suite_record = Suite(name=suite, status=status, counts=counts, failed_tests=failed,
                         signal=labelled([record.suite.signal for record in ordered]),
                         sources=sorted({source for record in ordered for source in record.suite.sources}),
                         rerun_outcome=first.rerun_outcome,
                         seconds=round(sum(seconds), 2) if len(seconds) == len(ordered) else None,
                         note=labelled([record.suite.note for record in ordered]), cuda_counts=cuda)
    test_seconds = {node: seconds for record in ordered for node, seconds in (record.test_seconds or {}).items()}
    walls = [wall for wall in (record.seconds for record in ordered) if wall is not None]
    exit_codes = [record.exit_code for record in ordered]
    return StoreRecord(
        suite=suite_record, exit_code=max((code or 0 for code in exit_codes), default=0)
        if all(code is not None for code in exit_codes) else None,
        seconds=round(sum(walls), 1) if len(walls) == len(ordered) else None,
        gpu=None, notes=tuple(f'piece {_label(record).index}/{_label(record).count}: {note}'
                              for record in ordered for note in record.notes or ()),
        output_tail=ordered[-1].output_tail, output_file=ordered[-1].output_file,
        test_seconds=test_seconds or None, pieces=tuple(_label(record) for record in ordered))


def with_merged(records: Mapping[str, StoreRecord]) -> Dict[str, StoreRecord]:
    """records ({key: record}, pieces and whole suites) with each suite whose pieces are all there (one
    count, every index) added as one merged record under its name; a suite's own whole record wins."""
    by_suite: Dict[str, Dict[int, Dict[int, StoreRecord]]] = {}
    for record in records.values():
        piece = record.piece
        if piece:
            by_suite.setdefault(piece.suite, {}).setdefault(piece.count, {})[piece.index] = record
    result = dict(records)
    for suite, counts in by_suite.items():
        if suite in result:
            continue
        for count, found in sorted(counts.items()):
            if len(found) == count:
                result[suite] = merged(suite, list(found.values()))
                break
    return result


def record_problem(record: Mapping) -> Optional[str]:
    """What is wrong with a stored record's piece label and per-test times (None: nothing), so that a
    crafted or torn line is set aside like any other bad record, never a traceback."""
    piece = record.get('piece')
    if piece is not None:
        integers = isinstance(piece, dict) and all(isinstance(piece.get(key), int) and not isinstance(piece[key], bool)
                                                   for key in ('index', 'count'))
        if not integers or set(piece) != {'suite', 'index', 'count'}:
            return 'piece: must be {suite, index, count} with integer index and count'
        if piece['suite'] != record['suite'].get('name'):
            return 'piece: names another suite than the record'
        try:
            Piece(piece['suite'], piece['index'], piece['count'])
        except (PluginError, TypeError):
            return f"piece: shard {piece['index']} of {piece['count']} is no piece"
    times = record.get('test_seconds')
    if times is not None and not (isinstance(times, dict) and all(isinstance(node, str) for node in times)):
        return 'test_seconds: must map test ids to seconds'
    for node, seconds in (times or {}).items():
        try:
            seconds_of(seconds)
        except NotSeconds as err:
            return f'test_seconds: {node[:80]!r}: {err}'
    return None
