"""Whether the suites run PyTorch's device-generic tests for CUDA, and what the test environment says so.

Upstream EB_PyTorch's test step sets SANDCASTLE=1 ("pretend to be on FB CI, which disables some tests").  In
that mode torch.testing._internal.common_device_type.get_device_type_test_bases() builds the CPU test base only
(PYTORCH_TEST_REMOTE_GPU=1: the CUDA base only), so on a GPU node no `*DeviceTypeCUDA` test of test_ops, test_nn,
nn/test_convolution, ... is instantiated and the step is blind to the very failure this project fixes (measured
on the H200 through eb: 0 tests ran, PASS, an unpatched PyTorch installed).  No variable gives both bases while
IS_SANDCASTLE holds; with SANDCASTLE=0 (and neither TW_JOB_USER=sandcastle nor PYTORCH_TEST_FBCODE=1) both are
built where torch.cuda.is_available().  What else IS_SANDCASTLE changes, and why turning it off is safe on a node
without network, is in docs/design.md §5.2 (file and line of each harness line).

The mode (easyconfig `cuda_device_tests`, `test-suite --cuda-device-tests`):
- 'auto': CUDA and CPU device tests where the step sees a GPU (run.gpus: one nvidia-smi lists that
  CUDA_VISIBLE_DEVICES leaves, as CUDA reads it: set empty, `-1`, or naming no GPU of the node, none) and the
  build has CUDA; elsewhere upstream's behaviour, unchanged;
- True: the same, and a step that sees no GPU (or a build without CUDA) stops before anything runs;
- False: upstream's behaviour (SANDCASTLE=1: CPU device tests only).
Where the mode is off nothing is changed: the easyblock's test step keeps upstream's SANDCASTLE=1, and
`test-suite` the environment it was given.
"""

from dataclasses import dataclass, field
from typing import Dict, Mapping, Optional, Sequence, Tuple, Union

from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.testsuite.run.gpus import gpu_view

SANDCASTLE = 'SANDCASTLE'
UPSTREAM_ENVIRONMENT: Dict[str, str] = {}  # nothing changed: the test step's SANDCASTLE=1 (upstream's) stays
CUDA_ENVIRONMENT = {SANDCASTLE: '0'}  # common_utils.IS_SANDCASTLE off: CPU and CUDA test bases


@dataclass(frozen=True)
class DeviceTestMode:
    """What the test step does about CUDA device tests, and why (said by the dry run and the step)."""

    requested: Union[bool, str]  # the parameter as given: 'auto', True, False
    cuda_build: Optional[bool]  # the build (or the tested torch) has CUDA; None: not asked (no GPU seen)
    gpus: Tuple[str, ...]  # the GPUs the suites would run on, as the step sees them
    enabled: bool  # the suites run the CUDA (and CPU) device-generic tests
    reason: str
    environment: Dict[str, str] = field(default_factory=dict)  # what the step sets for the suites

    def describe(self) -> str:
        """One line: the mode, why, and what is set."""
        state = 'CUDA and CPU device tests' if self.enabled else "upstream's device tests (CPU only under SANDCASTLE=1)"
        setting = ' '.join(f'{name}={value}' for name, value in sorted(self.environment.items())) or 'nothing'
        return f'cuda_device_tests={self.requested!r}: {state}: {self.reason}; sets {setting}'


def decide(requested: Union[bool, str], cuda_build: Optional[bool], gpus: Sequence[str],
           seen: Optional[str] = None) -> DeviceTestMode:
    """The mode for requested ('auto', True, False) where the build has CUDA or not and gpus are seen (seen: the
    words for them, run/gpus.GpuView.describe, which says why none is); PluginError (cuda_device_tests: ...) for
    True where the step cannot run CUDA tests, so nothing runs."""
    gpus = tuple(gpus)
    if seen is None:
        seen = (f"{len(gpus)} GPU(s) seen ({', '.join(gpus)})" if gpus else
                'no GPU seen (nvidia-smi, CUDA_VISIBLE_DEVICES)')
    build = {True: ', the build has CUDA', False: ', the build has no CUDA', None: ''}[cuda_build]
    if requested is False:
        return DeviceTestMode(requested, cuda_build, gpus, False, 'switched off', dict(UPSTREAM_ENVIRONMENT))
    if cuda_build and gpus:
        return DeviceTestMode(requested, cuda_build, gpus, True, f'{seen}{build}', dict(CUDA_ENVIRONMENT))
    if requested is True:
        raise PluginError('cuda_device_tests', f'is True, but the test step cannot run CUDA tests here: {seen}'
                                               f'{build}')
    return DeviceTestMode(requested, cuda_build, gpus, False, f'{seen}{build}', dict(UPSTREAM_ENVIRONMENT))


