"""The test step of a PyTorch build, EasyBuild-free: the one service the easyblock and `test-suite` call.

It owns what both must do alike: where the policy applies (scope_context: the GPUs the suites run on,
else the build's compute capabilities), running the suites (here in batches, or spread over Slurm jobs),
isolated reruns, the notes of the store, the verdict, keeping a run that failed on its verdict only, the
reports (report_texts: the same JSON, notes included, and the same Markdown, scoped, for both) and the
cleanup.  The callers supply their facts (the easyblock: EasyBuild's installation, environment and
messages; the CLI: a source tree, a Python and a results directory) and print.
"""

import dataclasses
import hashlib
import json
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from eb_pytorch_cuda import process
from eb_pytorch_cuda.leftovers import stop_leftovers
from eb_pytorch_cuda.testsuite.run import calls
from eb_pytorch_cuda.testsuite.run import discovery
from eb_pytorch_cuda.testsuite.run.executor import Executor, execute
from eb_pytorch_cuda.testsuite.run.here import HereExecutor
from eb_pytorch_cuda.testsuite.run.launcher import PROCESSES, Launcher
from eb_pytorch_cuda.testsuite.run.plan import HERE_PIECE_SECONDS, PieceRule, RunRequest, here_piece_rule
from eb_pytorch_cuda.testsuite.run.reruns import rerun_failures
from eb_pytorch_cuda.testsuite.run.retries import planned as planned_retries  # noqa: F401 - the dry run's
from eb_pytorch_cuda.testsuite.run.retries import retry_environment
from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.testsuite.policy.judging import Policy, ScopeContext, Verdict, detect_context, judge
from eb_pytorch_cuda.testsuite.policy.report import RESULTS_JSON, RESULTS_MARKDOWN, to_json, to_markdown
from eb_pytorch_cuda.testsuite.policy.settings import DEFAULT_SUITE_TIMEOUT, JUDGING, TestSettings, rule_timeout
from eb_pytorch_cuda.testsuite.policy.settings import TERMS_KEY, DeviceTerms, JudgedTerms
from eb_pytorch_cuda.testsuite.results import previous
from eb_pytorch_cuda.testsuite.results.model import RunResult
from eb_pytorch_cuda.testsuite.results.pieces import with_merged
from eb_pytorch_cuda.testsuite.run.command import TestCommand, parse_runtest
from eb_pytorch_cuda.testsuite.results.cudatests import cuda_totals
from eb_pytorch_cuda.testsuite.run.devicetests import (CUDA_ENVIRONMENT, UPSTREAM_ENVIRONMENT, DeviceTestMode, decide,
                                                       suite_environment)
from eb_pytorch_cuda.testsuite.run.devicetests import planned as planned_device_tests  # noqa: F401 - the dry run's
from eb_pytorch_cuda.testsuite.run.gpus import gpu_compute_capabilities, gpu_view
from eb_pytorch_cuda.testsuite.run.node import this_node
from eb_pytorch_cuda.testsuite.run.store import ResultStore
from eb_pytorch_cuda.testsuite.policy import settings as _settings
from eb_pytorch_cuda.testsuite.policy.judging import FAMILIES
from eb_pytorch_cuda.testsuite.policy.report import to_text
from eb_pytorch_cuda.testsuite.run.command import with_test_options
from eb_pytorch_cuda.testsuite.spread.worker import CLAIM_SECONDS

if TYPE_CHECKING:
    from eb_pytorch_cuda.testsuite.spread.controller import SpreadOptions

# --- what the easyblock reads of the step: it imports this module only (tests/test_easyblock_imports.py) ---
# the test step's easyconfig parameters (policy.settings: one list for all their readers) and their facts
SETTING_DEFAULTS = _settings.DEFAULTS
SETTING_NAMES = _settings.NAMES
MAX_RERUNS = _settings.MAX_RERUNS
TIMEOUT_RULE = _settings.TIMEOUT_RULE
CPU_FAMILIES = FAMILIES  # the CPU families a scope of excluded_tests/known_test_failures may name
# what the dry run says of a run: suites per run_test.py call, the XML switch, a Slurm job's claim
BATCH_SIZE = calls.DEFAULT_BATCH_SIZE
XML_VARIABLE = calls.XML_VARIABLE
CLAIM_MINUTES = CLAIM_SECONDS // 60

