"""The failure policy: which tests are excluded and which failures are known, per scope, and the verdict.

Scopes let one easyconfig serve every build target: '' (everywhere), a CPU family ('x86_64'), an
EESSI-style CPU target ('x86_64/intel/haswell', glob allowed: 'aarch64/*'), or a CUDA compute
capability ('9.0'); results/scopes parses them and says where each applies.  Known failures are named
(suite, optionally '::test', glob allowed) with a reason; they do not consume the budget, and one that
did not fail is reported as stale.  A suite that was
killed, crashed or failed without a countable summary fails the run unless a known entry names it.
"""

import re
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any, List, NamedTuple, Optional

from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.testsuite.results.model import UNJUDGEABLE, RerunOutcome, RunResult
from eb_pytorch_cuda.testsuite.results.scopes import Scope, ScopeContext

# What can name a test file of run_test.py, one rule for excluded_tests and known_test_failures: its -x takes
# names of its TESTS list only (its argparse choices, in the 2.1 line and in 2.6 alike), which its discover_tests
# makes of the paths of test/**/test_*.py relative to test/ without '.py', and of the C++ test binaries cut at their
# first '.' (cpp/NAME): '/'-separated parts of word characters and '-'.  An entry that cannot be such a name
# ('../x', '/etc/passwd', 'test_x.py', 'test_*', 'test_x;id') would exclude nothing, or match no suite, without a
# word: it is refused in one line.  One that can but that the tree has not is known at the test step only, from
# the harness itself (run/discovery), and said there.

# a part of a name: \w is Unicode word characters, as in a Python module's name; no part starts with '-'
_NAME_PART = re.compile(r'\w[\w-]*\Z')
_PATTERN_PART = re.compile(r'[\w*?\[][\w*?\[\]!-]*\Z')  # the same with fnmatch's '*?[]!' (known_test_failures)


def name_problem(text: str, globs: bool = False) -> Optional[str]:
    """Why text cannot name a test file of run_test.py, in a few words; None when it can.  So no whitespace
    inside ("test_a test_b" excluded nothing, silently), no option ('--help' reached run_test.py as
    `-x --help`), no '.py' suffix, no '..' or absolute path, no glob, no shell or control character.
    globs: '*?[]!' allowed too, as in a known_test_failures pattern (matched against the suites' names,
    never given to run_test.py)."""
    parts = text.split('/')
    if text and all((_PATTERN_PART if globs else _NAME_PART).match(part) for part in parts):
        return None
    if text.endswith('.py'):
        return f'a file name: write it without .py ({text[:-3]!r})'
    if text.startswith('/') or '.' in parts or '..' in parts:
        return 'a path outside test/: names are relative to test/, without . or ..'
    if text.startswith('-'):
        return 'an option'
    if any(c.isspace() for c in text):
        return 'one test file per entry, without whitespace inside'
    if not globs and any(c in '*?[]' for c in text):
        return 'a glob: run_test.py -x takes test names only'
    return 'letters, digits, _ and - between / only'


def excluded_tests(setting: Any, context: ScopeContext) -> List[str]:
    """Test files to skip (run_test.py -x) for this context, in the easyconfig's order, without repeats."""
    result = []
    for scope, tests in (setting or {}).items():
        if context.applies(scope):
            result += [test for test in tests if test not in result]
    return result


@dataclass(frozen=True)
class KnownFailure:
    """'suite' or 'suite::test' (globs allowed) expected to fail in a scope, and why.

    limit: at most this many failures are covered (None: any number); the ones past it are unknown, so
    a suite-level entry for "2 known failures in dynamo/test_dynamic_shapes" cannot hide a third.
    """

    pattern: str
    reason: str
    scope: str = ''
    limit: Optional[int] = None

    @property
    def suite_pattern(self) -> str:
        return self.pattern.split('::', 1)[0]

    @property
    def test_pattern(self) -> Optional[str]:
        return self.pattern.split('::', 1)[1] if '::' in self.pattern else None

    def covers_suite(self, suite: str) -> bool:
        """True for a whole-suite entry naming this suite (it then covers a crash or signal too)."""
        return self.test_pattern is None and fnmatchcase(suite, self.suite_pattern)

    def covers_test(self, suite: str, test_id: str) -> bool:
        if not fnmatchcase(suite, self.suite_pattern):
            return False
        pattern = self.test_pattern
        return pattern is None or fnmatchcase(test_id, pattern) or fnmatchcase(test_id.rsplit('.', 1)[-1], pattern)


