"""The typed record of one finished suite (or piece of one), as the results store keeps it: one JSON line.

Why a type: the record is written in four places (a suite alone: run/solo; a suite of a batch: run/batches; a
suite whose every Slurm job died: spread/controller; the merge of a suite's pieces: results/pieces) and read in
more (the store, the batch runner, the queue, the controller's progress, the service's notes), so its keys are
named once here and mypy checks every reader against them.  It stays a dict (a TypedDict, not a dataclass) for
the one reason that matters to a ten-hour run: the line on disk is exactly this mapping, so the stores that
earlier versions wrote read as they are, with no version field and no conversion (tests/data/store-82948c5).

Only `suite` is required: every writer writes the other keys it knows, but a record written by an earlier
version, or by hand in a test, may lack them, and readers use .get() for them.  What the JSON on disk must
satisfy to be such a record is checked in one place, run/store.parse_record.
"""

from typing import Any, Dict, List, Optional, TypedDict


class PieceLabel(TypedDict):
    """Which shard of which suite a record is (results.pieces.Piece, as dataclasses.asdict gives it)."""

    suite: str
    index: int
    count: int


class _Suite(TypedDict):
    suite: Dict[str, Any]  # a results.model.Suite as dataclasses.asdict gives it (results.saved.check_suite)


class StoreRecord(_Suite, total=False):
    """One suite's outcome, as stored; the keys its writers give, each but `suite` optional on reading."""

    exit_code: Optional[int]  # the suite's exit status, None when it timed out or never finished
    seconds: Optional[float]  # wall seconds of the suite (alone) or its share (in a batch)
    gpu: Optional[str]  # the GPU it was pinned to (CUDA_VISIBLE_DEVICES), None: all of them
    notes: List[str]  # what the outcome noticed (a pass with 0 tests, log and XML disagreeing)
    output_tail: str  # the last run/calls.OUTPUT_KEPT characters of its output
    output_file: Optional[str]  # the log it ran into
    batch_seconds: Optional[float]  # a suite of a batch: the batch's wall seconds
    batch_exit_code: Optional[int]  # a suite of a batch: run_test.py's exit status, None when killed
    corrected: bool  # a batch's end changed the record stored when the suite ended (the last one counts)
    test_seconds: Dict[str, float]  # {test id: seconds} of a long suite: how the next build splits it
    piece: PieceLabel  # a record of one piece of a suite (results.pieces)
    pieces: List[PieceLabel]  # a merged record: the pieces it was merged from (never stored)
    fingerprint: str  # the build it belongs to (added by ResultStore.append)


# the keys of a record that are times: each is also read by the one number reader (results.seconds), so that a
# record with 1e999 or -5 there is set aside like any other bad line (run/store.parse_record)
TIME_KEYS = ('seconds', 'batch_seconds')

# every key a record may have, with the JSON types its value may take (None: JSON null); run/store.parse_record
# checks each key that is there, so a crafted line never reaches a reader as the wrong type
OPTIONAL_TYPES = {
    'exit_code': (int, type(None)), 'seconds': (int, float, type(None)), 'gpu': (str, type(None)),
    'output_tail': (str,), 'output_file': (str, type(None)), 'batch_seconds': (int, float, type(None)),
    'batch_exit_code': (int, type(None)), 'corrected': (bool,),
}