FLAG_VARIABLES = ('CFLAGS', 'CXXFLAGS', 'LDFLAGS', 'TORCH_CUDA_ARCH_LIST')


def build_fingerprint(easyconfig_values: Mapping[str, object], environ: Mapping[str, str],
                      extra: Optional[Mapping[str, object]] = None) -> str:
    """sha256 of what the tested build depends on: the easyconfig's parameters without the policy ones,
    the compiler flags, and extra facts (e.g. the CUDA compute capabilities)."""
    values = {k: v for k, v in easyconfig_values.items() if k not in JUDGING}  # policy, not build
    flags = {name: environ.get(name, '') for name in FLAG_VARIABLES}
    text = json.dumps({'easyconfig': values, 'flags': flags, 'extra': extra or {}}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def suite_timeouts(explicit: Optional[int], previous_results: Optional[str],
                   progress: Optional[Callable[[str], None]] = None) -> Dict[str, int]:
    """{suite: seconds}, '' for the rest: the explicit value, else 4x (at least 10 min) each suite's time in
    a previous results JSON (results.previous: a time that is not one is left out, said through progress),
    else the default (settings.TIMEOUT_RULE)."""
    if explicit:
        return {'': int(explicit)}
    timeouts = {'': DEFAULT_SUITE_TIMEOUT}
    times = previous.suite_seconds(previous_results, previous.load(previous_results), progress or (lambda note: None))
    for suite, seconds in times.items():
        timeouts[suite] = rule_timeout(seconds)
    return timeouts


def executor_for(jobs: int, spread: Optional['SpreadOptions'] = None,
                 progress: Optional[Callable[[str], None]] = None, launcher: Launcher = PROCESSES) -> Executor:
    """The executor of a run (run/executor): with jobs > 1 the Slurm one (spread/controller, that many jobs,
    spread: how), else the one here (run/here: batches on this node, its calls started by launcher)."""
    if int(jobs) > 1:
        from eb_pytorch_cuda.testsuite.spread import controller  # only a spread build needs Slurm's side
        return controller.SlurmExecutor(int(jobs), spread, progress)
    return HereExecutor(progress, launcher)


def here_pieces(previous_results: Optional[str], parallel: int,
                progress: Optional[Callable[[str], None]] = None) -> Optional[PieceRule]:
    """How a run here with `parallel` slots cuts its long suites (run/plan.here_piece_rule), from previous_results
    (a results JSON: its suites' and tests' times; what is not a time is said through progress); None without."""
    if parallel <= 1 or not previous_results:
        return None
    data = previous.load(previous_results)
    return here_piece_rule(previous.suite_seconds(previous_results, data),
                           previous.test_seconds(previous_results, data, progress or (lambda note: None)), parallel)


def spread_options(previous_results: Optional[str], tested_installation: Optional[str] = None,
                   progress: Optional[Callable[[str], None]] = None) -> 'SpreadOptions':
    """How the step spreads its suites: longest first and the long ones in pieces by previous_results (a
    results JSON: its suites' and tests' times), the tested installation checked as a path the jobs see."""
    from eb_pytorch_cuda.testsuite.spread import controller
    rule = PieceRule(controller.previous_suite_seconds(previous_results),
                     controller.previous_test_seconds(previous_results, progress))
    return controller.SpreadOptions(tested_installation=tested_installation, pieces=rule)


def run_suites(request: RunRequest, store: ResultStore, *, jobs: int = 1, spread: Optional['SpreadOptions'] = None,
               progress: Optional[Callable[[str], None]] = None, launcher: Launcher = PROCESSES) -> RunResult:
    """Run every suite of request not yet in store (here in batches, its long suites in pieces where the request
    cuts them: here_pieces; or with jobs > 1 on that many Slurm jobs: executor_for), then rerun failures in
    isolation; return the RunResult.  The plan of the run (run/plan) is built once, here, after the executor has
    refused what it cannot run."""
    progress = progress or (lambda message: None)
    # one run per store (a second one refuses in one line naming the directory); a SIGTERM/SIGHUP or Ctrl-C
    # stops every suite, batch and rerun group before we exit (eb_pytorch_cuda.process)
    with store.exclusive(), process.terminating_signals_stop_children():
        if store.notice is None:
            store.notice = progress  # each store line set aside is said once, naming the file and the line
        registry = store.path + '.children'  # the groups this run starts, for the next run to stop if it must
        leftovers = stop_leftovers(registry)
        for note in leftovers.notes:
            progress(note)
        for group in leftovers.stopped:
            progress(f'stopped process group {group}, left running by a killed previous run on {store.path}')
        with process.recorded_in(registry):
            plan, result = execute(executor_for(jobs, spread, progress, launcher), request, store, progress)
            rerun_failures(result, plan, progress)
            return result


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


def device_test_mode(requested: Union[bool, str], cuda_build: Callable[[], bool], env: Mapping[str, str],
                     on_this_node: bool = True) -> DeviceTestMode:
    """The CUDA device tests' mode (run/devicetests) for the suites about to run: on this node, from the GPUs it
    sees (run.gpus.gpu_view: those nvidia-smi lists that CUDA_VISIBLE_DEVICES leaves); for suites spread to
    Slurm jobs (on_this_node False) nothing is probed here, and only True turns the CUDA device tests on (the
    jobs' nodes have the GPUs).  cuda_build is asked only where it decides (a GPU seen, or True)."""
    if not on_this_node:
        if requested is True:
            return DeviceTestMode(True, True, (), True, 'True, suites spread over Slurm jobs (their nodes have the '
                                                        'GPUs: not probed here)', dict(CUDA_ENVIRONMENT))
        if requested is False:
            return decide(False, None, ())
        return DeviceTestMode(requested, None, (), False, "suites spread over Slurm jobs, whose GPUs are not probed "
                                                          "here (set cuda_device_tests = True to run CUDA device tests "
                                                          "there)", dict(UPSTREAM_ENVIRONMENT))
    if requested is False:
        return decide(False, None, ())
    view = gpu_view(env)
    return decide(requested, bool(cuda_build()) if view.visible else None, view.names, view.describe())


def planned_slots(parallel: Union[int, str]) -> str:
    """The dry run's words for parallel_test_suites (nothing is probed: the step sizes the node it runs on), and
    what more than one slot does with long suites (here_pieces)."""
    slots = (f'{parallel} call(s)' if parallel != 'auto' else
             "as many calls as the test step's node holds (parallel_test_suites='auto': its CPUs, memory and GPU "
             "memory; run/node)")
    if parallel == 'auto' or int(parallel) > 1:
        slots += (f" (with more than one and the previous build's results, a suite longer than its share of the "
                  f"node, at least {HERE_PIECE_SECONDS:.0f} s, runs as pieces side by side)")
    return slots


def batch_slots(parallel: Union[int, str], env: Mapping[str, str], device_tests: Optional[DeviceTestMode] = None,
                progress: Optional[Callable[[str], None]] = None) -> int:
    """The batches run at a time: parallel_test_suites as given, or for 'auto' what this node holds (run/node:
    its CPUs, available memory and, where CUDA device tests run, its GPUs' memory), said in one line."""
    if parallel != 'auto':
        return int(parallel)
    size = this_node(env, bool(device_tests and device_tests.enabled))
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
                  target: Optional[str] = None, aliases: tuple = (),
                  progress: Optional[Callable[[str], None]] = None) -> ScopeContext:
    """Where the policy applies.  on_this_node (the suites run here): the compute capabilities of the GPUs
    they run on, where nvidia-smi sees any, for a known failure scoped '8.0' was seen on such GPUs;
    otherwise (dry run, no GPU seen, suites spread to other nodes) the build's own."""
    seen = gpu_compute_capabilities(env) if on_this_node else ()
    if seen and progress:
        progress(f"policy scope: compute capabilities {', '.join(seen)} (the GPUs the suites run on; built for "
                 f"{', '.join(map(str, built_capabilities)) or 'none given'})")
    return detect_context(seen or tuple(built_capabilities), target=target, aliases=aliases)


