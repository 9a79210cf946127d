"""The test parameters' one reader (testsuite/policy/settings): each bad value refused naming the parameter,
good values and the defaults accepted unchanged, and the easyblock's parameters are its list.  In this
process (the easyconfig forms, read by a child Python through `report` and `test-suite`, are
test_test_parameters', a tier that starts processes)."""

import pytest

from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.testsuite.policy import settings

# (parameter = value, what the one-line error must say); each was a wrong verdict or a traceback before
BAD_VALUES = [
    ('max_failed_tests = -4', 'max_failed_tests must be an integer >= 0, got -4'),
    ("max_failed_tests = 'three'", "max_failed_tests must be an integer >= 0, got 'three'"),
    ('max_failed_tests = True', 'max_failed_tests must be an integer >= 0, got True'),
    ('test_suite_timeout = -5', 'test_suite_timeout must be an integer >= 1, got -5'),
    ('test_suite_timeout = 0', 'test_suite_timeout must be an integer >= 1, got 0'),
    ('rerun_failed_tests = -1', 'rerun_failed_tests must be an integer >= 0 and <= 10, got -1'),
    ('rerun_failed_tests = 10**6', 'rerun_failed_tests must be an integer >= 0 and <= 10, got 1000000'),  # ran on
    ("rerun_failed_tests = float('inf')", 'rerun_failed_tests must be a plain value'),
    ('parallel_test_suites = 0', 'parallel_test_suites must be an integer >= 1, got 0'),
    ('test_suite_jobs = 2.5', 'test_suite_jobs must be an integer >= 1, got 2.5'),
    ("flaky_failures_consume_budget = 'no'", "flaky_failures_consume_budget must be True or False, got 'no'"),
    ('harness_retries = 1', 'harness_retries must be True or False, got 1'),  # 1 == True: a typo, not a switch
    ("excluded_tests = {'': 'test_slow'}", "excluded_tests: scope '' must map to a list of test files"),
    ("excluded_tests = ['test_slow']", "excluded_tests must be a dict {scope: [...]}, got ['test_slow']"),
    ("excluded_tests = {8.0: ['test_slow']}", 'excluded_tests: scope 8.0 must be a string'),
    ("excluded_tests = {'': ['test_a test_b']}", "excluded_tests: 'test_a test_b' in scope '' is not a test name"),
    ("excluded_tests = {'': ['--help']}", "excluded_tests: '--help' in scope '' is not a test name"),  # was: -x --help
    ("excluded_tests = {'': ['test_a\\x1b[2J']}", "excluded_tests: 'test_a\\x1b[2J' in scope '' is not a test"),
    ("excluded_tests = {'': ['test_x.py']}", "excluded_tests: 'test_x.py' in scope '' is not a test name (a file"),
    ("excluded_tests = {'': ['../x']}", "excluded_tests: '../x' in scope '' is not a test name (a path outside"),
    ("excluded_tests = {'': ['/etc/passwd']}", "excluded_tests: '/etc/passwd' in scope '' is not a test name (a path"),
    ("excluded_tests = {'': ['test_*']}", "excluded_tests: 'test_*' in scope '' is not a test name (a glob"),
    ("excluded_tests = {'': ['test_x;id']}", "excluded_tests: 'test_x;id' in scope '' is not a test name (letters"),
    ("known_test_failures = {'': [('test_x.py::T.t', 'why')]}", "known_test_failures: entry ('test_x.py::T.t', "
                                                                "'why') in scope '': 'test_x.py' is not a test file"),
    ("known_test_failures = {'': [('/etc/passwd', 'why')]}", "'/etc/passwd' is not a test file (a path outside"),
    ("cuda_compute_capabilities = '8.0'", "cuda_compute_capabilities must be a list of strings such as ['8.0', "
                                          "'9.0'], got '8.0'"),
    ('cuda_compute_capabilities = [8.0]', 'cuda_compute_capabilities must be a list of strings'),
    ('known_test_failures = 5', 'known_test_failures must be a dict {scope: [...]}, got 5'),
    ("known_test_failures = {'': [('test_x',)]}", "known_test_failures: entry ('test_x',) in scope '' is not "
                                                  "(test, reason[, max])"),
    ("known_test_failures = {'': 'test_x'}", "known_test_failures: scope '' must map to a list"),
]


