"""The run plan: everything a test step's run is made of, put together once (build_plan), then handed to
an executor (run/executor: here in batches, or over Slurm jobs) and to the reruns.

build_plan is the one caller of harness_environment, harness_of and discovery.discover: the submitting side
builds the plan from the test command, a Slurm job rebuilds it from its queue spec (spread/worker.plan_of_spec)
through the same function, with the units given instead of discovered.
"""

from dataclasses import dataclass, field, replace
from typing import Callable, Dict, FrozenSet, Mapping, Optional, Sequence, Tuple

from eb_pytorch_cuda.testsuite.policy.settings import DEFAULT_SUITE_TIMEOUT, piece_timeouts, timeout_of
from eb_pytorch_cuda.testsuite.results import pieces
from eb_pytorch_cuda.testsuite.run import calls, discovery, piece_times
from eb_pytorch_cuda.testsuite.run.command import TestCommand, harness_environment
from eb_pytorch_cuda.testsuite.run.devicetests import JobDecision
from eb_pytorch_cuda.testsuite.run.gpu_share import processes_on_a_gpu, share_environment, share_line
from eb_pytorch_cuda.testsuite.run.gpus import slot_gpus
from eb_pytorch_cuda.testsuite.run.harness import Harness, harness_of
from eb_pytorch_cuda.testsuite.run.heartbeat import HeartbeatSettings
from eb_pytorch_cuda.testsuite.run.node import gpu_memory_gib, threads_per_suite, usable_cpus


@dataclass(frozen=True)
class PieceRule:
    """How long suites are cut into pieces (results/pieces), for a run spread over Slurm jobs or here in parallel
    slots (here_piece_rule): a suite expected
    (previous_seconds: {suite: s} of a previous run) to take longer than piece_seconds (None: never) is run as
    pieces, cut by its tests' times where previous_test_seconds ({suite: {node id: s}}) has them."""
    previous_seconds: Mapping[str, float] = field(default_factory=dict)
    previous_test_seconds: Optional[Mapping[str, Dict[str, float]]] = None
    piece_seconds: Optional[float] = pieces.PIECE_SECONDS


HERE_PIECE_SECONDS = 120.0  # a piece run here costs a process that imports torch and collects its file again


def here_piece_rule(previous_seconds: Mapping[str, float], previous_test_seconds: Mapping[str, Dict[str, float]],
                    parallel: int) -> Optional[PieceRule]:
    """How a run here (run/here) with `parallel` slots cuts its long suites, from a previous run's times: a suite
    longer than its share of the node (the previous run's total over the slots, at least HERE_PIECE_SECONDS) runs
    as pieces side by side, so one long suite does not hold the node while the other slots idle (a GPU node:
    one GPU, 16 cores).  None: one slot, or no previous times (the first build of a target runs whole suites)."""
    if parallel <= 1 or not previous_seconds:
        return None
    share = sum(previous_seconds.values()) / parallel
    return PieceRule(dict(previous_seconds), dict(previous_test_seconds), max(HERE_PIECE_SECONDS, share))


@dataclass(frozen=True)
class RunRequest:
    """What a caller asks of a run: the test command and the environment it runs in (the runtest line's and
    the caller's own variables merged in), where outputs go, the Python of the reruns, the timeouts ({suite or
    piece key: s, '': every other}), the calls at a time, the reruns of a failed test, the suites per call.
    units (suite or piece keys) given: run those, nothing is discovered (a Slurm job, a test); serial: keys
    the harness runs alone besides its own lists; pieces: cut long suites (a spread run); done: keys already
    measured (not cut, their times files not written); tested_installation: the installation the suites test
    (where the executor checks that its nodes see it, and what is kept when the run fails on its verdict only);
    job_devices: where the suites run on other nodes, what each decides the CUDA device tests' mode by there;
    heartbeat: how often the run says what runs (run/heartbeat); on_other_nodes: the suites run on other nodes
    (Slurm jobs), each of which sets its suites' OMP_NUM_THREADS from its own CPUs; sized_by_jobs: there, with
    parallel_test_suites='auto', each job also sizes its slots by its own node (run/node), and parallel is only
    this node's estimate (the claims' size)."""
    command: TestCommand
    environ: Mapping[str, str]
    output_dir: str
    python: str
    timeouts: Mapping[str, float] = field(default_factory=lambda: {'': DEFAULT_SUITE_TIMEOUT})
    parallel: int = 1
    reruns: int = 0
    batch_size: int = calls.DEFAULT_BATCH_SIZE
    units: Optional[Sequence[str]] = None
    serial: FrozenSet[str] = frozenset()
    pieces: Optional[PieceRule] = None
    done: FrozenSet[str] = frozenset()
    tested_installation: Optional[str] = None
    job_devices: Optional[JobDecision] = None
    heartbeat: HeartbeatSettings = HeartbeatSettings()
    on_other_nodes: bool = False
    sized_by_jobs: bool = False


