"""What PyTorch's test/run_test.py and the suites it runs print, in one table: every pattern that reads it.

One place, so that a line a new harness prints is added once and every reader sees it: logparse (a whole
log, counts per suite), splitting (one batch's output cut into each suite's part), outcome (a suite's own
times), run/batches (which new output can settle a suite), run/discovery (the dry run's printed selection)
and run/harness (which of these lines a run_test.py's source prints at all).  See logparse's docstring for
which harness version prints which line (measured on the real 2.1-line harness, tests/data/pytorch21, and
on 2.6.0, tests/data/pytorch_corpus).  `X` below is a suite with an optional shard, `suite i/n`.

The fragments (upper case, str) match a line from its start; the compiled patterns are anchored (`^`,
re.M) and add what their reader needs after a fragment.  Every pattern is linear in the line length (no
nested or adjacent unbounded quantifiers that can backtrack over one line): a 160 KB summary line parses
in milliseconds.
"""

import re

SUITE = r'(?P<name>[\w./-]+)(?: (?P<shard>\d+)/(?P<shards>\d+))?'
SUITE_UNNAMED = r'[\w./-]+(?: \d+/\d+)?'  # the same, without groups, to be used inside other patterns

# --- the harness's own lines about its suites -------------------------------------------------------------

# `Running X ... [date]`: a run of a suite starts.  Read at a line's start, or after a `]` or a blank: 2.6's pool
# workers print the line and its newline in two writes (PYTHONUNBUFFERED=1), and another worker's output may be
# unfinished, so a start may follow another start (`Running A 1/1 ... [date]Running B 1/1 ... [date]`, seen once in
# a full test run) or a test line waiting for its result (`test_x.py::C::t Running B 1/1 ... [date]`: 2 of 22 plain
# runs of tests/data/pytorch26-plain's selection under load, tests/data/pytorch26-start-after-test)
RUNNING = rf'Running {SUITE} \.\.\. \['
RUNNING_AFTER_TEXTS = (']Running ', ' Running ')
# `[##[group]]PRINTING [BEGINNING OF ]LOG FILE of X (path)`: a suite's replayed log starts
LOG_START = rf'(?:##\[group\])?PRINTING (?P<beginning>BEGINNING OF )?LOG FILE of {SUITE} \('
# `FINISHED PRINTING LOG FILE of X[ (path)]`: a suite's replayed log ends
LOG_END_TEXT = 'FINISHED PRINTING LOG FILE of '
LOG_END = rf'{LOG_END_TEXT}{SUITE}'
# `X failed![ Received signal: SIGx]`: a run of a suite failed (also inside `RuntimeError: ` when run_test.py
# stops there, which is the same failure again)
FAILED_TEXT = 'failed!'
FAILED = rf'{SUITE} {FAILED_TEXT}(?: Received signal: (?P<signal>\w+))?'
FAILED_RAISED_PREFIX = r'RuntimeError: '
# `X was successful, full logs can be found in artifacts with path P` (2.6 with --pipe-logs)
SUCCESS_TEXT = 'was successful, full logs can be found'
SUCCESS = rf'{SUITE} {SUCCESS_TEXT}'
SUCCESS_LOG_PATH = r' in artifacts with path (?P<path>\S+)'
# lines only the harness prints, whatever the suite (splitting finds where a replayed short log begins)
# (not `Running N items in this shard`: pytest-shard prints it inside every 2.1 suite's own log)
HARNESS_ONLY = (rf'Running {SUITE_UNNAMED} \.\.\. \[|Executing |{LOG_END_TEXT}|Expand the folded group|'
                rf'{SUITE_UNNAMED} {FAILED_TEXT}|{SUITE_UNNAMED} was successful')

# what a run_test.py's source holds when it replays logs, and when it replays a failed suite's log as its
# beginning only (so that a whole replay is a passed suite's: 2.1); read by run/harness
LOG_REPLAY_SOURCE_TEXT = 'PRINTING LOG FILE'
LOG_BEGINNING_SOURCE_TEXT = 'PRINTING BEGINNING OF LOG FILE'

