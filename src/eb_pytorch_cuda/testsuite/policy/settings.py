"""The test step's settings: one list of parameters, one object built from plain values.

The easyconfig reader (eb/ecpolicy), the build fingerprint (service.build_fingerprint leaves the judging
ones out: changing them re-judges, it does not rebuild), the dry run and `test-suite` all use this list,
so a parameter cannot be known to one and missing from another.  EasyBuild-free.

Every value is checked by type and range before anything runs (from_values): a wrong one would not fail,
it would judge wrongly (a budget of -4 fails every run, a timeout of -5 kills every suite, a string of
excluded tests is split into letters), so it is refused in one line naming the parameter.
"""

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, Mapping, Optional, Tuple, Union

from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.testsuite.policy.judging import (Policy, ScopeContext, excluded_tests, known_failures,
                                                      name_problem)
from eb_pytorch_cuda.testsuite.results.pieces import Piece

DEFAULT_SUITE_TIMEOUT = 3 * 3600  # s a suite may run without a previous time: PyTorch's slowest take under 1 h
TIMEOUT_FACTOR, LEAST_TIMEOUT = 4, 600  # else: 4x its time in the previous results, at least 10 minutes
TIMEOUT_RULE = (f'{TIMEOUT_FACTOR}x its time in the previous results (at least {LEAST_TIMEOUT} s), '
                f'else {DEFAULT_SUITE_TIMEOUT} s; a piece of a split suite its share of that')


def rule_timeout(seconds: float) -> int:
    """TIMEOUT_RULE's timeout of a suite expected to take `seconds`."""
    return max(LEAST_TIMEOUT, int(TIMEOUT_FACTOR * seconds))


def piece_timeouts(timeouts: Mapping[str, float], expected: Mapping[str, float], pieces: Iterable) -> Dict[str, int]:
    """{piece key: seconds} for the pieces (results.pieces.Piece) of split suites: the suite's timeout
    (timeouts: {suite: s, '': s}) times the piece's share of the suite's expected time (expected: {piece
    key: s}, by its tests' times or an equal share), at least LEAST_TIMEOUT, at most the suite's own.  For a
    suite whose timeout came from the rule this is the rule applied to the piece's expected time (4x it);
    an explicit test_suite_timeout is shared out the same way.  Why: a hung piece of a 20-hour suite
    would otherwise hold its job for the whole suite's 80 hours."""
    pieces = [piece for piece in pieces if not piece.whole]
    totals: Dict[tuple, float] = {}
    for piece in pieces:
        totals[piece.suite, piece.count] = totals.get((piece.suite, piece.count), 0.0) + expected.get(piece.key, 0.0)
    found = {}
    for piece in pieces:
        whole = int(timeouts.get(piece.suite, timeouts['']))
        total = totals[piece.suite, piece.count]
        if piece.key not in expected or total <= 0:
            continue
        found[piece.key] = min(whole, max(LEAST_TIMEOUT, int(whole * expected[piece.key] / total)))
    return found


def timeout_of(timeouts: Mapping[str, float]) -> Callable[[str], float]:
    """Each suite's or piece's timeout from {suite or piece key: seconds, '': every other suite}
    (service.suite_timeouts' form, and the Slurm queue spec's, where piece_timeouts adds the pieces): a
    piece's own, else its suite's, else the default; one lookup for the serial step, the spread's reruns and
    every Slurm job."""
    return lambda key: timeouts.get(key, timeouts.get(Piece.parse(key).suite, timeouts['']))


# (name, default, decides how a run is judged or scheduled rather than what is built and tested)
PARAMETERS: Tuple[Tuple[str, Any, bool], ...] = (
    ('max_failed_tests', None, True),  # None: the installed easyblocks' default (eb/ecpolicy)
    # upstream EB_PyTorch's (easybuild-easyblocks #4052): True (any number), False (none) or a count
    ('allow_missing_failures', False, True),  # suites that failed uncountably: see judging.judge
    ('allow_extra_failures', True, True),  # accepted for upstream's easyconfigs; nothing to allow here (judge)
    ('known_test_failures', {}, True),
    ('flaky_failures_consume_budget', False, True),
    ('rerun_failed_tests', 0, True),
    ('excluded_tests', {}, True),  # upstream EB_PyTorch's parameter and default
    ('test_suite_timeout', None, True),
    ('parallel_test_suites', 'auto', True),  # 'auto': from the node (run/node), else a count
    ('test_suite_jobs', 1, True),  # where the suites run, not what is tested: Slurm jobs (testsuite/spread)
    ('cuda_compute_capabilities', (), False),  # EasyBuild's own parameter (and build option)
    # 'auto', True or False: whether the suites run PyTorch's device-generic tests for CUDA (run/devicetests):
    # what is tested, so part of the build fingerprint
    ('cuda_device_tests', 'auto', False),
)
DEFAULTS = {name: default for name, default, _judging in PARAMETERS}  # the easyblock's extra_options read these
NAMES = tuple(name for name, _default, _judging in PARAMETERS)
JUDGING = tuple(name for name, _default, judging in PARAMETERS if judging)  # left out of the build fingerprint


