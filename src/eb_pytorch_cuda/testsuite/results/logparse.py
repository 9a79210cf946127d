"""Parse the console output of PyTorch's test/run_test.py (2.x) into the result model.

The markers, as run_test.py prints them (read from its source: 2.6.0 from Debian's source package, a
2.1-era file from the code index; 2.6.0 also run for real, its output in tests/data/pytorch_corpus/logs;
`X` is `suite i/n`, the suite and its shard):
- `Running X ... [date]` when a suite starts; with the pool (two or three suites at a time) these come
  before any of their output; 2.6 runs each pool suite once alone first (`-m serial`, usually all
  deselected), so it is announced twice;
- 2.1: the log of a suite once it ended, between `##[group]PRINTING LOG FILE of X (path)` and
  `FINISHED PRINTING LOG FILE of X (path)` when its process exited 0 (so such a replay is a pass, also
  with no countable summary: `test_cuda_primary_ctx` without a GPU prints only `no tests collected`);
  for a failed suite only its last 100 lines, after `##[group]PRINTING BEGINNING OF LOG FILE of X (path)`
  ... `##[endgroup]`, or, for a log of 100 lines or fewer, with no start marker at all; `X failed!` is
  printed after the replay and again at the end of the run; pytest-shard's `Running N items in this
  shard` inside every log is no suite (measured on the real 2.1-line harness: tests/data/pytorch21);
- 2.6 with --pipe-logs (CI): `PRINTING LOG FILE of X (path)` ... `FINISHED PRINTING LOG FILE of X (path)`
  for a failed or rerun suite, `X was successful, full logs can be found in artifacts with path ...`
  for a passed one; without it (EasyBuild) the suites' own output, interleaved in the pool;
- `X failed!`, `X failed! Received signal: SIGx` or `X failed! <exception>` when a suite failed,
  printed when it ends and again at the end of the run (and inside `RuntimeError: ...` when run_test.py stops).

The log is cut at these markers.  A piece of text belongs to the suite whose end marker (`FINISHED
PRINTING LOG FILE of X`, `X was successful`, or `X failed!` right after X's own marker or at the log's
start) directly follows it, else to the suite whose start marker directly precedes it, else to none: so
a summary is tied to the lines that follow it as well as those before, and a missing start marker loses
nothing.  (In 2.6's pool `X failed!` comes when X's worker ends, after other workers' output: it claims
none of it.)  A pytest summary goes to the session it ends: every `=== test session starts ===` (found
anywhere in a line: another worker's unfinished test line may come before it) opens one, its header
(written at once by one process) gives its collected/deselected/selected counts and its suite (the ids of
`Running K items in this shard: ...`, or `stepcurrent: ... Running only <id>`: an isolated rerun; a
`--scs` run after a failure names none, and is the one suite that had a failing session, has none open,
has not ended and collected as many items), and the summary goes to the open session whose deselected
count it repeats and whose selected count it ran (at most, with a failure: `-x`); where no session fits,
to the suite whose test file pytest named last before it (`test_x.py::Class::test`), when that suite was
announced, else to the piece's owner.  Every countable summary is added up (unittest "Ran N tests" +
"OK"/"FAILED (...)", pytest "=== 2 failed, 128 passed, ... in 3.4s ===", `no tests collected in Xs` as
0 tests, run_test.py's "AssertionError: N unit test(s) failed:" list) and failed test names are collected.
A test run_test_retries ran three times counts once: as the suite's `The following tests failed
consistently: [...]` list says (found anywhere in a line), else, for a suite with isolated reruns, once
per failing test id.  After `X was successful` (--pipe-logs) the `Running N items in this shard` lines
count N passed (a note says how many were skipped is only in X's own log).  Every run that
was announced must end with an outcome (an end marker or a countable summary), and every shard 1..n
of an `i/n` must have run: a suite with a run or shard left open is SUITE_INCOMPLETE, as is a suite
that was announced and never summarised: never "0 failures".

A log must show where it ends (a log cut by a full disk or a killed job must not read as a passing run); what
the harness prints about a run as a whole (read from its source: 2.6.0's run_test.py main() and run_tests(), the
2.1-line harness's main(); grammar names the lines):
- 2.6 lists its selection before any suite runs (`Name: tests to run (est. time: ...)`, `  Serial tests (N):`,
  `    test_x 1/1`, `  Parallel tests (N):`, ...), runs each serial suite once, then each pool ("parallel") suite
  alone with `-m serial`, then the pool suites again with `-m not serial` (a pool suite is announced twice, a
  serial one once), then prints `Running test batch 'tests to run' cost N seconds`, unless it stopped at a
  failure (`RuntimeError: X failed!`, without --continue-through-error);
- the 2.1 line prints neither a selection nor a last line (`Starting test batch 'highly_relevant'` ... before
  the suites): a 2.1 log cut between two suites cannot be told from a complete one by its text (a note says so);
- both replay a suite's log between `PRINTING [BEGINNING OF ]LOG FILE of X` and `FINISHED PRINTING LOG FILE of
  X`: a replay without its end line was cut.
judge_run marks each suite that a run's log does not show finishing so SUITE_INCOMPLETE (SUITE_MISSING for a
listed suite that never ran), with a note that says where the log ends: inside it (its run or its replayed log
has no end), before its main run, or after it and before the closing line; its failures still count.
A log can hold several runs (the test step's output one per batch, a log appended to by a second attempt): a
second selection (2.6) or first-batch line (2.1) after a run's suites starts a new run.  Each run is read and
judged on its own, and union_runs makes them one result: a suite in several has the failing tests of every run,
a test failing in several counting once (by its id), its other counts the largest of any run, its status the
worst; a note names the runs and the lines they start at.

Every pattern is linear in the line length (no nested or adjacent unbounded quantifiers that can
backtrack over one line, look-behinds where a search could restart inside a long run): a 160 KB
summary line parses in milliseconds.

CRLF line ends are read as LF, and so is a lone CR (a log written on an old Mac or through a tool that
turns every newline into a carriage return, which would otherwise read as one line showing only its first
suite): what a terminal shows as a line is a line.

The log is streamed (a kept EasyBuild log of a whole test step reaches a gigabyte): read in blocks
cut after a line end (LF, CRLF or a lone CR, never between the CR and LF of a CRLF), twice.  The first pass
collects the marker lines only (so every announced suite and the marker after each piece are known, as the
cut above needs); the second feeds each piece to a small state (its owner, the suite the last test file
mention named, the failed tests it names) and keeps nothing else.  Only lines that can matter are looked at:
those starting with a character a pattern starts with, and those holding `failed!` or `was successful`
(found by substring search, which is what makes a gigabyte take seconds); a test file mention is searched
for backwards from a summary. A multi-line summary (`Ran N tests` ... `OK`, run_test.py's assertion list)
cut by a block's end is held back and read with the next block, and a selection list cut by one is read on at
the next.  Memory: a few blocks, the markers, the selection lists and the failed test ids; a line longer than
LINE_LIMIT (8 MiB) is read in pieces of about that, each as a line of its own, and a NUL byte anywhere refuses
the file as binary (_file_blocks).
tests/test_logparse_streaming.py checks the result is the same at many block sizes on every log the tests keep,
and the whole-text reader's (kept there) but where judge_run marks a suite the log does not show ending;
tests/test_log_cuts.py checks every line prefix of every kept real run_test.py log.
"""

