"""A suite's outcome from everything known about it: its output, its exit state, its XML reports.

The exit state comes first: run_test.py prints `X failed!` exactly when the suite's process (or its
custom handler) returned non-zero.  So a suite that finished without that line exited 0: with no
countable summary it passed with 0 tests (noted: e.g. test_cuda_primary_ctx on a machine without a
GPU); one with the line and no countable failure failed without a countable summary (it fails the
run unless a known failure names it).  XML reports, when written, are the precise source of counts
and failed tests; the log is compared with them, a difference becomes a note, and a failure that
only one of the two shows still counts.
"""

from dataclasses import dataclass, replace
from typing import List, Optional, Tuple

from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.testsuite.results import grammar, reportdirs
from eb_pytorch_cuda.testsuite.results.cudatests import with_named_failures
from eb_pytorch_cuda.testsuite.results.logparse import ZERO_TESTS_NOTE, parse_log_text
from eb_pytorch_cuda.testsuite.results.model import (SUITE_FAILED, SUITE_INCOMPLETE, SUITE_PASSED,
                                                     SUITE_TERMINATED, SUITE_TIMED_OUT, SUITE_UNCOUNTED, Suite)
from eb_pytorch_cuda.testsuite.results.pieces import Piece
from eb_pytorch_cuda.testsuite.results.reportdirs import Attempt
from eb_pytorch_cuda.testsuite.results.seconds import NotSeconds, seconds_in_text
from eb_pytorch_cuda.testsuite.results.xmlparse import parse_report_files


def report_files(test_dir: str, suite: str, attempt: Optional[Attempt] = None, with_variants: bool = False
                 ) -> List[str]:
    """The XML report files of suite: this attempt's own (results.reportdirs.Attempt; with_variants: and the
    harness's variant directories'), or, without an attempt, those in the harness's own places."""
    if attempt is not None:
        return attempt.files(suite, with_variants)
    return reportdirs.suite_report_files(test_dir, suite)


def suite_reports(test_dir: str, suite: str, attempt: Optional[Attempt] = None) -> Optional[Suite]:
    """The XML reports of suite (report_files: only this attempt's, when given), as a Suite or None."""
    files = report_files(test_dir, suite, attempt)
    if not files:
        return None
    root = attempt.parse_root(files) if attempt is not None else reportdirs.reports_root(test_dir)
    try:
        return parse_report_files(root, files).suites.get(suite)
    except PluginError:
        return None


def remove_reports(test_dir: str, suite: str, piece: Optional[Piece] = None) -> None:
    """Drop a suite's XML reports of an earlier run in the harness's own places (a piece: in its own only, as
    the other pieces of its suite may be writing theirs now).  What is read is the attempt's own directory
    anyway; this keeps the tree the harness's and clears the variant directories it writes itself."""
    runners = [reportdirs.piece_runner(piece.index, piece.count)] if piece else None
    reportdirs.remove_suite_reports(test_dir, suite, runners)


def summary_seconds(text: str, notes: Optional[list] = None) -> Optional[float]:
    """Seconds the suite's tests took by its own summaries (start-up excluded), None without any; a summary
    whose time is not one (results.seconds: `1.2.3`, 400 digits) is left out, with a note in notes."""
    times = []
    for match in grammar.SUMMARY_SECONDS.finditer(text):
        try:
            times.append(seconds_in_text(match.group('unittest') or match.group('pytest')))
        except NotSeconds as err:
            if notes is not None:
                notes.append(f'summary {match.group(0)[:80]!r}: {err}; left out of the suite\'s time')
    return round(sum(times), 2) if times else None


def _from_log(suite: str, text: str, piece=None):
    shard = (piece.index, piece.count) if piece else (1, 1)
    try:
        return parse_log_text(f'{grammar.running_line(suite, *shard)}\n{text}',
                              only_shard={suite: piece.index} if piece else None).suites.get(suite)
    except PluginError:
        return None


