"""Where the suites run is decided once (service.executor_of), and an executor is anything that implements the
protocol of run/executor: a throw-away one, registered by name, runs a whole `test-suite` step.

The suites are the stand-in harness's (src/eb_pytorch_cuda/standins): what is shown is the step's seam, not
PyTorch's behaviour, which the real-harness tests show through the same seam.
"""

import os
import re
import shutil
import subprocess
import sys
import tokenize
from typing import Any, Dict, List, Optional, Sequence

import pytest

from helpers import comparable, standin_source
from eb_pytorch_cuda import standins
from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.testsuite import service, sourcetree
from eb_pytorch_cuda.testsuite.policy import settings as settings_module
from eb_pytorch_cuda.testsuite.policy.settings import TestSettings
from eb_pytorch_cuda.testsuite.results.previous import History
from eb_pytorch_cuda.testsuite.run import solo
from eb_pytorch_cuda.testsuite.run.command import TestCommand as Command  # not a pytest test class
from eb_pytorch_cuda.testsuite.run.executor import execute
from eb_pytorch_cuda.testsuite.run.here import HereExecutor
from eb_pytorch_cuda.testsuite.run.plan import PieceRule, RunPlan, RunRequest
from eb_pytorch_cuda.testsuite.run.store import ResultStore
from eb_pytorch_cuda.testsuite.spread import controller, slurm, worker
from eb_pytorch_cuda.testsuite.spread.jobpool import JobPool, JobVariables

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

    def discard(self, store: ResultStore) -> List[str]:
        return []

    def node_devices(self, store: ResultStore) -> Dict[str, Dict[str, Any]]:
        return {}


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


class LocalJobs:
    """A throw-away job pool (spread/jobpool.JobPool): each job a process on this machine running the worker, its id
    in LOCAL_JOB_ID.  It derives from nothing of the package: the protocol is all it implements."""

    noun = 'local job(s)'

    def __init__(self, queue, python: str, jobs: int) -> None:
        self.queue, self.python, self.jobs = queue, python, jobs
        self.live: List[str] = []
        self.gone: List[str] = []
        self.processes: Dict[str, subprocess.Popen] = {}

    def asked(self) -> str:
        return 'no options'

    def cancel_previous(self) -> List[str]:
        return []

    def start(self, suites_left: int) -> None:
        while len(self.live) < min(self.jobs, suites_left):
            job = str(len(self.live) + len(self.gone) + 1)
            env = dict(os.environ, LOCAL_JOB_ID=job, LOCAL_JOB_MARK=f'job {job}',
                       PYTHONPATH=os.path.join(ROOT, 'src'))
            self.processes[job] = subprocess.Popen(
                [self.python, '-m', 'eb_pytorch_cuda.testsuite.spread.worker', '--job-id-variable', 'LOCAL_JOB_ID',
                 '--job-variable-prefix', 'LOCAL_JOB_', self.queue.directory],
                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
            self.live.append(job)

    def check(self, suites_unclaimed: int) -> List[str]:
        died = [job for job in self.live if self.processes[job].poll() is not None]
        for job in died:
            self.queue.mark_dead(job)
            self.live.remove(job)
            self.gone.append(job)
        return died

    def finish(self) -> None:
        for job in self.live:
            self.processes[job].kill()
            self.processes[job].wait()


def test_a_new_job_pool_runs_the_spread_step_through_the_protocol_alone(tree, tmp_path):
    """The spread run's queue, worker and wait loop are generic: a pool of local processes (LocalJobs) gives the
    results of the same suites run here, its workers named after its own job ids; Slurm's pool is one
    implementation, whose job script passes Slurm's variable names to the worker."""
    pools: List[LocalJobs] = []

    def local_jobs(queue, python, jobs):
        pools.append(LocalJobs(queue, python, jobs))
        return pools[-1]

    def run(executor, name):
        store = ResultStore(str(tmp_path / name / 'results.jsonl'), 'build-a')
        source = shutil.copytree(tree, tmp_path / name / 'src')  # test_flaky's state is kept in its tree
        request = RunRequest(Command(str(source / 'test'), {}, [sys.executable, 'run_test.py']),
                             dict(os.environ, LOCAL_JOB_MARK='the submitter'), str(tmp_path / name / 'out'),
                             sys.executable, {'': 120})
        return execute(executor, request, store)[1], store

    here, _ = run(HereExecutor(), 'here')
    lines: List[str] = []
    options = controller.SpreadOptions(pool=local_jobs, shared_paths=[str(tmp_path)], poll=0.2)
    spread, store = run(controller.SlurmExecutor(2, options, lines.append), 'spread')
    assert comparable(spread) == comparable(here) and sorted(spread.suites) == ['test_flaky', 'test_known_failure']
    assert isinstance(pools[0], JobPool)  # the protocol's members, checked at run time
    assert all(process.poll() is not None for process in pools[0].processes.values())  # every job ended with the step
    assert lines[0].startswith('running 2 suites on 2 local job(s) (no options; ')
    workers = {record.job for record in store.load().values()}
    assert workers and {worker.split('.', 1)[0] for worker in workers} <= {'1', '2'}
    # the job's own variables win over the submitter's, by the names the pool passed (worker.job_environment)
    spec = {'env': {'LOCAL_JOB_MARK': 'the submitter', 'SLURM_JOB_ID': '7', 'PATH': '/bin'}}
    own = {'LOCAL_JOB_MARK': 'job 2', 'HOME': '/root'}
    assert worker.job_environment(spec, own, JobVariables('LOCAL_JOB_ID', 'LOCAL_JOB_')) == {
        'LOCAL_JOB_MARK': 'job 2', 'SLURM_JOB_ID': '7', 'PATH': '/bin'}
    script = slurm.write_batch_script(str(tmp_path / 'worker-job.py'), sys.executable)
    with open(script) as handle:
        assert "main(['--job-id-variable', 'SLURM_JOB_ID', '--job-variable-prefix', 'SLURM_'] + sys.argv[1:])" \
            in handle.read()