import os
import re
from dataclasses import dataclass, field, replace
from typing import Callable, Dict, Iterator, List, NamedTuple, Optional, Set, Tuple

from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.inputs import open_regular
from eb_pytorch_cuda.testsuite.results import grammar
from eb_pytorch_cuda.testsuite.results.cudatests import cuda_counts_in_log, with_named_failures
from eb_pytorch_cuda.testsuite.results.model import (COUNT_KEYS, ERROR, FAILED, SUITE_FAILED, SUITE_INCOMPLETE,
                                                     SUITE_MISSING, SUITE_PASSED, SUITE_STATES, SUITE_TERMINATED,
                                                     SUITE_UNCOUNTED, RunResult, Suite, TestCase)

START, REPLAY, FINISHED, FAILED_LINE, SUCCESS = 'start', 'replay', 'finished', 'failed', 'success'
BEGINNING = 'beginning'  # `PRINTING BEGINNING OF LOG FILE of X`: the replay of a failed suite's log (2.1)
SELECTION, RUN_BEGIN = 'selection', 'run'  # where a run starts: 2.6's `Name: tests to run`, 2.1's first batch line
BOUNDARIES = (SELECTION, RUN_BEGIN)
# a suite that ended without a failure and counted nothing (no summary, or only `no tests collected`): the test
# step (results.outcome) says the same of it
ZERO_TESTS_NOTE = 'exit 0 without a countable summary: passed with 0 tests'
STARTS = (START, REPLAY, BEGINNING)  # REPLAY: a whole log replayed (`PRINTING LOG FILE of X`, not `BEGINNING OF`)
MARKERS = [  # (kind, pattern, the first characters of a line it can match, else a text such a line holds)
    (START, grammar.START_MARKERS[0], 'R'),  # a suite's run starts with either start line (a replay's kind: _markers)
    (START, grammar.START_MARKERS[0], grammar.RUNNING_AFTER_TEXTS[0]),  # or after other output on its line
    (START, grammar.START_MARKERS[0], grammar.RUNNING_AFTER_TEXTS[1]),
    (START, grammar.START_MARKERS[1], '#P'),
    (FINISHED, grammar.FINISHED_MARKER, 'F'),
    (FAILED_LINE, grammar.FAILED_MARKER, grammar.FAILED_TEXT),
    (SUCCESS, grammar.SUCCESS_MARKER, grammar.SUCCESS_TEXT),
    (SELECTION, grammar.SELECTION_START, 'N'),
    (RUN_BEGIN, grammar.RUN_START_21, 'S'),
]
_BY_FIRST = {char: [(kind, pattern) for kind, pattern, firsts in MARKERS if len(firsts) <= 2 and char in firsts]
             for char in '#FNPRS'}  # the markers a line's first character allows
_BY_TEXT = [(kind, pattern, text) for kind, pattern, text in MARKERS if len(text) > 2]  # those a text in it allows


def _pytest_test_id(cls, test):
    """'Class.test' (or 'test' for a module-level test) of a pytest node id's class and test parts."""
    return f'{cls}.{test}' if cls else test


def _test_id(test, where):
    """'Class.test' from unittest's '(module.Class)' or Python 3.11's '(module.Class.test)'."""
    parts = where.split('.')
    if parts[-1] == test and len(parts) > 1:
        parts.pop()
    return f'{parts[-1]}.{test}'


class Marker(NamedTuple):
    """One harness marker line of a log: where it is, what it says (MARKERS' kind), about which suite ('' for a
    run's start)."""
    start: int
    end: int
    kind: str
    suite: str
    shard: int
    shards: int
    signal: Optional[str]


def _unittest_counts(match):
    details = {k.strip(): int(v) for k, v in
               (item.split('=', 1) for item in (match.group('details') or '').split(',') if '=' in item)
               if v.strip().isdigit()}
    counts = {'failed': details.get('failures', 0), 'errors': details.get('errors', 0),
              'skipped': details.get('skipped', 0), 'xfailed': details.get('expected failures', 0),
              'xpassed': details.get('unexpected successes', 0)}
    counts['passed'] = max(0, int(match.group('total')) - sum(counts.values()))
    return counts


def _owner(preceding, following):
    """(suite, shard) the text between two markers belongs to, or None (see the module docstring)."""
    # "X failed!" claims the text before it only after X's own marker (or at the log's start): after another
    # suite's marker it is run_test.py's closing list, or, in 2.6's pool, X's worker ending while the other
    # workers' output was printed before it (measured: tests/data/pytorch26-plain)
    own = (preceding is None or preceding[3] == following[3]) if following else False
    if following and (following[2] in (FINISHED, SUCCESS) or (following[2] == FAILED_LINE and own)):
        return following[3:5]
    if preceding and preceding[2] in STARTS:
        return preceding[3:5]
    return None


# --- a run as a whole: what run_test.py said it would run, whether the log shows it ending (see the module
# docstring), and the runs of one log made one result ----------------------------------------------------

CLOSING_LINE = "`Running test batch 'tests to run' cost N seconds`"


class Entry(NamedTuple):
    """One suite (shard) of a 2.6 selection: `    test_x 1/1` under `Serial tests` or `Parallel tests`."""
    name: str
    shard: int
    shards: int
    parallel: bool

    @property
    def label(self) -> str:
        return f'{self.name} {self.shard}/{self.shards}'


class Selection:
    """The suites a 2.6 run_test.py run said it would run (its `Name: tests to run` list), read line by line as the
    log's blocks come (a block may end inside the list)."""

    def __init__(self, line: int):
        self.line = line  # the log's line of `Name: tests to run`, from 1
        self.entries: List[Entry] = []
        self.parallel: Optional[bool] = None  # the section being read (None: none yet)
        self.reading = True

    def read(self, text: str, pos: int) -> None:
        """Read the list's lines of text from pos (a line start) on, until a line that is not one of them; reading
        stays True when text ends first (its rest starts the next block)."""
        while self.reading and pos < len(text):
            end = text.find('\n', pos)
            end = len(text) if end < 0 else end
            section = grammar.SELECTION_SECTION.fullmatch(text, pos, end)
            entry = grammar.SELECTION_ENTRY.fullmatch(text, pos, end) if self.parallel is not None else None
            if section:
                self.parallel = section.group('kind') == 'Parallel'
            elif entry and self.parallel is not None:
                self.entries.append(Entry(entry.group('name'), int(entry.group('shard')), int(entry.group('shards')),
                                          self.parallel))
            else:
                self.reading = False
            pos = end + 1