def _compare(log, xml):
    """Notes on where the log and the XML reports disagree (counts of failures, failed test ids)."""
    notes = []
    if log.failing_count != xml.failing_count:
        notes.append(f'log and XML reports differ: {log.failing_count} vs {xml.failing_count} failed/errors')
    log_ids = {t.test_id for t in log.failed_tests}
    xml_ids = {t.test_id for t in xml.failed_tests}
    for ids, other, where in ((log_ids - xml_ids, xml_ids, 'the log'), (xml_ids - log_ids, log_ids, 'the XML')):
        if ids and other is not None:
            notes.append(f"failed only in {where}: {', '.join(sorted(ids))}")
    return notes


def _combined(log, xml):
    """XML counts and tests, plus any failure only the log shows.  The failed tests are listed in the order the
    log shows them fail, then those only the XML names: the XML files' order says nothing (2.6 writes one per
    pytest session under a random name), and a report of the same run must read the same."""
    by_id = {t.test_id: t for t in xml.failed_tests}
    in_log = [by_id.get(t.test_id, t) for t in log.failed_tests]
    logged = {t.test_id for t in in_log}
    suite = Suite(xml.name, counts=replace(xml.counts),
                  failed_tests=in_log + [t for t in xml.failed_tests if t.test_id not in logged],
                  sources=['xml', 'log'], cuda_counts=xml.cuda_counts)
    for key in ('failed', 'errors'):
        suite.counts[key] = max(suite.counts[key], log.counts[key])
    suite.cuda_counts = with_named_failures(suite.cuda_counts, (t.test_id for t in suite.failed_tests))
    return suite


@dataclass(frozen=True)
class Ending:
    """How a suite's run ended: finished (the harness reported the suite done); failed (it printed `suite
    failed!`: its process exited non-zero); signal (the signal named there); timed_out ('timeout after Ns'
    when it was killed)."""
    finished: bool = True
    failed: bool = False
    signal: Optional[str] = None
    timed_out: Optional[str] = None


def build_outcome(suite: str, text: str, ending: Ending, *, test_dir: Optional[str] = None,
                  piece: Optional[Piece] = None, attempt: Optional[Attempt] = None
                  ) -> Tuple[Suite, Optional[int], List[str]]:
    """(Suite, exit_code, notes) of one suite that ended as ending says, or of one piece of it
    (results.pieces.Piece: its shard of the log), read from its output text and its XML reports in test_dir
    of this attempt (results.reportdirs.Attempt; None: the harness's places)."""
    finished, failed, signal, timed_out = ending.finished, ending.failed, ending.signal, ending.timed_out
    notes = []
    log = _from_log(suite, text, piece)
    # `no tests collected` (logparse's ZERO_TESTS_NOTE) is a summary with nothing in it: not counted here either
    counted = log is not None and log.status != SUITE_INCOMPLETE and log.note != ZERO_TESTS_NOTE
    xml = suite_reports(test_dir, suite, attempt) if test_dir else None
    if xml is not None and log is not None and counted:
        notes += _compare(log, xml)
        result = _combined(log, xml)
    elif xml is not None:
        result, counted = xml, True
    elif log is not None:
        result = log
    else:
        result = Suite(suite, sources=['log'])
    result.seconds = summary_seconds(text, notes)
    if timed_out:
        result.status, result.signal = SUITE_TIMED_OUT, timed_out
        return result, None, notes
    if not finished:
        result.status = SUITE_INCOMPLETE
        return result, None, notes
    if signal:
        result.status, result.signal = SUITE_TERMINATED, signal
        return result, 1, notes
    if failed:
        result.status = SUITE_FAILED if counted and (result.failing_count or result.failed_tests) else SUITE_UNCOUNTED
        return result, 1, notes
    if result.failing_count or result.failed_tests:
        result.status = SUITE_FAILED
        notes.append('exit 0 but failures counted')
    else:
        result.status = SUITE_PASSED
        if not counted:
            notes.append(ZERO_TESTS_NOTE)
    return result, 0, notes