@dataclass(frozen=True)
class TestStep:
    """What a test step runs: the command (easyconfig_command, source_tree_command) and its environment (the
    runtest line's and the caller's variables merged in), where the suites' outputs go, the Python of the
    reruns, a previous results JSON (its times: the timeouts, a spread's order and pieces), the tested
    installation (kept when the run fails on its verdict), the suites per run_test.py call (None: BATCH_SIZE)."""
    __test__ = False  # not a pytest test class
    command: TestCommand
    env: Mapping[str, str]
    output_dir: str
    python: str
    previous_results: Optional[str] = None
    tested_installation: Optional[str] = None
    batch_size: Optional[int] = None


@dataclass(frozen=True)
class StepTerms:
    """What a test step is run and judged by: the easyconfig's test settings, the policy made of them, and
    where that policy applies (scope_context)."""
    settings: TestSettings
    policy: Policy
    context: ScopeContext


def run_and_judge(step: TestStep, store: ResultStore, terms: StepTerms, *,
                  progress: Optional[Callable[[str], None]] = None,
                  device_tests: Optional[DeviceTestMode] = None) -> StepOutcome:
    """Run every suite of step not yet in store (run_suites), judge by the terms' policy; a run that failed on
    its verdict keeps its result, and its tested installation when one is given, for a re-judging without
    running a suite.  device_tests (device_test_mode): the suites' environment gets its variables (the runtest
    line's own win), and a run that saw a GPU and ran 0 CUDA tests is warned about (True: fails)."""
    settings, command, env = terms.settings, step.command, dict(step.env)
    if device_tests is not None:
        env = dict(env, **suite_environment(device_tests, command.env))
        if progress:
            progress(device_tests.describe())
    env = retry_environment(env, settings.harness_retries)  # rerun_failed_tests the only retry (run/retries)
    timeouts = suite_timeouts(settings.test_suite_timeout, step.previous_results, progress)
    jobs = int(settings.test_suite_jobs)
    slots = batch_slots(settings.parallel_test_suites, env, device_tests, progress)
    request = RunRequest(command, env, step.output_dir, step.python, timeouts, slots, settings.rerun_failed_tests,
                         step.batch_size or BATCH_SIZE,
                         pieces=here_pieces(step.previous_results, slots, progress) if jobs <= 1 else None)
    spread = spread_options(step.previous_results, step.tested_installation, progress) if jobs > 1 else None
    result = run_suites(request, store, jobs=jobs, spread=spread, progress=progress)
    verdict, warnings = judged(result, terms.policy, device_tests)
    for warning in warnings:
        if progress:
            progress(f'WARNING: {warning}')
    if step.tested_installation and not verdict.passed:
        keep(store, result, step.tested_installation)
    device = None if device_tests is None else DeviceTerms(device_tests.requested, device_tests.enabled,
                                                           tuple(device_tests.gpus), device_tests.reason)
    judged_by = JudgedTerms.of(terms.policy, tuple(settings.excluded(terms.context)), settings.rerun_failed_tests,
                               device)
    return StepOutcome(result, verdict, terms.context, notes(store), test_seconds(store), device_tests, warnings,
                       judged_by)


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


