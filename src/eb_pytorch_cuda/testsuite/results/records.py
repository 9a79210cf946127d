"""The typed record of one finished suite (or piece of one), as the results store keeps it: one JSON line.

Why a type: the record is written in four places (a suite alone: run/solo; a suite of a batch: run/batches; a
suite whose every Slurm job died: spread/controller; the merge of a suite's pieces: results/pieces) and read in
more (the store, the batch runner, the queue, the controller's progress, the service's notes), so its fields are
named once here and mypy checks every reader against them.  Inside the step a record is this frozen object, its
suite a results.model.Suite; it becomes JSON in one place each way: to_json() when the store appends the line
(run/store.ResultStore.append, which the Slurm queue's workers write through too), from_json() when the store's
one reader has checked a line (run/store.parse_record, which the queue's RecordReader reads through too).

The line on disk is exactly the mapping the writers wrote before the record was a dataclass (a TypedDict then),
key for key and in the same order, so the stores earlier versions wrote read as they are and a record written
today is byte for byte what it was (tests/data/store-82948c5, tests/data/store-2fa24cb).  Which keys a line
has tells what wrote it, so to_json() leaves out what a writer never wrote: the batch keys outside a batch, the
notes of a record that has none (a suite whose jobs all died), the per-test times, the correction mark, the
piece labels, the fingerprint until the store adds it, the interruption mark a suite killed from outside has, and
the Slurm job of a record a spread run's job wrote.

Only `suite` is required on reading: a record written by an earlier version, or by hand in a test, may lack the
other keys, and they take the defaults below.  What the JSON on disk must satisfy to be such a record is checked
in one place, run/store.parse_record.
"""

from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

from eb_pytorch_cuda.testsuite.results.model import Suite


@dataclass(frozen=True)
class PieceLabel:
    """Which shard of which suite a record is (results.pieces.Piece, as the line holds it)."""

    suite: str
    index: int
    count: int

    def to_json(self) -> Dict[str, Any]:
        return {'suite': self.suite, 'index': self.index, 'count': self.count}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> 'PieceLabel':
        return cls(data['suite'], int(data['index']), int(data['count']))


