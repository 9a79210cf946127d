"""The test step's settings: one list of parameters, one object built from plain values.

The easyconfig reader (eb/ecpolicy), the build fingerprint (service.build_fingerprint leaves the judging
ones out: changing them re-judges, it does not rebuild), the dry run and `test-suite` all use this list,
so a parameter cannot be known to one and missing from another.  EasyBuild-free.

Every value is checked by type and range before anything runs (from_values): a wrong one would not fail,
it would judge wrongly (a budget of -4 fails every run, a timeout of -5 kills every suite, a string of
excluded tests is split into letters), so it is refused in one line naming the parameter.

What they became where a run was judged (JudgedTerms: the budget, the known failures in force, ...) goes into the
run's results JSON, and `report` judges that JSON again by them (terms_of reads them back, checked the same way).
"""

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, Mapping, NoReturn, Optional, Tuple, Union

from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.testsuite.policy.judging import KnownFailure, Policy, excluded_tests, known_failures, name_problem
from eb_pytorch_cuda.testsuite.results.pieces import Piece
from eb_pytorch_cuda.testsuite.results.scopes import Scope, ScopeContext

DEFAULT_SUITE_TIMEOUT = 3 * 3600  # s a suite may run without a previous time: PyTorch's slowest take under 1 h
TIMEOUT_FACTOR, LEAST_TIMEOUT = 4, 600  # else: 4x its time in the previous results, at least 10 minutes
TIMEOUT_RULE = (f'{TIMEOUT_FACTOR}x its time in the previous results (at least {LEAST_TIMEOUT} s), '
                f'else {DEFAULT_SUITE_TIMEOUT} s; a piece of a split suite its share of that')


# s between two heartbeat lines of a running step (run/heartbeat): a suite may run an hour with nothing printed
DEFAULT_HEARTBEAT = 300


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
    # False: the harness's own retries are off, rerun_failed_tests is the only one (run/retries); True: kept
    ('harness_retries', False, True),
    ('excluded_tests', {}, True),  # upstream EB_PyTorch's parameter and default
    ('test_suite_timeout', None, True),
    ('parallel_test_suites', 'auto', True),  # 'auto': from the node (run/node), else a count
    ('test_suite_jobs', 1, True),  # where the suites run, not what is tested: Slurm jobs (testsuite/spread)
    # where the suites run: 'auto' (Slurm where test_suite_jobs > 1, else here), or an executor's name
    ('test_suite_executor', 'auto', True),
    ('test_suite_heartbeat', DEFAULT_HEARTBEAT, True),  # s between the step's heartbeat lines (run/heartbeat)
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
    harness_retries: bool = False
    excluded_tests: dict = field(default_factory=dict)
    test_suite_timeout: Optional[int] = None
    parallel_test_suites: Union[int, str] = 'auto'
    test_suite_jobs: int = 1
    test_suite_executor: str = 'auto'
    test_suite_heartbeat: int = DEFAULT_HEARTBEAT
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
                   known_test_failures=scoped(value('known_test_failures')),
                   flaky_failures_consume_budget=bool(value('flaky_failures_consume_budget')),
                   rerun_failed_tests=value('rerun_failed_tests'),
                   harness_retries=value('harness_retries'),
                   excluded_tests=scoped(stripped_names(value('excluded_tests'))),
                   test_suite_timeout=None if timeout in (None, '') else timeout,
                   parallel_test_suites=value('parallel_test_suites'),
                   test_suite_jobs=value('test_suite_jobs'),
                   test_suite_executor=value('test_suite_executor'),
                   test_suite_heartbeat=value('test_suite_heartbeat'),
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
            'test_suite_jobs': 1, 'test_suite_heartbeat': 1}
# reruns of one failed test: a flaky test passes within a few; 10**6 (a typo, a stray digit) ran until killed
MAX_RERUNS = 10
_MAXIMUM = {'rerun_failed_tests': MAX_RERUNS}
# test_suite_executor's values: 'auto' and the executors' names (service.EXECUTORS has one entry for each)
EXECUTORS = ('auto', 'here', 'slurm')
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


def scoped(setting: Mapping[str, Any]) -> Dict[Scope, Any]:
    """A checked {scope: [...]} setting (check_values) with its scopes parsed once: the judge asks each Scope
    where it applies."""
    return {Scope.parse(scope): items for scope, items in setting.items()}


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
        try:
            Scope.parse(scope, source)
        except PluginError as err:
            raise PluginError(source, f'{name}: {err.problem}') from None
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
    for name in ('flaky_failures_consume_budget', 'harness_retries'):
        if given(name) and not isinstance(values[name], bool):
            raise PluginError(source, f'{name} must be True or False, got {_shown(values[name])}')

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
    executor = values.get('test_suite_executor')
    if executor is not None and executor not in EXECUTORS:
        raise PluginError(source, f"test_suite_executor must be one of {', '.join(map(repr, EXECUTORS))}, got "
                                  f"{_shown(executor)}")
    if executor == 'here' and given('test_suite_jobs') and values['test_suite_jobs'] != 1:
        raise PluginError(source, f"test_suite_jobs = {_shown(values['test_suite_jobs'])} is the Slurm executor's "
                                  f"option: with test_suite_executor = 'here' the suites run on this node")
    device_tests = values.get('cuda_device_tests')
    if device_tests is not None and not (device_tests is True or device_tests is False or device_tests == 'auto'):
        raise PluginError(source, f"cuda_device_tests must be 'auto', True or False, got {_shown(device_tests)}")