def report_texts(outcome: StepOutcome, title: str = 'PyTorch test suite') -> Dict[str, str]:
    """{file name: text} of the two reports, the same for the easyblock and `test-suite`: the JSON (with the
    scope and the store's notes; `eb-pytorch-cuda report` reads it back) and the Markdown summary."""
    data = to_json(outcome.result, outcome.verdict, outcome.context)
    data['notes'] = outcome.notes
    if outcome.test_seconds:
        data['test_seconds'] = outcome.test_seconds  # the next build's split (spread.controller.previous_test_seconds)
    if outcome.device_tests is not None:
        mode = outcome.device_tests
        data['cuda_device_tests'] = {'requested': mode.requested, 'enabled': mode.enabled, 'reason': mode.reason,
                                     'gpus': list(mode.gpus), 'environment': mode.environment}
    data['warnings'] = list(outcome.warnings)
    if outcome.terms is not None:
        data[TERMS_KEY] = outcome.terms.to_dict()  # `report` judges the JSON again by them (settings.terms_of)
    markdown = to_markdown(outcome.result, outcome.verdict, title=title, context=outcome.context,
                           device_tests=outcome.device_tests.describe() if outcome.device_tests else None,
                           warnings=outcome.warnings)
    return {RESULTS_JSON: json.dumps(data, indent=1, allow_nan=False) + '\n', RESULTS_MARKDOWN: markdown}