def known_failures(setting: Any, context: ScopeContext, source: str = 'known_test_failures') -> List['KnownFailure']:
    """KnownFailure entries of the scopes that apply; entries are (pattern, reason) or {'test':..., 'reason':...}.
    PluginError(source, one line) for a scope that is none (results/scopes) or an entry of the wrong shape or
    whose test-file part cannot be one."""
    entries = []
    for text, items in (setting or {}).items():
        scope = Scope.parse(text, source)
        if not isinstance(items, (list, tuple)):
            raise PluginError(source, f'scope {scope!r} must map to a list of (test, reason) entries')
        for item in items:
            if isinstance(item, dict):
                pattern, reason, limit = item.get('test'), item.get('reason'), item.get('max')
            elif isinstance(item, (list, tuple)) and len(item) in (2, 3):
                pattern, reason, limit = (*item, None)[:3]
            else:
                raise PluginError(source, f'entry {item!r} in scope {scope!r} is not (test, reason[, max])')
            if not pattern or not reason:
                raise PluginError(source, f'entry {item!r} in scope {scope!r} needs both a test and a reason')
            pattern = str(pattern).strip()  # as excluded_tests' names: the whitespace around is no part of it
            problem = name_problem(pattern.split('::', 1)[0], globs=True)
            if problem:
                raise PluginError(source, f"entry {item!r} in scope {scope!r}: {pattern.split('::', 1)[0]!r} is "
                                          f"not a test file ({problem}; 'suite' or 'suite::Class.test' such as "
                                          f"'distributed/test_c10d', globs allowed)")
            if limit is not None and (not isinstance(limit, int) or limit < 1):
                raise PluginError(source, f'entry {item!r} in scope {scope!r}: max must be a positive integer')
            if scope.applies(context):
                entries.append(KnownFailure(str(pattern), str(reason), str(scope), limit))
    return entries


@dataclass
class Policy:
    """Budget for unknown failures, the known failures in force, and whether flaky failures count."""

    max_failed_tests: int = 0
    known: list = field(default_factory=list)
    flaky_consumes_budget: bool = False
    # suites that cannot be judged and that no known failure names, tolerated up to this many (None: any);
    # upstream's allow_missing_failures
    allow_missing_failures: Optional[int] = 0


class KnownHit(NamedTuple):
    """A failure the policy knows: its suite, its test (None: counted in a summary, never named), the entry."""
    suite: str
    test_id: Optional[str]
    entry: 'KnownFailure'


class Failure(NamedTuple):
    """An unknown or flaky failure: its suite and test (None: unnamed, or a whole suite rerun as one)."""
    suite: str
    test_id: Optional[str]


class Budget(NamedTuple):
    """How a run stands against max_failed_tests: the one place that says what counts and when it is exceeded
    (judge's verdict and suggest's "N left" both read it, so they cannot disagree)."""
    counted: int  # unknown failures, plus flaky ones where the policy says flaky failures consume the budget
    allowed: int  # max_failed_tests

    @property
    def exceeded(self) -> bool:
        return self.counted > self.allowed

    @property
    def left(self) -> int:
        return max(self.allowed - self.counted, 0)

    @property
    def reason(self) -> str:
        """The verdict's reason line when exceeded."""
        return f'{self.counted} unknown failure(s), budget {self.allowed}'


def budget_of(policy: 'Policy', unknown: list, flaky: list) -> Budget:
    """The Budget of a run whose failures sorted into unknown and flaky under policy."""
    return Budget(len(unknown) + (len(flaky) if policy.flaky_consumes_budget else 0), policy.max_failed_tests)


class Unjudgeable(NamedTuple):
    """A suite whose outcome cannot be counted (crash, timeout, missing): why, and the entry that covers it."""
    suite: str
    status: str
    signal: Optional[str]
    entry: Optional['KnownFailure']


