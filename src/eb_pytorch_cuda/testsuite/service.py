"""The test step of a PyTorch build, EasyBuild-free: its sequence, assembled once (run_step, and describe_step
for a dry run), which the easyblock and `eb-pytorch-cuda test-suite` both call.

A caller builds its StepInputs (the easyblock from an easyconfig and EasyBuild's environment; the CLI from
options and a source tree) and a StepHost (how it speaks: EasyBuild's print and log, or the terminal; and what
only it can do: make a tested installation, say whether the build has CUDA).  The step then: chooses where the
suites run, once (executor_of: here, or over Slurm jobs), finds where the policy applies (scope_context: the GPUs
the suites run on, else the build's compute capabilities), builds the command with the tests excluded there,
reads the previous results once (results/previous.History), runs the suites not yet in the store with the CUDA
device tests' mode decided (device_test_mode), reruns failures in isolation, judges, keeps a run that failed on
its verdict only, and returns a StepOutcome that report_texts turns into the two reports.
"""

import contextlib
import dataclasses
import hashlib
import json
import os
import shutil
from dataclasses import dataclass, field
from typing import (Callable, ContextManager, Dict, Iterator, List, Mapping, Optional, Protocol, Sequence, Tuple,
                    Union)

from eb_pytorch_cuda import process
from eb_pytorch_cuda.testsuite.run.heartbeat import settings_of as heartbeat_of
from eb_pytorch_cuda.testsuite.run.retries import planned as planned_retries
from eb_pytorch_cuda.testsuite.run.retries import retry_environment
from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.escape import markdown_code, printable
from eb_pytorch_cuda.leftovers import stop_leftovers
from eb_pytorch_cuda.testsuite.policy import settings as _settings
from eb_pytorch_cuda.testsuite.policy.judging import Policy, Verdict, judge
from eb_pytorch_cuda.testsuite.policy.report import RESULTS_JSON, RESULTS_MARKDOWN, to_json, to_markdown, to_text
from eb_pytorch_cuda.testsuite.policy.settings import DEFAULT_SUITE_TIMEOUT, JUDGING, TestSettings, rule_timeout
from eb_pytorch_cuda.testsuite.policy.settings import TERMS_KEY, DeviceTerms, JudgedTerms
from eb_pytorch_cuda.testsuite.results.cudatests import cuda_totals
from eb_pytorch_cuda.testsuite.results.model import RunResult
from eb_pytorch_cuda.testsuite.results.pieces import with_merged
from eb_pytorch_cuda.testsuite.results.previous import History
from eb_pytorch_cuda.testsuite.results.records import StoreRecord
from eb_pytorch_cuda.testsuite.run import calls
from eb_pytorch_cuda.testsuite.run.command import TestCommand, parse_runtest, with_test_options
from eb_pytorch_cuda.testsuite.run.devicetests import (CUDA_ENVIRONMENT, DeviceTestMode, JobDecision, decide, planned,
                                                       suite_environment)
from eb_pytorch_cuda.testsuite.run.executor import Executor, execute
from eb_pytorch_cuda.testsuite.run.gpus import gpu_compute_capabilities, gpu_view
from eb_pytorch_cuda.testsuite.run.here import HereExecutor
from eb_pytorch_cuda.testsuite.run.launcher import PROCESSES, Launcher
from eb_pytorch_cuda.testsuite.run.node import this_node
from eb_pytorch_cuda.testsuite.run.plan import HERE_PIECE_SECONDS, RunRequest
from eb_pytorch_cuda.testsuite.run.reruns import rerun_failures, rerun_lines_of_jobs
from eb_pytorch_cuda.testsuite.run.store import ResultStore
from eb_pytorch_cuda.testsuite.results import scopes as _scopes
from eb_pytorch_cuda.testsuite.results.scopes import ScopeContext, detect_context
from eb_pytorch_cuda.testsuite.policy.timechart import TIME_CHART, svg_chart

# the test step's easyconfig parameters (policy.settings: one list for all their readers), for extra_options
SETTING_DEFAULTS = _settings.DEFAULTS
SETTING_NAMES = _settings.NAMES
MAX_RERUNS = _settings.MAX_RERUNS
TIMEOUT_RULE = _settings.TIMEOUT_RULE
SCOPE_HELP = _scopes.HELP  # what a scope of excluded_tests/known_test_failures may be, for the parameters' help

