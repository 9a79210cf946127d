"""Run the test suites here (not over Slurm): batches, and a suite alone when its batch was killed.

A ten-hour test step must survive a hanging multiprocess test and a killed `eb`.  Suites run in
batches through run_test.py itself (run/batches: its pool and serial list apply, no per-suite start-up
cost), each batch in its own process group killed at the sum of its suites' timeouts; a suite its
killed batch did not finish runs again alone (run_suite) with its own timeout.  Each suite's outcome
(results/outcome: exit state, log, XML reports) goes to the build's run/store as its batch ends.
"""

import os
import subprocess
import time
from typing import Callable, List, Mapping, Optional, Sequence, Tuple

from eb_pytorch_cuda import process
from eb_pytorch_cuda.testsuite.run import batches
from eb_pytorch_cuda.testsuite.run import discovery
from eb_pytorch_cuda.testsuite.results import grammar
from eb_pytorch_cuda.testsuite.run.gpus import slot_gpus
from eb_pytorch_cuda.testsuite.results.splitting import split_batch_output
from eb_pytorch_cuda.testsuite.run.command import harness_environment
from eb_pytorch_cuda.testsuite.run.command import TestCommand
from eb_pytorch_cuda.testsuite.run.harness import Harness, harness_of
from eb_pytorch_cuda.testsuite.run.store import ResultStore
from eb_pytorch_cuda.testsuite.results.model import SUITE_INCOMPLETE, RunResult
from eb_pytorch_cuda.testsuite.results.outcome import build_outcome, remove_reports, report_files
from eb_pytorch_cuda.testsuite.results.testtimes import KEPT_FROM, kept_times, node_prefix
from eb_pytorch_cuda.testsuite.results.pieces import Piece, mark
from eb_pytorch_cuda.testsuite.results.records import StoreRecord
from eb_pytorch_cuda.testsuite.results.reportdirs import Attempt

OUTPUT_KEPT = batches.OUTPUT_KEPT


def run_suite(command: TestCommand, suite: str, timeout: float, output_dir: str, env: Mapping[str, str],
              gpu: Optional[str] = None, piece: Optional[Piece] = None) -> StoreRecord:
    """Run one suite alone (`run_test.py -i suite`) in its own process group; return its record.  piece
    (results.pieces.Piece, not whole): run only that pytest shard of suite, the way the harness runs its own
    (`--shard i k` over a times file that splits suite into k: run/piece_times); its XML reports go to a
    directory of this run's own (results/reportdirs.Attempt: a late report of an earlier attempt never counts),
    then to the harness's place (a piece's: its own); the record is labelled with the piece."""
    harness = harness_of(command.cwd)
    piece = piece if piece is not None and not piece.whole else None
    remove_reports(command.cwd, suite, piece)
    # its reports, and only they, are read (results/reportdirs)
    attempt = Attempt.new(command.cwd, (piece.index, piece.count) if piece else None)
    extra = batches.call_options(harness, command, env)
    run_env = batches.batch_env(env, gpu, attempt)
    argv = discovery.run_argv(command.argv, [suite], extra)
    if piece:  # inserted, not passed as extra: run_argv drops extra words already on the line (a '2')
        at = max(index for index, word in enumerate(argv) if word == '-i' and argv[index + 1:index + 2] == [suite])
        argv[at:at] = ['--shard', str(piece.index), str(piece.count)]
    output_path = os.path.join(output_dir, (piece.key if piece else suite).replace('/', '.') + '.log')
    start = time.time()
    with open(output_path, 'w') as output:
        code, killed = process.run(argv, timeout=timeout, cwd=command.cwd, env=run_env,
                                   stdout=output, stderr=subprocess.STDOUT)
        timed_out = f'timeout after {timeout}s' if killed else None
    with open(output_path, errors='replace') as handle:
        text = handle.read()
    out = split_batch_output(text, [suite], command.cwd)[suite]
    failed = out.failed or (code != 0 and timed_out is None)
    result, exit_code, notes = build_outcome(suite, out.text or text, True, failed, out.signal, timed_out,
                                             command.cwd, piece, attempt)
    if piece and timed_out is None and grammar.running_prefix(suite, piece.index, piece.count) not in text:
        result.status = SUITE_INCOMPLETE  # the harness split the suite otherwise (another THRESHOLD, no times file)
        result.note = f'the harness did not run shard {piece.index}/{piece.count} of {suite}'
    result.seconds = round(time.time() - start, 1)
    # per-test times: how the next build splits this suite (results/testtimes; a time that is no time adds a note)
    times = kept_times(result.seconds if not piece else KEPT_FROM, report_files(command.cwd, suite, attempt, not piece),
                       node_prefix(text, command.cwd), notes)
    record = StoreRecord(suite=result, exit_code=code if timed_out is None else None, seconds=result.seconds,
                         gpu=gpu, notes=tuple(notes), output_tail=text[-OUTPUT_KEPT:], output_file=output_path,
                         test_seconds=times or None)
    attempt.publish(suite)
    attempt.discard()
    return mark(record, piece) if piece else record


def run_all(command: TestCommand, suites: Sequence[str], store: ResultStore, output_dir: str,
            env: Mapping[str, str], timeout_for: Callable[[str], float], parallel: int = 1,
            progress: Optional[Callable[[str], None]] = None, harness: Optional[Harness] = None,
            batch_size: int = batches.DEFAULT_BATCH_SIZE) -> Tuple[RunResult, List[str]]:
    """Run every suite not already in the store, in batches; return (RunResult of all, [suites run now])."""
    harness = harness or harness_of(command.cwd)
    env = harness_environment(env, command)  # also for callers other than service.run_suites
    gpus = slot_gpus(env, parallel)
    todo = batches.run_batches(command, suites, store, output_dir, env, timeout_for, harness, parallel, progress,
                               gpus, solo=lambda suite, timeout: run_suite(command, suite, timeout, output_dir, env),
                               batch_size=batch_size)
    return store.result(suites), todo
