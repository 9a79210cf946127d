"""Scopes: where an entry of excluded_tests or known_test_failures applies, and where a build runs.

A scope is written as a string in an easyconfig ('' everywhere, a CPU family 'x86_64', an EESSI CPU target
'x86_64/intel/haswell' with globs allowed, a CUDA compute capability '9.0').  Scope.parse reads that string
once into a Scope, which knows its kind: whether it applies where a build runs (a ScopeContext), the wider
scopes a suggestion may lift it to, its place in a listing and a description.  This module is the only one
that tells the kinds apart; the judge (policy/judging), the suggester (policy/suggest), the test settings and
the saved results ask a Scope or a ScopeContext, never the string's shape.

A Scope is a str (its text as written), so that it is a key of the easyconfig's dict, json.dumps writes it and
repr() gives the literal a suggestion prints, as the plain strings it stands for.

A ScopeContext is where a build runs: its CPU family, its EESSI-style CPU target and the compute capabilities
of the GPUs it is tested on (or built for).  A judged run records it (to_json) so that a report or a
suggestion made elsewhere applies the scopes of where the run ran (from_json).
"""

import os
import platform
import re
from dataclasses import dataclass, replace
from enum import Enum
from fnmatch import fnmatchcase
from typing import Any, List, Mapping, Optional, Tuple, Union

from eb_pytorch_cuda.errors import PluginError

FAMILIES = ('x86_64', 'aarch64', 'ppc64le', 'riscv64')  # the CPU families a scope may name
# EasyBuild's names of CPU families (systemtools.get_cpu_architecture, and its family 'RISC-V'): upstream
# EB_PyTorch's excluded_tests are keyed by them
EASYBUILD_FAMILIES = {'AArch64': 'aarch64', 'POWER': 'ppc64le', 'RISCV64': 'riscv64', 'RISC-V': 'riscv64'}
_COMPUTE_CAPABILITY = re.compile(r'^\d+\.\d+$')
_NVCC_ARCH = re.compile(r'^(?:sm|compute)_(\d+)(\d)a?$')  # nvcc's sm_90, compute_90: a hint, not a scope
_VENDORS = {'GenuineIntel': 'intel', 'AuthenticAMD': 'amd'}  # archspec's vendors that EESSI's targets name

# where a ScopeContext's target came from: named by the caller (--target, a saved result's scope), the EESSI
# variable, archspec's detection of this CPU (as EESSI's own eessi_software_subdir_for_host.py), or neither
GIVEN, EESSI, ARCHSPEC, FALLBACK = 'given', '$EESSI_SOFTWARE_SUBDIR', 'archspec', 'fallback'
TARGET_SOURCES = (GIVEN, EESSI, ARCHSPEC, FALLBACK)
_SAID = {GIVEN: 'as given', EESSI: 'from $EESSI_SOFTWARE_SUBDIR', ARCHSPEC: 'detected by archspec',
         FALLBACK: 'fallback'}


def is_compute_capability(text: object) -> bool:
    """Whether text is written as a CUDA compute capability ('8.0', '10.0'), as nvidia-smi and EasyBuild's
    cuda_compute_capabilities write them."""
    return bool(_COMPUTE_CAPABILITY.match(str(text)))


class ScopeKind(Enum):
    """The kinds of scope, widest first (the order a suggestion lists them in).  The value names the kind's form
    in a refusal; help_text in an easyconfig parameter's help."""

    EVERYWHERE = "''"
    CPU_FAMILY = f"a CPU family ({', '.join(FAMILIES)})"
    CPU_TARGET = "an EESSI target such as 'x86_64/intel/haswell'"
    COMPUTE_CAPABILITY = "a CUDA compute capability such as '9.0'"

    @property
    def rank(self) -> int:
        return list(ScopeKind).index(self)

    @property
    def help_text(self) -> str:
        return _HELP[self]


_HELP = {
    ScopeKind.EVERYWHERE: "'' (all)",
    ScopeKind.CPU_FAMILY: f"a CPU family ({', '.join(map(repr, FAMILIES))}, or EasyBuild's "
                          f"{'/'.join(repr(name) for name in list(EASYBUILD_FAMILIES)[:2])})",
    ScopeKind.CPU_TARGET: "an EESSI CPU target ('x86_64/intel/haswell', globs allowed; from $EESSI_SOFTWARE_SUBDIR, "
                          "else detected)",
    ScopeKind.COMPUTE_CAPABILITY: "a CUDA compute capability ('9.0': the GPUs the suites run on, else the build's)",
}


def _listed(phrases: List[str], last: str) -> str:
    return ', '.join(phrases[:-1]) + f', {last} ' + phrases[-1]


FORMS = _listed([kind.value for kind in ScopeKind], 'or')  # what a scope may be, for a refusal
HELP = _listed([kind.help_text for kind in ScopeKind], 'or')  # the same for an easyconfig parameter's help