@dataclass(frozen=True)
class RunPlan:
    """One run, built once (build_plan) from its request: every runner, executor and the reruns read it, none
    rebuilds a part.  It holds the request and what it derives from it, nothing copied.

    command: the request's, with the excluded tests the harness does not know left out (run/discovery); env: the
    suites' environment (run.command.harness_environment: without PyTorch's CI switch unless the runtest line
    sets it; the threads per suite where several calls share the node); harness: run_test.py's facts, its serial
    list completed by what it listed in its dry run and what the request runs alone; suites: the whole suites,
    in the harness's order; units: what runs (suite or piece keys; a piece: results/pieces); options: every
    run_test.py call's options (run/calls.batch_options); timeouts: {key: s, '': s}, the pieces' shares included
    (policy.settings.piece_timeouts); expected: {key: s} a unit is expected to take (a spread run orders its
    queue by it); parallel: the calls at a time (at least 1); gpus: the GPU of each slot (run/gpus.slot_gpus;
    empty: not pinned)."""
    request: RunRequest
    command: TestCommand
    env: Mapping[str, str]
    harness: Harness
    suites: Tuple[str, ...]
    units: Tuple[str, ...]
    options: Tuple[str, ...]
    timeouts: Mapping[str, float]
    expected: Mapping[str, float]
    parallel: int
    gpus: Tuple[str, ...]
    shared_cpus: Optional[int] = None

    def call_env(self, processes: int = 1, alone: bool = False) -> Mapping[str, str]:
        """The environment of one run_test.py call that runs up to `processes` suite processes at once (1: a piece
        or a call of one suite; a batch: min(its suites, the harness's pool)): with shared_cpus (the CPUs the
        plan's calls share where it sets the threads), OMP_NUM_THREADS = shared_cpus // (calls x processes)
        (run.node.threads_per_suite).  A call with no other beside it (alone: the harness's serial list, run
        after the others) gets none, as in upstream's one call: on the H100, nn/test_convolution's CUDA tests,
        whose references run on the CPU, took 55 s in the plain call and 188 s alone at 1 thread
        (docs/benchmarks.md, gpu case).  A call beside others on a GPU (the slots pinned to GPUs, run/gpus) gives
        each of its suite processes the harness's own share of a call (run/gpu_share), which 2.6's run_test.py
        misses for a call's first suites; one alone is left to the harness."""
        if alone:
            return self.env
        env = dict(self.env)
        if self.gpus:
            env = share_environment(env, self.harness.pool_size)
        if self.shared_cpus is not None:
            env['OMP_NUM_THREADS'] = str(threads_per_suite(self.shared_cpus, self.parallel, max(1, processes)))
        return env

    @property
    def output_dir(self) -> str:
        """Where the suites' outputs go (the request's)."""
        return self.request.output_dir

    @property
    def python(self) -> str:
        """The Python of the reruns (the request's)."""
        return self.request.python

    @property
    def reruns(self) -> int:
        """Reruns of a failed test (the request's)."""
        return int(self.request.reruns)

    @property
    def batch_size(self) -> int:
        """Suites per run_test.py call (the request's)."""
        return self.request.batch_size

    @property
    def heartbeat(self) -> HeartbeatSettings:
        """How often the run says what runs (the request's: run/heartbeat)."""
        return self.request.heartbeat

    def timeout_for(self, key: str) -> float:
        """A suite's or piece's timeout: its own, else its suite's, else the default (policy.settings.timeout_of)."""
        return timeout_of(self.timeouts)(key)