@dataclass(frozen=True)
class TestSettings:
    """Everything the test step needs from an easyconfig (or the test-suite command line)."""

    __test__ = False  # not a pytest test class

    max_failed_tests: Optional[int] = None
    allow_missing_failures: Union[bool, int] = False
    allow_extra_failures: Union[bool, int] = True
    known_test_failures: dict = field(default_factory=dict)
    flaky_failures_consume_budget: bool = False
    rerun_failed_tests: int = 0
    excluded_tests: dict = field(default_factory=dict)
    test_suite_timeout: Optional[int] = None
    parallel_test_suites: Union[int, str] = 'auto'
    test_suite_jobs: int = 1
    cuda_compute_capabilities: tuple = ()
    cuda_device_tests: Union[bool, str] = 'auto'

    @classmethod
    def from_values(cls, values: dict, source: str = 'easyconfig') -> 'TestSettings':
        """From {parameter: value} (missing or None values take the defaults); PluginError naming source and
        the parameter for a value of the wrong type or out of range (see check_values)."""
        check_values(values, source)

        def value(name):
            found = values.get(name)
            return DEFAULTS[name] if found is None else found
        timeout = values.get('test_suite_timeout')
        return cls(max_failed_tests=values.get('max_failed_tests'),
                   allow_missing_failures=value('allow_missing_failures'),
                   allow_extra_failures=value('allow_extra_failures'),
                   known_test_failures=dict(value('known_test_failures')),
                   flaky_failures_consume_budget=bool(value('flaky_failures_consume_budget')),
                   rerun_failed_tests=value('rerun_failed_tests'),
                   excluded_tests=stripped_names(value('excluded_tests')),
                   test_suite_timeout=None if timeout in (None, '') else timeout,
                   parallel_test_suites=value('parallel_test_suites'),
                   test_suite_jobs=value('test_suite_jobs'),
                   cuda_compute_capabilities=tuple(value('cuda_compute_capabilities')),
                   cuda_device_tests=value('cuda_device_tests'))

    def policy(self, context: ScopeContext, default_budget: int = 0, source: str = 'known_test_failures') -> Policy:
        """The failure policy in force in context (default_budget when max_failed_tests is not set)."""
        budget = default_budget if self.max_failed_tests is None else self.max_failed_tests
        return Policy(max_failed_tests=int(budget), known=known_failures(self.known_test_failures, context, source),
                      flaky_consumes_budget=self.flaky_failures_consume_budget,
                      allow_missing_failures=allowance(self.allow_missing_failures))

    def excluded(self, context: ScopeContext) -> list:
        """run_test.py -x suites in force in context."""
        return excluded_tests(self.excluded_tests, context)


# cuda_device_tests: 'auto' (where a GPU is seen and the build has CUDA), True (required: no GPU fails the step),
# False (upstream's: CPU device tests only); checked with `is`: 1 and 0 (== True and False) are typos
CUDA_DEVICE_TEST_MODES = ('auto', True, False)


# {parameter: least value} of the integer parameters
_MINIMUM = {'max_failed_tests': 0, 'rerun_failed_tests': 0, 'test_suite_timeout': 1, 'parallel_test_suites': 1,
            'test_suite_jobs': 1}
# reruns of one failed test: a flaky test passes within a few; 10**6 (a typo, a stray digit) ran until killed
MAX_RERUNS = 10
_MAXIMUM = {'rerun_failed_tests': MAX_RERUNS}
_EVERYWHERE = ScopeContext('', '')  # known_failures checks every entry, whatever scope is in force


def _shown(value) -> str:
    return f'{value!r:.60}'


def is_integer(value: object) -> bool:
    """An int that is not a bool (True is an int to Python, not a count to an easyconfig)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_test_name(text: str) -> bool:
    """True for what run_test.py's -x can take as one test (policy/judging.name_problem)."""
    return name_problem(text) is None


