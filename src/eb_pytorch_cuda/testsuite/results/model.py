"""The result model shared by the parsers, the policy and the reports: typed objects, JSON only at the edges.

Inside the step a suite's outcome is a Suite (its status a SuiteStatus, its counts a Counts, its failing tests
TestCase objects); to_json()/from_json() turn it into the mapping a saved result, the kept final result and a
results-store record (results/records) hold, and back.  The mapping is the one dataclasses.asdict gave before
these types existed, key for key and in the same order, so the bytes on disk are the bytes earlier versions
wrote (tests/test_store_records.py pins them with the kept stores of tests/data/).
"""

from dataclasses import asdict, dataclass, field, fields
from enum import Enum
from typing import Any, Dict, Iterator, List, Mapping, Optional

# states of a test case, as the reports name them
PASSED, FAILED, ERROR, SKIPPED, XFAILED, XPASSED = 'passed', 'failed', 'error', 'skipped', 'xfailed', 'xpassed'
COUNT_KEYS = ('failed', 'errors', 'passed', 'skipped', 'xfailed', 'xpassed', 'rerun')


class SuiteStatus(str, Enum):
    """A suite's outcome.  A str, so that json.dumps writes its value, a comparison with the word read from an
    older record holds, and it prints as the word the reports have always shown (str() is the value)."""

    PASSED = 'passed'  # a countable summary, no failure
    FAILED = 'failed'  # failures counted
    UNCOUNTED = 'failed without countable summary'  # run_test.py said failed, nothing to count
    TERMINATED = 'terminated'  # killed by a signal
    INCOMPLETE = 'no summary'  # started, never finished (crash of the runner, truncated log)
    TIMED_OUT = 'timed out'  # killed, with its whole process group, at the per-suite timeout
    MISSING = 'missing'  # announced, listed by discovery or expected, and no outcome at all
    REPORT_INCOMPLETE = 'incomplete report'  # an empty or comment-only XML report: killed while writing it
    BAD_REPORT = 'unreadable report'  # an XML report that cannot be trusted (see Suite.note), in the test step

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


# the suite outcomes under the names the code has always used
SUITE_PASSED, SUITE_FAILED, SUITE_UNCOUNTED = SuiteStatus.PASSED, SuiteStatus.FAILED, SuiteStatus.UNCOUNTED
SUITE_TERMINATED, SUITE_INCOMPLETE = SuiteStatus.TERMINATED, SuiteStatus.INCOMPLETE
SUITE_TIMED_OUT = SuiteStatus.TIMED_OUT
SUITE_MISSING, SUITE_REPORT_INCOMPLETE = SuiteStatus.MISSING, SuiteStatus.REPORT_INCOMPLETE
SUITE_BAD_REPORT = SuiteStatus.BAD_REPORT
UNJUDGEABLE = (SUITE_UNCOUNTED, SUITE_TERMINATED, SUITE_INCOMPLETE, SUITE_TIMED_OUT, SUITE_MISSING,
               SUITE_REPORT_INCOMPLETE, SUITE_BAD_REPORT)
SUITE_STATES = tuple(SuiteStatus)  # SUITE_PASSED, SUITE_FAILED, then UNJUDGEABLE
TEST_STATES = (PASSED, FAILED, ERROR, SKIPPED, XFAILED, XPASSED)


class RerunOutcome(str, Enum):
    """What the isolated reruns of a failed test (or of a suite rerun whole) showed (run/reruns).  A str, as
    SuiteStatus, so that the JSON files hold the same words and a word read from one compares equal."""

    FLAKY = 'flaky'  # passed on a rerun: not counted against the budget unless the policy says so
    REPRODUCIBLE = 'reproducible'  # failed on every rerun

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


RERUN_OUTCOMES = tuple(RerunOutcome)
# the tests of a suite that ran on a CUDA device (results/cudatests): executed (not skipped), failed or errored
# among them, skipped; a suite's `cuda_counts` is None where nothing could tell (no XML report, an older record)
CUDA_COUNT_KEYS = ('ran', 'failed', 'skipped')