@dataclass
class RunTrace:
    """What one run's log showed of the run's own progress, as the log reader saw it."""

    selection: Optional[Selection] = None
    announced: Dict[Tuple[str, int], int] = field(default_factory=dict)  # (suite, shard): its `Running X` lines
    replays: Dict[Tuple[str, int], str] = field(default_factory=dict)  # replayed logs begun, not ended: their label
    prerun: bool = False  # a suite was run with `-m serial` added (2.6's lone run of a pool suite)
    closed: bool = False  # the closing line, or run_test.py stopped at a failure (`RuntimeError: X failed!`)
    last_ended: Optional[str] = None  # the suite whose end (a summary or an end line) came last


def _unfinished(suite: Suite, note: str) -> None:
    """suite did not finish in this log: no summary or end line can make it pass; its failures still count."""
    if suite.status in (SUITE_PASSED, SUITE_FAILED):
        suite.status, suite.note = SUITE_INCOMPLETE, note
    elif suite.status == SUITE_INCOMPLETE and not suite.note:
        suite.note = note


def judge_run(result: RunResult, trace: RunTrace, open_runs: Set[str]) -> None:
    """Mark the suites of one run (result, its statuses set from its summaries) that its log does not show ending;
    open_runs: the suites with a run announced and never ended (already SUITE_INCOMPLETE)."""
    for name in open_runs:
        _unfinished(result.suites[name], 'the log ends inside it: started (`Running ... [`), no summary or end '
                                         'line after')
    for (name, _shard), label in trace.replays.items():
        _unfinished(result.suites[name], f'the log ends inside its replayed log (`PRINTING LOG FILE of {label}`, '
                                         f'no `FINISHED PRINTING LOG FILE of {label}`)')
    for suite in result.suites.values():  # its output ended (its replayed log's end line) without a summary
        if suite.status == SUITE_INCOMPLETE and not suite.note:
            suite.note = ('no summary, and no end line of the harness (`X failed!`) after its output: the log ends '
                          'before the harness said how it ended')
    selection = trace.selection
    if selection is None:
        return
    never: Dict[str, List[str]] = {}
    for entry in selection.entries:
        runs = trace.announced.get((entry.name, entry.shard), 0)
        if not runs:
            never.setdefault(entry.name, []).append(entry.label)
        elif entry.parallel and trace.prerun and runs < 2:
            _unfinished(result.suites[entry.name], f'only its `-m serial` run ran: the log ends before its main run '
                                                   f'(`-m not serial`, the second `Running {entry.label} ... [`)')
    where = f'listed by run_test.py (`Name: tests to run`, line {selection.line}), never ran'
    for name, labels in never.items():
        if name in result.suites:
            _unfinished(result.suites[name], f"{', '.join(labels)} {where}")
        else:
            result.suites[name] = Suite(name, status=SUITE_MISSING, sources=['log'], note=where)
    cut = any(suite.status in (SUITE_INCOMPLETE, SUITE_MISSING) for suite in result.suites.values())
    if not trace.closed and not cut and trace.last_ended in result.suites:
        _unfinished(result.suites[trace.last_ended],
                    f"the log ends after it, before run_test.py's last line ({CLOSING_LINE}): what came next is not "
                    f'known')


# the worse status first: those that cannot be judged (SUITE_STATES' order after PASSED and FAILED), then FAILED
_WORST_FIRST = list(SUITE_STATES[2:]) + [SUITE_FAILED, SUITE_PASSED]


def _union(first: Suite, later: Suite) -> Suite:
    """One suite of two runs' outcomes of it (see the module docstring)."""
    worse = later if _WORST_FIRST.index(later.status) < _WORST_FIRST.index(first.status) else first
    suite = replace(first, counts=replace(first.counts), failed_tests=list(first.failed_tests),
                    sources=list(first.sources))
    known = {test.test_id for test in suite.failed_tests}
    suite.failed_tests += [test for test in later.failed_tests if test.test_id not in known]
    for key in COUNT_KEYS:
        suite.counts[key] = max(first.counts[key], later.counts[key])
    errors = sum(1 for test in suite.failed_tests if test.state == ERROR)
    suite.counts['errors'] = max(suite.counts['errors'], errors)
    suite.counts['failed'] = max(suite.counts['failed'], len(suite.failed_tests) - errors)
    if worse is later or later.status == first.status:
        suite.note = later.note
    suite.status, suite.signal = worse.status, worse.signal or first.signal or later.signal
    if suite.status == SUITE_PASSED and suite.failing_count:
        suite.status = SUITE_FAILED
    return suite


def union_runs(runs: List[RunResult]) -> RunResult:
    """One RunResult of the runs of one log, in the log's order (see the module docstring)."""
    result = RunResult()
    for run in runs:
        for name, suite in run.suites.items():
            result.suites[name] = _union(result.suites[name], suite) if name in result.suites else suite
        result.notes += [note for note in run.notes if note not in result.notes]
    return result


class _Session:
    """One pytest session (`=== test session starts ===` to its summary line) as its header described it: the
    suite it runs (named by its `Running K items in this shard: <ids>` or `stepcurrent: ... Running only <id>`
    line, else inferred), how many items it collected, deselected and selected."""

    def __init__(self):
        self.suite: Optional[str] = None
        self.collected: Optional[int] = None
        self.deselected = 0
        self.selected: Optional[int] = None
        self.items_seen = False  # its `Running K items in this shard` line was read (the header's last line)

    def fits(self, counts, deselected):
        """Whether a summary of counts (and deselected) can be this session's: the same deselected items, and as
        many tests run as it selected (at most as many when one failed: `-x` stops there)."""
        if self.collected is not None and self.deselected != deselected:
            return False
        if self.selected is None:
            return True
        executed = sum(counts.get(key, 0) for key in ('passed', 'failed', 'errors', 'skipped', 'xfailed', 'xpassed'))
        failing = counts.get('failed', 0) + counts.get('errors', 0)
        return executed <= self.selected if failing else executed == self.selected


