"""Read what the dynamic loader cares about from an ELF file: SONAME, NEEDED, RPATH, RUNPATH, flags.

pyelftools does the decoding, so files of any class, endianness and machine can be read (an aarch64
build can be audited on an x86_64 node).  Only the ELF header, program headers and the dynamic
segment are read, never the whole file.  Every way a file can fail to be a usable shared object
(not ELF, a linker script named .so, truncated, relocatable, static) becomes a one-line PluginError.
PT_GNU_STACK is read too: glibc >= 2.41 refuses to dlopen() an object that asks for an executable stack.

The names (NEEDED, SONAME, RPATH, RUNPATH) are read as the loader reads them: at DT_STRTAB, mapped
through the PT_LOAD segments, never through the section headers, which the loader ignores
(check_string_tables, issue 28).  A DT_STRTAB outside every loaded segment (glibc segfaults on it), a
name past DT_STRSZ or without its NUL, and section headers whose `.dynstr` is not where DT_STRTAB is
(the loader loads the file, but patchelf and the symbol reader of doctor read names from the section
and would write or report wrong ones) are refused here, the one reader check-needed, add-needed and
doctor share, with one message each.
"""

import os
import struct
from typing import Any, Iterable, Optional, Tuple, Union
from dataclasses import dataclass

from elftools.common.exceptions import ELFError, ELFParseError
from elftools.elf.elffile import ELFFile
from elftools.elf.dynamic import DynamicSegment
from elftools.elf.enums import ENUM_E_MACHINE

from eb_pytorch_cuda.errors import PluginError

ELF_MAGIC = b'\x7fELF'
# text a GNU ld linker script (e.g. libc.so, or libfoo.so -> "INPUT(libfoo.so.1)") starts with
LINKER_SCRIPT_MARKERS = (b'/*', b'INPUT', b'GROUP', b'OUTPUT_FORMAT', b'SEARCH_DIR')

DF_1_NODEFLIB = 0x800
MACHINE_NAMES = {value: key for key, value in ENUM_E_MACHINE.items() if not key.startswith('_')}


@dataclass(frozen=True)
class ElfInfo:
    """The loader-relevant facts of one ELF file (sonames and search paths as raw strings)."""

    path: str
    elf_class: int  # 32 or 64
    little_endian: bool
    machine: str  # e.g. 'EM_X86_64', 'EM_AARCH64'
    soname: Optional[str] = None
    needed: tuple = ()
    rpath: tuple = ()  # DT_RPATH entries, unexpanded ($ORIGIN kept)
    runpath: tuple = ()  # DT_RUNPATH entries, unexpanded
    flags_1: int = 0
    stack_flags: Optional[int] = None  # p_flags of PT_GNU_STACK (PF_X = 1: executable stack); None: no header

    @property
    def nodeflib(self) -> bool:
        """True when linked with -z nodeflib: ld.so.cache and default dirs are not searched."""
        return bool(self.flags_1 & DF_1_NODEFLIB)

    @property
    def abi_key(self) -> Tuple[int, bool, str]:
        """What must match for glibc to accept this file as a dependency of another."""
        return (self.elf_class, self.little_endian, self.machine)


def _split_path_list(value):
    return tuple(entry for entry in value.split(':') if entry) if value else ()


def _sniff(path):
    """Check the file is a readable ELF before pyelftools sees it; raise PluginError otherwise."""
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


def read_elf(path: Union[str, 'os.PathLike[str]']) -> ElfInfo:
    """Return the ElfInfo of the shared object or executable at path, or raise PluginError."""
    path = os.fspath(path)
    _sniff(path)
    size = os.path.getsize(path)
    try:
        with open(path, 'rb') as stream:
            elf = ELFFile(stream)
            header = elf.header
            expected_size = 52 if elf.elfclass == 32 else 64
            if header['e_ehsize'] != expected_size:  # e.g. a flipped EI_CLASS or EI_DATA byte: nothing else fits
                raise PluginError(path, f"has an inconsistent ELF header: e_ehsize is {header['e_ehsize']}, but a "
                                        f"{elf.elfclass}-bit {'little' if elf.little_endian else 'big'}-endian header "
                                        f"is {expected_size} bytes (EI_CLASS or EI_DATA byte corrupt?)")
            if header['e_type'] not in ('ET_DYN', 'ET_EXEC'):
                raise PluginError(path, f"is an ELF file of type {header['e_type']}, not a shared object")
            if header['e_phoff'] + header['e_phnum'] * header['e_phentsize'] > size:
                raise PluginError(path, 'is a truncated ELF file (program headers past the end)')
            dynamic, stack_flags = None, None
            segments: Iterable[Any] = elf.iter_segments()  # pyelftools sets some attributes at run time
            for segment in segments:
                if segment['p_offset'] + segment['p_filesz'] > size:
                    raise PluginError(path, f"is a truncated ELF file ({segment['p_type']} past the end)")
                if isinstance(segment, DynamicSegment):
                    dynamic = segment
                elif segment['p_type'] == 'PT_GNU_STACK':
                    stack_flags = segment['p_flags']
            if dynamic is None:
                raise PluginError(path, 'has no dynamic section (statically linked?)')
            values: dict = {'DT_NEEDED': [], 'DT_SONAME': None, 'DT_RPATH': None, 'DT_RUNPATH': None, 'DT_FLAGS_1': 0}
            names = check_string_tables(path, elf, stream, size)
            for kind, name in names:
                if kind == 'DT_NEEDED':
                    values['DT_NEEDED'].append(name)
                elif kind in values:
                    values[kind] = name
            tags: Iterable[Any] = dynamic.iter_tags()
            for tag in tags:
                if tag.entry.d_tag == 'DT_FLAGS_1':
                    values['DT_FLAGS_1'] = tag.entry.d_val
                elif tag.entry.d_tag == 'DT_NULL':
                    break
            return ElfInfo(
                path=path,
                elf_class=elf.elfclass,
                little_endian=elf.little_endian,
                machine=header['e_machine'],
                soname=values['DT_SONAME'],
                needed=tuple(values['DT_NEEDED']),
                rpath=_split_path_list(values['DT_RPATH']),
                runpath=_split_path_list(values['DT_RUNPATH']),
                flags_1=values['DT_FLAGS_1'],
                stack_flags=stack_flags,
            )
    except PluginError:
        raise
    except (ELFError, ELFParseError, struct.error, ValueError, KeyError, UnicodeDecodeError) as err:
        raise PluginError(path, f'is a truncated or corrupt ELF file ({type(err).__name__}: {err})') from None
    except Exception as err:  # pyelftools' construct layer raises assorted types on garbage input
        raise PluginError(path, f'is a truncated or corrupt ELF file ({type(err).__name__})') from None


