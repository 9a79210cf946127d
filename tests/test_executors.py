"""Where the suites run is decided once (service.executor_of), and an executor is anything that implements the
protocol of run/executor: a throw-away one, registered by name, runs a whole `test-suite` step.

The suites are the stand-in harness's (src/eb_pytorch_cuda/standins): what is shown is the step's seam, not
PyTorch's behaviour, which the real-harness tests show through the same seam.
"""

import os
import re
import shutil
import sys
import tokenize
from typing import Any, Dict, List, Optional, Sequence

import pytest

from helpers import standin_source
from eb_pytorch_cuda import standins
from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.testsuite import service, sourcetree
from eb_pytorch_cuda.testsuite.policy import settings as settings_module
from eb_pytorch_cuda.testsuite.policy.settings import TestSettings
from eb_pytorch_cuda.testsuite.results.previous import History
from eb_pytorch_cuda.testsuite.run import solo
from eb_pytorch_cuda.testsuite.run.plan import PieceRule, RunPlan, RunRequest
from eb_pytorch_cuda.testsuite.run.store import ResultStore

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class OneAtATime:
    """A throw-away executor: each unit alone (run/solo), in order.  It derives from nothing of the package: the
    protocol is all it implements."""

    name = 'one-at-a-time'
    on_this_node = True

    def __init__(self) -> None:
        self.ran: List[str] = []

    def installation_parent(self, build_dir: Optional[str]) -> Optional[str]:
        return None

    def piece_rule(self, history: History, slots: int) -> Optional[PieceRule]:
        return None

    def prepare(self, request: RunRequest, store: ResultStore) -> RunRequest:
        return request

    def run(self, plan: RunPlan, units: Sequence[str], store: ResultStore) -> None:
        for unit in units:
            self.ran.append(unit)
            store.append(solo.run_suite(plan, unit))

    def describe(self, build_dir: Optional[str]) -> List[str]:
        return ['each suite alone, one after another']

    def finish(self, store: ResultStore) -> None:
        return None

    def node_devices(self, store: ResultStore) -> Dict[str, Dict[str, Any]]:
        return {}  # the suites ran here: the step decided the CUDA device tests itself


@pytest.fixture
def tree(tmp_path):
    source = standin_source(tmp_path / 'src')
    for suite in ('test_flaky.py', 'test_known_failure.py'):
        shutil.copy(os.path.join(standins.TORCH_SOURCES, 'test', suite), source / 'test' / suite)
    return source


class Quiet:
    def __init__(self) -> None:
        self.lines: List[str] = []

    def say(self, message: str) -> None:
        self.lines.append(message)

    def has_cuda(self, installation: Optional[str]) -> bool:
        return False

    tested_installation = staticmethod(service.no_installation)


def test_a_new_executor_runs_a_whole_step_through_the_protocol_alone(tree, tmp_path, monkeypatch):
    executor = OneAtATime()
    monkeypatch.setitem(service.EXECUTORS, executor.name, lambda settings, say, launcher: executor)
    monkeypatch.setattr(settings_module, 'EXECUTORS', settings_module.EXECUTORS + (executor.name,))
    settings = TestSettings.from_values({'test_suite_executor': executor.name})
    results = tmp_path / 'results'

    def command(excluded):
        return sourcetree.source_tree_command(str(tree), sys.executable, None, excluded)
    inputs = service.StepInputs(settings, command, env=dict(os.environ), output_dir=str(results / 'output'),
                                python=sys.executable)
    host = Quiet()
    outcome = sourcetree.test_source_tree(str(tree), str(results), inputs, host)
    assert sorted(executor.ran) == ['test_flaky', 'test_known_failure']
    assert sorted(outcome.result.suites) == ['test_flaky', 'test_known_failure']
    assert not outcome.verdict.passed  # the stand-in's known failure is not known to this policy
    assert '  each suite alone, one after another' in service.describe_step(inputs, host)


@pytest.mark.parametrize('values, name', [
    ({}, 'here'), ({'test_suite_jobs': 1}, 'here'), ({'test_suite_jobs': 3}, 'slurm'),
    ({'test_suite_executor': 'slurm'}, 'slurm'), ({'test_suite_executor': 'here'}, 'here'),
    ({'test_suite_executor': 'slurm', 'test_suite_jobs': 4}, 'slurm'),
])
def test_here_or_slurm_is_one_decision_of_the_settings(values, name):
    settings = TestSettings.from_values(values)
    executor = service.executor_of(settings)
    assert service.executor_name(settings) == executor.name == name
    assert executor.on_this_node is (name == 'here')
    assert executor.installation_parent('/build') == (None if name == 'here' else '/build')


@pytest.mark.parametrize('values, problem', [
    ({'test_suite_executor': 'flux'}, "test_suite_executor must be one of 'auto', 'here', 'slurm', got 'flux'"),
    ({'test_suite_executor': 'here', 'test_suite_jobs': 2},
     "test_suite_jobs = 2 is the Slurm executor's option: with test_suite_executor = 'here' the suites run on this "
     "node"),
])
def test_an_executor_setting_that_cannot_be_is_refused_naming_the_easyconfig(values, problem):
    with pytest.raises(PluginError) as caught:
        TestSettings.from_values(values, 'PyTorch.eb')
    assert str(caught.value) == f'PyTorch.eb: {problem}'


def test_only_the_service_compares_the_job_count():
    """The job count is read in one place (service.executor_name): no other module of the step, the CLI or the
    easyblock asks it to choose between here and Slurm."""
    pattern = re.compile(r'\b\w*_jobs \)? (?:[<>]=?|==|!=) 1\b|\bjobs (?:[<>]=?|==|!=) 1\b')
    found = []
    for top in (os.path.join(ROOT, 'src', 'eb_pytorch_cuda'), os.path.join(ROOT, 'easybuild')):
        for directory, _dirs, files in os.walk(top):
            for name in sorted(files):
                if name.endswith('.py'):
                    path = os.path.join(directory, name)
                    found += [f'{os.path.relpath(path, ROOT)}:{line}' for line in _code_lines(path)
                              if pattern.search(line)]
    assert found == ["src/eb_pytorch_cuda/testsuite/service.py:return 'slurm' if int ( settings . test_suite_jobs ) "
                     "> 1 else 'here'"], found


def _code_lines(path):
    """The lines of path as their code tokens (names, operators, numbers, strings), comments and docstrings
    left out, joined by spaces."""
    lines, current = [], []
    with open(path, 'rb') as handle:
        for token in tokenize.tokenize(handle.readline):
            if token.type in (tokenize.NEWLINE, tokenize.NL):
                if current:
                    lines.append(' '.join(current))
                current = []
            elif token.type in (tokenize.NAME, tokenize.OP, tokenize.NUMBER) or \
                    (token.type == tokenize.STRING and current):
                current.append(token.string)
    return lines
