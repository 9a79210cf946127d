"""Find the file glibc would load for a soname requested by a given object, without running ld.so.

The order follows glibc's _dl_map_object (docs/design.md section 1), with LD_LIBRARY_PATH unset by
default because RPATH-linked EasyBuild installs (and EESSI) never rely on it:

0. a name with a slash is used as a path;
1. an already-loaded object with that soname wins;
2. if the requester has no DT_RUNPATH: DT_RPATH of the requester, then of the object that loaded it
   as a NEEDED entry, and on up that chain, then the executable's DT_RPATH.  An object loaded with
   dlopen() starts a new chain: it does not inherit the RPATH of whoever dlopen()ed it;
3. LD_LIBRARY_PATH (only when given explicitly);
4. the requester's own DT_RUNPATH (never inherited);
5. /etc/ld.so.cache, then 6. the system directories (both skipped for -z nodeflib).

A candidate file whose ELF class or machine differs from the requester's is skipped, as glibc does; a
candidate glibc cannot read as an ELF header at all (shorter than one: "file too short", bad magic:
"invalid ELF header", the other byte order) ends the search there, as glibc's open_verify does (measured:
a text file first in RUNPATH fails the load although a good copy lies in the next directory), so it is
returned as the resolution and its reader names the problem.  Not modelled: glibc-hwcaps/legacy hwcap
subdirectories, $PLATFORM-specific variants.
"""

import os
import platform
import re
import subprocess
from dataclasses import dataclass, field

from typing import Dict, List, Optional, Sequence, Tuple, Union

from eb_pytorch_cuda.elf.reader import ELF_MAGIC, ElfInfo, read_abi_key
from eb_pytorch_cuda.loader.ldcache import load_ld_so_cache

_TOKEN = re.compile(r'\$(ORIGIN|LIB|PLATFORM)\b|\$\{(ORIGIN|LIB|PLATFORM)\}')

# system directories compiled into glibc, per machine, for builds audited off their own host
FALLBACK_SYSTEM_DIRS: Dict[Union[str, int], Tuple[str, ...]] = {
    'EM_X86_64': ('/lib/x86_64-linux-gnu', '/usr/lib/x86_64-linux-gnu', '/lib64', '/usr/lib64', '/lib', '/usr/lib'),
    'EM_AARCH64': ('/lib/aarch64-linux-gnu', '/usr/lib/aarch64-linux-gnu', '/lib64', '/usr/lib64', '/lib', '/usr/lib'),
    'EM_PPC64': ('/lib/powerpc64le-linux-gnu', '/usr/lib/powerpc64le-linux-gnu', '/lib64', '/usr/lib64', '/lib',
                 '/usr/lib'),
    'EM_RISCV': ('/lib/riscv64-linux-gnu', '/usr/lib/riscv64-linux-gnu', '/lib64', '/usr/lib64', '/lib', '/usr/lib'),
}
HOST_LOADERS = ('/lib64/ld-linux-x86-64.so.2', '/lib/ld-linux-aarch64.so.1', '/lib64/ld64.so.2',
                '/lib/ld-linux-riscv64-lp64d.so.1')


@dataclass
class Resolution:
    """Where a soname resolved (path None when it did not), how, and which directories were tried."""

    soname: str
    path: Optional[str] = None
    via: Optional[str] = None  # e.g. 'DT_RPATH of /x/libtorch_cuda.so', 'ld.so.cache', 'already loaded'
    tried: list = field(default_factory=list)

    @property
    def found(self) -> bool:
        return self.path is not None


def expand_tokens(entry: str, origin_dir: str, elf_class: int = 64) -> str:
    """Expand $ORIGIN, $LIB and $PLATFORM in one RPATH/RUNPATH entry the way ld.so does."""
    def substitute(match: 're.Match[str]') -> str:
        token = match.group(1) or match.group(2)
        if token == 'ORIGIN':
            return origin_dir
        if token == 'LIB':
            return 'lib64' if elf_class == 64 else 'lib'
        return platform.machine()
    # a relative entry without $ORIGIN is relative to the process's working directory, as in ld.so
    return os.path.normpath(os.path.join(os.getcwd(), _TOKEN.sub(substitute, entry)))


def object_search_dirs(info: ElfInfo, tag: str) -> List[str]:
    """The expanded directories of one object's DT_RPATH ('rpath') or DT_RUNPATH ('runpath')."""
    origin = os.path.dirname(os.path.abspath(info.path))
    return [expand_tokens(entry, origin, info.elf_class) for entry in getattr(info, tag)]


_HOST_SYSTEM_DIRS: list = []


