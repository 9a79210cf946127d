"""What gets patched: find the libtorch_cuda.so files, decide what to add, apply, check.

The one place that decides which cuDNN sub-libraries become NEEDED entries of which file, from plain
values (directories, the cuDNN root, the settings of the easyconfig, the environment and the site)
and nothing else: no EasyBuild, no state kept between calls.  The EasyBuild hooks and the easyblock
call it alike; eb.hooks only adds the messages and EasyBuild's error type.

Requested sonames: the easyconfig's cudnn_needed, else $EB_PYTORCH_CUDA_CUDNN_NEEDED, else the site's
setting, else the catalog default for the cuDNN major version the library links (cudnn.py).  Only
those whose file exists in the cuDNN installation are added (docs/design.md section 1: a NEEDED entry
that does not resolve makes `import torch` itself fail).

CUDA libraries that cuDNN itself dlopen()s (libnvrtc, libcublasLt: cudnn.CUDA_DLOPEN) are added as well,
where the installation needs them: the cuDNN library that opens one cannot find it with its own search path
(no RPATH chain: only its RUNPATH, then the system), while libtorch_cuda.so finds it through its RPATH (the
CUDA installation it was linked against).  A NEEDED entry there loads it at start-up, and cuDNN's later
dlopen() by soname finds it loaded; where neither finds it (CUDA reached through LD_LIBRARY_PATH only),
nothing is added (doctor names that case).
"""

import os
import platform
from dataclasses import dataclass
from typing import Any, Iterable, List, Mapping, Optional, Sequence, Tuple

from eb_pytorch_cuda import cudnn
from eb_pytorch_cuda.elf.reader import read_elf
from eb_pytorch_cuda.loader.resolve import Resolver
from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.patch.needed import AddNeededResult, NeededCheck, add_needed, check_needed, check_problems, \
    is_soname

LIBRARY_NAME = 'libtorch_cuda.so'
DRIVER_STUBS = ('lib64/stubs/libcuda.so', 'lib/stubs/libcuda.so', 'targets/{machine}-linux/lib/stubs/libcuda.so')


@dataclass(frozen=True)
class Settings:
    """Where the sonames to add come from (see the module docstring for the order)."""

    cudnn_root: Optional[str] = None  # $EBROOTCUDNN of the loaded cuDNN module
    easyconfig_value: Any = None  # cudnn_needed of the easyconfig: list, {major: list}, or None
    site_value: Any = None  # the site's setting, same forms
    environ: Optional[Mapping[str, str]] = None  # for $EB_PYTORCH_CUDA_CUDNN_NEEDED; None: os.environ


@dataclass(frozen=True)
class LibraryPlan:
    """The decision for one libtorch_cuda.so."""

    path: str
    major: Optional[int]  # cuDNN major version it links; None: no cuDNN, nothing to do
    add: Tuple[str, ...] = ()  # requested and present in the cuDNN installation
    absent: Tuple[str, ...] = ()  # requested but not there: never added
    cudnn_dirs: Tuple[str, ...] = ()  # where libcudnn.so.N resolves from the library, and the cuDNN root's lib dirs
    cuda_add: Tuple[str, ...] = ()  # CUDA libraries cuDNN dlopen()s and cannot find itself, resolving from the library

    @property
    def all_added(self) -> Tuple[str, ...]:
        return self.add + self.cuda_add


def _sonames_problem(value: Any) -> Optional[str]:
    if not isinstance(value, (list, tuple)):
        return f'must be a list of sonames such as [{cudnn.DEFAULT_NEEDED[9][0]!r}], got {value!r:.60}'
    bad = next((item for item in value if not is_soname(item)), None)
    return None if bad is None else f'{bad!r:.60} is not a soname (a file name such as libcudnn_cnn.so.9)'


def check_cudnn_needed(value: Any, source: str, name: str = 'cudnn_needed') -> Any:
    """value when it is a cudnn_needed setting (None, a list of sonames, or {int major: list of sonames}),
    else PluginError naming source and the parameter.  Why: each wrong form did harm silently in real eb:
    {8: 'libcudnn_cnn_train.so.8'} was split into characters (14 warnings, then "refusing to add NEEDED ."),
    5 a TypeError traceback, a plain string was replaced by the default.  The one check of every reader's
    value (the easyconfig's in eb.hooks, which the easyblock calls at its start; the site's in its hooks)."""
    if value is None:
        return value
    if isinstance(value, dict):
        for major, sonames in value.items():
            if not (isinstance(major, int) and not isinstance(major, bool)) or major < 1:
                # (-1 or 0, no cuDNN's major, made a key no library matches: the defaults were added instead)
                raise PluginError(source, f'{name}: key {major!r:.40} must be a cuDNN major version (an int such '
                                          f'as 9, from 1)')
            problem = _sonames_problem(sonames)
            if problem:
                raise PluginError(source, f'{name}[{major}] {problem}')
        return value
    problem = _sonames_problem(value)
    if problem:
        raise PluginError(source, f'{name} {problem} (or a dict {{cuDNN major: [sonames]}})')
    return value


def find_libraries(roots: Iterable[Optional[str]], name: str = LIBRARY_NAME) -> List[str]:
    """Every file called name below the given directories, found by search (no version or path assumed);
    a file reached twice (symlinked directories) is listed once."""
    found, seen = [], set()
    for root in roots:
        if not root or not os.path.isdir(root):
            continue
        for dirpath, _dirnames, filenames in os.walk(root):
            if name in filenames:
                path = os.path.join(dirpath, name)
                real = os.path.realpath(path)
                if real not in seen and os.path.isfile(real):
                    seen.add(real)
                    found.append(path)
    return sorted(found)


