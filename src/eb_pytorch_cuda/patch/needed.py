"""The two operations the fix is made of: add NEEDED entries safely, and prove they work.

add_needed() is idempotent (an entry already present is not added again) and refuses to add an entry
that would not resolve from the library itself, because such an entry makes the library fail to load
at all.  It reads the library's entries while holding the file's lock (elf.patchelf.lock_target), so
two runs at once serialize and the second one sees, and keeps, the first one's entry.

check_needed() proves, for each soname, that it is (a) a NEEDED entry, (b) resolvable through the
library's own search path (optionally inside an expected directory, e.g. $EBROOTCUDNN), and (c) with
load=True, really mapped when the library is loaded in a fresh process without LD_LIBRARY_PATH.
"""

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any, Optional

from eb_pytorch_cuda import process
from eb_pytorch_cuda.loader import loadprobe
from eb_pytorch_cuda.elf.reader import read_abi_key, read_elf
from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.elf.patchelf import lock_target, write_needed
from eb_pytorch_cuda.inputs import require_regular
from eb_pytorch_cuda.loader.resolve import Resolver

SCRUBBED_ENV = ('LD_LIBRARY_PATH', 'LD_PRELOAD', 'LD_AUDIT')


def is_soname(value) -> bool:
    """True for a string that can be a soname: a file name (not empty, no '/'), no whitespace, printable."""
    return isinstance(value, str) and bool(value) and '/' not in value and value.isprintable() \
        and not any(c.isspace() for c in value)


def validate_sonames(path, sonames):
    """Reject values that cannot be a soname (empty, a path, whitespace) before touching the file."""
    if not sonames:
        raise PluginError(path, 'no soname given')
    for soname in sonames:
        if not is_soname(soname):
            raise PluginError(path, f'{soname!r} is not a soname (expected a file name like libfoo.so.1)')
    return list(dict.fromkeys(sonames))


@dataclass
class AddNeededResult:
    """What add_needed() found and did."""

    path: str
    added: list
    already_present: list
    resolutions: dict  # soname -> Resolution, from the library's own search path


def add_needed(path: str, sonames, force: bool = False, resolver=None,
               break_hardlinks: bool = False, allow_setid: bool = False) -> 'AddNeededResult':
    """Make every soname a NEEDED entry of the library at path; see the module docstring.

    break_hardlinks: patch a file that has other hard links anyway (they keep the old content);
    allow_setid: patch a setuid/setgid file (refused otherwise; the bits are kept)."""
    sonames = validate_sonames(path, sonames)
    with lock_target(path) as lock_fd:
        info = read_elf(path)  # under the lock: a concurrent run's entries are seen (path as given: $ORIGIN)
        resolver = resolver or Resolver()
        resolutions = {soname: resolver.resolve(soname, info) for soname in sonames}
        missing = [s for s in sonames if s not in info.needed]
        unresolved = [s for s in missing if not resolutions[s].found]
        if unresolved and not force:
            soname = unresolved[0]
            searched = ', '.join(resolutions[soname].tried) or 'no directories'
            raise PluginError(path, f'refusing to add NEEDED {soname}: it does not resolve from this library '
                                    f'(searched {searched}, then ld.so.cache and system directories), so the '
                                    f'library would fail to load; use --force to add it anyway')
        if missing:
            write_needed(path, missing, before=info, break_hardlinks=break_hardlinks, lock_fd=lock_fd,
                         allow_setid=allow_setid)
    return AddNeededResult(path, missing, [s for s in sonames if s not in missing], resolutions)


@dataclass
class NeededCheck:
    """The verdict for one soname of check_needed(); problem is None when all checks passed."""

    soname: str
    present: bool
    resolution: Any  # loader.resolve's Resolution
    inside_expected: Optional[bool] = None
    mapped: Optional[bool] = None
    problem: Optional[str] = None


@dataclass
class LoadReport:
    """What a real load in a clean process did."""

    loaded: bool
    error: Optional[str] = None
    mapped: list = field(default_factory=list)
    preloaded: list = field(default_factory=list)


def _inside(path, directory):
    """True when path lies within directory, comparing both as given and with symlinks resolved."""
    for candidate in {os.path.abspath(path), os.path.realpath(path)}:
        for root in {os.path.abspath(directory), os.path.realpath(directory)}:
            if candidate.startswith(root.rstrip('/') + '/'):
                return True
    return False


def load_in_clean_process(path, preload=(), info=None):
    """Load path (after preload) in a fresh Python without LD_LIBRARY_PATH/LD_PRELOAD; return LoadReport.

    info: the ElfInfo of path when the caller has read it already."""
    info = info or read_elf(path)
    host = read_abi_key(sys.executable)
    if host and host != info.abi_key:
        raise PluginError(path, f'cannot be loaded on this host: it is {info.machine} {info.elf_class}-bit, '
                                f'this Python is {host[2]} {host[0]}-bit')
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED_ENV}
    command = [sys.executable, '-I', loadprobe.__file__]
    for item in preload:
        command += ['--preload', os.path.abspath(item)]
    command.append(os.path.abspath(path))
    try:
        done = process.capture(command, timeout=600, env=env, text=True)
    except subprocess.TimeoutExpired:
        raise PluginError(path, 'load probe did not finish in 600 s (a constructor of the library hangs?)') from None
    try:
        report = json.loads(done.stdout)
    except ValueError:
        detail = (done.stderr.strip().splitlines() or [f'exit code {done.returncode}'])[-1]
        raise PluginError(path, f'load probe crashed: {detail}') from None
    return LoadReport(report['loaded'], report['error'], report['mapped'], list(preload))


def check_needed(path: str, sonames, expect_dir: Optional[str] = None, load: bool = False, preload=(),
                 resolver=None) -> tuple:
    """Check every soname of a library; return ([NeededCheck], LoadReport or None)."""
    sonames = validate_sonames(path, sonames)
    require_regular(path)
    if expect_dir is not None and not os.path.isdir(expect_dir):
        raise PluginError(expect_dir, 'no such directory (given as --expect-dir)' if not os.path.exists(expect_dir)
                          else 'is not a directory (given as --expect-dir)')
    for item in preload:
        require_regular(item)
    info = read_elf(path)
    resolver = resolver or Resolver()
    checks = []
    for soname in sonames:
        resolution = resolver.resolve(soname, info)
        check = NeededCheck(soname, soname in info.needed, resolution)
        if expect_dir and resolution.found:
            check.inside_expected = _inside(resolution.path, expect_dir)
        if not check.present:
            check.problem = f'{soname} is not a NEEDED entry'
        elif not resolution.found:
            check.problem = (f'NEEDED {soname} does not resolve (searched '
                             f"{', '.join(resolution.tried) or 'no directories'})")
        elif check.inside_expected is False:
            check.problem = f'NEEDED {soname} resolves to {resolution.path}, outside {expect_dir}'
        checks.append(check)
    report = None
    if load:
        report = load_in_clean_process(path, preload, info)
        mapped = {os.path.realpath(p) for p in report.mapped}
        for check in checks:
            check.mapped = check.resolution.found and os.path.realpath(check.resolution.path) in mapped
            if check.problem is None and not report.loaded:
                check.problem = f'loading it failed: {report.error}'
            elif check.problem is None and not check.mapped:
                check.problem = f'a real load did not map {check.resolution.path}'
    return checks, report


def check_problems(path, checks):
    """One-line messages, each naming the library and the soname, for the checks that failed."""
    return [f'{path}: {check.problem}' for check in checks if check.problem]