STRING_TAGS = ('DT_NEEDED', 'DT_SONAME', 'DT_RPATH', 'DT_RUNPATH')
SHT_DYNAMIC_NAMES = ('SHT_DYNAMIC', 'SHT_DYNSYM')  # sections whose sh_link is the dynamic string table


def _raw_tags(elf) -> list:
    """[(d_tag name or number, d_val)] of the dynamic segment up to DT_NULL, read without pyelftools'
    string decoding (which falls back to the section headers when DT_STRTAB maps nowhere)."""
    dynamic = next(segment for segment in elf.iter_segments() if segment['p_type'] == 'PT_DYNAMIC')
    raw: Iterable[Any] = dynamic._iter_tags()  # pyelftools' own entry parser, no string table touched
    return [(entry['d_tag'], entry['d_val']) for entry in raw if entry['d_tag'] != 'DT_NULL']


def check_string_tables(path: str, elf, stream, size: int) -> list:
    """[(tag, name)] of the string entries of the dynamic section, read at DT_STRTAB as the loader reads them;
    PluginError naming path and the fault for what the loader would crash on or tools would misread (see
    the module docstring)."""
    tags = _raw_tags(elf)
    strtab = next((value for tag, value in tags if tag == 'DT_STRTAB'), None)
    strsz = next((value for tag, value in tags if tag == 'DT_STRSZ'), None)
    wanted = [(tag, value) for tag, value in tags if tag in STRING_TAGS]
    if strtab is None:
        if wanted:
            raise PluginError(path, f'has a corrupt dynamic section: {wanted[0][0]} but no DT_STRTAB')
        return []
    loads = [segment for segment in elf.iter_segments() if segment['p_type'] == 'PT_LOAD']
    segment = next((s for s in loads if s['p_vaddr'] <= strtab < s['p_vaddr'] + s['p_filesz']), None)
    if segment is None:
        raise PluginError(path, f'has a corrupt dynamic section: DT_STRTAB {strtab:#x} is outside every loaded '
                                f'segment (the loader would crash reading its names)')
    offset = segment['p_offset'] + strtab - segment['p_vaddr']
    limit = segment['p_offset'] + segment['p_filesz']
    if strsz is not None:
        if offset + strsz > limit:
            raise PluginError(path, f'has a corrupt dynamic section: DT_STRSZ {strsz} runs past the segment '
                                    f'DT_STRTAB {strtab:#x} is in')
        limit = offset + strsz
    limit = min(limit, size)
    names = []
    for tag, value in wanted:
        stream.seek(offset + value)
        data = stream.read(max(0, min(limit - offset - value, 65536)))
        end = data.find(b'\0')
        if value >= limit - offset or end < 0:
            raise PluginError(path, f'has a corrupt dynamic section: {tag} {value} points past its string table '
                                    f'(DT_STRSZ {strsz}) or to a name without its end')
        names.append((tag, data[:end].decode('utf-8', 'replace')))
    _check_sections_agree(path, elf, offset, strtab)
    return names


def _check_sections_agree(path, elf, offset, strtab):
    """Refuse section headers whose dynamic string table is not at DT_STRTAB (none at all is fine: sstrip)."""
    if not elf.header['e_shnum']:
        return
    sections = list(elf.iter_sections())
    candidates = {index for index, section in enumerate(sections) if section.name == '.dynstr'}
    candidates |= {section['sh_link'] for section in sections if section['sh_type'] in SHT_DYNAMIC_NAMES}
    for index in sorted(candidates):
        if index >= len(sections):
            raise PluginError(path, f'has corrupt section headers: a dynamic section links to section {index} of '
                                    f'{len(sections)}')
        section = sections[index]
        if section['sh_offset'] != offset or section['sh_addr'] != strtab:
            raise PluginError(path, f"has section headers that disagree with its dynamic section: "
                                    f"{section.name or f'section {index}'} at file offset {section['sh_offset']:#x} "
                                    f"(address {section['sh_addr']:#x}), DT_STRTAB at file offset {offset:#x} "
                                    f"(address {strtab:#x}); the loader reads DT_STRTAB, patchelf and symbol "
                                    f"readers the section: refused as corrupt")


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
    return (64 if is64 else 32, little, MACHINE_NAMES.get(machine, machine))