def build_plan(request: RunRequest, progress: Optional[Callable[[str], None]] = None) -> RunPlan:
    """The plan of request: the suites' environment, the harness, the suites (asked of the harness with
    `--dry-run`: run/discovery, unless request.units are given), their pieces, the call options, the
    timeouts, the GPU slots.  progress hears that XML reports are off and how long suites are cut."""
    progress = progress or (lambda message: None)
    command = request.command
    env = harness_environment(request.environ, command)
    harness = harness_of(command.cwd)
    piece_times.check_times_file(command.cwd, harness)  # the harness opens it at its start: a FIFO would hang it
    if request.units is None:
        selection = discovery.select(command, env)
        suites = selection.suites
        harness = replace(harness, serial=harness.serial | (selection.serial or set()))  # what it says runs alone
        if selection.unknown_excluded:  # not an error: upstream's easyconfigs name files that some trees lack
            progress(discovery.unknown_exclusions_line(selection.unknown_excluded))
            command = selection.command
        units = [pieces.Piece(suite) for suite in suites]
    else:
        units = [pieces.Piece.parse(key) for key in request.units]
        suites = list(dict.fromkeys(unit.suite for unit in units))
    harness = replace(harness, serial=harness.serial | set(request.serial))
    safe = calls.xml_reports_safe(harness, command, env)
    if not safe:
        progress(f"XML reports off: the suites run under unittest and {command.argv[0]} cannot import xmlrunner "
                 f"(unittest-xml-reporting), which --save-xml needs; results come from the log only")
    expected: Dict[str, float] = {}
    timeouts = dict(request.timeouts)
    if request.pieces is not None:
        rule = request.pieces
        # a suite stored whole (or as all its pieces: done holds its name) is done; one partly run as pieces keeps
        # the count it was cut into (a resume with another slot count would cut it otherwise: all of it again)
        started = _partly_run(request.done)
        units = [unit for unit in units if unit.key not in request.done and unit.suite not in request.done]
        kept = [pieces.Piece(suite, index, count) for suite, count in sorted(started.items())
                for index in range(1, count + 1)]
        units = _cut(command.cwd, harness, [unit.suite for unit in units if unit.whole and unit.suite not in started],
                     rule, progress, kept) + \
            [unit for unit in units if not unit.whole and unit.suite not in started]
        units = [unit for unit in units if unit.key not in request.done]  # a kept piece already stored
        expected = dict(rule.previous_seconds,
                        **pieces.expected_of(units, rule.previous_seconds, rule.previous_test_seconds))
        timeouts.update(piece_timeouts(request.timeouts, expected, units))  # a piece's: its share of its suite's
    parallel = max(1, int(request.parallel))
    # where the suites run on other nodes, each job's worker plan sets the threads from its CPUs (spread/worker)
    shared_cpus = None if request.on_other_nodes else sets_threads(env, parallel, usable_cpus())
    if shared_cpus is not None:
        pool = harness.pool_size
        progress(f"OMP_NUM_THREADS for each suite process: {threads_per_suite(shared_cpus, parallel, 1)} in a piece "
                 f"or a call of one suite, {threads_per_suite(shared_cpus, parallel, pool)} in a call of {pool} "
                 f"or more ({shared_cpus} CPUs over {parallel} run_test.py calls); torch's own count for the suites "
                 f"run alone; set OMP_NUM_THREADS to choose")
    gpus = tuple(slot_gpus(env, parallel))
    if gpus:  # calls side by side on the GPUs share their memory (run/gpu_share)
        progress(share_line(processes_on_a_gpu(parallel, gpus, harness.pool_size), harness.pool_size,
                            gpu_memory_gib(env), int(request.reruns)))
    return RunPlan(request, command, env, harness, tuple(suites), tuple(unit.key for unit in units),
                   tuple(calls.batch_options(harness, safe)), timeouts, expected, parallel, gpus, shared_cpus)


def sets_threads(env: Mapping[str, str], parallel: int, cpus: int) -> Optional[int]:
    """The CPUs whose threads the plan shares among its calls' suite processes (RunPlan.call_env), or None: one
    call (upstream's test step, unchanged) or a value the user set (the environment's, the runtest line's)."""
    if parallel <= 1 or 'OMP_NUM_THREADS' in env:
        return None
    return cpus


def _partly_run(done: FrozenSet[str]) -> Dict[str, int]:
    """{suite: the count its stored pieces were cut into} for each suite with pieces among done and no record of
    its own there (results/pieces.with_merged puts a complete one's name in done)."""
    found: Dict[str, int] = {}
    for key in sorted(done):
        piece = pieces.Piece.parse(key)
        if not piece.whole and piece.suite not in done:
            found.setdefault(piece.suite, piece.count)
    return found


def _cut(test_dir: str, harness: Harness, suites: Sequence[str], rule: PieceRule,
         progress: Callable[[str], None], kept: Sequence[pieces.Piece] = ()) -> list:
    """The units of suites: those expected to take longer than rule.piece_seconds as their pieces, when the
    harness can split them (a times file for its `--shard`: run/piece_times), and kept (pieces of suites a
    previous attempt cut) as they are; a suite with a custom handler stays whole (its handler runs the file its
    own way, and sets its own report directory).  With nothing cut, a times file of ours left by an earlier run
    is emptied: it would have the harness shard those suites inside our batches."""
    splittable = {suite: seconds for suite, seconds in rule.previous_seconds.items() if not harness.has_handler(suite)}
    units = (pieces.split(suites, splittable, rule.piece_seconds, rule.previous_test_seconds) if rule.piece_seconds
             else [pieces.Piece(suite) for suite in suites])
    units += list(kept)
    if all(unit.whole for unit in units):
        piece_times.clear_times(test_dir, harness)
        return units
    why_not = piece_times.write_times(test_dir, harness, units)
    if why_not:
        progress(f'not splitting long suites: {why_not}')
        return [pieces.Piece(suite) for suite in dict.fromkeys(unit.suite for unit in units)]
    split = sorted({unit.suite for unit in units if not unit.whole})
    progress(f"{len(split)} long suite(s) run as pieces ({sum(not unit.whole for unit in units)} in all): "
             + ', '.join(split))
    return units