class _Runs:
    """What the log says per suite: counts, failed tests, runs still open, shards, failed lines.

    A `Running X i/n` or `PRINTING ... LOG FILE of X i/n` line opens a run of shard i of X; a summary
    credited to X or an end marker of X closes one.  In a pool the output of two or three suites is
    interleaved (2.6 without --pipe-logs): a summary is credited to the suite whose test file
    (`dir/test_x.py::Class::test`) was named last before it, when that suite was announced, else to
    the piece's owner; a `FAILED dir/test_x.py::...` line names its own suite.
    """

    def __init__(self, result, events, only_shard=None, trace: Optional[RunTrace] = None):
        self.result = result
        self.trace = trace or RunTrace()  # the run's own progress (judge_run judges it)
        self.only_shard = only_shard or {}  # {suite: i}: the log is shard i of suite alone (a piece's run)
        self.open: dict = {}
        self.shards: dict = {}
        self.seen: set = set()
        self.failed: dict = {}
        self.success: set = set()
        self.counted: set = set()
        self.last_shard: dict = {}
        self.replaying: set = set()
        self.consistent: dict = {}  # suite: {test id: None} (ordered) its run_test_retries reported failing every time
        self.paths: dict = {}  # test file path: the suite it names (suite_of_cached)
        self.failed_ids: dict = {}  # suite: {ids of its failed_tests}
        self.sessions: List[_Session] = []  # pytest sessions begun and not yet summarised, oldest first
        self.first_collected: dict = {}  # suite: the items its first named session collected
        self.retried: set = set()  # suites with a session that failed (run_test_retries runs more sessions)
        self.isolated: set = set()  # suites with an isolated rerun of one test (`Running only ...`)
        self.items_only: dict = {}  # suite: (tests, log path) counted from `X was successful` and its items
        self.summarised: set = set()  # suites credited with a unittest or pytest summary
        self.no_tests: set = set()  # suites credited with a `no tests collected/ran` line
        for _start, _end, kind, name, shard, total, _signal in events:
            if kind in BOUNDARIES:
                continue
            result.suite(name)
            self.shards[name] = max(self.shards.get(name, 1), total)

    def suite_of(self, path):
        """The announced suite a test file path names ('test/dynamo/test_x.py' -> 'dynamo/test_x'), or None."""
        name = path[:-3] if path.endswith('.py') else path
        for candidate in (name, name[5:] if name.startswith('test/') else None):
            if candidate in self.result.suites:
                return candidate
        return None

    def event(self, kind, name, shard, shards, signal):
        if kind in BOUNDARIES:
            return
        key = (name, shard)
        self.seen.add(key)
        if kind in STARTS:
            if kind != REPLAY or not self.open.get(key):  # a replay of an announced run is that same run
                self.open[key] = self.open.get(key, 0) + 1
            self.last_shard[name] = shard
            (self.replaying.add if kind == REPLAY else self.replaying.discard)(key)
            if kind == START:
                self.trace.announced[key] = self.trace.announced.get(key, 0) + 1
            else:
                self.trace.replays[key] = f'{name} {shard}/{shards}'
            return
        self.trace.last_ended = name
        if kind == FINISHED:
            self.trace.replays.pop(key, None)
        self.open[key] = max(0, self.open.get(key, 0) - 1)
        if kind == FINISHED and key in self.replaying:
            self.success.add(name)  # 2.1 replays a log whole only when the suite's process exited 0
            self.replaying.discard(key)
        elif kind == FAILED_LINE:
            self.failed[name] = self.failed.get(name) or signal or ''
            self.sessions = [session for session in self.sessions if session.suite != name]
        elif kind == SUCCESS:
            self.success.add(name)

    def suite_of_cached(self, path):
        """suite_of, remembered per path (a log names the same few test files millions of times)."""
        if path not in self.paths:
            self.paths[path] = self.suite_of(path)
        return self.paths[path]

    def mention(self, text, low, high):
        """The suite of the last test file mention (`dir/test_x.py::`) in text[low:high] that names an announced
        suite, or None.  low is a line start; searched backwards for `.py::`, the path is the run of
        [\\w/.-] before it (what `(?<![\\w/.-])([\\w/.-]+?\\.py)::` would match, one char at least)."""
        found = text.rfind(grammar.TEST_FILE_MENTION, low, high)
        while found >= 0:
            begin = found - _run_before(text, low, found)
            if begin < found:
                name = self.suite_of_cached(text[begin:found + 3])
                if name is not None:
                    return name
            found = text.rfind(grammar.TEST_FILE_MENTION, low, begin)
        return None

    def feed(self, piece: '_Piece', text: str, low: int, high: int, lines: List[int], final: bool) -> int:
        """Read text[low:high] (whole lines of one piece; lines: the starts of its lines that may matter) into
        piece; return where reading stopped: high, or, when not final, the start of a multi-line summary the
        block's end may have cut (read again with the next block)."""
        stop = high if final else _hold_point(text, lines, high)
        owner = piece.owner
        for start in lines:
            if start >= stop:
                break
            first = text[start]
            summary = None
            deselected, no_tests = 0, False
            line_end = text.find('\n', start, stop)
            line_end = stop if line_end < 0 else line_end
            if text.find(grammar.SESSION_START_TEXT, start, line_end) >= 0 and \
                    grammar.SESSION_START.search(text, start, line_end):
                self.sessions.append(_Session())
                piece.session_seen = True
            elif first == 'R':
                match = grammar.UNITTEST_SUMMARY.match(text, start, stop)
                if match:
                    summary = _unittest_counts(match)
                elif grammar.RUN_CLOSING.match(text, start, stop):
                    self.trace.closed = True
                else:
                    self.shard_items(piece, text, start, stop)
            elif first == '=':
                summary = _pytest_counts(text, start, stop)
                if summary is not None:
                    deselected = summary.pop('deselected', 0)
                elif grammar.NO_TESTS.match(text, start, stop):
                    summary, no_tests = {}, True
            elif first == 'n':
                if grammar.NO_TESTS.match(text, start, stop):
                    summary, no_tests = {}, True
            elif first == 'c':
                self.read_collected(grammar.SESSION_COLLECTED.match(text, start, stop))
            elif first == 's':
                self.read_isolated(grammar.STEPCURRENT_ONLY.match(text, start, stop))
            elif first in 'FE':
                if text.startswith(grammar.EXECUTING_TEXT, start) and \
                        text.find(grammar.SERIAL_PRERUN_TEXT, start, line_end) >= 0:
                    self.trace.prerun = True
                match = grammar.UNITTEST_FAILED_TEST.match(text, start, stop)
                if match:
                    piece.add(0, owner[0] if owner else None, _test_id(match.group('test'), match.group('where')),
                              ERROR if match.group('kind') == 'ERROR' else FAILED)
                match = grammar.PYTEST_FAILED_TEST.match(text, start, stop)
                if match:
                    name = self.suite_of(match.group('path')) or (owner[0] if owner else None)
                    piece.add(1, name, _pytest_test_id(match.group('cls'), match.group('test')),
                              ERROR if match.group('kind') == 'ERROR' else FAILED)
            if text.find(grammar.CONSISTENT_FAILURES_TEXT, start, line_end) >= 0:
                match = grammar.CONSISTENT_FAILURES.search(text, start, line_end)
                if match:
                    for test in grammar.QUOTED_TEST.finditer(match.group('tests')):
                        name = self.suite_of(test.group('path')) or (owner[0] if owner else None)
                        if name is not None:
                            self.consistent.setdefault(name, {})[
                                _pytest_test_id(test.group('cls'), test.group('test'))] = None
            elif first == 'A':
                match = grammar.ASSERTION_LIST.match(text, start, stop)
                if match:
                    count = int(match.group('count'))
                    piece.assertions.append((self.credit(piece, text, low, start), count))
                    low = start
                    for line in match.group('names').splitlines()[:count]:
                        piece.add(2, owner[0] if owner else None, line.strip(), FAILED)
            if summary is None and first != '=' and _ends_with_rule(text, start, line_end):
                after = self.summary_after(text, start, line_end)
                if after is not None:
                    piece.summarised = True
                    self.summarised.add(after[0])
                    self.count(owner, *after)
            if summary is not None:
                name = self.credit(piece, text, low, start)
                low = start
                piece.summarised = True
                if first != 'R':  # a pytest session's summary: the session it ends, when one is open
                    name = self.session_suite(summary, deselected, name)
                if name is not None:
                    (self.no_tests if no_tests else self.summarised).add(name)
                self.count(owner, name, summary)
        name = self.mention(text, low, stop)
        if name is not None:
            piece.last_named = name
        return stop

    def shard_items(self, piece, text, start, stop):
        """A `Running K items in this shard[: ids]` line: right after `X was successful` (--pipe-logs) the tests X
        ran, counted (how many of them were skipped is only in X's own log); else the last line of the
        header of the session last begun, naming its suite (or inferred: infer_suite)."""
        match = grammar.SHARD_ITEMS.match(text, start, stop)
        if not match:
            return
        named = self.suite_of(match.group('first')) if match.group('first') else None
        after = piece.after
        if after is not None and after.kind == SUCCESS and not piece.session_seen:
            total, path = self.items_only.get(after.suite, (0, piece.success_path))
            self.items_only[after.suite] = (total + int(match.group('count')), path)
            self.count((after.suite, after.shard), after.suite, {'passed': int(match.group('count'))})
            return
        session = self.header_of(lambda session: not session.items_seen)
        if session is None:
            return
        session.items_seen = True
        if session.selected is None:
            session.selected = int(match.group('count'))
        session.suite = session.suite or named or self.infer_suite(session)
        if session.suite is not None:
            # a suite runs one session at a time: an older one still open never printed its summary (killed)
            self.sessions = [other for other in self.sessions if other is session or other.suite != session.suite]
            if session.collected is not None:
                self.first_collected.setdefault(session.suite, session.collected)

    def read_collected(self, match):
        """A `collected N items[ / D deselected / S selected]` line (match, or None): the counts of its session."""
        session = self.header_of(lambda session: session.collected is None) if match else None
        if match and session is not None:
            session.collected = int(match.group('collected'))
            session.deselected = int(match.group('deselected') or 0)
            session.selected = int(match.group('selected') or session.collected - session.deselected)

    def read_isolated(self, match):
        """A `stepcurrent: ... Running only <id>` line (match, or None): its session runs one test of that suite
        alone (run_test_retries' isolated rerun)."""
        session = self.header_of(lambda session: not session.items_seen) if match else None
        if match and session is not None:
            session.suite = self.suite_of(match.group('path')) or session.suite
            if session.suite is not None:
                self.isolated.add(session.suite)

    def header_of(self, lacks):
        """The open session a header line goes to: the oldest whose header still lacks it (lacks(session)), None
        when none does.  Headers of the pool's sessions interleave (a session may start mid-line in another's header),
        and each session's lines come in order, so the oldest unfinished header is the one a line continues."""
        return next((session for session in self.sessions if lacks(session)), None)

    def infer_suite(self, session):
        """The suite of a session its header does not name (run_test_retries' `--scs` run of a suite's tests after
        one that failed): the one suite that had a failing session, has not ended, has no session open and
        collected as many items in its first session; None when not exactly one."""
        busy = {other.suite for other in self.sessions if other is not session}
        candidates = [name for name in self.retried if name not in self.failed and name not in busy
                      and self.first_collected.get(name) == session.collected]
        return candidates[0] if len(candidates) == 1 else None

    def session_suite(self, counts, deselected, fallback):
        """The suite a pytest summary is credited to: that of the open session it fits (_Session.fits; of
        several, the one of fallback's suite, else the oldest), closed by it; fallback (the last test file named,
        else the piece's owner) where no open session fits or the session's suite is unknown."""
        fitting = [session for session in self.sessions if session.fits(counts, deselected)]
        if not fitting:
            return fallback
        chosen = next((session for session in fitting if session.suite == fallback), fitting[0])
        return self.close_session(chosen, chosen.suite or fallback, counts)

    def close_session(self, session, name, counts):
        """Close session, whose summary (counts) is credited to suite name (None: nobody's), and return name; a
        summary with failures marks the suite as one run_test_retries runs more sessions of (infer_suite)."""
        self.sessions.remove(session)
        if name is not None and counts.get('failed', 0) + counts.get('errors', 0):
            self.retried.add(name)
        return name

    def summary_after(self, text, start, line_end):
        """(suite, counts) of a pytest summary written after another pool worker's unfinished test line
        (`test_x.py::C::t === 11 passed in 0.75s ===`), the suite being that of the one open session it fits, whose
        header named its suite and selection, closed by it; None (the summary credited to nobody, so that suite
        reads `no summary`) where not exactly one open session fits, counting those whose suite or selection is
        unknown (a session of another suite that could be this one's): never the suite the line names, whose test
        it interrupted."""
        match = grammar.PYTEST_AFTER_TEXT.search(text, start, line_end)
        counts = _pytest_counts(match.group('summary'), 0, len(match.group('summary'))) if match else None
        if counts is None:
            return None
        deselected = counts.pop('deselected', 0)
        fitting = [session for session in self.sessions if session.fits(counts, deselected)]
        if len(fitting) != 1 or fitting[0].suite is None or fitting[0].selected is None:
            return None
        return self.close_session(fitting[0], fitting[0].suite, counts), counts

    def credit(self, piece, text, low, position):
        """The suite a summary at position is credited to: the last test file named before it in the piece,
        else the piece's owner (None: nobody's)."""
        name = self.mention(text, low, position)
        if name is not None:
            piece.last_named = name
        if piece.last_named is not None:
            return piece.last_named
        return piece.owner[0] if piece.owner else None

    def count(self, owner, name, counts):
        """Add one summary's counts to suite name (None: nobody's), closing its open run."""
        if name is None:
            return
        shard = owner[1] if owner and owner[0] == name else self.last_shard.get(name, 1)
        for key, value in counts.items():
            self.result.suites[name].counts[key] += value
        self.counted.add(name)
        self.trace.last_ended = name
        self.seen.add((name, shard))
        self.open[(name, shard)] = max(0, self.open.get((name, shard), 0) - 1)

    def finish(self, piece):
        """A piece ended: run_test.py's assertion list counts only where no unittest or pytest summary did; the
        failed tests it named are added in the order the whole-text reader found them (unittest's, pytest's,
        the assertion list's)."""
        if not piece.summarised:
            for name, count in piece.assertions:
                self.count(piece.owner, name, {'failed': count})
        for kind in piece.failed:
            for (name, test_id), state in kind.items():
                known = self.failed_ids.setdefault(name, set())
                if test_id not in known:
                    known.add(test_id)
                    self.result.suites[name].failed_tests.append(TestCase(test_id, state))

    def judge(self):
        """Set each suite's status from what was seen; then mark those the log does not show ending
        (judge_run)."""
        for name, suite in self.result.suites.items():
            suite.sources.append('log')
            if name in self.consistent:  # retries counted once: the harness's own list of what failed
                failing = len(self.consistent[name])
                suite.counts['errors'] = min(suite.counts['errors'], failing)
                suite.counts['failed'] = failing - suite.counts['errors']
                # the list names them all: also a test whose process crashed before pytest printed FAILED (a
                # segfault in cuDNN's sub-library loading, measured on the H200: no FAILED line, no XML)
                listed = {test.test_id: test for test in suite.failed_tests if test.test_id in self.consistent[name]}
                suite.failed_tests = list(listed.values()) + [
                    TestCase(test_id, FAILED) for test_id in self.consistent[name] if test_id not in listed]
            elif name in self.isolated and suite.failed_tests:  # no list: each failing test once, not per rerun
                suite.counts['errors'] = sum(1 for test in suite.failed_tests if test.state == ERROR)
                suite.counts['failed'] = len(suite.failed_tests) - suite.counts['errors']
            wanted = [self.only_shard[name]] if name in self.only_shard else range(1, self.shards[name] + 1)
            missing = [shard for shard in wanted if (name, shard) not in self.seen or self.open.get((name, shard))]
            if self.failed.get(name):
                suite.status, suite.signal = SUITE_TERMINATED, self.failed[name]
            elif missing:
                suite.status = SUITE_INCOMPLETE
                if self.shards[name] > 1:
                    suite.note = f"shard(s) {', '.join(map(str, missing))} of {self.shards[name]} never ended"
            elif name in self.failed:
                suite.status = SUITE_FAILED if name in self.counted and (suite.failing_count or suite.failed_tests) \
                    else SUITE_UNCOUNTED
            elif name not in self.counted and name not in self.success:
                suite.status = SUITE_INCOMPLETE
            elif suite.failing_count or suite.failed_tests:
                suite.status = SUITE_FAILED
            else:
                suite.status = SUITE_PASSED
                if name not in self.counted or (name in self.no_tests and not any(suite.counts.values())):
                    suite.note = ZERO_TESTS_NOTE
                elif name in self.items_only and name not in self.summarised and self.items_only[name][0]:
                    total, path = self.items_only[name]
                    suite.note = (f'passed counts the {total} test(s) it ran (`Running N items in this shard`): how '
                                  f'many of them were skipped is only in its own log' + (f' ({path})' if path else ''))
        judge_run(self.result, self.trace, {name for (name, _shard), runs in self.open.items() if runs})