def _host_system_dirs():
    """System search path of this host's glibc, as `ld.so --help` states it (read once)."""
    if not _HOST_SYSTEM_DIRS:
        dirs = []
        for loader in HOST_LOADERS:
            if os.path.exists(loader):
                try:
                    out = subprocess.run([loader, '--help'], capture_output=True, text=True, timeout=10).stdout
                except (OSError, subprocess.SubprocessError):
                    continue
                dirs = re.findall(r'^\s+(/\S+) \(system search path\)', out, re.M)
                if dirs:
                    break
        _HOST_SYSTEM_DIRS.append(tuple(dirs))
    return _HOST_SYSTEM_DIRS[0]


def system_dirs(info: ElfInfo) -> List[str]:
    """Default directories glibc searches for objects like info (host's own list when it matches)."""
    host = read_abi_key(HOST_LOADERS[0]) or read_abi_key('/proc/self/exe')
    if host == info.abi_key and _host_system_dirs():
        return list(_host_system_dirs())
    return list(FALLBACK_SYSTEM_DIRS.get(info.machine, ('/lib64', '/usr/lib64', '/lib', '/usr/lib')))


def _stops_glibc(path: str, requester: ElfInfo) -> bool:
    """True when glibc's open_verify fails the load on this file instead of skipping it: shorter than an ELF
    header of the requester's class, bad magic, or the same class in the other byte order (a file of the
    other class, or of another machine, is skipped)."""
    try:
        with open(path, 'rb') as handle:
            head = handle.read(64)
    except OSError:
        return False  # unreadable: glibc's open() fails and it searches on
    if len(head) < (64 if requester.elf_class == 64 else 52) or head[:4] != ELF_MAGIC:
        return True
    same_class = head[4] == (2 if requester.elf_class == 64 else 1)
    return same_class and head[5] != (1 if requester.little_endian else 2)


class Resolver:
    """Resolve sonames like glibc; holds the ld.so.cache and the file-compatibility checks it needs."""

    def __init__(self, ld_library_path=None, ld_so_cache=None, use_system=True):
        self.ld_library_path = [d for d in (ld_library_path or []) if d]
        self.ld_so_cache = load_ld_so_cache() if ld_so_cache is None else ld_so_cache
        self.use_system = use_system
        self._abi = {}

    def _compatible(self, candidate, requester):
        """True for a file glibc takes (its ELF class and machine match), or one it stops on (not a readable
        ELF header for it: the load fails there); False for one it skips, or no file."""
        if candidate not in self._abi:
            self._abi[candidate] = read_abi_key(candidate) if os.path.isfile(candidate) else None
        if self._abi[candidate] == requester.abi_key:
            return True
        return os.path.isfile(candidate) and _stops_glibc(candidate, requester)

    def _try_dirs(self, soname, dirs, requester, via, result):
        for directory in dirs:
            result.tried.append(directory)
            candidate = os.path.join(directory, soname)
            if self._compatible(candidate, requester):
                result.path, result.via = candidate, via
                return True
        return False

    def resolve(self, soname: str, requester: ElfInfo, loader_chain: Sequence[ElfInfo] = (),
                executable: Optional[ElfInfo] = None, loaded: Optional[Dict[str, str]] = None) -> Resolution:
        """Resolve soname as requested by `requester` (an ElfInfo).

        loader_chain: the objects that loaded requester as a NEEDED entry, nearest first (empty when
        requester was loaded with dlopen(), or when only its own paths should count).
        executable: ElfInfo of the main program, whose DT_RPATH glibc always consults in step 2.
        loaded: {soname: path} of objects already in the process.
        """
        result = Resolution(soname)
        if '/' in soname:
            if self._compatible(soname, requester):
                result.path, result.via = soname, 'path given'
            return result
        if loaded and soname in loaded:
            result.path, result.via = loaded[soname], 'already loaded'
            return result
        if not requester.runpath:
            visited = set()
            for obj in [requester, *loader_chain, *([executable] if executable else [])]:
                if obj.path in visited or obj.runpath:  # glibc ignores DT_RPATH when DT_RUNPATH is set
                    continue
                visited.add(obj.path)
                if self._try_dirs(soname, object_search_dirs(obj, 'rpath'), requester, f'DT_RPATH of {obj.path}',
                                  result):
                    return result
        if self._try_dirs(soname, self.ld_library_path, requester, 'LD_LIBRARY_PATH', result):
            return result
        if self._try_dirs(soname, object_search_dirs(requester, 'runpath'), requester,
                          f'DT_RUNPATH of {requester.path}', result):
            return result
        if not self.use_system or requester.nodeflib:
            return result
        cached = [os.path.dirname(p) for p in self.ld_so_cache.get(soname, [])]
        if self._try_dirs(soname, cached, requester, 'ld.so.cache', result):
            return result
        self._try_dirs(soname, system_dirs(requester), requester, 'system directories', result)
        return result