# as splitting reads them: a whole line each
LOG_START_LINE = re.compile(rf'^{LOG_START}[^)\n]*\)[ \t]*$', re.M)
LOG_END_LINE = re.compile(rf'^{LOG_END}(?: \([^)\n]*\))?[ \t]*$', re.M)
HARNESS_LINE = re.compile(rf'^(?:{HARNESS_ONLY}).*$', re.M)
SUCCESS_WITH_PATH = re.compile(rf'^{SUCCESS}{SUCCESS_LOG_PATH}', re.M)
FAILED_LINE = re.compile(rf'^{FAILED}', re.M)  # not `RuntimeError: X failed!`: the same end again
RUNNING_MARKER = re.compile(rf'(?:^|(?<=[\] ]))(?:{RUNNING})', re.M)

# as logparse reads them: (kind, pattern), a suite's run starts with either start line
START_MARKERS = (RUNNING_MARKER, re.compile(rf'^{LOG_START}', re.M))
FINISHED_MARKER = re.compile(rf'^{LOG_END} \(', re.M)
FAILED_MARKER = re.compile(rf'^(?:{FAILED_RAISED_PREFIX})?{FAILED}', re.M)
SUCCESS_MARKER = re.compile(rf'^{SUCCESS}', re.M)

# --- a run of run_test.py as a whole: where it starts, what it said it would run, its last line -------------------
# (read by results/runplan; 2.6.0's test/run_test.py main() and run_tests(), 2.1's main())

# 2.6: `print_to_stderr(test_batch)` before any suite runs (TestBatch.__str__): `Name: tests to run (est. time:
# 0.0min)`, `  Serial tests (N):` and one `    test_x i/n` line each, `  Parallel tests (N):` and theirs; then the
# same for `Name: excluded`.  A second such line in one log starts a second run
SELECTION_START = re.compile(r'^Name: tests to run \(', re.M)
SELECTION_SECTION = re.compile(r'[ \t]+(?P<kind>Serial|Parallel) tests \((?P<count>\d+)\):[ \t]*')
SELECTION_ENTRY = re.compile(r'[ \t]{3,}(?P<name>[\w./-]+) (?P<shard>\d+)/(?P<shards>\d+)[ \t]*')
# the 2.1 line prints no selection; main() prints `Starting test batch 'highly_relevant'` (its first
# target-determination batch) once per run, before any suite (stdout, flushed when the pool starts)
RUN_START_21 = re.compile(r"^Starting test batch 'highly_relevant'", re.M)
# 2.6: after run_tests() returned (every suite ended): `Running test batch 'tests to run' cost 117.21 seconds`
RUN_CLOSING = re.compile(r"^Running test batch 'tests to run' cost [\d.]+ seconds[ \t]*$", re.M)
# 2.6 runs each pool suite alone first, `-m serial` added to its command (`Executing [..., '-m', 'serial', ...]`),
# and again in the pool with `-m not serial`: it is announced (`Running X ... [`) twice
EXECUTING_TEXT = 'Executing ['
SERIAL_PRERUN_TEXT = "'-m', 'serial'"

# output that can settle a suite of a running batch (run/batches looks for these in what is new)
SETTLING_TEXTS = (FAILED_TEXT, 'was successful', 'Running ')


def running_prefix(suite: str, shard: int = 1, shards: int = 1) -> str:
    """`Running X i/n `: how the harness starts announcing shard i of n of suite (run/solo checks it ran)."""
    return f'Running {suite} {shard}/{shards} '


def running_line(suite: str, shard: int = 1, shards: int = 1) -> str:
    """The start of the harness's `Running X i/n ... [date]` line (outcome reads a suite's own output as a log)."""
    return f'{running_prefix(suite, shard, shards)}... ['


# --- the suites' own summaries and failed tests (unittest, pytest, run_test.py's lists) ----------------------

UNITTEST_SUMMARY_HEAD = r'Ran (?P<total>\d+) tests? in [\d.]+s[ \t]*\n'
BLANK_LINES_TEXT = r'(?:[ \t]*\n)*'  # between `Ran N tests` and `OK`/`FAILED (...)`
UNITTEST_SUMMARY = re.compile(rf'^{UNITTEST_SUMMARY_HEAD}{BLANK_LINES_TEXT}'
                              r'(?P<status>OK|FAILED)(?: \((?P<details>[^)\n]*)\))?[ \t]*$', re.M)