BLOCK = 1 << 23  # characters (bytes) read at a time: 8 MiB, the largest part of the memory a log takes
LINE_LIMIT = 1 << 23  # bytes: a longer line is read in pieces of about this (_file_blocks); a real log's longest is
# a few hundred KB (the consistent-failures list of a suite with thousands of failing tests)


class _Piece:
    """What one piece of a log (the text between two markers) has given so far."""

    def __init__(self, owner, after: Optional[Marker] = None, success_path: Optional[str] = None):
        self.owner = owner
        self.after = after  # the marker this piece follows (None at the log's start)
        self.success_path = success_path  # after `X was successful`: where the harness kept X's log
        self.session_seen = False  # a `test session starts` line was read in this piece
        self.last_named: Optional[str] = None  # the suite of the last test file mention that named one
        self.summarised = False  # a unittest or pytest summary was read
        self.assertions: List[Tuple[Optional[str], int]] = []  # run_test.py's "N unit test(s) failed" lists
        self.failed: Tuple[Dict, Dict, Dict] = ({}, {}, {})  # (suite, test id): state, as unittest, pytest, list

    def add(self, kind, name, test_id, state):
        if name is not None:
            self.failed[kind].setdefault((name, test_id), state)


def _run_before(text, low, end):
    """Length of the run of [\\w/.-] characters ending at end (not before low)."""
    width = 64
    while True:
        begin = max(low, end - width)
        match = grammar.PATH_CHARS.match(text[begin:end][::-1])  # always matches, maybe empty
        length = match.end() if match else 0
        if length < end - begin or begin == low:
            return length
        width *= 4