# --- the terms a run was judged by, as its results JSON carries them (key TERMS_KEY): `report` on that JSON
# judges it again by the same terms instead of by the defaults of the machine it runs on.
#
# What is carried: the budget (max_failed_tests as applied: the easyconfig's, else the installed easyblocks'
# default), the known failures in force with their scopes (already resolved for where the run ran: a report made
# elsewhere applies the same entries, whatever its own target), whether flaky failures consume the budget, the
# allowance of suites that cannot be judged (allow_missing_failures), and, as the record of what ran, the excluded
# tests, the reruns and the CUDA device tests' mode.  The last three are null where they are not known (a kept run
# re-judged: the settings in force now need not be the ones it ran with; a report made from logs).
#
# A JSON document without the key (written before the key existed, or by hand) is judged as before: by the
# command line's or an easyconfig's policy, else the defaults.

TERMS_KEY = 'terms'
_KEYS = ('max_failed_tests', 'known_test_failures', 'flaky_failures_consume_budget', 'allow_missing_failures',
         'excluded_tests', 'rerun_failed_tests', 'cuda_device_tests')
_ENTRY_KEYS = ('test', 'reason', 'scope', 'max')
_DEVICE_KEYS = ('requested', 'enabled', 'gpus', 'reason')


@dataclass(frozen=True)
class DeviceTerms:
    """The CUDA device tests' mode the suites ran in (run/devicetests.DeviceTestMode, as plain values): requested
    True fails a run that saw a GPU and ran 0 CUDA tests, so a re-judging must know it."""
    requested: Any  # 'auto', True or False
    enabled: bool
    gpus: Tuple[str, ...]
    reason: str


@dataclass(frozen=True)
class JudgedTerms:
    """The policy a run was judged by, and what ran (None: not known)."""
    max_failed_tests: int
    known: Tuple[KnownFailure, ...]
    flaky_failures_consume_budget: bool = False
    allow_missing_failures: Optional[int] = 0  # None: any number (upstream's True)
    excluded_tests: Optional[Tuple[str, ...]] = None
    rerun_failed_tests: Optional[int] = None
    device_tests: Optional[DeviceTerms] = None

    @classmethod
    def of(cls, policy: Policy, excluded: Optional[Tuple[str, ...]] = None, reruns: Optional[int] = None,
           device_tests: Optional[DeviceTerms] = None) -> 'JudgedTerms':
        """The terms of a run judged by policy (the entries in force, scopes resolved), and what ran."""
        return cls(int(policy.max_failed_tests), tuple(policy.known), bool(policy.flaky_consumes_budget),
                   policy.allow_missing_failures, None if excluded is None else tuple(excluded), reruns, device_tests)

    def policy(self, max_failed_tests: Optional[int] = None) -> Policy:
        """The Policy to judge by again (max_failed_tests: another budget, as `report --max-failed-tests` gives)."""
        budget = self.max_failed_tests if max_failed_tests is None else max_failed_tests
        return Policy(budget, list(self.known), self.flaky_failures_consume_budget, self.allow_missing_failures)

    def describe(self, max_failed_tests: Optional[int] = None) -> str:
        """'budget 0, 1 known failure' (and what else differs from the defaults), for report's terms line."""
        return describe_policy(self.policy(max_failed_tests))

    def to_dict(self) -> dict:
        """The JSON form (TERMS_KEY's value); terms_of reads it back."""
        device = self.device_tests
        return {'max_failed_tests': self.max_failed_tests,
                'known_test_failures': [{'test': e.pattern, 'reason': e.reason, 'scope': e.scope, 'max': e.limit}
                                        for e in self.known],
                'flaky_failures_consume_budget': self.flaky_failures_consume_budget,
                'allow_missing_failures': True if self.allow_missing_failures is None else self.allow_missing_failures,
                'excluded_tests': None if self.excluded_tests is None else list(self.excluded_tests),
                'rerun_failed_tests': self.rerun_failed_tests,
                'cuda_device_tests': None if device is None else {
                    'requested': device.requested, 'enabled': device.enabled, 'gpus': list(device.gpus),
                    'reason': device.reason}}


def describe_policy(policy: Policy) -> str:
    """'budget 0, 1 known failure', with flaky_failures_consume_budget and allow_missing_failures where they are
    not the defaults."""
    count = len(policy.known)
    parts = [f'budget {policy.max_failed_tests}', f"{count or 'no'} known failure{'' if count == 1 else 's'}"]
    if policy.flaky_consumes_budget:
        parts.append('flaky failures consume the budget')
    if policy.allow_missing_failures != 0:
        allowed = policy.allow_missing_failures
        parts.append(f"allow_missing_failures {'True' if allowed is None else allowed}")
    return ', '.join(parts)


