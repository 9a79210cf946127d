"""Bad easyconfig test parameters and test-suite options: refused in one line naming the parameter, before
anything runs, never a wrong verdict; an easyconfig that exits or raises is bad input (exit 2), never a verdict.

The easyconfigs are read by real EasyBuild (easybuild-framework's EasyConfigParser, as `eb` reads them).
"""

import json
import os
import shutil

import pytest

from conftest import cli
from eb_pytorch_cuda import standins
from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.testsuite.policy import settings

HEADER = ("easyblock = 'PyTorch'\nname = 'PyTorch'\nversion = '2.1.2'\nhomepage = 'x'\ndescription = 'x'\n"
          "toolchain = SYSTEM\n")

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
    ("excluded_tests = {'': 'test_slow'}", "excluded_tests: scope '' must map to a list of test files"),
    ("excluded_tests = ['test_slow']", "excluded_tests must be a dict {scope: [...]}, got ['test_slow']"),
    ("excluded_tests = {8.0: ['test_slow']}", 'excluded_tests: scope 8.0 must be a string'),
    ("excluded_tests = {'': ['test_a test_b']}", "excluded_tests: 'test_a test_b' in scope '' is not a test name"),
    ("excluded_tests = {'': ['--help']}", "excluded_tests: '--help' in scope '' is not a test name"),  # was: -x --help
    ("excluded_tests = {'': ['test_a\\x1b[2J']}", "excluded_tests: 'test_a\\x1b[2J' in scope '' is not a test"),
    ("cuda_compute_capabilities = '8.0'", "cuda_compute_capabilities must be a list of strings such as ['8.0', "
                                          "'9.0'], got '8.0'"),
    ('cuda_compute_capabilities = [8.0]', 'cuda_compute_capabilities must be a list of strings'),
    ('known_test_failures = 5', 'known_test_failures must be a dict {scope: [...]}, got 5'),
    ("known_test_failures = {'': [('test_x',)]}", "known_test_failures: entry ('test_x',) in scope '' is not "
                                                  "(test, reason[, max])"),
    ("known_test_failures = {'': 'test_x'}", "known_test_failures: scope '' must map to a list"),
]


def _easyconfig(directory, line):
    path = directory / 'PyTorch-2.1.2.eb'
    path.write_text(HEADER + line + '\n')
    return path


def _one_line_error(done, *parts):
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stdout == ''
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    for part in parts:
        assert str(part) in lines[0], lines[0]
    assert 'Traceback' not in done.stderr


def _saved_pass(directory):
    path = directory / 'saved.json'
    path.write_text(json.dumps({'format': 'eb-pytorch-cuda-test-results',
                                'suites': [{'name': 'test_nn', 'status': 'passed', 'counts': {'passed': 3}}]}))
    return path


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


@pytest.mark.parametrize('line,problem', BAD_VALUES)
def test_report_with_a_bad_easyconfig_value_is_bad_input_not_a_verdict(tmp_path, line, problem):
    easyconfig = _easyconfig(tmp_path, line)
    done = cli('report', _saved_pass(tmp_path), '--easyconfig', easyconfig)
    _one_line_error(done, easyconfig, problem)


@pytest.mark.parametrize('body,problem', [
    ('import sys\nsys.exit(0)', 'it called sys.exit(0)'),  # was: exit 0, no output (a PASS to a script)
    ('import sys\nsys.exit("bye\\nnow")', "it called sys.exit('bye\\nnow')"),
    ('raise SystemExit(1)', 'it called sys.exit(1)'),
    ('raise RuntimeError("from the\\neasyconfig")', 'from the'),  # (EasyBuild 4 shows it as a repr)
    ('class Odd(BaseException):\n    pass\nraise Odd()', 'Odd'),
    ('raise KeyboardInterrupt', 'it raised KeyboardInterrupt'),  # was: "interrupted (SIGINT)", exit 130
    # no handler sees these: each ended the reading process itself (was: exit 0 and nothing printed, a PASS)
    ('import os\nos._exit(0)', 'the process reading it ended with exit status 0 before it was read whole'),
    ('import os\nos._exit(1)', 'the process reading it ended with exit status 1 before it was read whole'),
    ('import os, signal\nos.kill(os.getpid(), signal.SIGKILL)', 'the process reading it was killed by SIGKILL'),
    ('import os, signal\nos.kill(os.getpid(), signal.SIGINT)', 'the process reading it was killed by SIGINT'),
    ('print("max_failed_tests = 0")\nimport sys\nsys.stdout.flush()\nimport os\nos._exit(0)', 'exit status 0'),
])
def test_an_easyconfig_that_exits_or_raises_is_bad_input(tmp_path, body, problem):
    easyconfig = _easyconfig(tmp_path, body)
    done = cli('report', _saved_pass(tmp_path), '--easyconfig', easyconfig)
    _one_line_error(done, easyconfig, 'is not a readable easyconfig', problem)