def stripped_names(setting: Mapping[str, Iterable[str]]) -> Dict[str, list]:
    """excluded_tests without the whitespace around each name, which upstream's EB_PyTorch loses when it joins
    them with spaces into `-x ...` (its PyTorch-2.9.1 easyconfigs have 'inductor/test_flex_decoding ')."""
    return {scope: [name.strip() for name in names] for scope, names in setting.items()}


def allowance(value: Union[bool, int]) -> Optional[int]:
    """Upstream's bool-or-count as a count: True is any number (None), False none (0)."""
    if value is True:
        return None
    return 0 if value is False else int(value)


def _range_problem(value, minimum: int, maximum: Optional[int]) -> Optional[str]:
    """'must be an integer >= N[ and <= M], got X' unless value is such an integer; None when it is."""
    if is_integer(value) and value >= minimum and (maximum is None or value <= maximum):
        return None
    upper = '' if maximum is None else f' and <= {maximum}'
    return f'must be an integer >= {minimum}{upper}, got {_shown(value)}'


def check_option(name: str, value: object, minimum: int, maximum: Optional[int] = None) -> None:
    """PluginError naming the option or parameter unless value is None or an integer in [minimum, maximum]."""
    problem = None if value is None else _range_problem(value, minimum, maximum)
    if problem:
        raise PluginError(name, problem)


def _check_scopes(source, name, value, check_items):
    if not isinstance(value, dict):
        raise PluginError(source, f'{name} must be a dict {{scope: [...]}}, got {_shown(value)}')
    for scope, items in value.items():
        if not isinstance(scope, str):
            raise PluginError(source, f'{name}: scope {_shown(scope)} must be a string (\'\' for all)')
        check_items(scope, items)


def check_values(values: dict, source: str = 'easyconfig') -> None:
    """PluginError (source: {parameter} ...) for the first value of values that is of the wrong type or out of
    range; None always stands for the default.  Strings are not converted: '3' in an easyconfig is a typo."""
    def given(name):
        return values.get(name) is not None
    for name, minimum in _MINIMUM.items():
        found = values.get(name)
        if name == 'parallel_test_suites' and found == 'auto':
            continue  # from the node (run/node)
        if name == 'test_suite_timeout' and found == '':
            continue  # the easyblocks' own way of leaving it unset
        problem = None if found is None else _range_problem(found, minimum, _MAXIMUM.get(name))
        if problem:
            raise PluginError(source, f'{name} {problem}')
    for name in ('allow_missing_failures', 'allow_extra_failures'):
        found = values.get(name)
        if found is not None and not (isinstance(found, bool) or (is_integer(found) and found >= 0)):
            raise PluginError(source, f'{name} must be True, False or an integer >= 0, got {_shown(found)}')
    if given('flaky_failures_consume_budget') and not isinstance(values['flaky_failures_consume_budget'], bool):
        raise PluginError(source, f"flaky_failures_consume_budget must be True or False, got "
                                  f"{_shown(values['flaky_failures_consume_budget'])}")

    def excluded_items(scope, items):
        if not isinstance(items, (list, tuple)) or not all(isinstance(t, str) and t.strip() for t in items):
            raise PluginError(source, f'excluded_tests: scope {scope!r} must map to a list of test files such as '
                                      f"['test_x'], got {_shown(items)}")
        for item in items:  # each becomes one argument after run_test.py's -x
            problem = name_problem(item.strip())  # upstream joins them with spaces: whitespace around is lost
            if problem:
                raise PluginError(source, f'excluded_tests: {_shown(item)} in scope {scope!r} is not a test name '
                                          f"({problem}; one run_test.py test file such as 'test_nn' or "
                                          f"'distributed/test_c10d')")
    if given('excluded_tests'):
        _check_scopes(source, 'excluded_tests', values['excluded_tests'], excluded_items)
    if given('known_test_failures'):
        _check_scopes(source, 'known_test_failures', values['known_test_failures'], lambda scope, items: None)
        try:
            known_failures(values['known_test_failures'], _EVERYWHERE, source)
        except PluginError as err:
            raise PluginError(source, f'known_test_failures: {err.problem}') from None
    capabilities = values.get('cuda_compute_capabilities')
    if capabilities is not None and (not isinstance(capabilities, (list, tuple))
                                     or not all(isinstance(c, str) and c.strip() for c in capabilities)):
        raise PluginError(source, f"cuda_compute_capabilities must be a list of strings such as ['8.0', '9.0'], "
                                  f'got {_shown(capabilities)}')
    device_tests = values.get('cuda_device_tests')
    if device_tests is not None and not (device_tests is True or device_tests is False or device_tests == 'auto'):
        raise PluginError(source, f"cuda_device_tests must be 'auto', True or False, got {_shown(device_tests)}")
