"""What gets patched: find the libtorch_cuda.so files, decide what to add, apply, check.

The one place that decides which cuDNN sub-libraries become NEEDED entries of which file, from plain
values (directories, the cuDNN root, the settings of the easyconfig, the environment and the site)
and nothing else: no EasyBuild, no state kept between calls.  The EasyBuild hooks and the easyblock
call it alike; eb.hooks only adds the messages and EasyBuild's error type.

Requested sonames: the easyconfig's cudnn_needed, else $EB_PYTORCH_CUDA_CUDNN_NEEDED, else the site's
setting, else the catalog default for the cuDNN major version the library links (cudnn.py).  Only
those whose file exists in the cuDNN installation are added (docs/design.md section 1: a NEEDED entry
that does not resolve makes `import torch` itself fail).
"""

import os
import platform
from dataclasses import dataclass
from typing import Any, Iterable, List, Mapping, Optional, Sequence, Tuple

from eb_pytorch_cuda import cudnn
from eb_pytorch_cuda.elf.reader import read_elf
from eb_pytorch_cuda.loader.resolve import Resolver
from eb_pytorch_cuda.patch.needed import AddNeededResult, NeededCheck, add_needed, check_needed, check_problems

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
    dirs = ([os.path.dirname(resolution.path)] if resolution.found else []) + cudnn_lib_dirs(settings.cudnn_root)
    dirs = list(dict.fromkeys(os.path.realpath(d) for d in dirs))
    requested = cudnn.requested_sonames(major, easyconfig_value=settings.easyconfig_value,
                                        site_value=settings.site_value, environ=settings.environ)
    present, absent = cudnn.filter_present(requested, dirs)
    return LibraryPlan(path, major, tuple(present), tuple(absent), tuple(dirs))


def apply_plan(plan: LibraryPlan) -> Optional[AddNeededResult]:
    """Add the planned entries (idempotent, atomic: patch.needed.add_needed); None when there is nothing to add."""
    if not plan.add:
        return None
    return add_needed(plan.path, list(plan.add))


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
    if not plan.add:
        return [], []
    expect = expect_dir or (plan.cudnn_dirs[0] if plan.cudnn_dirs else None)
    checks, _report = check_needed(plan.path, list(plan.add), expect_dir=expect, load=load, preload=preload)
    return checks, check_problems(plan.path, checks)


def planned_sonames(cudnn_version: str, settings: Settings = Settings()) -> Tuple[int, List[str]]:
    """(major, sonames requested) for a cuDNN version as an easyconfig names it, before any file exists (eb -x)."""
    major = int(str(cudnn_version).split('.')[0])
    return major, cudnn.requested_sonames(major, easyconfig_value=settings.easyconfig_value,
                                          site_value=settings.site_value, environ=settings.environ)
