"""Check the tables the dynamic section points at the way glibc's loader uses them, and against the section headers.

The loader reads a shared object through its PT_LOAD segments and its dynamic section only: DT_STRTAB for
names, DT_SYMTAB for symbols, DT_GNU_HASH (else DT_HASH) to look them up; it never reads a section header.
patchelf and symbol readers (elf/symbols.py, doctor's) read the sections, and patchelf writes DT_STRTAB,
DT_SYMTAB, DT_GNU_HASH, DT_HASH and DT_STRSZ anew from them.  So two kinds of corrupt file, measured with
the real loader and the real patchelf (docs/design.md section 11, tests/test_elf_dynamic_tables.py):

- what the loader fails on (loader_fails=True): DT_SYMTAB missing or outside every loaded segment, a
  DT_GNU_HASH outside them (SIGSEGV), a GNU hash table whose bloom filter is not a power of two (an
  assertion in _dl_setup_hash, exit 127) or that runs past its segment, a DT_SYMTAB that does not start
  with the null symbol, no hash table at all (the loader finds none of the object's symbols: "undefined
  symbol" for its users); DT_HASH is checked only when there is no DT_GNU_HASH (glibc then ignores it);
- what the loader loads but the sections contradict (loader_fails=False): a `.dynsym`, `.gnu.hash`,
  `.hash` or `.dynstr` section header elsewhere than its dynamic entry says, section headers past the end
  of the file.  patchelf turns such a file that loads into one that does not (undefined symbol, SIGSEGV,
  the _dl_setup_hash assertion) and doctor would check symbols the loader never sees.

DT_STRSZ is not checked: the loader ignores it (loads fine at 1, at 0x7fff0000 and without it) and patchelf
writes it from `.dynstr`'s size; names are read up to their NUL within the segment, as the loader reads them.
"""

import struct
from dataclasses import dataclass
from typing import BinaryIO, Dict, List, Optional, Sequence, Tuple

from eb_pytorch_cuda.errors import CorruptElf

DT_HASH, DT_STRTAB, DT_SYMTAB, DT_GNU_HASH = 4, 5, 6, 0x6ffffef5
SHT_HASH, SHT_DYNAMIC, SHT_DYNSYM, SHT_GNU_HASH = 5, 6, 11, 0x6ffffff6
_NAME_CHUNK = 4096  # names are short: read a page at a time up to the NUL
_CRASH = 'the loader would crash'


@dataclass(frozen=True)
class Image:
    """The loaded view of one open ELF file: its PT_LOAD segments as (p_offset, p_vaddr, p_filesz)."""

    path: str
    stream: BinaryIO
    loads: Tuple[Tuple[int, int, int], ...]
    is64: bool
    order: str
    mapped: int  # the file's size rounded up to a page: what the loader's mapping shows (zeros past the end)

    def segment(self, address: int) -> Optional[Tuple[int, int, int]]:
        """The PT_LOAD segment whose file contents hold address, or None."""
        return next((s for s in self.loads if s[1] <= address < s[1] + s[2]), None)

    def read(self, address: int, size: int) -> Optional[bytes]:
        """size bytes at address if they lie within one segment's file contents, else None."""
        load = self.segment(address)
        if load is None or address + size > load[1] + load[2]:
            return None
        offset = address - load[1] + load[0]
        self.stream.seek(offset)
        data = self.stream.read(size)
        if len(data) < size and offset + size <= self.mapped:
            data += bytes(size - len(data))
        return data if len(data) == size else None

    def offset_of(self, address: int) -> Optional[int]:
        """The file offset the loader maps address from, or None outside every segment."""
        load = self.segment(address)
        return None if load is None else address - load[1] + load[0]

    def string(self, address: int) -> Optional[bytes]:
        """The NUL-terminated bytes at address, read as the loader reads them (bounded by the segment,
        never by DT_STRSZ); None when the segment ends first."""
        load = self.segment(address)
        if load is None:
            return None
        end = load[1] + load[2]
        parts: List[bytes] = []
        while address < end:
            chunk = self.read(address, min(_NAME_CHUNK, end - address)) or b''
            nul = chunk.find(b'\0')
            if nul >= 0:
                return b''.join(parts) + chunk[:nul]
            if not chunk:
                return None
            parts.append(chunk)
            address += len(chunk)
        return None


def _fail(image: Image, problem: str) -> CorruptElf:
    return CorruptElf(image.path, f'has a corrupt dynamic section: {problem}', loader_fails=True)


def located(image: Image, values: Dict[int, int], tag: int, name: str, consequence: str) -> int:
    value = values.get(tag)
    if value is None:
        raise _fail(image, f'no {name} ({consequence})')
    if image.segment(value) is None:
        raise _fail(image, f'{name} {value:#x} is outside every loaded segment ({consequence})')
    return value