class Scope(str):
    """A scope as written ('', 'AArch64', 'x86_64/intel/*', '9.0'), with its kind and, for a CPU family or
    target, the CPU family it names ('aarch64' for EasyBuild's 'AArch64').  Made by Scope.parse (what an
    easyconfig or an option wrote) or ScopeContext.run_scope (where a run ran)."""

    kind: ScopeKind
    family: str

    def __new__(cls, text: str, kind: ScopeKind, family: str = '') -> 'Scope':
        scope = super().__new__(cls, text)
        scope.kind, scope.family = kind, family
        return scope

    def __getnewargs__(self) -> Tuple[str, ScopeKind, str]:  # type: ignore[override]  # copy and pickle
        return str(self), self.kind, self.family

    @classmethod
    def parse(cls, text: Any, source: str = 'scope') -> 'Scope':
        """The Scope text writes; PluginError(source, one line) for what no kind takes: a scope that could never
        apply ('haswell', 'sm_90', ' x86_64') would silently exclude or excuse nothing."""
        if isinstance(text, Scope):
            return text
        if text == '':
            return cls('', ScopeKind.EVERYWHERE)
        if isinstance(text, str):
            if text in FAMILIES or text in EASYBUILD_FAMILIES:
                return cls(text, ScopeKind.CPU_FAMILY, EASYBUILD_FAMILIES.get(text, text))
            if is_compute_capability(text):
                return cls(text, ScopeKind.COMPUTE_CAPABILITY)
            family, slash, rest = text.partition('/')
            if family in FAMILIES and slash and rest:
                return cls(text, ScopeKind.CPU_TARGET, family)
        nvcc = _NVCC_ARCH.match(text) if isinstance(text, str) else None
        hint = f" (compute capability {nvcc[1]}.{nvcc[2]} is written '{nvcc[1]}.{nvcc[2]}')" if nvcc else ''
        raise PluginError(source, f'scope {text!r:.80} is not {FORMS}{hint}')

    def applies(self, context: 'ScopeContext') -> bool:
        """Whether the entries of this scope are in force where context says the build runs."""
        if self.kind is ScopeKind.CPU_FAMILY:
            return self.family == context.cpu_family
        if self.kind is ScopeKind.CPU_TARGET:  # a fallback's family/generic is no target: none applies there
            return '/' in self and context.target_known and fnmatchcase(context.target, self)
        if self.kind is ScopeKind.COMPUTE_CAPABILITY:
            return str(self) in context.compute_capabilities
        return True

    def widenings(self) -> List['Scope']:
        """The wider scopes a suggestion may lift this one to, narrowest first: a target 'x86_64/intel/haswell'
        to its vendor's 'x86_64/intel/*' and its family 'x86_64'; none for the other kinds (a compute
        capability says nothing of the CPU)."""
        if self.kind is not ScopeKind.CPU_TARGET:
            return []
        parts = self.split('/')
        vendor = [Scope(f'{parts[0]}/{parts[1]}/*', ScopeKind.CPU_TARGET, self.family)] if len(parts) >= 3 else []
        return vendor + ([Scope(parts[0], ScopeKind.CPU_FAMILY, self.family)] if '/' in self else [])

    def order(self) -> Tuple[int, str]:
        """Its place in a listing: everywhere, families, targets, compute capabilities; by text within a kind."""
        return self.kind.rank, str(self)

    def describe(self) -> str:
        """What the scope covers, in words ('GPUs of CUDA compute capability 9.0')."""
        if self.kind is ScopeKind.CPU_FAMILY:
            return f'CPU family {self.family}' + (f" (EasyBuild's {str(self)})" if self != self.family else '')
        if self.kind is ScopeKind.CPU_TARGET:
            glob = any(c in self for c in '*?[')
            return f"EESSI CPU target{'s matching' if glob else ''} {str(self)}"
        if self.kind is ScopeKind.COMPUTE_CAPABILITY:
            return f'GPUs of CUDA compute capability {str(self)}'
        return 'every build'


EVERYWHERE = Scope('', ScopeKind.EVERYWHERE)