def finish(store: ResultStore, jobs: int = 1) -> None:
    """Drop what only this build's next run needed: the store, and the Slurm queue of a spread run."""
    store.remove()
    if jobs > 1:
        from eb_pytorch_cuda.testsuite.spread.controller import remove_queue
        remove_queue(store)


# --- `eb-pytorch-cuda test-suite`: a source tree's suites against an installed torch, outside EasyBuild ---

DEFAULT_RUNTEST = 'cd test && %(python)s run_test.py --continue-through-error %(excluded_tests)s'


_IS_PYTHON = 'import sys; print("python", sys.hexversion)'


def check_inputs(source: str, python: str) -> str:
    """The test directory of source; PluginError (bad input) when source or python is unusable.  python must
    run as a Python (one short child): `/bin/false` or `/bin/true` is refused here, before the results
    directory, its lock and its registry are created (before, they were left behind by the refusal that
    came from the harness's dry run)."""
    test_dir = os.path.join(source, 'test')
    if not os.path.isfile(os.path.join(test_dir, 'run_test.py')):
        raise PluginError(source, 'is not a PyTorch source tree (no test/run_test.py)')
    if not (os.path.isfile(python) and os.access(python, os.X_OK)):
        raise PluginError(python, 'is not an executable Python')
    try:
        done = process.capture([python, '-c', _IS_PYTHON], timeout=120, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise PluginError(python, f'is not an executable Python ({getattr(err, "strerror", None) or err})') \
            from None
    words = done.stdout.split()
    if done.returncode != 0 or len(words) != 2 or words[0] != b'python' or not words[1].isdigit():
        raise PluginError(python, f'is not a Python (`-c` code exited {done.returncode} without printing its '
                                  f'version)')
    return test_dir


def make_results_dir(results_dir: str) -> None:
    """Create results_dir (and its parents); PluginError naming it when it cannot be (`--results /dev/full`:
    "is a character device, not a directory", where os.makedirs says only "File exists")."""
    from eb_pytorch_cuda.inputs import file_kind
    try:
        os.makedirs(results_dir, exist_ok=True)
    except FileExistsError:
        try:
            kind = file_kind(os.stat(results_dir).st_mode)
        except OSError:
            kind = 'a symbolic link to nothing'
        raise PluginError(results_dir, f'is {kind}, not a directory') from None
    except OSError as err:
        raise PluginError(results_dir, f'cannot be created: {err.strerror}') from None


def store_for(results_dir: str, source: str, python: str, argv: Sequence[str],
              command_env: Optional[Dict[str, str]] = None) -> ResultStore:
    """The results store of this tree, Python and command (its argv and the assignments of its runtest line and
    pretestopts) in results_dir: the same command again runs only what is missing."""
    facts: Dict[str, object] = {'source': os.path.realpath(source), 'python': os.path.abspath(python),
                                'argv': list(argv)}
    if command_env:  # a command without assignments keeps the key it always had
        facts['env'] = dict(sorted(command_env.items()))
    key = json.dumps(facts)
    fingerprint = hashlib.sha256(key.encode()).hexdigest()
    return ResultStore(os.path.join(results_dir, 'results.jsonl'), fingerprint)


def source_tree_command(source: str, python: str, runtest: Optional[str] = None, excluded: Sequence[str] = (),
                        pretestopts: str = '', testopts: str = '', origin: str = 'runtest') -> TestCommand:
    """The test command of `test-suite` on source's test/ with python: runtest (an easyconfig's with its
    pretestopts and testopts, or --runtest), else DEFAULT_RUNTEST, built as the test step builds its own
    (easyconfig_command); origin names where a part that needs a shell came from."""
    # the command runs in test/; a venv's python must stay a path into the venv
    return easyconfig_command(runtest or DEFAULT_RUNTEST, pretestopts, testopts, origin, os.path.abspath(source),
                              os.path.abspath(python), excluded)


def easyconfig_command(runtest: str, pretestopts: str, testopts: str, source: str, start_dir: str, python: str,
                       excluded: Sequence[str]) -> TestCommand:
    """The test step's command: runtest with an easyconfig's pretestopts and testopts applied as
    PythonPackage.test_step applies them (`pretestopts runtest testopts`, run.command.with_test_options),
    without a shell; the runtest line's own assignments win over pretestopts'.  PluginError naming source
    (the easyconfig) when a part needs a shell."""
    text, pre_env = with_test_options(runtest, pretestopts, testopts, source)
    command = parse_runtest(text, start_dir, python, list(excluded))
    command.env = {**pre_env, **command.env}
    return command


def verdict_lines(outcome: StepOutcome) -> List[str]:
    """The verdict and its reasons, one screen of lines (policy.report.to_text), for the caller to print."""
    return to_text(outcome.result, outcome.verdict).splitlines()


def open_store(path: str, fingerprint: str) -> ResultStore:
    """The results store at path (JSON lines) of the build whose fingerprint (build_fingerprint) is given: the
    suites it holds for that fingerprint are not run again; records of another fingerprint are not read."""
    return ResultStore(path, fingerprint)


def torch_has_cuda(python: str) -> bool:
    """The torch that python imports is a CUDA build: its lib/ holds libtorch_cuda.so (found without importing
    torch, which takes seconds)."""
    code = ("import importlib.util as u, os; s = u.find_spec('torch'); "
            "print(os.path.isfile(os.path.join(s.submodule_search_locations[0], 'lib', 'libtorch_cuda.so')) "
            "if s and s.submodule_search_locations else False)")
    try:
        done = process.capture([python, '-c', code], timeout=60)
    except (OSError, PluginError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and done.stdout.strip() == b'True'


def test_source_tree(source: str, python: str, results_dir: str, command: TestCommand, terms: StepTerms, *,
                     progress: Optional[Callable[[str], None]] = None,
                     device_tests: Optional[DeviceTestMode] = None) -> StepOutcome:
    """The test step of command (source_tree_command) on source's test/ with python, run and judged by terms;
    results, outputs and reports kept in results_dir."""
    check_inputs(source, python)
    discovery.check_command(command)  # every refusal of the inputs before anything is created
    python = os.path.abspath(python)
    created = not os.path.lexists(results_dir)
    make_results_dir(results_dir)
    store = store_for(results_dir, source, python, command.argv, command.env)
    step = TestStep(command, dict(os.environ, **command.env), os.path.join(results_dir, 'output'), python,
                    os.path.join(results_dir, RESULTS_JSON))
    try:
        return run_and_judge(step, store, terms, progress=progress, device_tests=device_tests)
    except PluginError:
        # refused before any suite was stored (the harness's own dry run failed: a torch that does not import):
        # the directory this call made, with only its lock and registry in it, goes again
        if created and not os.path.exists(store.path):
            shutil.rmtree(results_dir, ignore_errors=True)
        raise