def test_values_read_in_the_child_arrive_as_written(tmp_path):
    """ecread sends repr()s: int keys, tuples and nested dicts come back exactly (the judging reads them)."""
    from eb_pytorch_cuda.eb.ecpolicy import read_easyconfig
    easyconfig = _easyconfig(tmp_path, "known_test_failures = {'8.0': [('test_b', 'why\\n', 2)]}\n"
                                       "excluded_tests = {'': ('test_a',)}\nrerun_failed_tests = 10\n"
                                       "print('noise')")
    assert read_easyconfig(str(easyconfig)) == {'known_test_failures': {'8.0': [('test_b', 'why\n', 2)]},
                                                'excluded_tests': {'': ('test_a',)}, 'rerun_failed_tests': 10}


def test_test_suite_with_an_easyconfig_that_exits_runs_nothing(tmp_path, source):
    results = tmp_path / 'results'
    easyconfig = _easyconfig(tmp_path, 'import os\nos._exit(0)')
    done = cli('test-suite', source, '--python', shutil.which('python3'), '--results', results,
               '--easyconfig', easyconfig)
    _one_line_error(done, easyconfig, 'exit status 0 before it was read whole')
    assert not results.exists()


@pytest.fixture
def source(tmp_path):
    tree = tmp_path / 'src'
    shutil.copytree(os.path.join(standins.TORCH_SOURCES, 'test'), tree / 'test')
    for name in os.listdir(tree / 'test'):  # one quick suite: a refused option must not run any, a bug would
        if name.startswith('test_') and name != 'test_known_failure.py':
            os.unlink(tree / 'test' / name)
    return tree


@pytest.mark.parametrize('option,value,minimum', [('--timeout', '-1', 1), ('--timeout', '0', 1),
                                                  ('--parallel', '0', 1), ('--rerun', '-2', 0), ('--jobs', '-1', 1),
                                                  ('--rerun', '100000', 0), ('--rerun', '11', 0)])
def test_test_suite_refuses_an_option_out_of_range_before_running_anything(tmp_path, source, option, value,
                                                                           minimum):
    results = tmp_path / 'results'
    done = cli('test-suite', source, '--python', shutil.which('python3'), '--results', results, option, value)
    upper = ' and <= 10' if option == '--rerun' else ''  # (settings.MAX_RERUNS)
    _one_line_error(done, option, f'must be an integer >= {minimum}{upper}, got {value}')
    assert not results.exists()  # nothing ran, nothing was written


@pytest.mark.parametrize('line,problem', [BAD_VALUES[3], BAD_VALUES[9], BAD_VALUES[12]])
def test_test_suite_refuses_a_bad_easyconfig_value_before_running_anything(tmp_path, source, line, problem):
    results = tmp_path / 'results'
    easyconfig = _easyconfig(tmp_path, line)
    done = cli('test-suite', source, '--python', shutil.which('python3'), '--results', results,
               '--easyconfig', easyconfig)
    _one_line_error(done, easyconfig, problem)
    assert not results.exists()


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


def test_a_missing_easyconfig_is_no_such_file_for_report_and_test_suite(tmp_path, source):
    missing = tmp_path / 'PyTorch-missing.eb'  # EasyBuild's parser says "Failed to determine get function"
    _one_line_error(cli('report', _saved_pass(tmp_path), '--easyconfig', missing), missing, 'no such file')
    results = tmp_path / 'results'
    done = cli('test-suite', source, '--python', shutil.which('python3'), '--results', results, '--easyconfig',
               missing)
    _one_line_error(done, missing, 'no such file')
    assert not results.exists()
