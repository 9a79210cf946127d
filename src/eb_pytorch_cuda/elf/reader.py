"""Read what the dynamic loader cares about from an ELF file: SONAME, NEEDED, RPATH, RUNPATH, flags.

Files of any class, endianness and machine can be read (an aarch64 build can be audited on an x86_64 node).
Only the ELF header, the program headers and the dynamic segment (with the strings it points at) are read,
never the whole file, with struct: doctor reads some fifty objects per run, and pyelftools' construct layer
took most of its time (0.9 s of 3.3 s under the profiler on the 2.1.2 layout).  Every way a file
can fail to be a usable shared object (not ELF, a linker script named .so, truncated, relocatable, static)
becomes a one-line PluginError.  PT_GNU_STACK is read too: glibc >= 2.41 refuses to dlopen() an object that
asks for an executable stack; and PT_INTERP (the executable's loader, whose glibc doctor judges for).

The names (NEEDED, SONAME, RPATH, RUNPATH) are read as the loader reads them: at DT_STRTAB, mapped
through the PT_LOAD segments, up to their NUL (DT_STRSZ, which the loader ignores, is not used), never
through the section headers, which the loader ignores.  What the loader would crash on or refuse (a
DT_STRTAB, DT_SYMTAB or hash table outside every loaded segment, and the rest elf/tables.py lists) and
section headers that contradict the dynamic section (the loader loads the file, but patchelf and the
symbol reader of doctor read the sections and would write or report something else) are refused here,
the one reader check-needed, add-needed and doctor share, as CorruptElf, one message each.
"""

import mmap
import os
import struct
from typing import Optional, Tuple, Union
from dataclasses import dataclass

from eb_pytorch_cuda.elf import tables
from eb_pytorch_cuda.errors import CorruptElf, PluginError

ELF_MAGIC = b'\x7fELF'
# text a GNU ld linker script (e.g. libc.so, or libfoo.so -> "INPUT(libfoo.so.1)") starts with
LINKER_SCRIPT_MARKERS = (b'/*', b'INPUT', b'GROUP', b'OUTPUT_FORMAT', b'SEARCH_DIR')

DF_1_NODEFLIB = 0x800
ET_EXEC, ET_DYN = 2, 3
PT_LOAD, PT_DYNAMIC, PT_INTERP, PT_GNU_STACK = 1, 2, 3, 0x6474e551
DT_NULL, DT_NEEDED, DT_STRTAB, DT_SONAME, DT_RPATH, DT_RUNPATH, DT_FLAGS_1 = 0, 1, 5, 14, 15, 29, 0x6ffffffb
_TYPE_NAMES = {0: 'ET_NONE', 1: 'ET_REL', 2: 'ET_EXEC', 3: 'ET_DYN', 4: 'ET_CORE'}
_SEGMENT_NAMES = {PT_LOAD: 'PT_LOAD', PT_DYNAMIC: 'PT_DYNAMIC', PT_INTERP: 'PT_INTERP', PT_GNU_STACK: 'PT_GNU_STACK'}
# e_machine values of the machines this project meets (names as pyelftools gives them); others: see machine_name
_MACHINES = {3: 'EM_386', 8: 'EM_MIPS', 20: 'EM_PPC', 21: 'EM_PPC64', 22: 'EM_S390', 40: 'EM_ARM', 62: 'EM_X86_64',
             183: 'EM_AARCH64', 243: 'EM_RISCV', 258: 'EM_LOONGARCH'}


def machine_name(number: int) -> Union[str, int]:
    """'EM_X86_64' for 62; a rarer machine's name from pyelftools' table (imported only then), else the number."""
    if number in _MACHINES:
        return _MACHINES[number]
    from elftools.elf.enums import ENUM_E_MACHINE
    names = {value: key for key, value in ENUM_E_MACHINE.items() if not key.startswith('_')}
    return names.get(number, number)


@dataclass(frozen=True)
class ElfInfo:
    """The loader-relevant facts of one ELF file (sonames and search paths as raw strings)."""

    path: str
    elf_class: int  # 32 or 64
    little_endian: bool
    machine: Union[str, int]  # e.g. 'EM_X86_64', 'EM_AARCH64'
    soname: Optional[str] = None
    needed: tuple = ()
    rpath: tuple = ()  # DT_RPATH entries, unexpanded ($ORIGIN kept)
    runpath: tuple = ()  # DT_RUNPATH entries, unexpanded
    flags_1: int = 0
    stack_flags: Optional[int] = None  # p_flags of PT_GNU_STACK (PF_X = 1: executable stack); None: no header
    interpreter: Optional[str] = None  # PT_INTERP (an executable's dynamic loader)

    @property
    def nodeflib(self) -> bool:
        """True when linked with -z nodeflib: ld.so.cache and default dirs are not searched."""
        return bool(self.flags_1 & DF_1_NODEFLIB)

    @property
    def abi_key(self) -> Tuple[int, bool, Union[str, int]]:
        """What must match for glibc to accept this file as a dependency of another."""
        return (self.elf_class, self.little_endian, self.machine)