def check_symbol_tables(image: Image, values: Dict[int, int]) -> None:
    """Raise CorruptElf(loader_fails=True) for a DT_SYMTAB or hash table the loader would crash on or find
    no symbols through."""
    word = 8 if image.is64 else 4
    entry = 24 if image.is64 else 16
    symtab = located(image, values, DT_SYMTAB, 'DT_SYMTAB', f'{_CRASH} resolving its symbols')
    first = image.read(symtab, entry)
    if first is None or any(first):
        raise _fail(image, f'DT_SYMTAB {symtab:#x} does not start with the null symbol (not a symbol table: '
                           f'the loader would bind wrong symbols or none)')
    if DT_GNU_HASH in values:
        where = located(image, values, DT_GNU_HASH, 'DT_GNU_HASH', f'{_CRASH} looking up its symbols')
        header = image.read(where, 16)
        nbuckets, _symbias, bloom, _shift = struct.unpack(image.order + 'IIII', header or bytes(16))
        if header is None or bloom == 0 or bloom & (bloom - 1):
            raise _fail(image, f'DT_GNU_HASH {where:#x} holds no GNU hash table (bloom filter of {bloom} words, '
                               f'not a power of two: the loader would stop with an assertion)')
        if image.read(where, 16 + bloom * word + nbuckets * 4) is None:
            raise _fail(image, f'the GNU hash table at DT_GNU_HASH {where:#x} ({nbuckets} buckets, {bloom} bloom '
                               f'words) runs past its segment ({_CRASH} looking up its symbols)')
    elif DT_HASH in values:
        where = located(image, values, DT_HASH, 'DT_HASH', f'{_CRASH} looking up its symbols')
        header = image.read(where, 8)
        nbucket, nchain = struct.unpack(image.order + 'II', header or bytes(8))
        if header is None or image.read(where, 8 + 4 * (nbucket + nchain)) is None \
                or image.read(symtab, nchain * entry) is None:
            raise _fail(image, f'the hash table at DT_HASH {where:#x} ({nbucket} buckets, {nchain} symbols) runs '
                               f'past its segment or its symbol table ({_CRASH} looking up its symbols)')
    else:
        raise _fail(image, 'neither DT_GNU_HASH nor DT_HASH (the loader would find none of its symbols)')


def check_sections(image: Image, values: Dict[int, int], shoff: int, shentsize: int, shnum: int, size: int) -> None:
    """Raise CorruptElf(loader_fails=False) for section headers that contradict the dynamic section (none
    at all is fine: sstrip): the loader reads the dynamic entries, patchelf and symbol readers the sections."""
    # (sh_name, sh_type, sh_flags, sh_addr, sh_offset, sh_size, sh_link) of each section header
    section_format = image.order + ('IIQQQQI' if image.is64 else 'IIIIIII')
    if shentsize < struct.calcsize(section_format) or shoff + shnum * shentsize > size:
        raise CorruptElf(image.path, 'has corrupt section headers (past the end of the file, or too small)',
                         loader_fails=False)
    image.stream.seek(shoff)
    table = image.stream.read(shnum * shentsize)
    sections = [struct.unpack_from(section_format, table, index * shentsize) for index in range(shnum)]
    wanted = [(index, '.dynstr', DT_STRTAB) for index in
              sorted({link for _n, kind, _f, _a, _o, _s, link in sections if kind in (SHT_DYNAMIC, SHT_DYNSYM)})]
    wanted += [(index, name, tag) for index, (_n, kind, *_rest) in enumerate(sections)
               for section_type, name, tag in ((SHT_DYNSYM, '.dynsym', DT_SYMTAB), (SHT_GNU_HASH, '.gnu.hash',
                                               DT_GNU_HASH), (SHT_HASH, '.hash', DT_HASH)) if kind == section_type]
    for index, name, tag in wanted:
        if index >= shnum:
            raise CorruptElf(image.path, f'has corrupt section headers: a dynamic section links to section {index} '
                                         f'of {shnum}', loader_fails=False)
        if tag not in values:
            continue  # a table the loader does without (DT_HASH beside DT_GNU_HASH): nothing to contradict
        _name, _kind, _flags, address, file_offset, _size, _link = sections[index]
        value, mapped = values[tag], image.offset_of(values[tag])
        if address != value or file_offset != mapped:
            where = f'file offset {mapped:#x}' if mapped is not None else 'no file offset'
            raise CorruptElf(
                image.path, f"has section headers that disagree with its dynamic section: {name} at file offset "
                            f"{file_offset:#x} (address {address:#x}; section {index}), {_TAG_NAMES[tag]} at "
                            f"{where} (address {value:#x}); the loader reads "
                            f"{_TAG_NAMES[tag]}, patchelf and symbol readers the section",
                loader_fails=False)


_TAG_NAMES = {DT_HASH: 'DT_HASH', DT_STRTAB: 'DT_STRTAB', DT_SYMTAB: 'DT_SYMTAB', DT_GNU_HASH: 'DT_GNU_HASH'}


def loads_of(segments: Sequence[Tuple[int, int, int, int, int]]) -> Tuple[Tuple[int, int, int], ...]:
    """(p_offset, p_vaddr, p_filesz) of the PT_LOAD entries among (p_type, p_flags, p_offset, p_vaddr, p_filesz)."""
    return tuple((offset, vaddr, filesz) for kind, _flags, offset, vaddr, filesz in segments if kind == 1)