@dataclass(eq=False)
class Counts(Mapping[str, int]):
    """A suite's seven counts (COUNT_KEYS), each a field mypy checks.  Also a mapping of those keys (read, and
    set with counts[key] = n), because the parsers count by a key they read (`counts[STATE_COUNT_KEY[state]]`)
    and the reports walk COUNT_KEYS; it equals a dict of the same seven counts, as the plain dict it replaces did."""

    failed: int = 0
    errors: int = 0
    passed: int = 0
    skipped: int = 0
    xfailed: int = 0
    xpassed: int = 0
    rerun: int = 0

    def __getitem__(self, key: str) -> int:
        if key not in COUNT_KEYS:
            raise KeyError(key)
        return int(getattr(self, key))

    def __setitem__(self, key: str, value: int) -> None:
        if key not in COUNT_KEYS:
            raise KeyError(key)
        setattr(self, key, value)

    def __iter__(self) -> Iterator[str]:
        return iter(COUNT_KEYS)

    def __len__(self) -> int:
        return len(COUNT_KEYS)

    def __repr__(self) -> str:
        return f'Counts({", ".join(f"{key}={self[key]}" for key in COUNT_KEYS)})'

    def to_json(self) -> Dict[str, int]:
        """{key: count} of all seven, in COUNT_KEYS order (what the writers have always written)."""
        return {key: self[key] for key in COUNT_KEYS}

    @classmethod
    def from_json(cls, data: Mapping[str, int]) -> 'Counts':
        """The counts of a checked mapping (results.saved.check_suite); a count left out is 0."""
        return cls(**{key: data[key] for key in COUNT_KEYS if key in data})


@dataclass
class TestCase:
    """One failing (or rerun) test of a suite; test_id is 'Class.test_method' when known."""

    test_id: str
    state: str
    reruns: int = 0
    rerun_outcome: Optional[RerunOutcome] = None  # None: not rerun

    def to_json(self) -> Dict[str, Any]:
        """The test as the JSON files hold it: every field, in field order, the outcome as its word."""
        return dict(asdict(self), rerun_outcome=_word(self.rerun_outcome))

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> 'TestCase':
        """The test of a checked mapping (results.saved.check_suite)."""
        return cls(**dict(data, rerun_outcome=_outcome(data.get('rerun_outcome'))))


def _word(outcome: Optional[RerunOutcome]) -> Optional[str]:
    return None if outcome is None else RerunOutcome(outcome).value


def _outcome(word: Optional[str]) -> Optional[RerunOutcome]:
    return None if word is None else RerunOutcome(word)


@dataclass
class Suite:
    """One test file's outcome (all shards and variants merged)."""

    name: str
    status: SuiteStatus = SuiteStatus.PASSED
    counts: Counts = field(default_factory=Counts)
    failed_tests: List[TestCase] = field(default_factory=list)  # failing ones only
    signal: Optional[str] = None
    sources: List[str] = field(default_factory=list)  # 'log', 'xml'
    rerun_outcome: Optional[RerunOutcome] = None  # for a suite rerun as a whole
    seconds: Optional[float] = None  # how long the suite ran, when it ran in a process of its own
    note: Optional[str] = None  # why the suite could not be judged, when a parser knows more than the status says
    cuda_counts: Optional[Dict[str, int]] = None  # {CUDA_COUNT_KEYS: n} of its tests on a CUDA device (None: unknown)

    @property
    def failing_count(self) -> int:
        return self.counts.failed + self.counts.errors

    def summary(self) -> str:
        """'2 failed, 2065 passed, 14 skipped, 33 xfailed, 4 rerun' (zero counts left out, passed always shown)."""
        parts = [f"{self.counts[k]} {'errors' if k == 'errors' else k}" for k in COUNT_KEYS
                 if self.counts[k] or k == 'passed']
        return ', '.join(parts)

    def to_json(self) -> Dict[str, Any]:
        """The suite as the JSON files hold it: every field, in field order (the mapping asdict gave)."""
        data = {item.name: getattr(self, item.name) for item in fields(self)}
        data.update(status=self.status.value, counts=self.counts.to_json(),
                    failed_tests=[test.to_json() for test in self.failed_tests], sources=list(self.sources),
                    cuda_counts=dict(self.cuda_counts) if self.cuda_counts is not None else None,
                    rerun_outcome=_word(self.rerun_outcome))
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> 'Suite':
        """The suite of a mapping results.saved.check_suite accepted (a key left out takes its default)."""
        item = dict(data)
        item['status'] = SuiteStatus(item.get('status', SuiteStatus.PASSED))
        item['counts'] = Counts.from_json(item.get('counts', {}))
        item['failed_tests'] = [TestCase.from_json(test) for test in item.get('failed_tests', [])]
        item['rerun_outcome'] = _outcome(item.get('rerun_outcome'))
        return cls(**item)


@dataclass
class RunResult:
    """All suites of one test run, keyed by suite name; notes: what a reader found about the input as a whole (a log
    that holds several runs, one that cannot show where it ends), one line each, for the reports (not in to_dict:
    a saved result and a record keep the suites only)."""

    suites: Dict[str, Suite] = field(default_factory=dict)
    notes: List[str] = field(default_factory=list)

    def suite(self, name: str) -> Suite:
        if name not in self.suites:
            self.suites[name] = Suite(name)
        return self.suites[name]

    def to_dict(self) -> dict:
        return {'suites': [suite.to_json() for suite in sorted(self.suites.values(), key=lambda s: s.name)]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> 'RunResult':
        result = cls()
        for item in data['suites']:
            suite = Suite.from_json(item)
            result.suites[suite.name] = suite
        return result