def _split_path_list(value):
    return tuple(entry for entry in value.split(':') if entry) if value else ()


def _sniff(path):
    """Check the file is a readable ELF; return its first 64 bytes or raise PluginError."""
    try:
        with open(path, 'rb') as handle:
            head = handle.read(64)
    except IsADirectoryError:
        raise PluginError(path, 'is a directory, not an ELF file') from None
    except FileNotFoundError:
        raise PluginError(path, 'no such file') from None
    except OSError as err:
        raise PluginError(path, f'cannot be read: {err.strerror}') from None
    if head[:4] != ELF_MAGIC:
        if head.lstrip().startswith(LINKER_SCRIPT_MARKERS):
            raise PluginError(path, 'is a linker script, not an ELF shared object')
        raise PluginError(path, 'is not an ELF file (bad magic)')
    if len(head) < 52:
        raise PluginError(path, 'is a truncated ELF file (incomplete ELF header)')
    if head[4] not in (1, 2) or head[5] not in (1, 2):
        raise PluginError(path, f'is a truncated or corrupt ELF file (EI_CLASS {head[4]}, EI_DATA {head[5]})')
    return head


def _read_at(stream, offset, size, path, what, mapped=None):
    """size bytes at offset; up to `mapped` (the file's size rounded up to a page), bytes past the end read
    as zeros, as the loader's mapping of the file shows them."""
    stream.seek(offset)
    data = stream.read(size)
    if len(data) != size:
        if mapped is None or offset + size > mapped:
            raise PluginError(path, f'is a truncated ELF file ({what} past the end)')
        data += bytes(size - len(data))
    return data