@dataclass
class Verdict:
    """The judged run: every failure sorted into known, unknown, flaky; suites that could not be judged."""

    passed: bool
    known: List[KnownHit]
    unknown: List[Failure]  # test_id None stands for failures counted but not named
    flaky: List[Failure]  # test_id None for a whole suite that passed when rerun
    unjudgeable: List[Unjudgeable]
    stale: list  # KnownFailure entries whose suite ran and that matched no failure
    not_run: list  # KnownFailure entries whose suite is not in the results
    budget: int
    reasons: list
    policy: Optional[Policy] = None  # the policy it was judged by (report's suggestion re-judges with entries added)
    tolerated: list = field(default_factory=list)  # what allow_missing_failures let pass, one line each

    @property
    def spent(self) -> Budget:
        """Where the run stands against its budget (budget_of; without a policy flaky failures do not count)."""
        return budget_of(self.policy or Policy(self.budget), self.unknown, self.flaky)


def _first(entries, predicate, used=None):
    """The first entry matching predicate that still has room under its limit (counted in used)."""
    for entry in entries:
        if predicate(entry) and (entry.limit is None or used is None or used.get(entry, 0) < entry.limit):
            return entry
    return None


def judge(result: 'RunResult', policy: 'Policy') -> 'Verdict':
    """Apply policy to a RunResult; see Verdict."""
    known: List[KnownHit] = []
    unknown: List[Failure] = []
    flaky: List[Failure] = []
    unjudgeable: List[Unjudgeable] = []
    used: dict = {}
    for suite in sorted(result.suites.values(), key=lambda s: s.name):
        if suite.status in UNJUDGEABLE:
            entry = _first(policy.known, lambda e: e.covers_suite(suite.name))
            if entry:
                used.setdefault(entry, 0)
            if not entry and suite.rerun_outcome == RerunOutcome.FLAKY:
                flaky.append(Failure(suite.name, None))  # passed when rerun as a whole
            else:
                unjudgeable.append(Unjudgeable(suite.name, suite.status, suite.signal, entry))
        for test in suite.failed_tests:  # an entry naming the test wins over a count for its whole suite
            entry = (_first(policy.known, lambda e: e.test_pattern and e.covers_test(suite.name, test.test_id), used)
                     or _first(policy.known, lambda e: e.covers_test(suite.name, test.test_id), used))
            if entry:
                known.append(KnownHit(suite.name, test.test_id, entry))
                used[entry] = used.get(entry, 0) + 1
            elif test.rerun_outcome == RerunOutcome.FLAKY:
                flaky.append(Failure(suite.name, test.test_id))
            else:
                unknown.append(Failure(suite.name, test.test_id))
        nameless = suite.failing_count - len(suite.failed_tests)
        if nameless > 0:  # counted in a summary, but no name was printed for them
            for _ in range(nameless):
                entry = _first(policy.known, lambda e: e.covers_suite(suite.name), used)
                if entry:
                    known.append(KnownHit(suite.name, None, entry))
                    used[entry] = used.get(entry, 0) + 1
                elif suite.rerun_outcome == RerunOutcome.FLAKY:
                    flaky.append(Failure(suite.name, None))
                else:
                    unknown.append(Failure(suite.name, None))
    stale = [e for e in policy.known
             if e not in used and any(fnmatchcase(name, e.suite_pattern) for name in result.suites)]
    not_run = [e for e in policy.known if e not in used and e not in stale]
    budget = budget_of(policy, unknown, flaky)
    # a suite that failed uncountably (killed, crashed, no summary) fails the build unless a known failure
    # names it or, as upstream's allow_missing_failures says, no more such suites than allowed are left: then
    # all of them pass with a line each (upstream: a warning), else all of them are reasons
    reasons: List[str] = []
    tolerated: List[str] = []
    unnamed = [f"{name}: {f'killed by {signal}' if signal else status}, and not a known failure"
               for name, status, signal, entry in unjudgeable if entry is None]
    allowed = policy.allow_missing_failures
    if unnamed and (allowed is None or len(unnamed) <= allowed):
        tolerated = [f"{line} (allow_missing_failures = {'True' if allowed is None else allowed})"
                     for line in unnamed]
    else:
        reasons += unnamed
    if budget.exceeded:
        reasons.append(budget.reason)
    return Verdict(not reasons, known, unknown, flaky, unjudgeable, stale, not_run, budget.allowed, reasons,
                   policy, tolerated)
