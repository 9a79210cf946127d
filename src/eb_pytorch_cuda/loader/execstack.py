"""Executable stacks: which objects glibc >= 2.41 refuses to dlopen(), and which glibc doctor judges for.

Why: glibc 2.41 stopped making the process stack executable when dlopen() loads an object whose
PT_GNU_STACK header asks for it (flags RWE), or that has no such header on x86 (where the default is an
executable stack); dlopen() fails with "cannot enable executable stack as shared object requires:
Invalid argument".  Python loads torch with dlopen(), so one such object anywhere in torch's closure
breaks `import torch` (PyTorch 2.6-2.9 on EESSI 2025.06, EESSI software-layer-scripts #172).  Objects
the program loads at start-up (its own NEEDED closure) are still allowed.  GLIBC_TUNABLES=
glibc.rtld.execstack=2 lets dlopen() make the stack executable again.  Each of these was measured with
Debian trixie's real 2.41 loader on gcc-built libraries (docs/design.md section 10).

Which glibc the installation will run under is not knowable from its files: doctor judges for the
glibc given with --glibc, else that of the --executable's interpreter (PT_INTERP, read from the
loader's version string), else this machine's, and says which.
"""

import os
import re
from dataclasses import dataclass
from typing import Optional, Tuple

from eb_pytorch_cuda.errors import PluginError

PF_X = 1
REFUSED_FROM = (2, 41)  # the first glibc whose dlopen() refuses an object that asks for an executable stack
# machines whose glibc makes the stack executable when PT_GNU_STACK is missing (sysdeps/x86 DEFAULT_STACK_PERMS;
# measured on x86_64); aarch64 and most others default to a non-executable stack
_EXECUTABLE_BY_DEFAULT = ('EM_X86_64', 'EM_386')
_LOADER_VERSION = re.compile(rb'release version (\d+)\.(\d+)')
_VERSION = re.compile(r'^(\d+)\.(\d+)$')
TUNABLE = 'GLIBC_TUNABLES=glibc.rtld.execstack=2'


@dataclass(frozen=True)
class TargetGlibc:
    """The glibc doctor judges executable stacks for, and where that came from (printed with the result)."""

    version: Tuple[int, int]
    source: str  # '--glibc', "this machine's", 'the interpreter /lib64/ld-linux-x86-64.so.2 of EXE'

    @property
    def label(self) -> str:
        return f'glibc {self.version[0]}.{self.version[1]} ({self.source})'

    @property
    def refuses_execstack(self) -> bool:
        return self.version >= REFUSED_FROM


def parse_version(text) -> Tuple[int, int]:
    """'2.41' -> (2, 41); anything else is a one-line error (exit 2)."""
    match = _VERSION.match(text or '')
    if not match:
        raise PluginError(None, f'--glibc {text!r}: expected a version like 2.41')
    return int(match.group(1)), int(match.group(2))


def needs_execstack(info) -> bool:
    """True when the object asks for an executable stack: PT_GNU_STACK with PF_X, or none on x86."""
    if info.stack_flags is None:
        return info.machine in _EXECUTABLE_BY_DEFAULT
    return bool(info.stack_flags & PF_X)


def loader_version(path) -> Optional[Tuple[int, int]]:
    """The glibc version of a dynamic loader file, from its 'stable release version 2.41.' string."""
    try:
        with open(path, 'rb') as handle:
            match = _LOADER_VERSION.search(handle.read(8 << 20))
    except OSError:
        return None
    return (int(match.group(1)), int(match.group(2))) if match else None


def interpreter_of(executable) -> Optional[str]:
    """PT_INTERP of an executable (its dynamic loader), or None."""
    from eb_pytorch_cuda.elf.reader import read_elf
    try:
        return read_elf(executable).interpreter
    except PluginError:  # not ELF, truncated: the executable's own reading reports it
        return None


def host_version() -> Optional[Tuple[int, int]]:
    """This machine's glibc ('glibc 2.36' from confstr), or None on another C library."""
    try:
        value = os.confstr('CS_GNU_LIBC_VERSION') or ''
    except (ValueError, OSError):
        return None
    match = re.search(r'(\d+)\.(\d+)', value)
    return (int(match.group(1)), int(match.group(2))) if match else None


def target_glibc(option=None, executable=None) -> TargetGlibc:
    """--glibc when given, else the executable's loader, else this machine's glibc (else 2.41, the strict case)."""
    if option:
        return TargetGlibc(parse_version(option), '--glibc')
    if executable:
        interpreter = interpreter_of(executable)
        version = loader_version(interpreter) if interpreter else None
        if version:
            return TargetGlibc(version, f'the interpreter {interpreter} of {executable}')
    version = host_version()
    if version:
        return TargetGlibc(version, "this machine's; --glibc VERSION to choose")
    return TargetGlibc(REFUSED_FROM, 'assumed: no glibc here; --glibc VERSION to choose')