def read_elf(path: Union[str, 'os.PathLike[str]'], check_sections: bool = True) -> ElfInfo:
    """Return the ElfInfo of the shared object or executable at path, or raise PluginError (CorruptElf for
    corrupt dynamic tables).  check_sections=False skips only the comparison with the section headers (what
    the loader never reads): doctor, for a dependency the loader loads although its sections disagree."""
    path = os.fspath(path)
    head = _sniff(path)
    is64, little = head[4] == 2, head[5] == 1
    order = '<' if little else '>'
    header = struct.unpack_from(order + ('HHIQQQIHHHHHH' if is64 else 'HHIIIIIHHHHHH'), head + bytes(64), 16)
    e_type, e_machine, _version, _entry, phoff, shoff, _flags, ehsize, phentsize, phnum, shentsize, shnum = \
        header[:12]
    expected_size = 64 if is64 else 52
    if ehsize != expected_size:  # e.g. a flipped EI_CLASS or EI_DATA byte: nothing else fits
        raise PluginError(path, f"has an inconsistent ELF header: e_ehsize is {ehsize}, but a "
                                f"{64 if is64 else 32}-bit {'little' if little else 'big'}-endian header "
                                f"is {expected_size} bytes (EI_CLASS or EI_DATA byte corrupt?)")
    if len(head) < expected_size:
        raise PluginError(path, 'is a truncated ELF file (incomplete ELF header)')
    if e_type not in (ET_DYN, ET_EXEC):
        raise PluginError(path, f"is an ELF file of type {_TYPE_NAMES.get(e_type, e_type)}, not a shared object")
    size = os.path.getsize(path)
    # the loader mmap()s segments: bytes past the end of the file up to the end of its last page read as
    # zeros (a copy cut there loads, measured); a page wholly past the end is SIGBUS when touched
    mapped = -(-size // mmap.PAGESIZE) * mmap.PAGESIZE
    if phoff + phnum * phentsize > size:
        raise PluginError(path, 'is a truncated ELF file (program headers past the end)')
    # (p_type, p_flags, p_offset, p_vaddr, p_filesz) of each program header
    segment_format = order + ('IIQQQQQQ' if is64 else 'IIIIIIII')
    if phnum and phentsize < struct.calcsize(segment_format):
        raise PluginError(path, f'is a truncated or corrupt ELF file (program header entries of {phentsize} bytes)')
    with open(path, 'rb') as stream:
        table = _read_at(stream, phoff, phnum * phentsize, path, 'program headers')
        segments = []
        for index in range(phnum):
            fields = struct.unpack_from(segment_format, table, index * phentsize)
            if is64:
                p_type, p_flags, p_offset, p_vaddr, _paddr, p_filesz = fields[:6]
            else:
                p_type, p_offset, p_vaddr, _paddr, p_filesz, _memsz, p_flags = fields[:7]
            if p_offset + p_filesz > mapped:
                raise PluginError(path, f'is a truncated ELF file ({_SEGMENT_NAMES.get(p_type, hex(p_type))} '
                                        f'past the end)')
            segments.append((p_type, p_flags, p_offset, p_vaddr, p_filesz))
        dynamic = next((s for s in segments if s[0] == PT_DYNAMIC), None)
        if dynamic is None:
            raise PluginError(path, 'has no dynamic section (statically linked?)')
        stack_flags = next((s[1] for s in segments if s[0] == PT_GNU_STACK), None)
        interp = next((s for s in segments if s[0] == PT_INTERP), None)
        interpreter = _read_at(stream, interp[2], interp[4], path, 'PT_INTERP').split(b'\0')[0].decode(
            'utf-8', 'surrogateescape') if interp else None
        entry = struct.Struct(order + ('qQ' if is64 else 'iI'))
        data = _read_at(stream, dynamic[2], dynamic[4], path, 'PT_DYNAMIC', mapped)
        tags = []
        for d_tag, d_val in entry.iter_unpack(data[:len(data) - len(data) % entry.size]):
            if d_tag == DT_NULL:
                break
            tags.append((d_tag, d_val))
        values = dict(tags)
        image = tables.Image(path, stream, tables.loads_of(segments), is64, order, mapped)
        strtab = values.get(DT_STRTAB)
        named = [(t, v) for t, v in tags if t in (DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH)]
        if named or strtab is not None:
            tables.located(image, values, DT_STRTAB, 'DT_STRTAB', 'the loader would crash reading its names')
        if e_type == ET_DYN or interp is not None:  # what ld.so relocates (a static executable has no symbols)
            tables.check_symbol_tables(image, values)
        names: dict = {}  # offset in DT_STRTAB -> the name there
        for _tag, offset in named:
            name = image.string(strtab + offset)
            if name is None:
                raise CorruptElf(path, f'has a corrupt dynamic section: a name at {offset} of DT_STRTAB has no end '
                                       f'within its segment', loader_fails=True)
            names[offset] = name.decode('utf-8', 'surrogateescape')
        if check_sections and shnum and shoff:
            tables.check_sections(image, values, shoff, shentsize, shnum, size)
    needed = tuple(names[v] for t, v in named if t == DT_NEEDED)
    soname = next((names[v] for t, v in named if t == DT_SONAME), None)
    rpath = next((names[v] for t, v in named if t == DT_RPATH), None)
    runpath = next((names[v] for t, v in named if t == DT_RUNPATH), None)
    return ElfInfo(path=path, elf_class=64 if is64 else 32, little_endian=little, machine=machine_name(e_machine),
                   soname=soname, needed=needed, rpath=_split_path_list(rpath), runpath=_split_path_list(runpath),
                   flags_1=values.get(DT_FLAGS_1, 0), stack_flags=stack_flags, interpreter=interpreter)


def decode_ident(head: bytes) -> Optional[Tuple[bool, bool]]:
    """(64-bit, little-endian) from the first bytes of a file, or None when they are not a valid ELF
    identification (magic, EI_CLASS 1 or 2, EI_DATA 1 or 2): the one check of the header-only readers
    (read_abi_key here, symbols.ElfSymbols)."""
    if len(head) < 6 or head[:4] != ELF_MAGIC or head[4] not in (1, 2) or head[5] not in (1, 2):
        return None
    return head[4] == 2, head[5] == 1


def read_abi_key(path: Union[str, 'os.PathLike[str]']) -> Optional[Tuple[int, bool, Union[str, int]]]:
    """Return (class, little_endian, machine) from the ELF header alone, or None if not a usable ELF.

    Used while searching directories: glibc skips a candidate file whose header does not match the
    object that asked for it (e.g. a 32-bit library in a 64-bit search path) and keeps searching.
    """
    try:
        with open(path, 'rb') as handle:
            head = handle.read(20)
    except OSError:
        return None
    ident = decode_ident(head)
    if len(head) < 20 or ident is None:
        return None
    is64, little = ident
    machine = struct.unpack('<H' if little else '>H', head[18:20])[0]
    return (64 if is64 else 32, little, machine_name(machine))
