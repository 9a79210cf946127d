"""Run one suite, or one piece of it, alone: `run_test.py -i suite` in its own process group, with its own
timeout.

A suite its killed batch did not finish (run/batches) runs again this way, so one hanging multiprocess
test costs that suite only; a Slurm job (spread/worker) runs a suite claimed again after its job died,
a must-serial suite and a piece of a long suite (`--shard i k`) this way.  The suite's outcome
(results/outcome: exit state, log, XML reports) is returned as the store's record.
"""

import os
import time
from typing import Optional

from eb_pytorch_cuda.testsuite.results import grammar
from eb_pytorch_cuda.testsuite.results.model import SUITE_INCOMPLETE
from eb_pytorch_cuda.testsuite.results.outcome import Ending, build_outcome, remove_reports, report_files
from eb_pytorch_cuda.testsuite.results.pieces import Piece, mark
from eb_pytorch_cuda.testsuite.results.records import StoreRecord, suite_record
from eb_pytorch_cuda.testsuite.results.reportdirs import Attempt
from eb_pytorch_cuda.testsuite.results.splitting import split_batch_output
from eb_pytorch_cuda.testsuite.results.testtimes import KEPT_FROM, kept_times, node_prefix
from eb_pytorch_cuda.testsuite.run import discovery
from eb_pytorch_cuda.testsuite.run.calls import batch_env, died_by, killed_from_outside
from eb_pytorch_cuda.testsuite.run.launcher import PROCESSES, Launcher, run_to_end
from eb_pytorch_cuda.testsuite.run.plan import RunPlan


def run_suite(plan: RunPlan, unit: str, *, gpu: Optional[str] = None, timeout: Optional[float] = None,
              launcher: Launcher = PROCESSES, alone: bool = False) -> StoreRecord:
    """Run unit (a suite, or a piece of one: results.pieces) alone, killed at timeout (default: the plan's
    for it); return its record.  A piece runs only that pytest shard of its suite, the way the harness runs
    its own (`--shard i k` over a times file that splits the suite into k: run/piece_times); its XML reports
    go to a directory of this run's own (results/reportdirs.Attempt: a late report of an earlier attempt
    never counts), then to the harness's place (a piece's: its own); the record is labelled with the piece.
    alone: no other call runs beside it (its threads: RunPlan.call_env)."""
    command = plan.command
    parsed = Piece.parse(unit)
    suite = parsed.suite
    piece = parsed if not parsed.whole else None
    timeout = plan.timeout_for(unit) if timeout is None else timeout
    remove_reports(command.cwd, suite, piece)
    # its reports, and only they, are read (results/reportdirs)
    attempt = Attempt.new(command.cwd, (piece.index, piece.count) if piece else None)
    run_env = batch_env(plan.call_env(1, alone), gpu, attempt)
    argv = discovery.run_argv(command.argv, [suite], plan.options)
    if piece:  # inserted, not passed as extra: run_argv drops extra words already on the line (a '2')
        at = max(index for index, word in enumerate(argv) if word == '-i' and argv[index + 1:index + 2] == [suite])
        argv[at:at] = ['--shard', str(piece.index), str(piece.count)]
    output_path = os.path.join(plan.output_dir, (piece.key if piece else suite).replace('/', '.') + '.log')
    start = time.time()
    with open(output_path, 'w') as output:
        code, killed = run_to_end(launcher, argv, command.cwd, run_env, output, timeout)
        timed_out = f'timeout after {timeout}s' if killed else None
    with open(output_path, errors='replace') as handle:
        text = handle.read()
    out = split_batch_output(text, [suite], command.cwd)[suite]
    failed = out.failed or (code != 0 and timed_out is None)
    # run_test.py (or our supervisor of it) killed from outside: the suite did not end by itself, whatever it printed
    interrupted = None if out.settled or timed_out else died_by(code)
    result, exit_code, notes = build_outcome(suite, out.text or text,
                                             Ending(True, failed, interrupted or out.signal, timed_out),
                                             test_dir=command.cwd, piece=piece, attempt=attempt)
    if interrupted:
        notes.append(f'its run_test.py was killed by {interrupted} before the suite ended')
    if piece and timed_out is None and grammar.running_prefix(suite, piece.index, piece.count) not in text:
        result.status = SUITE_INCOMPLETE  # the harness split the suite otherwise (another THRESHOLD, no times file)
        result.note = f'the harness did not run shard {piece.index}/{piece.count} of {suite}'
    result.seconds = round(time.time() - start, 1)
    # per-test times: how the next build splits this suite (results/testtimes; a time that is no time adds a note)
    times = kept_times(result.seconds if not piece else KEPT_FROM, report_files(command.cwd, suite, attempt, not piece),
                       node_prefix(text, command.cwd), notes)
    interrupted = interrupted or killed_from_outside(result.status, result.signal)
    record = suite_record(result, output=text, output_file=output_path,
                          exit_code=code if timed_out is None else None, seconds=result.seconds, gpu=gpu, notes=notes,
                          test_seconds=times, interrupted=interrupted)
    attempt.publish(suite)
    attempt.discard()
    return mark(record, piece) if piece else record