UNITTEST_SUMMARY_START = re.compile(UNITTEST_SUMMARY_HEAD)  # the summary up to its first newline
BLANK_LINES = re.compile(BLANK_LINES_TEXT)
PYTEST_LINE = re.compile(r'^=+ [^\n]*', re.M)  # candidate lines; the summary is checked with str methods
# ` in 0.75s (0:00:00) ====`: how a pytest session's last line ends, before any trailing blanks
PYTEST_DURATION = r' in [\d.]+s(?: \([\d:]+\))? =+'
PYTEST_TAIL = re.compile(rf'{PYTEST_DURATION}[ \t]*$')
PYTEST_ITEM = re.compile(r'(\d+) (\w+)')
# a session's summary after another pool worker's unfinished `test_x.py::Class::test ` on the same line (measured on
# 2.6.0 under load: tests/data/pytorch26-interleaved-summary): the summary, from its first `=`, at the line's end;
# PYTEST_TAIL_ANYWHERE finds the lines that may hold one (a literal first: fast over a whole block)
PYTEST_AFTER_TEXT = re.compile(rf'[^=\n] (?P<summary>=+ [^=\n]*{PYTEST_DURATION})[ \t]*$')
PYTEST_TAIL_ANYWHERE = re.compile(rf'{PYTEST_DURATION}[ \t]*$', re.M)
PYTEST_KEYS = {'failed': 'failed', 'passed': 'passed', 'skipped': 'skipped', 'xfailed': 'xfailed',
               'xpassed': 'xpassed', 'rerun': 'rerun', 'error': 'errors', 'errors': 'errors'}
PYTEST_END_WORDS = set(PYTEST_KEYS) | {'deselected', 'warning', 'warnings'}  # a session's last line has one
# the seconds a suite's tests took by its own summaries (unittest's `Ran N tests in Ss`, pytest's last line)
SUMMARY_SECONDS = re.compile(r'^(?:Ran \d+ tests? in (?P<unittest>[\d.]+)s'
                             r'|=+ .*? in (?P<pytest>[\d.]+)s(?: \([\d:]+\))? =+)[ \t]*$', re.M)
UNITTEST_FAILED_TEST = re.compile(r'^(?P<kind>FAIL|ERROR): (?P<test>\w+) \((?P<where>[\w.]+)\)', re.M)
PYTEST_FAILED_TEST = re.compile(r'^(?P<kind>FAILED|ERROR) (?:\[[^\]\n]*\] )?(?P<path>[\w/.-]+?\.py)::'
                                r'(?:(?P<cls>\w+)::)?(?P<test>[^\s:]+)', re.M)
ASSERTION_HEAD = r'AssertionError: (?P<count>\d+) unit test\(s\) failed:[ \t]*\n'
ASSERTION_LIST = re.compile(rf'^{ASSERTION_HEAD}(?P<names>(?:[ \t]+\S[^\n]*\n?)+)', re.M)
ASSERTION_START = re.compile(ASSERTION_HEAD)  # the list up to its first newline
ASSERTION_NAMES = re.compile(r'(?:[ \t]+\S[^\n]*\n)*')  # its names so far (whole lines)
# 2.3+ (run_test_retries): a failing test is retried alone in new processes, each printing its own `1 failed`
# summary, and the suite's log ends with the tests that failed every time (measured on 2.6.0 with torch 2.11 on
# the H200: 10 failing tests, 30 `1 failed` summaries): that list, not the sum, is what failed
CONSISTENT_FAILURES_TEXT = 'The following tests failed consistently: ['
# searched for anywhere in a line: in a pool's interleaved output it may follow another worker's unfinished
# `test_x.py::Class::test ` (measured on 2.6.0: tests/data/pytorch26-plain)
CONSISTENT_FAILURES = re.compile(r"The following tests failed consistently: \[(?P<tests>[^\]\n]*)\]")
QUOTED_TEST = re.compile(r"'(?P<path>[\w/.-]+?\.py)::(?:(?P<cls>\w+)::)?(?P<test>[^':]+)'")
TEST_FILE_MENTION = '.py::'  # a pytest node id names its test file before this