FLAG_VARIABLES = ('CFLAGS', 'CXXFLAGS', 'LDFLAGS', 'TORCH_CUDA_ARCH_LIST')
Say = Callable[[str], None]


def _slurm_executor(settings: TestSettings, say: Say, launcher: Launcher) -> Executor:
    from eb_pytorch_cuda.testsuite.spread import controller  # only a spread build needs Slurm's side
    return controller.SlurmExecutor(int(settings.test_suite_jobs), None, say)


# test_suite_executor's values besides 'auto' (policy/settings.EXECUTORS lists the same names): a new executor is
# its module, a line here and its name there
EXECUTORS: Dict[str, Callable[[TestSettings, Say, Launcher], Executor]] = {
    'here': lambda settings, say, launcher: HereExecutor(say, launcher),
    'slurm': _slurm_executor,
}


def executor_name(settings: TestSettings) -> str:
    """Where the suites run: test_suite_executor, or for 'auto' Slurm where test_suite_jobs > 1, else here."""
    if settings.test_suite_executor != 'auto':
        return settings.test_suite_executor
    return 'slurm' if int(settings.test_suite_jobs) > 1 else 'here'


def executor_of(settings: TestSettings, say: Optional[Say] = None, launcher: Launcher = PROCESSES) -> Executor:
    """The executor of a step (run/executor's protocol): the one place that decides here or Slurm."""
    return EXECUTORS[executor_name(settings)](settings, say or (lambda message: None), launcher)


def suite_timeouts(explicit: Optional[int], history: History) -> Dict[str, int]:
    """{suite: seconds}, '' for the rest: the explicit value, else 4x (at least 10 min) each suite's time in
    the previous results (history), else the default (settings.TIMEOUT_RULE)."""
    if explicit:
        return {'': int(explicit)}
    timeouts = {'': DEFAULT_SUITE_TIMEOUT}
    for suite, seconds in history.suite_seconds.items():
        timeouts[suite] = rule_timeout(seconds)
    return timeouts


def run_suites(request: RunRequest, store: ResultStore, executor: Executor, say: Optional[Say] = None) -> RunResult:
    """Run every suite of request not yet in store with executor, then rerun failures in isolation (where the
    suites ran on this node; a Slurm job reruns its own); return the RunResult.  The plan of the run (run/plan)
    is built once, after the executor has refused what it cannot run."""
    say = say or (lambda message: None)
    # one run per store (a second one refuses in one line naming the directory); a SIGTERM/SIGHUP or Ctrl-C
    # stops every suite, batch and rerun group before we exit (eb_pytorch_cuda.process)
    with store.exclusive(), process.terminating_signals_stop_children():
        if store.notice is None:
            store.notice = say  # each store line set aside is said once, naming the file and the line
        registry = store.path + '.children'  # the groups this run starts, for the next run to stop if it must
        leftovers = stop_leftovers(registry)
        for note in leftovers.notes:
            say(note)
        for group in leftovers.stopped:
            say(f'stopped process group {group}, left running by a killed previous run on {store.path}')
        with process.recorded_in(registry):
            plan, result = execute(executor, request, store, say)
            if executor.on_this_node:
                rerun_failures(result, plan, say)
            else:  # each job reran its own failures on its node (spread/worker): said here from their records
                for line in rerun_lines_of_jobs(result):
                    say(line)
            return result


@dataclass(frozen=True)
class TestedInstallation:
    """An installation made for the suites to test: its prefix (kept when the run fails on its verdict only) and
    the variables that make the suites import it (PYTHONPATH, PATH)."""
    __test__ = False  # not a pytest test class
    prefix: str
    env: Mapping[str, str] = field(default_factory=dict)


class StepHost(Protocol):
    """What differs between the callers of the step besides their inputs: how they speak, and what only they
    know how to do."""

    def say(self, message: str) -> None:
        """One line of progress (EasyBuild's print and log, or the terminal's stderr)."""

    def has_cuda(self, installation: Optional[str]) -> bool:
        """The build under test has CUDA (installation: its tested installation, None in a dry run)."""

    def tested_installation(self, parent: Optional[str]) -> ContextManager[Optional[TestedInstallation]]:
        """The installation the suites test, made in parent (None: a temporary directory) and removed after
        (None: the suites test what the environment already imports)."""


