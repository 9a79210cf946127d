"""Facts about the PyTorch test harness (test/run_test.py) of a source tree, read from its source.

The runner needs to know what the harness itself will do with a suite: whether it must run alone
(`must_serial`: RUN_PARALLEL_BLOCKLIST, CI_SERIAL_LIST, JIT_EXECUTOR_TESTS, ONNX_SERIAL_LIST, a
CUSTOM_HANDLERS entry or a distributed suite, in 2.1 as in 2.6), whether it has a custom handler (its
own environment: distributed backends, a subprocess), and which switches exist (`--pipe-logs`, 2.2+:
without it 2.6 prints suite outputs inline, interleaved when its pool runs two at a time).  The lists
are read with `ast` (string literals only), never by importing run_test.py, which imports torch.
"""

import ast
import os
from dataclasses import dataclass, field
from typing import Optional

from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.testsuite.results import grammar

SERIAL_LISTS = ('RUN_PARALLEL_BLOCKLIST', 'CI_SERIAL_LIST', 'JIT_EXECUTOR_TESTS', 'ONNX_SERIAL_LIST')


@dataclass
class Harness:
    """What a run_test.py does with suites (empty lists for a harness that has none, e.g. a stand-in)."""

    path: str
    serial: set = field(default_factory=set)
    handlers: set = field(default_factory=set)
    pipe_logs: bool = False  # accepts --pipe-logs
    forwards_unknown_args: bool = False  # parse_known_args: unknown options reach every test file
    positional_unittest_args: bool = False  # 2.1: `-- <args>` reach every test file (parse_args, no unknowns)
    has_distributed_prefix_rule: bool = False
    replays_logs: bool = False  # prints each suite's log between PRINTING LOG FILE markers after it ends
    serial_marked_pass: bool = False  # 2.3+: runs each parallel suite twice, `-m serial` alone, then the rest
    full_log_means_passed: bool = False  # 2.1: a log replayed whole (not its BEGINNING) is a passed suite's
    pytest_by_default: bool = False  # 2.1+: can_run_in_pytest(): every suite under pytest unless
    # PYTORCH_TEST_DO_NOT_USE_PYTEST is set; otherwise unittest, whose --save-xml needs xmlrunner
    pool_size: int = 2  # the most suites its pool runs at once: tools/testing/test_selections.py's NUM_PROCS
    # (2 on the 2.1 line; 2.6: 3 where BUILD_ENVIRONMENT names no cuda, as in a build), 2 where it cannot be read
    times_file: Optional[str] = None  # where (relative to the tree) it reads test times to split a long file
    # into pytest shards under `--shard i n` (tools/testing/test_selections.py get_with_pytest_shard); None: cannot

    def runs_of(self, suite: str) -> int:
        """How many times the harness runs (and reports the end of) suite in one call."""
        return 2 if self.serial_marked_pass and not self.must_serial(suite) else 1

    def must_serial(self, suite: str) -> bool:
        """As run_test.py's must_serial (without its environment switches)."""
        return (suite in self.serial or suite in self.handlers
                or (self.has_distributed_prefix_rule and 'distributed' in suite))

    def has_handler(self, suite: str) -> bool:
        return suite in self.handlers


def _strings(node):
    """String literals inside node (a list, a list + something, a dict's keys)."""
    if isinstance(node, ast.Dict):
        return {key.value for key in node.keys if isinstance(key, ast.Constant) and isinstance(key.value, str)}
    found = set()
    for child in ast.walk(node):
        if isinstance(child, ast.Constant) and isinstance(child.value, str):
            found.add(child.value)
    return found


def read_harness(run_test_py: str) -> Harness:
    """Harness facts of run_test_py; a PluginError naming the file when it cannot be read or parsed."""
    try:
        with open(run_test_py, encoding='utf-8', errors='replace') as handle:
            source = handle.read()
        tree = ast.parse(source, filename=run_test_py)
    except (OSError, SyntaxError, ValueError) as err:
        raise PluginError(run_test_py, f'is not a readable run_test.py ({err})') from None
    harness = Harness(run_test_py, pipe_logs="'--pipe-logs'" in source or '"--pipe-logs"' in source,
                      forwards_unknown_args='parse_known_args' in source,
                      has_distributed_prefix_rule='DISTRIBUTED_TEST_PREFIX in file' in source,
                      replays_logs=grammar.LOG_REPLAY_SOURCE_TEXT in source,
                      serial_marked_pass='["-m", "serial"]' in source,
                      full_log_means_passed=grammar.LOG_BEGINNING_SOURCE_TEXT in source,
                      positional_unittest_args='"additional_unittest_args"' in source,
                      pytest_by_default=any(isinstance(node, ast.FunctionDef) and node.name == 'can_run_in_pytest'
                                            for node in tree.body) and 'PYTORCH_TEST_DO_NOT_USE_PYTEST' in source)
    harness.times_file = _times_file(run_test_py, source)
    harness.pool_size = _pool_size(run_test_py) or harness.pool_size
    for node in tree.body:
        if not isinstance(node, ast.Assign) or len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
            continue
        name = node.targets[0].id
        if name in SERIAL_LISTS:
            harness.serial |= _strings(node.value)
        elif name == 'CUSTOM_HANDLERS':
            harness.handlers |= _strings(node.value)
    return harness


def _selections_path(run_test_py: str) -> str:
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(run_test_py))),
                        'tools', 'testing', 'test_selections.py')


def _pool_size(run_test_py: str) -> Optional[int]:
    """The largest integer in test_selections.py's module-level `NUM_PROCS = ...` (2.1: `1 if IS_MEM_LEAK_CHECK
    else 2`; 2.6: `1 if IS_MEM_LEAK_CHECK else 3 if USE_3_PROCS else 2`): the most its pool runs at once; None
    where the file or the assignment is not there."""
    try:
        with open(_selections_path(run_test_py), encoding='utf-8', errors='replace') as handle:
            tree = ast.parse(handle.read())
    except (OSError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id == 'NUM_PROCS'):
            sizes = [child.value for child in ast.walk(node.value)
                     if isinstance(child, ast.Constant) and type(child.value) is int and child.value > 0]
            return max(sizes) if sizes else None
    return None


def _times_file(run_test_py: str, source: str) -> Optional[str]:
    """The test-times file the harness reads (2.2+: .additional_ci_files/test-times.json; the 2.1 line:
    tools/stats/export_test_times.TEST_TIMES_FILE, .pytorch-test-times.json), when its tree can split a file
    into pytest shards by it; None otherwise."""
    selections = _selections_path(run_test_py)
    try:
        with open(selections, encoding='utf-8', errors='replace') as handle:
            if 'def get_with_pytest_shard' not in handle.read():
                return None
    except OSError:
        return None
    if 'ADDITIONAL_CI_FILES_FOLDER' in source and 'TEST_TIMES_FILE' in source:
        return os.path.join('.additional_ci_files', 'test-times.json')
    if 'from tools.stats.export_test_times import TEST_TIMES_FILE' in source:
        return '.pytorch-test-times.json'
    return None


def harness_of(test_dir: str) -> Harness:
    """The harness in test_dir (test/run_test.py of a source tree), or an empty one when there is none."""
    path = os.path.join(test_dir, 'run_test.py')
    return read_harness(path) if os.path.isfile(path) else Harness(path)