def cudnn_lib_dirs(cudnn_root: Optional[str]) -> List[str]:
    """lib and lib64 of a cuDNN installation, those that exist."""
    if not cudnn_root:
        return []
    return [os.path.join(cudnn_root, sub) for sub in ('lib', 'lib64') if os.path.isdir(os.path.join(cudnn_root, sub))]


def plan_library(path: str, settings: Settings = Settings(), resolver: Optional[Resolver] = None) -> LibraryPlan:
    """Decide what to add to the library at path (PluginError when it is not a readable ELF file)."""
    info = read_elf(path)
    major = cudnn.cudnn_major(info.needed)
    if major is None:
        return LibraryPlan(path, None)
    resolution = (resolver or Resolver()).resolve(f'libcudnn.so.{major}', info)
    # path is not None: resolution.found, spelled so that mypy narrows it
    dirs = ([os.path.dirname(resolution.path)] if resolution.path is not None else []) + \
        cudnn_lib_dirs(settings.cudnn_root)
    dirs = list(dict.fromkeys(os.path.realpath(d) for d in dirs))
    requested = cudnn.requested_sonames(major, easyconfig_value=settings.easyconfig_value,
                                        site_value=settings.site_value, environ=settings.environ)
    present, absent = cudnn.filter_present(requested, dirs)
    cuda_add = cuda_needed(info, dirs, resolver or Resolver()) if requested else []
    return LibraryPlan(path, major, tuple(present), tuple(absent), tuple(dirs), tuple(cuda_add))


def _cuda_major(info: Any) -> Optional[int]:
    for soname in info.needed:
        if soname.startswith('libcudart.so.') and soname[len('libcudart.so.'):].isdigit():
            return int(soname[len('libcudart.so.'):])
    return None


def _own_search(via: Optional[str]) -> bool:
    """True for a resolution through a search path of the installation (not ld.so.cache or a system directory)."""
    return bool(via) and str(via).startswith(('DT_RPATH', 'DT_RUNPATH'))


def cuda_needed(info: Any, cudnn_dirs: Sequence[str], resolver: Resolver) -> List[str]:
    """The CUDA sonames (cudnn.CUDA_DLOPEN) a cuDNN library of the installation dlopen()s without finding them
    itself, that the library `info` (libtorch_cuda.so) finds through its own RPATH/RUNPATH and does not yet need."""
    cuda_major = _cuda_major(info)
    wanted: List[str] = []
    for opener_name, names in sorted(cudnn.CUDA_DLOPEN.items()):
        opener_path = next((os.path.join(d, opener_name) for d in cudnn_dirs
                            if os.path.isfile(os.path.join(d, opener_name))), None)
        if opener_path is None:
            continue
        opener = read_elf(opener_path)
        for name in names:
            soname = cudnn.cuda_soname(name, cuda_major)
            if not soname or soname in info.needed or soname in wanted:
                continue
            ours = resolver.resolve(soname, info)
            if not ours.found or not _own_search(ours.via):
                continue  # libtorch_cuda.so does not find it either: a NEEDED entry would break `import torch`
            theirs = resolver.resolve(soname, opener)  # dlopen()ed: no RPATH chain inherited
            same = theirs.path is not None and ours.path is not None and \
                os.path.realpath(theirs.path) == os.path.realpath(ours.path)  # both found
            if same and _own_search(theirs.via):
                continue  # cuDNN finds the same file itself
            wanted.append(soname)
    return wanted


def apply_plan(plan: LibraryPlan) -> Optional[AddNeededResult]:
    """Add the planned entries (idempotent, atomic: patch.needed.add_needed); None when there is nothing to add."""
    if not plan.all_added:
        return None
    return add_needed(plan.path, list(plan.all_added))


def driver_stub_preload(path: str, cuda_root: Optional[str], machine: Optional[str] = None) -> List[str]:
    """The CUDA driver stub to preload for a load check when libcuda.so.1 does not resolve (a node without GPU).

    The stub's soname is libcuda.so.1, so preloading it satisfies that NEEDED entry by glibc's
    already-loaded rule; it changes nothing about how the cuDNN libraries are found.
    """
    if Resolver().resolve('libcuda.so.1', read_elf(path)).found or not cuda_root:
        return []
    for stub in DRIVER_STUBS:
        candidate = os.path.join(cuda_root, stub.format(machine=machine or platform.machine()))
        if os.path.exists(candidate):
            return [candidate]
    return []


def check_plan(plan: LibraryPlan, load: bool = True, preload: Sequence[str] = (),
               expect_dir: Optional[str] = None) -> Tuple[List[NeededCheck], List[str]]:
    """Prove the planned entries: NEEDED, resolving inside expect_dir (default: the first cuDNN dir), and with
    load=True mapped by a real load in a clean process.  Returns (checks, one-line problems)."""
    if not plan.all_added:
        return [], []
    expect = expect_dir or (plan.cudnn_dirs[0] if plan.cudnn_dirs else None)
    checks, _report = check_needed(plan.path, list(plan.add), expect_dir=expect, load=load, preload=preload) \
        if plan.add else ([], None)
    if plan.cuda_add:  # CUDA's libraries: resolving (through the library's own search path) is what counts
        cuda_checks, _report = check_needed(plan.path, list(plan.cuda_add), load=load, preload=preload)
        checks = list(checks) + list(cuda_checks)
    return checks, check_problems(plan.path, checks)


def planned_sonames(cudnn_version: str, settings: Settings = Settings()) -> Tuple[int, List[str]]:
    """(major, sonames requested) for a cuDNN version as an easyconfig names it, before any file exists (eb -x)."""
    major = int(str(cudnn_version).split('.')[0])
    return major, cudnn.requested_sonames(major, easyconfig_value=settings.easyconfig_value,
                                          site_value=settings.site_value, environ=settings.environ)