@dataclass(frozen=True)
class StepInputs:
    """What a caller hands the step.  command: the test command with the tests excluded in force (a function:
    they are known once the scope is); store: the results store of that command (a function for the same
    reason); env: the environment the suites start from; source: what names the policy in messages (the
    easyconfig); default_budget: max_failed_tests where the easyconfig sets none (the installed easyblocks');
    built_capabilities, target: where the policy applies when no GPU decides it (scope_context);
    previous_results: the previous installation's results JSON (its times); kept: a kept run's result and
    its store, judged again without running a suite; build_dir: where a tested installation goes that other
    nodes must see."""
    settings: TestSettings
    command: Callable[[Sequence[str]], TestCommand]
    env: Mapping[str, str]
    output_dir: str
    python: str
    store: Optional[Callable[[TestCommand], ResultStore]] = None
    source: str = 'policy'
    default_budget: int = 0
    built_capabilities: Sequence[str] = ()
    target: Optional[str] = None
    previous_results: Optional[str] = None
    kept: Optional[Tuple[RunResult, ResultStore]] = None
    build_dir: Optional[str] = None
    batch_size: int = calls.DEFAULT_BATCH_SIZE
    launcher: Launcher = PROCESSES


def build_fingerprint(easyconfig_values: Mapping[str, object], environ: Mapping[str, str],
                      extra: Optional[Mapping[str, object]] = None) -> str:
    """sha256 of what the tested build depends on: the easyconfig's parameters without the policy ones,
    the compiler flags, and extra facts (e.g. the CUDA compute capabilities)."""
    values = {k: v for k, v in easyconfig_values.items() if k not in JUDGING}  # policy, not build
    flags = {name: environ.get(name, '') for name in FLAG_VARIABLES}
    text = json.dumps({'easyconfig': values, 'flags': flags, 'extra': extra or {}}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def notes(store: ResultStore) -> dict:
    """{suite: [notes]} of the suites stored for this build: a pass with 0 tests, log and XML disagreeing."""
    return {suite: list(record.notes) for suite, record in sorted(store.load().items()) if record.notes}


def test_seconds(store: ResultStore) -> Dict[str, Dict[str, float]]:
    """{suite: {node id: seconds}} its long suites' records kept (results/testtimes; a suite run as pieces:
    all its pieces'), for the results JSON, where the next build of the target reads them to split."""
    return {suite: dict(sorted(record.test_seconds.items()))
            for suite, record in sorted(with_merged(store.load()).items())
            if not record.piece and record.test_seconds}


def keep(store: ResultStore, result: RunResult, tested_installation: str) -> None:
    """Keep result and the tested installation (for a run that failed on its verdict only).

    The copy is made beside the kept place and renamed into it, and only then is the result recorded as
    kept (save_final): a kill mid-copy leaves no record, so the next run rebuilds instead of installing
    a partial copy."""
    partial = store.cache_dir + '.partial'
    for stale in (partial, store.cache_dir):
        if os.path.isdir(stale):
            shutil.rmtree(stale)
    if os.path.exists(store.final_path):
        os.unlink(store.final_path)  # what was kept before no longer matches the build being kept
    shutil.copytree(tested_installation, partial, symlinks=True)
    os.rename(partial, store.cache_dir)
    store.save_final(result)


@dataclass
class StepOutcome:
    """What a test step ends with: the result, its verdict, where the policy applied, the store's notes."""
    result: RunResult
    verdict: Verdict
    context: ScopeContext
    notes: Dict[str, List[str]] = field(default_factory=dict)
    test_seconds: Dict[str, Dict[str, float]] = field(default_factory=dict)  # see test_seconds()
    device_tests: Optional[DeviceTestMode] = None  # the CUDA device tests' mode the suites ran in (None: not said)
    warnings: List[str] = field(default_factory=list)  # e.g. a GPU seen and 0 CUDA tests run
    terms: Optional[JudgedTerms] = None  # what it was judged by, for the results JSON (policy/settings.JudgedTerms)
    # {Slurm job: the CUDA device tests' mode it decided on its node, its suites, the CUDA tests it ran}
    jobs: Dict[str, dict] = field(default_factory=dict)


def device_test_mode(requested: Union[bool, str], cuda_build: Callable[[], bool], env: Mapping[str, str],
                     on_this_node: bool = True) -> DeviceTestMode:
    """The CUDA device tests' mode (run/devicetests) for the suites about to run: on this node, from the GPUs it
    sees (run.gpus.gpu_view: those nvidia-smi lists that CUDA_VISIBLE_DEVICES leaves); for suites that run on
    other nodes (on_this_node False: Slurm jobs) nothing is probed here: each job decides on its own node
    (job_decision), and this mode only says so.  cuda_build is asked only where it decides (a GPU seen, or True)."""
    if requested is False:
        return decide(False, None, ())
    if not on_this_node:
        return DeviceTestMode(requested, None, (), False, 'decided by each Slurm job on its own node (its GPUs: '
                                                          'nvidia-smi, CUDA_VISIBLE_DEVICES as Slurm sets it)', {})
    view = gpu_view(env)
    return decide(requested, bool(cuda_build()) if view.visible else None, view.names, view.describe())


def job_decision(requested: Union[bool, str], cuda_build: bool, runtest_env: Mapping[str, str]
                 ) -> Optional[JobDecision]:
    """What each job that runs suites on another node decides the CUDA device tests by (run/devicetests
    .JobDecision), None where there is nothing to decide (False, or 'auto' for a build without CUDA); True for a
    build without CUDA: PluginError, before any job is submitted."""
    if requested is False:
        return None
    if not cuda_build:
        decide(requested, False, ())  # True: refused here, as on one node
        return None
    return JobDecision(requested, True, tuple(name for name in CUDA_ENVIRONMENT if name in runtest_env))


def with_node_devices(mode: DeviceTestMode, devices: Mapping[str, Mapping], result: RunResult,
                      records: Mapping[str, StoreRecord]) -> Tuple[DeviceTestMode, List[str], Dict[str, dict]]:
    """(the run's mode, warnings, {job: what it decided and ran}) where the jobs decided on their own nodes
    (devices: Executor.node_devices): enabled where any job ran with CUDA device tests, the GPUs of all; a warning
    for each job that saw a GPU and ran 0 CUDA tests (results/cudatests: each record's suite counts), and one where
    the build has CUDA and no job saw a GPU (the jobs were given none: gpus_per_job is 0 unless set)."""
    if not devices:
        return mode, [], {}
    jobs: Dict[str, dict] = {}
    warnings: List[str] = []
    for job, facts in sorted(devices.items()):
        counts = [record.suite.cuda_counts for record in records.values() if record.job == job]
        known = [count for count in counts if count is not None]
        ran = sum(count['ran'] for count in known) if known else None
        jobs[job] = {'enabled': facts.get('enabled'), 'gpus': list(facts.get('gpus') or []),
                     'reason': facts.get('reason'), 'suites': len(counts), 'cuda_tests_ran': ran}
        if facts.get('enabled') and counts and ran == 0:
            warnings.append(f"Slurm job {job_of_worker(job)} saw {len(jobs[job]['gpus'])} GPU(s) and the build has "
                            f"CUDA, but 0 CUDA device tests ran in its {len(counts)} suite(s)")
    enabled = [job for job, facts in jobs.items() if facts['enabled']]
    # devices are noted only where the jobs decide (job_decision: a CUDA build, 'auto' or True)
    if not enabled and any(facts['suites'] for facts in jobs.values()):
        warnings.append(f"none of the {len(jobs)} Slurm job(s) saw a GPU, so the build's CUDA device tests did not "
                        "run: ask the jobs for GPUs (EB_PYTORCH_CUDA_SLURM_GPUS_PER_JOB, or the partition's own "
                        "--gres in EB_PYTORCH_CUDA_SLURM_EXTRA_OPTIONS)")
    gpus = tuple(dict.fromkeys(gpu for facts in jobs.values() for gpu in facts['gpus']))
    reason = (f"decided by each Slurm job on its own node: {len(enabled)} of {len(jobs)} job(s) saw a GPU and ran "
              f"CUDA and CPU device tests" + (f" ({', '.join(job_of_worker(job) for job in enabled)})" if enabled
                                              else ''))
    return (DeviceTestMode(mode.requested, mode.cuda_build, gpus, bool(enabled), reason,
                           dict(CUDA_ENVIRONMENT) if enabled else {}), warnings, jobs)


def job_of_worker(worker: str) -> str:
    """The Slurm job id a worker name ('<job>.<host>.<pid>': spread/workqueue.worker_id) belongs to."""
    return worker.split('.', 1)[0]


def planned_slots(parallel: Union[int, str]) -> str:
    """The dry run's words for parallel_test_suites (nothing is probed: the step sizes the node it runs on), and
    what more than one slot does with long suites (run/plan.here_piece_rule)."""
    slots = (f'{parallel} call(s)' if parallel != 'auto' else
             "as many calls as the test step's node holds (parallel_test_suites='auto': its CPUs, memory and GPU "
             "memory; run/node)")
    if parallel == 'auto' or int(parallel) > 1:
        slots += (f" (with more than one and the previous build's results, a suite longer than its share of the "
                  f"node, at least {HERE_PIECE_SECONDS:.0f} s, runs as pieces side by side)")
    return slots


def batch_slots(parallel: Union[int, str], env: Mapping[str, str],
                progress: Optional[Callable[[str], None]] = None) -> int:
    """The batches run at a time: parallel_test_suites as given, or for 'auto' what this node holds (run/node:
    its CPUs, available memory and the memory of the GPUs it sees), said in one line."""
    if parallel != 'auto':
        return int(parallel)
    size = this_node(env)
    if progress:
        progress(size.describe())
    return size.slots()


def cuda_test_warnings(result: RunResult, mode: Optional[DeviceTestMode]) -> Tuple[List[str], Optional[str]]:
    """(warnings, reason to fail) about the CUDA tests a run counted (results/cudatests): a step that saw a GPU
    with a CUDA build and ran 0 CUDA tests is blind to the GPU build, which fails the run when the mode was True."""
    if mode is None or not mode.enabled:
        return [], None
    total = cuda_totals(result)
    if total is None:
        return [f'CUDA device tests on ({mode.reason}), but neither XML reports nor pytest -v lines could '
                'count them'], None
    if total['ran']:
        return [], None
    seen = f'{len(mode.gpus)} GPU(s)' if mode.gpus else "the Slurm jobs' GPUs"
    problem = (f"the test step saw {seen} and the build has CUDA, but 0 CUDA device tests ran "
               f"({total['skipped']} skipped): the GPU build was not tested")
    return [problem], (problem if mode.requested is True else None)


def scope_context(built_capabilities: Sequence, on_this_node: bool, env: Mapping[str, str],
                  target: Optional[str] = None,
                  progress: Optional[Callable[[str], None]] = None) -> ScopeContext:
    """Where the policy applies.  on_this_node (the suites run here): the compute capabilities of the GPUs
    they run on, where nvidia-smi sees any, for a known failure scoped '8.0' was seen on such GPUs;
    otherwise (dry run, no GPU seen, suites spread to other nodes) the build's own.  progress: also told the
    target and where it came from (a fallback: that target-scoped entries will not apply)."""
    seen = gpu_compute_capabilities(env) if on_this_node else ()
    if seen and progress:
        progress(f"policy scope: compute capabilities {', '.join(seen)} (the GPUs the suites run on; built for "
                 f"{', '.join(map(str, built_capabilities)) or 'none given'})")
    context = detect_context(seen or tuple(built_capabilities), target=target, environ=env)
    if progress:
        progress(f'policy scope: {context.target_line()}')
    return context


def judged(result: RunResult, policy: Policy,
           device_tests: Optional[DeviceTestMode] = None) -> Tuple[Verdict, List[str]]:
    """(verdict, warnings) of result under policy, and under the CUDA device tests' mode the suites ran in
    (cuda_test_warnings: with True, a run that saw a GPU and ran 0 CUDA tests fails): the step's judging, and
    `report`'s of a results JSON by the terms it carries (device_mode_of)."""
    warnings, failing = cuda_test_warnings(result, device_tests)
    verdict = judge(result, policy)
    if failing:
        verdict = dataclasses.replace(verdict, passed=False,
                                      reasons=verdict.reasons + [f'cuda_device_tests=True: {failing}'])
    return verdict, warnings


def device_mode_of(device: Optional[DeviceTerms]) -> Optional[DeviceTestMode]:
    """The DeviceTestMode a results JSON's terms recorded (None: none recorded), for judged(); whether the build
    had CUDA is not recorded, nor needed: a mode is enabled only where it had."""
    if device is None:
        return None
    return DeviceTestMode(device.requested, None, tuple(device.gpus), device.enabled, device.reason)


def judge_kept(result: RunResult, policy: Policy, context: ScopeContext,
               store: Optional[ResultStore] = None) -> StepOutcome:
    """A kept run's result (ResultStore.load_final) under the policy in force now: nothing runs.  store (the
    kept run's, still there): its notes and its tests' times go into the reports as a run's would, so the
    installation's results JSON still lets the next build split its long suites.  Its terms record the policy;
    what ran (excluded tests, reruns, device tests' mode) is not known here (the settings in force now need not be
    the ones it ran with: they are left out of the build fingerprint), so they are recorded as unknown."""
    return StepOutcome(result, judge(result, policy), context, notes(store) if store else {},
                       test_seconds(store) if store else {}, terms=JudgedTerms.of(policy))


@dataclass(frozen=True)
class StepTerms:
    """What a test step is run and judged by: the easyconfig's test settings, the policy made of them, where
    that policy applies (scope_context) and the tests excluded there."""
    settings: TestSettings
    policy: Policy
    context: ScopeContext
    excluded: Tuple[str, ...] = ()


def step_terms(inputs: StepInputs, on_this_node: bool, say: Optional[Say] = None) -> StepTerms:
    """The step's terms: where the policy applies (on_this_node: the suites run here, so its GPUs decide),
    the policy and the excluded tests in force there."""
    context = scope_context(inputs.built_capabilities or inputs.settings.cuda_compute_capabilities, on_this_node,
                            inputs.env, inputs.target, say)
    policy = inputs.settings.policy(context, inputs.default_budget, inputs.source)
    return StepTerms(inputs.settings, policy, context, tuple(inputs.settings.excluded(context)))


def run_step(inputs: StepInputs, host: StepHost) -> StepOutcome:
    """The test step: run every suite not yet in the store, rerun failures, judge by the terms in force where
    the suites run; a kept run (StepInputs.kept) is judged again instead, without running a suite."""
    settings = inputs.settings
    executor = executor_of(settings, host.say, inputs.launcher)
    terms = step_terms(inputs, executor.on_this_node, host.say)
    if inputs.kept is not None:
        result, kept_store = inputs.kept
        return judge_kept(result, terms.policy, terms.context, kept_store)
    command = inputs.command(terms.excluded)
    if inputs.store is None:
        raise PluginError(inputs.source, 'the test step was given no results store')
    store = inputs.store(command)
    history = History.read(inputs.previous_results, host.say)
    with host.tested_installation(executor.installation_parent(inputs.build_dir)) as installed:
        env = dict(inputs.env, **command.env, **(installed.env if installed else {}))
        prefix = installed.prefix if installed else None
        # True without a GPU stops here, before any suite runs
        device_tests = device_test_mode(settings.cuda_device_tests, lambda: host.has_cuda(prefix), env,
                                        on_this_node=executor.on_this_node)
        env.update(suite_environment(device_tests, command.env))
        env = retry_environment(env, settings.harness_retries)  # rerun_failed_tests the only retry (run/retries)
        host.say(device_tests.describe())
        sized_by_jobs = settings.parallel_test_suites == 'auto' and not executor.on_this_node
        if sized_by_jobs:  # this node's size is only the claims' estimate: it is not where the suites run
            host.say("parallel_test_suites='auto': each Slurm job sizes its own node (its CPUs, memory and, where it "
                     "runs CUDA device tests, its GPUs' memory) and sets its suites' OMP_NUM_THREADS")
        slots = batch_slots(settings.parallel_test_suites, env, None if sized_by_jobs else host.say)
        decision = (None if executor.on_this_node or settings.cuda_device_tests is False else
                    job_decision(settings.cuda_device_tests, host.has_cuda(prefix), command.env))
        request = RunRequest(command, env, inputs.output_dir, inputs.python,
                             suite_timeouts(settings.test_suite_timeout, history), slots,
                             settings.rerun_failed_tests, inputs.batch_size,
                             pieces=executor.piece_rule(history, slots), tested_installation=prefix,
                             job_devices=decision, on_other_nodes=not executor.on_this_node,
                             sized_by_jobs=sized_by_jobs,
                             heartbeat=heartbeat_of(settings.test_suite_heartbeat, history))
        result = run_suites(request, store, executor, host.say)
        device_tests, warnings, jobs = with_node_devices(device_tests, executor.node_devices(store), result,
                                                         store.load())
        verdict, step_warnings = judged(result, terms.policy, device_tests)
        warnings += step_warnings
        for warning in warnings:
            host.say(f'WARNING: {warning}')
        if prefix and not verdict.passed:
            keep(store, result, prefix)
    device = DeviceTerms(device_tests.requested, device_tests.enabled, tuple(device_tests.gpus), device_tests.reason)
    judged_by = JudgedTerms.of(terms.policy, terms.excluded, settings.rerun_failed_tests, device)
    return StepOutcome(result, verdict, terms.context, notes(store), test_seconds(store), device_tests, warnings,
                       judged_by, jobs)


def describe_step(inputs: StepInputs, host: StepHost) -> List[str]:
    """What the test step would do, for a dry run (`eb -x`): nothing is run, probed or read from the build."""
    settings = inputs.settings
    executor = executor_of(settings)
    terms = step_terms(inputs, False)
    context, policy = terms.context, terms.policy
    lines = ['test suite (eb_pytorch_cuda):']
    try:
        command = inputs.command(terms.excluded)
        lines.append(f"  command (no shell): {' '.join(command.argv)}  [in {command.cwd}]")
        if command.env:
            lines.append('  environment: ' + ' '.join(f'{k}={v}' for k, v in sorted(command.env.items())))
        lines.append(f"  suites: as its --dry-run selects them, run {inputs.batch_size} at most per run_test.py call "
                     f"(its own pool and serial list apply), {planned_slots(settings.parallel_test_suites)} at a "
                     f"time; XML reports on ({calls.XML_VARIABLE}=1, --save-xml under pytest or with xmlrunner)")
    except PluginError as err:
        lines.append(f'  command: cannot run without a shell: {err}')
    lines += [f'  {line}' for line in executor.describe(inputs.build_dir)]
    device_line = planned(settings.cuda_device_tests, host.has_cuda(None), context.compute_capabilities,
                          per_job=not executor.on_this_node)
    lines.append('  ' + device_line)
    lines.append(f'  scope: {context.cpu_family}, {context.target_line()}, '
                 f"compute capabilities {', '.join(context.compute_capabilities) or 'none'}")
    lines.append(f"  excluded (-x): {' '.join(terms.excluded) or 'none'}")
    lines.append(f'  budget for unknown failures: {policy.max_failed_tests}; reruns: {settings.rerun_failed_tests}')
    lines.append('  ' + planned_retries(settings.harness_retries, settings.rerun_failed_tests))
    for entry in policy.known:
        limit = f' (at most {entry.limit})' if entry.limit else ''
        lines.append(f"  known failure [{entry.scope or 'all'}]: {entry.pattern}{limit} -- {entry.reason}")
    others = [scope for scope in settings.known_test_failures if not context.applies(scope)]
    if others:
        lines.append(f"  known failures of scopes not in force here: {', '.join(others)} "
                     f'(set $EESSI_SOFTWARE_SUBDIR to build for another target)')
    lines.append(f'  results: {RESULTS_JSON} and {RESULTS_MARKDOWN} in <installdir>/easybuild/')
    return lines


def discard_kept(store: ResultStore, settings: TestSettings, say: Optional[Say] = None) -> List[str]:
    """--rebuild/--force: drop everything an earlier run of this build kept (the store, its complete result and
    tested build, what its executor left: a Slurm queue and its jobs); return the paths that were there."""
    kept = [path for path in (store.path, store.final_path, store.cache_dir) if os.path.exists(path)]
    store.remove()
    return kept + executor_of(settings, say).discard(store)


def finish(store: ResultStore, settings: TestSettings) -> None:
    """Drop what only this build's next run needed: the store, and what its executor left (a Slurm queue)."""
    store.remove()
    executor_of(settings).finish(store)


@contextlib.contextmanager
def no_installation(parent: Optional[str]) -> Iterator[Optional[TestedInstallation]]:
    """StepHost.tested_installation of a caller whose suites test what the environment imports (`test-suite`)."""
    yield None


def report_texts(outcome: StepOutcome, title: str = 'PyTorch test suite') -> Dict[str, str]:
    """{file name: text} of the reports, the same for the easyblock and `test-suite`: the JSON (with the
    scope and the store's notes; `eb-pytorch-cuda report` reads it back) and the Markdown summary, and where
    matplotlib is installed the time chart it shows (policy/timechart)."""
    data = to_json(outcome.result, outcome.verdict, outcome.context)
    data['notes'] = outcome.notes
    if outcome.test_seconds:
        data['test_seconds'] = outcome.test_seconds  # the next build's split (spread.controller.previous_test_seconds)
    if outcome.device_tests is not None:
        mode = outcome.device_tests
        data['cuda_device_tests'] = {'requested': mode.requested, 'enabled': mode.enabled, 'reason': mode.reason,
                                     'gpus': list(mode.gpus), 'environment': mode.environment}
        if outcome.jobs:
            data['cuda_device_tests']['jobs'] = outcome.jobs
    data['warnings'] = list(outcome.warnings)
    if outcome.terms is not None:
        data[TERMS_KEY] = outcome.terms.to_dict()  # `report` judges the JSON again by them (settings.terms_of)
    chart = svg_chart(outcome.result)
    markdown = to_markdown(outcome.result, outcome.verdict, title=title, context=outcome.context,
                           device_tests=outcome.device_tests.describe() if outcome.device_tests else None,
                           warnings=outcome.warnings, chart_image=TIME_CHART if chart else None)
    if outcome.jobs:
        markdown += '\n' + job_devices_markdown(outcome.jobs)
    return {RESULTS_JSON: json.dumps(data, indent=1, allow_nan=False) + '\n', RESULTS_MARKDOWN: markdown,
            **({TIME_CHART: chart} if chart else {})}


def job_devices_markdown(jobs: Mapping[str, Mapping]) -> str:
    """The Markdown table of what each Slurm job decided about the CUDA device tests on its node."""
    lines = ['## CUDA device tests per Slurm job', '',
             '| job | GPUs seen | CUDA device tests | suites | CUDA tests ran |', '|---|---|---|---|---|']
    for job, facts in jobs.items():
        ran = facts.get('cuda_tests_ran')
        lines.append(f"| {markdown_code(job, in_table=True)} | {len(facts.get('gpus') or [])} | "
                     f"{'on' if facts.get('enabled') else 'off'} | {facts.get('suites', 0)} | "
                     f"{'unknown' if ran is None else ran} |")
    return '\n'.join(lines) + '\n'


def easyconfig_command(runtest: str, pretestopts: str, testopts: str, source: str, start_dir: str, python: str,
                       excluded: Sequence[str]) -> TestCommand:
    """The test step's command: runtest with an easyconfig's pretestopts and testopts applied as
    PythonPackage.test_step applies them (`pretestopts runtest testopts`, run.command.with_test_options),
    without a shell; the runtest line's own assignments win over pretestopts'.  PluginError naming source
    (the easyconfig) when a part needs a shell."""
    text, pre_env = with_test_options(runtest, pretestopts, testopts, source)
    command = parse_runtest(text, start_dir, python, list(excluded))
    return dataclasses.replace(command, env={**pre_env, **command.env})


def verdict_lines(outcome: StepOutcome) -> List[str]:
    """The verdict and its reasons, one screen of lines (policy.report.to_text), then each suite's notes (a pass
    without a summary, log and XML disagreeing), for the caller to print."""
    return to_text(outcome.result, outcome.verdict).splitlines() + [
        printable(f"note: {suite}: {'; '.join(notes)}") for suite, notes in outcome.notes.items()]


def open_store(path: str, fingerprint: str) -> ResultStore:
    """The results store at path (JSON lines) of the build whose fingerprint (build_fingerprint) is given: the
    suites it holds for that fingerprint are not run again; records of another fingerprint are not read."""
    return ResultStore(path, fingerprint)