# --- a pytest session's own lines (2.6's pool interleaves two or three sessions; their headers come whole) ------
# `=== test session starts ===`: a session begins (its header lines follow, written at once by one process)
SESSION_START_TEXT = ' test session starts '
# searched for anywhere in a line: another worker's unfinished `test_x.py::Class::test ` may come before it
SESSION_START = re.compile(r'=+ test session starts =+[ \t]*$', re.M)
# `collecting ... collected 15 items / 14 deselected / 1 selected` (`collected 1 item`, also without `collecting`)
SESSION_COLLECTED = re.compile(r'^(?:collecting \.\.\. )?collected (?P<collected>\d+) items?'
                               r'(?: / (?P<deselected>\d+) deselected)?(?: / (?P<selected>\d+) selected)?', re.M)
# 2.6's conftest (stepcurrent): `stepcurrent: skipping 0 already run items. Running only test/test_x.py::C::t`:
# run_test_retries' isolated rerun of one failing test (`--rs`); `skipping N already run items.` alone: `--scs`
STEPCURRENT_ONLY = re.compile(r'^stepcurrent: .*?Running only (?P<path>[\w/.-]+?\.py)::', re.M)
# pytest_shard_custom (2.6) / pytest-shard (2.1): `Running 2 items in this shard[: test/test_x.py::C::t, ...]`; the
# list only with --print-items (a suite's first session; after `X was successful` in a --pipe-logs log)
SHARD_ITEMS = re.compile(r'^Running (?P<count>\d+) items in this shard(?:: (?P<first>[\w/.-]+?\.py)::)?', re.M)
# a session that ran nothing: pytest's `no tests ran in 0.01s` (between `=` rules or not) and the
# `no tests collected in 0.03s` a --subprocess suite prints (test_cuda_primary_ctx without a GPU, exit 0)
NO_TESTS = re.compile(r'^(?:=+ )?no tests (?:ran|collected) in [\d.]+s\b', re.M)
PATH_CHARS = re.compile(r'[\w/.-]*')  # the characters of a test file path (before TEST_FILE_MENTION)

# the first characters of every line above that starts a line (logparse looks only at such lines, and at
# those holding ANYWHERE_TEXTS, which the suite and shard before them may push anywhere): a new pattern
# starting with another character must be added here
LINE_FIRST_CHARS = 'RFEAT=#PcsnNS'
CANDIDATE_LINE = re.compile(rf'\n[{re.escape(LINE_FIRST_CHARS)}]')
# `X failed!`, `X was successful`, the consistent failures, a session's start, a suite's start after other output
ANYWHERE_TEXTS = (FAILED_TEXT, SUCCESS_TEXT, CONSISTENT_FAILURES_TEXT, SESSION_START_TEXT) + RUNNING_AFTER_TEXTS

# --- the dry run's printed selection (run/discovery's cross-check) -------------------------------------------

# 2.0 with --verbose: `Selected tests:` and one indented name a line
DRY_RUN_SELECTED = re.compile(r'^Selected tests:[ \t]*\n((?:[ \t]+\S.*\n?)*)', re.M)
# 2.6: its batch, `Name: tests to run ...`, `  Serial tests (N):`, `    test_x 1/1`, `  Parallel tests (N):`
DRY_RUN_BATCH = re.compile(r'^Name: tests to run\b.*\n((?:[ \t]+.*\n?)*)', re.M)
DRY_RUN_BATCH_LINE = re.compile(r'^[ \t]{4,}(?P<name>[\w./-]+)(?: \d+/\d+)?[ \t]*$')
DRY_RUN_SERIAL_HEADER = re.compile(r'^[ \t]+Serial tests \(\d+\):')
DRY_RUN_PARALLEL_HEADER = re.compile(r'^[ \t]+Parallel tests \(\d+\):')