def _hold_point(text, lines, high):
    """Where the text a block ends with must wait for the next block: the start of a `Ran N tests` line
    followed by blank lines only, or of an assertion list still short of its names; else high."""
    if not lines:
        return high
    start = lines[-1]
    head = grammar.UNITTEST_SUMMARY_START.match(text, start, high)
    if head and grammar.BLANK_LINES.fullmatch(text, head.end(), high):
        return start
    head = grammar.ASSERTION_START.match(text, start, high)
    if head and grammar.ASSERTION_NAMES.fullmatch(text, head.end(), high) and \
            text.count('\n', head.end(), high) < max(1, int(head.group('count'))):
        return start
    return high


def _success_path(text, marker):
    """The log path of an `X was successful, full logs can be found in artifacts with path P` line (the marker,
    in text at offset 0), else None."""
    if marker.kind != SUCCESS:
        return None
    line_start = text.rfind('\n', 0, marker.end) + 1
    match = grammar.SUCCESS_WITH_PATH.match(text, line_start, marker.end)
    return match.group('path') if match else None


def _ends_with_rule(text, start, line_end):
    """Whether the line text[start:line_end] ends with `=` (trailing blanks aside), as a pytest summary does."""
    end = line_end
    while end > start and text[end - 1] in ' \t':
        end -= 1
    return end > start and text[end - 1] == '='


def _pytest_counts(text, start, stop):
    """{count key: n} of a pytest session's last line (`=== 2 failed, 128 passed in 3.4s ===`) at start, or None."""
    line = grammar.PYTEST_LINE.match(text, start, stop)
    if not line:
        return None
    found = line.group()
    tail = grammar.PYTEST_TAIL.search(found)
    items = grammar.PYTEST_ITEM.findall(found[:tail.start()].lstrip('= ')) if tail else ()
    if not any(word in grammar.PYTEST_END_WORDS for _, word in items):
        return None
    counts: dict = {}
    for number, word in items:
        if word in grammar.PYTEST_KEYS:
            counts[grammar.PYTEST_KEYS[word]] = counts.get(grammar.PYTEST_KEYS[word], 0) + int(number)
        elif word == 'deselected':  # not a count of the suite: what tells a session's summary apart (_Session.fits)
            counts['deselected'] = counts.get('deselected', 0) + int(number)
    return counts


