"""The result model shared by the parsers, the policy and the reports (plain data, JSON round-trip)."""

from dataclasses import asdict, dataclass, field
from typing import Any, Mapping, Optional

# states of a test case, as the reports name them
PASSED, FAILED, ERROR, SKIPPED, XFAILED, XPASSED = 'passed', 'failed', 'error', 'skipped', 'xfailed', 'xpassed'
COUNT_KEYS = ('failed', 'errors', 'passed', 'skipped', 'xfailed', 'xpassed', 'rerun')

# suite outcomes
SUITE_PASSED = 'passed'  # a countable summary, no failure
SUITE_FAILED = 'failed'  # failures counted
SUITE_UNCOUNTED = 'failed without countable summary'  # run_test.py said failed, nothing to count
SUITE_TERMINATED = 'terminated'  # killed by a signal
SUITE_INCOMPLETE = 'no summary'  # started, never finished (crash of the runner, truncated log)
SUITE_TIMED_OUT = 'timed out'  # killed, with its whole process group, at the per-suite timeout
SUITE_MISSING = 'missing'  # announced, listed by discovery or expected, and no outcome at all
SUITE_REPORT_INCOMPLETE = 'incomplete report'  # an empty or comment-only XML report: killed while writing it
SUITE_BAD_REPORT = 'unreadable report'  # an XML report that cannot be trusted (see Suite.note), in the test step
UNJUDGEABLE = (SUITE_UNCOUNTED, SUITE_TERMINATED, SUITE_INCOMPLETE, SUITE_TIMED_OUT, SUITE_MISSING,
               SUITE_REPORT_INCOMPLETE, SUITE_BAD_REPORT)
SUITE_STATES = (SUITE_PASSED, SUITE_FAILED) + UNJUDGEABLE
TEST_STATES = (PASSED, FAILED, ERROR, SKIPPED, XFAILED, XPASSED)
RERUN_OUTCOMES = ('flaky', 'reproducible')
# the tests of a suite that ran on a CUDA device (results/cudatests): executed (not skipped), failed or errored
# among them, skipped; a suite's `cuda_counts` is None where nothing could tell (no XML report, an older record)
CUDA_COUNT_KEYS = ('ran', 'failed', 'skipped')


@dataclass
class TestCase:
    """One failing (or rerun) test of a suite; test_id is 'Class.test_method' when known."""

    test_id: str
    state: str
    reruns: int = 0
    rerun_outcome: Optional[str] = None  # 'flaky' (passed on an isolated rerun) or 'reproducible'


@dataclass
class Suite:
    """One test file's outcome (all shards and variants merged)."""

    name: str
    status: str = SUITE_PASSED
    counts: dict = field(default_factory=lambda: dict.fromkeys(COUNT_KEYS, 0))
    failed_tests: list = field(default_factory=list)  # TestCase, failing ones only
    signal: Optional[str] = None
    sources: list = field(default_factory=list)  # 'log', 'xml'
    rerun_outcome: Optional[str] = None  # for a suite rerun as a whole: 'flaky' or 'reproducible'
    seconds: Optional[float] = None  # how long the suite ran, when it ran in a process of its own
    note: Optional[str] = None  # why the suite could not be judged, when a parser knows more than the status says
    cuda_counts: Optional[dict] = None  # {CUDA_COUNT_KEYS: n} of its tests that ran on a CUDA device (None: unknown)

    @property
    def failing_count(self) -> int:
        return self.counts['failed'] + self.counts['errors']

    def summary(self) -> str:
        """'2 failed, 2065 passed, 14 skipped, 33 xfailed, 4 rerun' (zero counts left out, passed always shown)."""
        parts = [f"{self.counts[k]} {'errors' if k == 'errors' else k}" for k in COUNT_KEYS
                 if self.counts[k] or k == 'passed']
        return ', '.join(parts)


@dataclass
class RunResult:
    """All suites of one test run, keyed by suite name."""

    suites: dict = field(default_factory=dict)

    def suite(self, name: str) -> Suite:
        if name not in self.suites:
            self.suites[name] = Suite(name)
        return self.suites[name]

    def to_dict(self) -> dict:
        return {'suites': [asdict(suite) for suite in sorted(self.suites.values(), key=lambda s: s.name)]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> 'RunResult':
        result = cls()
        for item in data['suites']:
            item = dict(item)
            tests = [TestCase(**test) for test in item.pop('failed_tests', [])]
            item['counts'] = {**dict.fromkeys(COUNT_KEYS, 0), **item.get('counts', {})}  # a count left out is 0
            suite = Suite(**item)
            suite.failed_tests = tests
            result.suites[suite.name] = suite
        return result
