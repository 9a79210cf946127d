"""Cut the console output of one run_test.py call over several suites into each suite's own output.

The harness's pool runs two or three suites at a time, so lines of different suites interleave;
what belongs to one suite is only what the harness itself marks as such:
- the replayed log file, ending with `FINISHED PRINTING LOG FILE of X[ i/n] (path)`: 2.1 replays every
  suite's log, a passed one whole after `##[group]PRINTING LOG FILE of X (path)`, a failed one as its
  last 100 lines (after `##[group]PRINTING BEGINNING OF LOG FILE of X (path)`, the first lines and
  `##[endgroup]` when longer, with no start marker at all when shorter); 2.6 with --pipe-logs replays
  failed or rerun suites;
- `X i/n was successful, full logs can be found in artifacts with path test/test-reports/...log`
  (2.6 with --pipe-logs): the log file named there is read;
- `X[ i/n] failed![ Received signal: SIGx]`: the suite's outcome;
- otherwise (a serial harness printing inline, as the stand-in does) the text from `Running X ... [`
  to the next `Running ` line.
A suite that none of these mentions has not finished.
"""

import os
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

from eb_pytorch_cuda.testsuite.results import grammar


@dataclass
class SuiteOutput:
    """What one batch's output says about one suite."""

    name: str
    text: str = ''
    finished: bool = False
    failed: bool = False
    signal: Optional[str] = None
    sources: list = field(default_factory=list)  # 'log section', 'log file', 'inline'
    settled: bool = False  # its outcome cannot change any more (its last run reported, or inline and over)
    ends: int = 0  # `failed!` and `was successful` lines: one per run of the suite


def announced_runs(text: str) -> dict:
    """{suite: how many times the harness announced a run of it (`Running X ... [`)}: with the end lines
    (SuiteOutput.ends), whether a run of it is in progress now."""
    counts: dict = {}
    for match in grammar.RUNNING_MARKER.finditer(text):
        counts[match.group('name')] = counts.get(match.group('name'), 0) + 1
    return counts


def _read(path):
    try:
        with open(path, errors='replace') as handle:
            return handle.read()
    except OSError:
        return ''


def split_batch_output(text: str, suites: Sequence[str], test_dir: str, inline_is_serial: bool = False,
                       runs_of: Optional[Callable[[str], int]] = None, full_log_means_passed: bool = False) -> dict:
    """{suite: SuiteOutput} for each of suites, from one run_test.py output (text) run in test_dir.

    inline_is_serial: the harness prints suites inline one after another (no pool, no replayed logs), so
    a suite followed by another's `Running` line is over; runs_of(suite): how many times the harness runs it
    (2.6 runs a parallel suite twice), so how many end lines settle it; full_log_means_passed: the harness
    (2.1) replays a log whole (`PRINTING LOG FILE of`, not `PRINTING BEGINNING OF`) only when the suite passed,
    so that replay settles it."""
    outputs = {suite: SuiteOutput(suite) for suite in suites}
    repo_root = os.path.dirname(os.path.abspath(test_dir))
    starts = list(grammar.LOG_START_LINE.finditer(text))
    harness_lines = list(grammar.HARNESS_LINE.finditer(text))
    for end in grammar.LOG_END_LINE.finditer(text):
        output = outputs.get(end.group('name'))
        if output is None:
            continue
        start = next((m for m in reversed(starts) if m.group('name') == output.name and m.end() <= end.start()), None)
        previous_end = max((m.end() for m in harness_lines if m.end() <= end.start()
                            and m.group(0).startswith(grammar.LOG_END_TEXT)), default=0)
        if start is not None and start.start() >= previous_end:
            body_start = start.end()
            if full_log_means_passed and not start.group('beginning'):
                output.ends += 1  # this harness replays a log whole only for a suite that passed
        else:  # a failed suite's short log, replayed without a start marker
            body_start = max((m.end() for m in harness_lines if m.end() <= end.start()), default=0)
        output.text += text[body_start:end.start()]
        output.finished = True
        output.sources.append('log section')
    for match in grammar.SUCCESS_WITH_PATH.finditer(text):
        output = outputs.get(match.group('name'))
        if output:
            path = match.group('path')
            output.text += _read(path if os.path.isabs(path) else os.path.join(repo_root, path))
            output.finished = True
            output.ends += 1
            output.sources.append('log file')
    for match in grammar.FAILED_LINE.finditer(text):
        output = outputs.get(match.group('name'))
        if output:
            output.finished = output.failed = True
            output.ends += 1
            output.signal = output.signal or match.group('signal')
    for output in outputs.values():
        output.settled = output.ends >= (runs_of(output.name) if runs_of else 1)
    runs = list(grammar.RUNNING_MARKER.finditer(text))
    for index, match in enumerate(runs):
        output = outputs.get(match.group('name'))
        if output is None or 'log section' in output.sources or 'log file' in output.sources:
            continue
        stop = runs[index + 1].start() if index + 1 < len(runs) else len(text)
        output.text += text[match.end():stop]
        output.sources.append('inline')
        if inline_is_serial and index + 1 < len(runs):
            output.finished = output.settled = True  # a serial harness started the next suite
    return outputs