def _lines(text):
    """Starts of the lines of text (which starts with a newline) that may be a marker, a summary or a failed
    test, in order."""
    starts = {match.start() + 1 for match in grammar.CANDIDATE_LINE.finditer(text)}
    for match in grammar.PYTEST_TAIL_ANYWHERE.finditer(text):  # a summary after another worker's test line
        starts.add(text.rfind('\n', 0, match.start()) + 1)
    for literal in grammar.ANYWHERE_TEXTS:
        found = text.find(literal)
        while found >= 0:
            starts.add(text.rfind('\n', 0, found) + 1)
            end = text.find('\n', found)
            found = -1 if end < 0 else text.find(literal, end)
    return sorted(starts)


def _markers(text, start, offset):
    """The markers of the line at start (none, one, or start markers after other output: grammar.RUNNING), as the
    whole-text reader ordered them."""
    found = []
    line_end = text.find('\n', start)
    line_end = len(text) if line_end < 0 else line_end
    by_text = [(kind, pattern) for kind, pattern, needed in _BY_TEXT if text.find(needed, start, line_end) >= 0]
    several = (START, grammar.RUNNING_MARKER) in by_text  # a start after other output: maybe more than one
    candidates = dict.fromkeys(_BY_FIRST.get(text[start:start + 1], []) + by_text)  # the start marker's pattern once
    for kind, pattern in candidates:
        matches = pattern.finditer(text, start, line_end) if several and pattern is grammar.RUNNING_MARKER else \
            (pattern.match(text, start),)
        for match in matches:
            if not match:
                continue
            groups = match.groupdict()
            end = text.find('\n', match.end())
            if 'beginning' in groups:
                kind = BEGINNING if groups['beginning'] else REPLAY
            found.append(Marker(offset + match.start(), offset + (len(text) if end < 0 else end), kind,
                                groups.get('name', ''), int(groups.get('shard') or '1'),
                                int(groups.get('shards') or '1'), groups.get('signal')))
    return sorted(found)


Blocks = Callable[[], Iterator[str]]


def _lf_blocks(blocks: Blocks) -> Blocks:
    """blocks with CRLF and lone CR line ends read as LF: a log copied through Windows or a web form is the same
    run (the summaries' patterns end at `\n`, so it would read as `no summary`), and so is a
    CR-only log.  A block ends after a line end that is not the CR of a CRLF, so no CRLF is cut."""
    def converted():
        for block in blocks():
            if '\r' in block:
                block = block.replace('\r\n', '\n').replace('\r', '\n')
            yield block
    return converted


def _last_flagged(blocks):
    """(block, is the last one) of blocks."""
    previous = None
    for block in blocks:
        if previous is not None:
            yield previous, False
        previous = block
    if previous is not None:
        yield previous, True


class _FirstPass(NamedTuple):
    """The markers of a whole log (first pass), each 2.6 selection by the index of its marker, and the line of each
    run's start marker by its index."""
    events: List[Marker]
    selections: Dict[int, Selection]
    lines: Dict[int, int]


def _first_pass(blocks: Blocks) -> _FirstPass:
    """The markers of the log, and the selection lists, read as the blocks come (a list may go on in the next)."""
    found = _FirstPass([], {}, {})
    offset, line, reading = 0, 1, None
    for block in blocks():
        text = '\n' + block
        if reading is not None:
            reading.read(text, 1)
            reading = reading if reading.reading else None
        for start in _lines(text):
            for marker in _markers(text, start, offset - 1):
                if marker.kind in BOUNDARIES:
                    found.lines[len(found.events)] = line + text.count('\n', 1, start)
                if marker.kind == SELECTION:
                    selection = Selection(found.lines[len(found.events)])
                    end = text.find('\n', start)
                    if end >= 0:
                        selection.read(text, end + 1)
                    found.selections[len(found.events)] = selection
                    reading = selection if selection.reading else None
                found.events.append(marker)
        line += block.count('\n')
        offset += len(block)
    return found


def _run_starts(events: List[Marker]) -> List[int]:
    """Indices of the markers that start a second, third, ... run: a run's start marker (2.6's selection, 2.1's first
    batch line) in a run that has one already, followed by a suite's marker.  (Suites' markers before a run's first
    start marker, as results/outcome puts a `Running X` line before a suite's own output, belong to that run.)"""
    starts: List[int] = []
    begun = busy = False
    for index, marker in enumerate(events):
        if marker.kind in BOUNDARIES:
            if begun and busy:
                starts.append(index)
                busy = False
            begun = True
        elif begun:
            busy = True
    return starts


def parse_log_blocks(blocks: Blocks, source: str = 'log', only_shard: Optional[Dict[str, int]] = None) -> RunResult:
    """RunResult of one run_test.py console output, given as a function returning its text in pieces that each
    end with a newline (the last may not); raise PluginError when nothing in it is recognized.
    only_shard {suite: i}: the output is of shard i alone of that suite (a piece: results.pieces), so its other
    shards are not expected.  A log of several runs (_run_starts) is read run by run, each judged on its own
    (judge_run), and the runs made one result (union_runs)."""
    blocks = _lf_blocks(blocks)
    first = _first_pass(blocks)
    events = first.events
    if all(marker.kind in BOUNDARIES for marker in events):
        listed = [index for index, selection in first.selections.items() if selection.entries]
        if not listed:
            if first.selections:
                raise PluginError(source, f'no suite ran: the log ends at run_test.py\'s list of the suites it would '
                                          f'run (`Name: tests to run`, line {min(first.lines.values())})')
            raise PluginError(source, 'no run_test.py output found (no "Running <suite> ..." line and no summary)')
    bounds = [0] + _run_starts(events) + [len(events)]

    def run_of(number):
        """The _Runs of the number-th run (from 0): its markers, its selection."""
        selection = next((first.selections[index] for index in range(bounds[number], bounds[number + 1])
                          if index in first.selections), None)
        return _Runs(RunResult(), events[bounds[number]:bounds[number + 1]], only_shard, RunTrace(selection))

    number, done = 0, []
    runs = run_of(0)
    index = 0
    piece = _Piece(_owner(None, events[0]) if events else None)
    carry = ''
    for block, last in _last_flagged(blocks()):  # second pass: the pieces between them
        text = '\n' + carry + block
        low, pending = 1, []
        for start in _lines(text):
            markers = _markers(text, start, 0) if index < len(events) else []
            if not markers:
                pending.append(start)
                continue
            runs.feed(piece, text, low, start, pending, True)
            for marker in markers:
                runs.finish(piece)
                if index == bounds[number + 1]:  # a second (third, ...) run starts here
                    runs.judge()
                    done.append((number, runs.result))
                    number += 1
                    runs = run_of(number)
                if marker.kind == FAILED_LINE and text.startswith(grammar.FAILED_RAISED_PREFIX, start):
                    runs.trace.closed = True  # run_test.py stopped at this failure: no closing line comes
                runs.event(marker.kind, marker.suite, marker.shard, marker.shards, marker.signal)
                index += 1
                piece = _Piece(_owner(events[index - 1], events[index] if index < len(events) else None),
                               events[index - 1], _success_path(text, marker))
                low = marker.end
            pending = []
        stop = runs.feed(piece, text, low, len(text), pending, last)
        carry = text[stop:]
        head = grammar.UNITTEST_SUMMARY_START.match(carry)
        if head:
            carry = carry[:head.end()]  # the blank lines after it change nothing
    runs.finish(piece)
    runs.judge()
    done.append((number, runs.result))
    result = _one_result(done, bounds, first, source)
    _add_cuda_counts(result, cuda_counts_in_log(blocks()))  # third pass: the CUDA tests of its -v lines
    return result


