"""The `unit` tier stays pure: no module of it imports what starts a process, starts the
console script, or makes a stand-in executable.  Read from the files (ast), so a test skipped on this machine
is checked too; tests/conftest.py's audit hook fails a unit test that starts a process at run time.

setup.cfg calls the tier "pure Python, seconds": the command's main() runs in the test's process
(tests/helpers.run_main), and a stand-in nvidia-smi belongs to real_tools.
"""

import ast
import os
import tomllib

import pytest

from conftest import TIER_OF_MODULE, UNIT_MODULES

TESTS = os.path.dirname(os.path.abspath(__file__))
# modules whose import is a way to start a process
PROCESS_MODULES = {'subprocess', 'multiprocessing', 'pty', 'asyncio.subprocess'}
PROCESS_NAMES = {'ProcessPoolExecutor', 'create_subprocess_exec', 'create_subprocess_shell'}
# os functions that start one
OS_STARTERS = {'fork', 'forkpty', 'system', 'popen', 'posix_spawn', 'posix_spawnp', 'startfile',
               'execl', 'execle', 'execlp', 'execlpe', 'execv', 'execve', 'execvp', 'execvpe',
               'spawnl', 'spawnle', 'spawnlp', 'spawnlpe', 'spawnv', 'spawnve', 'spawnvp', 'spawnvpe'}


def _console_script():
    """The console script's name, as pyproject.toml installs it."""
    with open(os.path.join(os.path.dirname(TESTS), 'pyproject.toml'), 'rb') as handle:
        return next(iter(tomllib.load(handle)['project']['scripts']))


CONSOLE_SCRIPT = _console_script()
SHARED = ('helpers', 'conftest')  # the shared test modules whose functions may start one


def _source(module):
    with open(os.path.join(TESTS, f'{module}.py'), encoding='utf-8') as handle:
        return handle.read()


def _starters_of(source):
    """Names of the top-level functions of source that start a process, directly or through one another."""
    tree = ast.parse(source)
    functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    starting = {name for name, node in functions.items() if _problems(node, set(), imports=False)}
    while True:
        more = {name for name, node in functions.items() if name not in starting
                and any(isinstance(n, ast.Name) and n.id in starting for n in ast.walk(node))}
        if not more:
            return starting
        starting |= more


def _problems(tree, starters, imports=True):
    """What in tree starts a process: (line, what) for each import, call or constant that does."""
    found = []
    for node in ast.walk(tree):
        line = getattr(node, 'lineno', 0)
        if isinstance(node, ast.Import):
            found += [(line, f'import {a.name}') for a in node.names
                      if a.name in PROCESS_MODULES or a.name.split('.')[0] in PROCESS_MODULES]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ''
            names = {a.name for a in node.names}
            if module in PROCESS_MODULES or module.split('.')[0] in PROCESS_MODULES:
                found.append((line, f'from {module} import'))
            if module == 'os' and names & OS_STARTERS:
                found.append((line, f'from os import {sorted(names & OS_STARTERS)}'))
            if names & PROCESS_NAMES:
                found.append((line, f'from {module} import {sorted(names & PROCESS_NAMES)}'))
            if module in SHARED and names & starters:
                found.append((line, f'from {module} import {sorted(names & starters)}: it starts a process'))
        elif isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id in PROCESS_MODULES:
                found.append((line, f'{node.value.id}.{node.attr}'))
            elif isinstance(node.value, ast.Name) and node.value.id == 'os' and node.attr in OS_STARTERS:
                found.append((line, f'os.{node.attr}'))
            elif node.attr in PROCESS_NAMES:
                found.append((line, node.attr))
        elif isinstance(node, ast.Constant) and node.value == CONSOLE_SCRIPT:
            found.append((line, f'{CONSOLE_SCRIPT!r}: the console script'))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == 'chmod':
            modes = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, int)]
            if any(mode & 0o111 for mode in modes):
                found.append((line, 'an executable made (a stand-in program to run)'))
    if not imports:
        found = [item for item in found if not item[1].startswith(('import ', 'from '))]
    return sorted(found)


def _starters():
    return set().union(*(_starters_of(_source(name)) for name in SHARED))


def test_the_tiers_name_each_module_once():
    assert not UNIT_MODULES & set(TIER_OF_MODULE), UNIT_MODULES & set(TIER_OF_MODULE)
    on_disk = {name[:-3] for name in os.listdir(TESTS) if name.startswith('test_') and name.endswith('.py')}
    assert UNIT_MODULES <= on_disk, UNIT_MODULES - on_disk  # a renamed module leaves no stale name


@pytest.mark.parametrize('module', sorted(UNIT_MODULES))
def test_a_unit_module_starts_no_process(module):
    problems = _problems(ast.parse(_source(module)), _starters())
    assert not problems, f'tests/{module}.py is in the unit tier but: ' + '; '.join(
        f'line {line}: {what}' for line, what in problems)


def test_the_shared_process_starters_are_found():
    """The check knows the shared helpers that start a process (else importing one would pass unseen)."""
    assert {'cli', 'run_loadcheck', 'console_script'} <= _starters()
    assert 'run_main' not in _starters() and 'one_line_error' not in _starters()


@pytest.mark.parametrize('source, what', [
    ('import subprocess', 'import subprocess'),
    ('from multiprocessing import Pool', 'from multiprocessing import'),
    ('import os\nos.fork()', 'os.fork'),
    ('import os\nos.execv("/bin/true", ["true"])', 'os.execv'),
    ('from os import system', "from os import ['system']"),
    ('from concurrent.futures import ProcessPoolExecutor', "from concurrent.futures import ['ProcessPoolExecutor']"),
    ('from helpers import cli, run_main', "from helpers import ['cli']: it starts a process"),
    ('ARGV = ["eb-pytorch-cuda", "report"]', "'eb-pytorch-cuda': the console script"),
    ('script.chmod(0o755)', 'an executable made (a stand-in program to run)'),
])
def test_each_way_to_start_a_process_is_found(source, what):
    assert [found for _, found in _problems(ast.parse(source), _starters())] == [what]


@pytest.mark.parametrize('source', ['import os\nos.path.join("a", "b")', 'FORMAT = "eb-pytorch-cuda-test-results"',
                                    'from helpers import run_main', 'path.chmod(0o644)'])
def test_what_starts_nothing_passes(source):
    assert _problems(ast.parse(source), _starters()) == []