@dataclass(frozen=True)
class ScopeContext:
    """Where this build runs: CPU family, EESSI-style CPU target, CUDA compute capabilities."""

    cpu_family: str
    target: str
    compute_capabilities: tuple = ()
    target_source: str = GIVEN  # where the target came from (TARGET_SOURCES); FALLBACK: not known

    @property
    def target_known(self) -> bool:
        """False where the target is FALLBACK's family/generic: no target-scoped entry applies then."""
        return self.target_source != FALLBACK

    def target_line(self) -> str:
        """The target and where it came from, in one line; for a fallback also that target-scoped entries
        will not apply (the dry run, the test step and `test-suite` print it)."""
        if self.target_known:
            return f'target {self.target} ({_SAID.get(self.target_source, self.target_source)})'
        return (f'target unknown (fallback {self.target}: neither $EESSI_SOFTWARE_SUBDIR nor archspec names it; '
                f'entries scoped to a CPU target will not apply: set $EESSI_SOFTWARE_SUBDIR, or --target, to name it)')

    def applies(self, scope: Union[str, Scope]) -> bool:
        """Whether scope (a Scope, or its text: parsed, PluginError where it is none) is in force here."""
        return Scope.parse(scope).applies(self)

    def run_scope(self) -> Scope:
        """The scope a run's new known failures get: the one compute capability a CUDA build for one GPU
        generation was tested on or made for (what differs between GPU nodes), else the CPU target; where the
        target is not known (a fallback: target_known) the CPU family, and a suggestion says so.  Taken as it
        is (a recorded target may hold anything: it is printed escaped)."""
        if len(self.compute_capabilities) == 1:
            return Scope(str(self.compute_capabilities[0]), ScopeKind.COMPUTE_CAPABILITY)
        if not self.target_known:  # a fallback names no target
            return Scope(self.cpu_family, ScopeKind.CPU_FAMILY, self.cpu_family)
        return Scope(self.target, ScopeKind.CPU_TARGET, self.target.split('/', 1)[0])

    def cpu_run_scope(self) -> Scope:
        """The scope a run's new known failures of CPU tests get: run_scope of this context without its compute
        capabilities (a CPU test that failed on a GPU node failed on its CPU target, not on its GPU)."""
        return replace(self, compute_capabilities=()).run_scope()

    def to_json(self) -> dict:
        """The context as a judged run records it (the key 'scope' of its results JSON)."""
        return {'cpu_family': self.cpu_family, 'target': self.target, 'target_source': self.target_source,
                'compute_capabilities': list(self.compute_capabilities)}

    @staticmethod
    def json_problem(data: Any) -> Optional[Tuple[str, str]]:
        """(where, problem) when data is not of to_json's shape, None when it is: strings of any content (a
        results file's, printed escaped wherever they are shown)."""
        if not isinstance(data, dict) or set(data) - set(JSON_KEYS):
            return 'scope', f"must be an object of {', '.join(JSON_KEYS[:-1])} and {JSON_KEYS[-1]}"
        for key in ('cpu_family', 'target', 'target_source'):
            value = data.get(key)
            if value is not None and (not isinstance(value, str) or not value):
                return f'scope.{key}', f'must be a non-empty string, got {value!r:.60}'
        capabilities = data.get('compute_capabilities', [])
        if not isinstance(capabilities, list) or not all(isinstance(c, str) and c for c in capabilities):
            return 'scope.compute_capabilities', f'must be a list of strings, got {capabilities!r:.60}'
        return None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Optional['ScopeContext']:
        """The context of a recorded scope (checked by results.saved), None where it names no target; the family
        is the target's, as for a target given on the command line (detect_context); the target's source as the
        run found it (a fallback stays one), 'given' where the result does not say it (saved before it was
        recorded)."""
        if not data.get('target'):
            return None
        context = detect_context(tuple(str(c) for c in data.get('compute_capabilities') or ()),
                                 target=str(data['target']))
        source = data.get('target_source')
        return replace(context, target_source=source) if source in TARGET_SOURCES else context


JSON_KEYS = ('cpu_family', 'target', 'target_source', 'compute_capabilities')  # of ScopeContext.to_json


def find_target(cpu_family: str, environ: Optional[Mapping[str, str]] = None) -> Tuple[str, str]:
    """(target, source): $EESSI_SOFTWARE_SUBDIR when set; else family[/vendor]/microarchitecture from archspec,
    named as EESSI names its targets (a vendor part for Intel and AMD only: 'x86_64/amd/zen3',
    'aarch64/neoverse_v1'); else family/generic with source FALLBACK (archspec missing or unable to tell)."""
    environ = os.environ if environ is None else environ
    if environ.get('EESSI_SOFTWARE_SUBDIR'):
        return environ['EESSI_SOFTWARE_SUBDIR'], EESSI
    try:
        import archspec.cpu
        host = archspec.cpu.host()
        vendor = _VENDORS.get(host.vendor)
        name = str(host.name)
    except Exception:  # noqa: BLE001 - archspec missing or unable to tell: said as FALLBACK
        return f'{cpu_family}/generic', FALLBACK
    if name in ('', 'generic') or name == cpu_family:  # archspec's own fallback: the family, nothing more
        return f'{cpu_family}/generic', FALLBACK
    return '/'.join(filter(None, (cpu_family, vendor, name))), ARCHSPEC


def detect_target(cpu_family: str, environ: Optional[Mapping[str, str]] = None) -> str:
    """The target of find_target, without its source."""
    return find_target(cpu_family, environ)[0]


def detect_context(compute_capabilities: tuple = (), cpu_family: Optional[str] = None, target: Optional[str] = None,
                   environ: Optional[Mapping[str, str]] = None) -> ScopeContext:
    """Where the build runs.  A target ('aarch64/neoverse_v1', given or $EESSI_SOFTWARE_SUBDIR) names its own
    CPU family, so a dry run or a report made on another machine resolves that target's family scopes; the
    context says where its target came from (find_target)."""
    env = os.environ if environ is None else environ
    source = GIVEN if target else EESSI
    target = target or env.get('EESSI_SOFTWARE_SUBDIR') or None
    family = cpu_family or (str(target).split('/', 1)[0] if target and '/' in str(target) else platform.machine())
    if not target:
        target, source = find_target(family, env)
    return ScopeContext(family, target, tuple(str(c) for c in compute_capabilities), source)