@pytest.mark.parametrize('line,problem', [value for value in BAD_VALUES if 'plain value' not in value[1]])
def test_each_bad_value_is_refused_by_the_settings_naming_the_parameter(line, problem):
    name, _, text = line.partition(' = ')
    with pytest.raises(PluginError) as caught:
        settings.TestSettings.from_values({name: eval(text)}, 'my.eb')  # noqa: S307 - our own literals
    assert str(caught.value).startswith('my.eb: ') and problem in str(caught.value)


def test_good_values_and_defaults_are_accepted_unchanged():
    read = settings.TestSettings.from_values({
        'max_failed_tests': 0, 'test_suite_timeout': '', 'excluded_tests': {'': ('test_a',)},
        'cuda_compute_capabilities': ['8.0', '9.0a'], 'known_test_failures': {'8.0': [('test_b', 'why', 2)]},
        'flaky_failures_consume_budget': None, 'parallel_test_suites': None})
    assert (read.max_failed_tests, read.test_suite_timeout, read.cuda_compute_capabilities,
            read.parallel_test_suites) == (0, None, ('8.0', '9.0a'), 'auto')  # 'auto': from the node (run/node)


def test_the_easyblocks_parameters_are_the_settings_list_with_its_defaults():
    """Names and defaults of the test parameters come from one list (settings.PARAMETERS): the easyblock's
    extra_options (loaded in the real EasyBuild of this venv) and the settings reader agree on both."""
    import importlib.util
    from pathlib import Path
    from easybuild.framework.easyconfig.default import DEFAULT_CONFIG
    path = Path(__file__).resolve().parent.parent / 'easybuild' / 'easyblocks' / 'p' / 'pytorch.py'
    spec = importlib.util.spec_from_file_location('eb_pytorch_cuda_easyblock_under_test', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    extra = module.EB_PyTorch.extra_options()
    upstream = module.UpstreamPyTorch.extra_options()
    defaults = settings.TestSettings.from_values({})
    for name, default, _judging in settings.PARAMETERS:
        assert name in extra or name in DEFAULT_CONFIG, name  # an easyconfig can set it
        if name in module._OUR_TEST_PARAMETERS:
            assert extra[name][0] == default, name
        elif name in upstream:  # upstream's parameter: None here stands for upstream's own default
            assert default is None or default == upstream[name][0], name
        value = getattr(defaults, name)
        assert value == (default if not isinstance(default, tuple) else tuple(default)), name
    assert set(module._OUR_TEST_PARAMETERS) <= set(settings.NAMES)


def test_whitespace_around_a_test_name_is_dropped_as_upstreams_join_drops_it():
    """Upstream's PyTorch-2.9.1 easyconfigs exclude 'inductor/test_flex_decoding ' (its easyblock joins the names
    with spaces into -x); names that can be test files are kept whether or not this tree has them (the test step
    knows the tree: run/discovery), globs stay allowed in known_test_failures."""
    read = settings.TestSettings.from_values({
        'excluded_tests': {'': ['inductor/test_flex_decoding ', ' test_\u00f1', 'cpp/c10-test'], '8.0': ('test_a',)},
        'known_test_failures': {'': [(' dist*/test_c10d_*::Test.test_[ab] ', 'why')]}}, 'my.eb')
    assert read.excluded_tests == {'': ['inductor/test_flex_decoding', 'test_\u00f1', 'cpp/c10-test'],
                                   '8.0': ['test_a']}
    assert read.excluded(settings.ScopeContext('x86_64', 'x86_64/generic')) == \
        ['inductor/test_flex_decoding', 'test_\u00f1', 'cpp/c10-test']
    known = read.policy(settings.ScopeContext('x86_64', 'x86_64/generic')).known
    assert [entry.pattern for entry in known] == ['dist*/test_c10d_*::Test.test_[ab]']