@dataclass(frozen=True)
class StoreRecord:
    """One suite's outcome, as stored; the fields in the order of the keys on disk."""

    suite: Suite
    exit_code: Optional[int] = None  # the suite's exit status, None when it timed out or never finished
    seconds: Optional[float] = None  # wall seconds of the suite (alone) or its share (in a batch)
    batch_seconds: Optional[float] = None  # a suite of a batch: the batch's wall seconds (None: not of a batch)
    batch_exit_code: Optional[int] = None  # a suite of a batch: run_test.py's exit status, None when killed
    gpu: Optional[str] = None  # the GPU it was pinned to (CUDA_VISIBLE_DEVICES), None: all of them
    notes: Optional[Tuple[str, ...]] = None  # what the outcome noticed (a pass with 0 tests); None: none recorded
    output_tail: str = ''  # the last OUTPUT_KEPT characters of its output
    output_file: Optional[str] = None  # the log it ran into
    test_seconds: Optional[Dict[str, float]] = None  # {test id: seconds} of a long suite: how the next build splits it
    corrected: bool = False  # a batch's end changed the record stored when the suite ended (the last one counts)
    piece: Optional[PieceLabel] = None  # a record of one piece of a suite (results.pieces)
    pieces: Tuple[PieceLabel, ...] = ()  # a merged record: the pieces it was merged from (never stored)
    fingerprint: Optional[str] = None  # the build it belongs to (added by ResultStore.append)
    # the signal that killed the suite's run_test.py from outside (not its own failure): a rerun runs it again
    interrupted: Optional[str] = None
    job: Optional[str] = None  # the Slurm job's worker that ran it (spread/worker; None: run by the step itself)

    def to_json(self) -> Dict[str, Any]:
        """The line's mapping, keys in the writers' order, each key a writer leaves out left out (see the module)."""
        data: Dict[str, Any] = {'suite': self.suite.to_json(), 'exit_code': self.exit_code, 'seconds': self.seconds}
        if self.batch_seconds is not None:
            data.update(batch_seconds=self.batch_seconds, batch_exit_code=self.batch_exit_code)
        data['gpu'] = self.gpu
        if self.notes is not None:
            data['notes'] = list(self.notes)
        data.update(output_tail=self.output_tail, output_file=self.output_file)
        if self.test_seconds is not None:
            data['test_seconds'] = dict(self.test_seconds)
        if self.corrected:
            data['corrected'] = True
        if self.piece is not None:
            data['piece'] = self.piece.to_json()
        if self.pieces:
            data['pieces'] = [piece.to_json() for piece in self.pieces]
        if self.fingerprint is not None:
            data['fingerprint'] = self.fingerprint
        if self.interrupted is not None:
            data['interrupted'] = self.interrupted
        if self.job is not None:
            data['job'] = self.job
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> 'StoreRecord':
        """The record of a line run/store.parse_record has checked (a key left out takes its default)."""
        notes, piece = data.get('notes'), data.get('piece')
        return cls(suite=Suite.from_json(data['suite']), exit_code=data.get('exit_code'), seconds=data.get('seconds'),
                   batch_seconds=data.get('batch_seconds'), batch_exit_code=data.get('batch_exit_code'),
                   gpu=data.get('gpu'), notes=tuple(notes) if notes is not None else None,
                   output_tail=data.get('output_tail', ''), output_file=data.get('output_file'),
                   test_seconds=data.get('test_seconds'), corrected=bool(data.get('corrected', False)),
                   piece=PieceLabel.from_json(piece) if piece is not None else None,
                   fingerprint=data.get('fingerprint'),
                   interrupted=data.get('interrupted'),
                   job=data.get('job'))  # `pieces` is never stored: a line's is not read


# the keys of a record that are times: each is also read by the one number reader (results.seconds), so that a
# record with 1e999 or -5 there is set aside like any other bad line (run/store.parse_record)
TIME_KEYS = ('seconds', 'batch_seconds')

# every key a record may have, with the JSON types its value may take (None: JSON null); run/store.parse_record
# checks each key that is there, so a crafted line never reaches a reader as the wrong type
OPTIONAL_TYPES = {
    'exit_code': (int, type(None)), 'seconds': (int, float, type(None)), 'gpu': (str, type(None)),
    'output_tail': (str,), 'output_file': (str, type(None)), 'batch_seconds': (int, float, type(None)),
    'batch_exit_code': (int, type(None)), 'corrected': (bool,),
    'interrupted': (str, type(None)), 'job': (str, type(None)),
}


OUTPUT_KEPT = 20000  # characters of a suite's output kept in its record


def suite_record(suite: Suite, *, output: str = '', output_file: Optional[str] = None, exit_code: Optional[int] = None,
                 seconds: Optional[float] = None, gpu: Optional[str] = None, notes: Optional[Sequence[str]] = None,
                 test_seconds: Optional[Dict[str, float]] = None, interrupted: Optional[str] = None,
                 batch_seconds: Optional[float] = None, batch_exit_code: Optional[int] = None) -> StoreRecord:
    """The record of one suite's run, whichever runner ran it (a batch, the suite alone, a Slurm job's submitter
    for a suite its jobs never finished): the last OUTPUT_KEPT characters of output kept, notes as given (None:
    none recorded), per-test times only where there are some."""
    return StoreRecord(suite=suite, exit_code=exit_code, seconds=seconds, batch_seconds=batch_seconds,
                       batch_exit_code=batch_exit_code, gpu=gpu, notes=None if notes is None else tuple(notes),
                       output_tail=output[-OUTPUT_KEPT:], output_file=output_file, test_seconds=test_seconds or None,
                       interrupted=interrupted)