def _refuse_term(path: str, key: str, problem: str) -> NoReturn:
    raise PluginError(path, f'{TERMS_KEY}.{key}: {problem}')


def _text(path: str, key: str, value: object, empty: bool = False) -> str:
    if not isinstance(value, str) or not (value or empty):
        _refuse_term(path, key, f"must be a {'' if empty else 'non-empty '}string, got {value!r:.60}")
    return str(value)


def _entry(path: str, key: str, item: object) -> KnownFailure:
    if not isinstance(item, dict) or set(item) != set(_ENTRY_KEYS):
        _refuse_term(path, key, f"must be an object of {', '.join(_ENTRY_KEYS)}, got {item!r:.60}")
    assert isinstance(item, dict)
    limit = item['max']
    if limit is not None and not (is_integer(limit) and limit >= 1):
        _refuse_term(path, f'{key}.max', f'must be null or an integer >= 1, got {limit!r:.60}')
    return KnownFailure(_text(path, f'{key}.test', item['test']), _text(path, f'{key}.reason', item['reason']),
                        _text(path, f'{key}.scope', item['scope'], empty=True), limit)


def _device(path: str, value: object) -> Optional[DeviceTerms]:
    key = 'cuda_device_tests'
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) != set(_DEVICE_KEYS):
        _refuse_term(path, key, f"must be null or an object of {', '.join(_DEVICE_KEYS)}, got {value!r:.60}")
    assert isinstance(value, dict)
    if not (value['requested'] is True or value['requested'] is False or value['requested'] == 'auto'):
        _refuse_term(path, f'{key}.requested', f"must be 'auto', true or false, got {value['requested']!r:.60}")
    if not isinstance(value['enabled'], bool):
        _refuse_term(path, f'{key}.enabled', f"must be true or false, got {value['enabled']!r:.60}")
    gpus = value['gpus']
    if not isinstance(gpus, list) or not all(isinstance(g, str) and g for g in gpus):
        _refuse_term(path, f'{key}.gpus', f'must be a list of strings, got {gpus!r:.60}')
    return DeviceTerms(value['requested'], value['enabled'], tuple(gpus),
                       _text(path, f'{key}.reason', value['reason'], empty=True))


def terms_of(path: str, document: Mapping[str, Any]) -> Optional[JudgedTerms]:
    """The terms a saved results document (results/saved.read_saved) carries, None where it carries none;
    PluginError (path: terms.<key>: problem) for a value of the wrong type or out of range: a budget of '3' or
    -1, an entry without its reason, judged as written, would be another verdict than the build's."""
    if TERMS_KEY not in document:
        return None
    data = document[TERMS_KEY]
    if not isinstance(data, dict):
        raise PluginError(path, f'{TERMS_KEY}: must be an object, got {data!r:.60}')
    unknown, missing = set(data) - set(_KEYS), [key for key in _KEYS if key not in data]
    if unknown or missing:
        key = sorted(unknown)[0] if unknown else missing[0]
        _refuse_term(path, key, 'is not a key of the terms' if unknown else 'is missing')
    if not (is_integer(data['max_failed_tests']) and data['max_failed_tests'] >= 0):
        _refuse_term(path, 'max_failed_tests', f"must be an integer >= 0, got {data['max_failed_tests']!r:.60}")
    known = data['known_test_failures']
    if not isinstance(known, list):
        _refuse_term(path, 'known_test_failures', f'must be a list, got {known!r:.60}')
    entries = tuple(_entry(path, f'known_test_failures[{n}]', item) for n, item in enumerate(known))
    if not isinstance(data['flaky_failures_consume_budget'], bool):
        _refuse_term(path, 'flaky_failures_consume_budget',
                     f"must be true or false, got {data['flaky_failures_consume_budget']!r:.60}")
    allowed = data['allow_missing_failures']
    if not (allowed is True or (is_integer(allowed) and allowed >= 0)):
        _refuse_term(path, 'allow_missing_failures', f'must be true or an integer >= 0, got {allowed!r:.60}')
    excluded = data['excluded_tests']
    if excluded is not None and (not isinstance(excluded, list) or not all(isinstance(t, str) and t
                                                                           for t in excluded)):
        _refuse_term(path, 'excluded_tests', f'must be null or a list of test names, got {excluded!r:.60}')
    reruns = data['rerun_failed_tests']
    if reruns is not None and not (is_integer(reruns) and reruns >= 0):
        _refuse_term(path, 'rerun_failed_tests', f'must be null or an integer >= 0, got {reruns!r:.60}')
    return JudgedTerms(data['max_failed_tests'], entries, data['flaky_failures_consume_budget'],
                       None if allowed is True else allowed, None if excluded is None else tuple(excluded), reruns,
                       _device(path, data['cuda_device_tests']))
