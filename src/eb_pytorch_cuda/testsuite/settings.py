"""The test step's settings: one list of parameters, one object built from plain values.

The easyconfig reader (eb/ecpolicy), the build fingerprint (step.build_fingerprint leaves the judging
ones out: changing them re-judges, it does not rebuild), the dry run and `test-suite` all use this list,
so a parameter cannot be known to one and missing from another.  EasyBuild-free.
"""

from dataclasses import dataclass, field
from typing import Optional

from eb_pytorch_cuda.testsuite.policy import Policy, excluded_tests, known_failures

# (name, default, decides how a run is judged or scheduled rather than what is built and tested)
PARAMETERS = (
    ('max_failed_tests', None, True),  # None: the installed easyblocks' default (eb/ecpolicy)
    ('known_test_failures', None, True),
    ('flaky_failures_consume_budget', False, True),
    ('rerun_failed_tests', 0, True),
    ('excluded_tests', None, True),
    ('test_suite_timeout', None, True),
    ('parallel_test_suites', 1, True),
    ('test_suite_jobs', 1, True),  # where the suites run, not what is tested: Slurm jobs (testsuite/spread)
    ('cuda_compute_capabilities', None, False),
)
NAMES = tuple(name for name, _default, _judging in PARAMETERS)
JUDGING = tuple(name for name, _default, judging in PARAMETERS if judging)  # left out of the build fingerprint


@dataclass(frozen=True)
class TestSettings:
    """Everything the test step needs from an easyconfig (or the test-suite command line)."""

    __test__ = False  # not a pytest test class

    max_failed_tests: Optional[int] = None
    known_test_failures: dict = field(default_factory=dict)
    flaky_failures_consume_budget: bool = False
    rerun_failed_tests: int = 0
    excluded_tests: dict = field(default_factory=dict)
    test_suite_timeout: Optional[int] = None
    parallel_test_suites: int = 1
    test_suite_jobs: int = 1
    cuda_compute_capabilities: tuple = ()

    @classmethod
    def from_values(cls, values: dict) -> 'TestSettings':
        """From {parameter: value} (missing or None values take the defaults)."""
        def value(name, default):
            found = values.get(name)
            return default if found is None else found
        return cls(max_failed_tests=None if values.get('max_failed_tests') is None
                   else int(values['max_failed_tests']),
                   known_test_failures=dict(value('known_test_failures', {})),
                   flaky_failures_consume_budget=bool(value('flaky_failures_consume_budget', False)),
                   rerun_failed_tests=int(value('rerun_failed_tests', 0)),
                   excluded_tests=dict(value('excluded_tests', {})),
                   test_suite_timeout=None if values.get('test_suite_timeout') in (None, '') else
                   int(values['test_suite_timeout']),
                   parallel_test_suites=max(1, int(value('parallel_test_suites', 1))),
                   test_suite_jobs=max(1, int(value('test_suite_jobs', 1))),
                   cuda_compute_capabilities=tuple(str(c) for c in value('cuda_compute_capabilities', ())))

    def policy(self, context, default_budget: int = 0, source: str = 'known_test_failures') -> Policy:
        """The failure policy in force in context (default_budget when max_failed_tests is not set)."""
        budget = default_budget if self.max_failed_tests is None else self.max_failed_tests
        return Policy(max_failed_tests=int(budget), known=known_failures(self.known_test_failures, context, source),
                      flaky_consumes_budget=self.flaky_failures_consume_budget)

    def excluded(self, context) -> list:
        """run_test.py -x suites in force in context."""
        return excluded_tests(self.excluded_tests, context)