def _one_result(done: List[Tuple[int, RunResult]], bounds: List[int], first: _FirstPass, source: str) -> RunResult:
    """The result of a log from those of its runs (done: (number, result) in order), with notes on the log."""
    runs = [(number, result) for number, result in done if result.suites]
    result = union_runs([run for _number, run in runs]) if len(runs) > 1 else runs[0][1]
    if len(runs) > 1:
        starts = [min((line for index, line in first.lines.items() if bounds[number] <= index < bounds[number + 1]),
                      default=1) for number, _ in runs]
        result.notes.append(f"{source} holds {len(runs)} runs of run_test.py (from lines "
                            f"{', '.join(map(str, starts))}): a suite in several shows its worst outcome, a test "
                            f"failing in several counts once")
    if not first.selections:
        result.notes.append(f'{source}: run_test.py printed no list of the suites it would run, and prints no last '
                            f'line (the 2.1 line): a log cut between two suites reads as complete; '
                            f'--expected-suites names the suites that must be there')
    return result


_LINE_END = re.compile(r'\r\n?|\n')


def _text_blocks(text: str, size: int) -> Blocks:
    def blocks():
        start = 0
        while start < len(text):
            found = _LINE_END.search(text, start + size - 1)
            end = len(text) if found is None else found.end()
            yield text[start:end]
            start = end
    return blocks


def _cut(data: bytes) -> int:
    """Where a block of data read from a file ends: after its last LF, or after a later lone CR (one whose next
    byte is in data, so not the CR of a CRLF the next read completes); 0 for none."""
    return max(data.rfind(b'\n'), data.rfind(b'\r', 0, len(data) - 1)) + 1


def _piece_end(data: bytes) -> int:
    """Where a piece of a line longer than LINE_LIMIT ends: the whole of data, less a last CR (perhaps a CRLF's) and
    an unfinished UTF-8 sequence (its lead byte and continuation bytes), so that pieces decode as the line does."""
    end = len(data) - 1 if data.endswith(b'\r') else len(data)
    back = end
    while back > max(end - 4, 0) and 0x80 <= data[back - 1] < 0xc0:
        back -= 1
    if back > max(end - 4, 0) and data[back - 1] >= 0xc0:
        needed = 2 if data[back - 1] < 0xe0 else 3 if data[back - 1] < 0xf0 else 4
        if end - (back - 1) < needed:
            end = back - 1
    return end or len(data)


def _file_blocks(path: str, size: int) -> Blocks:
    """The text of the log at path in blocks of about size bytes, each ending after a line end.  A NUL byte anywhere
    refuses the file as binary (a test log holds none; before, only the first 8 KB were looked at, and 16 KB of
    log then 1 GiB of NULs, no line end in it, took 5,154 MB).  A line longer than LINE_LIMIT comes in pieces of
    about that, each ended by a line end of its own (one 1 GiB line took 3,107 MB): memory stays bounded."""
    def blocks():
        with os.fdopen(open_regular(path), 'rb') as handle:
            held: List[bytes] = []  # the start of a line that no block has ended yet
            held_size = offset = 0
            while True:
                try:
                    data = handle.read(size)
                except OSError as err:
                    raise PluginError(path, f'cannot be read: {err.strerror}') from None
                if not data:
                    break
                nul = data.find(b'\0')
                if nul >= 0:
                    raise PluginError(path, f'is a binary file (a NUL byte at byte {offset + nul}), not a test log')
                offset += len(data)
                cut = _cut(data)
                if held:
                    held.append(data)
                    held_size += len(data)
                    if not cut and held_size < LINE_LIMIT:
                        continue
                    data, held, held_size = b''.join(held), [], 0  # (parts joined once)
                    cut = _cut(data)
                if not cut and len(data) >= LINE_LIMIT:  # this piece of a longer line is read as a line
                    cut = _piece_end(data)
                    yield str(memoryview(data)[:cut], 'utf-8', 'replace') + '\n'
                elif cut:  # a line end ends no multi-byte sequence: blocks decode as the whole file does
                    yield str(memoryview(data)[:cut], 'utf-8', 'replace')
                if cut < len(data):
                    held, held_size = [data[cut:]], len(data) - cut
            if held:
                yield b''.join(held).decode('utf-8', 'replace')
    return blocks


def parse_log_text(text: str, source: str = 'log', block: int = BLOCK,
                   only_shard: Optional[Dict[str, int]] = None) -> RunResult:
    """RunResult of one run_test.py console output (text); raise PluginError when nothing in it is recognized.
    only_shard: see parse_log_blocks."""
    return parse_log_blocks(_text_blocks(text, block), source, only_shard)


def parse_log_file(path: str, block: int = BLOCK) -> RunResult:
    """RunResult of a run_test.py log (or an EasyBuild log holding it), read in blocks; PluginError for
    unreadable input."""
    with os.fdopen(open_regular(path), 'rb') as handle:
        try:
            head = handle.read(8192)
        except OSError as err:
            raise PluginError(path, f'cannot be read: {err.strerror}') from None
    if b'\0' in head:
        raise PluginError(path, 'is a binary file, not a test log')
    return parse_log_blocks(_file_blocks(path, block), source=str(path))


def _add_cuda_counts(result: RunResult, counted: Tuple[Dict[str, Dict[str, int]], bool]) -> None:
    """The CUDA tests a log's -v lines show (results/cudatests: a pass of its own over the blocks, as the log's own
    passes keep no per-test line), into its suites: where the log has pytest -v lines, a suite with tests counted
    and no CUDA line ran 0 CUDA tests; without any such line (unittest mode, a pipe-logs log) it stays unknown."""
    per_suite, any_lines = counted
    for name, suite in result.suites.items():
        if name in per_suite:
            suite.cuda_counts = per_suite[name]
        elif any_lines and any(suite.counts.values()):
            suite.cuda_counts = {'ran': 0, 'failed': 0, 'skipped': 0}
        suite.cuda_counts = with_named_failures(suite.cuda_counts, (test.test_id for test in suite.failed_tests))