def planned(requested: Union[bool, str], cuda_build: bool, compute_capabilities: Sequence[str],
            per_job: bool = False) -> str:
    """The dry run's line (nothing is probed: the step decides on the node it runs on; per_job: each job of a
    spread run decides on its own node)."""
    if requested is False:
        return f'cuda_device_tests=False: CPU device tests only (upstream\'s {SANDCASTLE}=1)'
    if not cuda_build:
        return (f'cuda_device_tests={requested!r}: the build has no CUDA: CPU device tests only ({SANDCASTLE}=1)'
                + (' (True: the test step will stop)' if requested is True else ''))
    built = ', '.join(compute_capabilities) or 'none given'
    who = 'each Slurm job, on its own node,' if per_job else 'the test step'
    where = ('stops before any suite runs' if requested is True and not per_job else
             'the step stops, naming the job' if requested is True else f'CPU device tests only, {SANDCASTLE}=1')
    return (f'cuda_device_tests={requested!r}: where {who} sees a GPU (nvidia-smi, CUDA_VISIBLE_DEVICES): CUDA '
            f'and CPU device tests, {SANDCASTLE}=0; where it sees none: {where} (cuda_compute_capabilities: {built})')


def suite_environment(mode: DeviceTestMode, runtest_env: Mapping[str, str]) -> Dict[str, str]:
    """What the suites' environment gets from the mode; the runtest line's own assignment of a variable wins, as
    every assignment on that line does."""
    return {name: value for name, value in mode.environment.items() if name not in runtest_env}


@dataclass(frozen=True)
class JobDecision:
    """What a job that runs suites on another node (a Slurm job of a spread run) needs to decide the mode there,
    on its own GPUs: the mode as requested, whether the build has CUDA (asked where the tested installation was
    made), and the mode's variables the runtest line sets itself (those stay as the line sets them)."""

    requested: Union[bool, str]
    cuda_build: bool
    runtest_sets: Tuple[str, ...] = ()

    def to_json(self) -> Dict[str, object]:
        return {'requested': self.requested, 'cuda_build': self.cuda_build, 'runtest_sets': list(self.runtest_sets)}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> 'JobDecision':
        """The decision is_job_decision accepted."""
        requested = data['requested']
        sets = data.get('runtest_sets')
        return cls(requested if isinstance(requested, (bool, str)) else 'auto', bool(data['cuda_build']),
                   tuple(str(name) for name in sets) if isinstance(sets, list) else ())

    def on_this_node(self, env: Mapping[str, str]) -> DeviceTestMode:
        """The mode on the node that runs with env (its GPUs: run/gpus.gpu_view, CUDA_VISIBLE_DEVICES as Slurm set
        it); PluginError for True where this node cannot run CUDA tests."""
        view = gpu_view(env)
        mode = decide(self.requested, self.cuda_build if view.visible else None, view.names, view.describe())
        kept = {name: value for name, value in mode.environment.items() if name not in self.runtest_sets}
        return DeviceTestMode(mode.requested, mode.cuda_build, mode.gpus, mode.enabled, mode.reason, kept)


def is_job_decision(data: object) -> bool:
    """data is a JobDecision's JSON (a queue spec's key, checked before a job reads it)."""
    return (isinstance(data, dict) and data.get('requested') in ('auto', True, False)
            and isinstance(data.get('cuda_build'), bool)
            and all(isinstance(name, str) for name in data.get('runtest_sets') or []))
