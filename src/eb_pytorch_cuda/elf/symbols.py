"""Fast reading of dynamic symbols, symbol versions and read-only strings of ELF files.

Auditing a PyTorch installation (40 objects, 4.8 GB, 254,000 dynamic symbols) must take about as long
as an `ldd -r` loop, so this reads only the section headers, .dynsym/.dynstr, the GNU version
sections and (on request) .rodata, through mmap, decoding the symbol table in bulk with
struct.iter_unpack.  Any class and byte order works: nothing here runs the loader on the file.
"""

import mmap
import re
import struct
from typing import Set
from dataclasses import dataclass, field

from eb_pytorch_cuda.elf.reader import decode_ident
from eb_pytorch_cuda.errors import PluginError

SHT_DYNSYM, SHT_GNU_VERDEF, SHT_GNU_VERNEED, SHT_GNU_VERSYM = 11, 0x6ffffffd, 0x6ffffffe, 0x6fffffff
STB_WEAK = 2
_SONAME_STRING = re.compile(rb'(lib[\w+-]+(?:\.[\w+-]+)*?\.so(?:\.\d+)*)\x00')


@dataclass
class SymbolTable:
    """Exported and required dynamic symbols of one object."""

    defined: dict = field(default_factory=dict)  # name (bytes) -> frozenset of version names ('' for unversioned)
    undefined: list = field(default_factory=list)  # (name, version or '', library expected to define it or ''),
    # names as bytes: decoded only when reported


class ElfSymbols:
    """Section-level view of one ELF file, opened with mmap."""

    def __init__(self, path: str) -> None:
        self.path = path
        try:
            with open(path, 'rb') as handle:
                self.map = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError) as err:
            raise PluginError(path, f'cannot be mapped for reading ({err})') from None
        try:
            self._read_header(path)
        except struct.error:
            self.map.close()
            raise PluginError(path, 'is a truncated or corrupt ELF file (section headers)') from None
        except BaseException:
            self.map.close()
            raise

    def _read_header(self, path: str) -> None:
        ident = decode_ident(self.map[:16])
        if ident is None:
            raise PluginError(path, 'is not an ELF file (bad magic, class or byte order)')
        self.is64, little = ident
        self.order = '<' if little else '>'
        if len(self.map) < (64 if self.is64 else 52):
            raise PluginError(path, 'is a truncated ELF file (shorter than its ELF header)')
        if self.is64:
            (_type, _machine, _version, _entry, _phoff, self.shoff, _flags, _ehsize, _phentsize, _phnum,
             self.shentsize, self.shnum, self.shstrndx) = struct.unpack_from(self.order + 'HHIQQQIHHHHHH', self.map, 16)
            self.section_format = self.order + 'IIQQQQIIQQ'
        else:
            (_type, _machine, _version, _entry, _phoff, self.shoff, _flags, _ehsize, _phentsize, _phnum,
             self.shentsize, self.shnum, self.shstrndx) = struct.unpack_from(self.order + 'HHIIIIIHHHHHH', self.map, 16)
            self.section_format = self.order + 'IIIIIIIIII'
        if self.shnum and self.shentsize < struct.calcsize(self.section_format):
            raise PluginError(path, f'is a corrupt ELF file (section header entries of {self.shentsize} bytes)')
        if self.shoff + self.shnum * self.shentsize > len(self.map):
            raise PluginError(path, 'is a truncated ELF file (section headers past the end)')
        self.sections = self._read_sections()

    def close(self) -> None:
        self.map.close()

    def _read_sections(self):
        raw = []
        for index in range(self.shnum):
            fields = struct.unpack_from(self.section_format, self.map, self.shoff + index * self.shentsize)
            name, kind, _flags, _addr, offset, size, link, info, _align, entsize = fields
            raw.append((name, kind, offset, size, link, info, entsize))
        sections = []
        names_offset = raw[self.shstrndx][2] if self.shstrndx < len(raw) else 0
        for name, kind, offset, size, link, info, entsize in raw:
            end = self.map.find(b'\0', names_offset + name)
            sections.append({'name': self.map[names_offset + name:end].decode('ascii', 'replace'), 'type': kind,
                             'offset': offset, 'size': size, 'link': link, 'info': info, 'entsize': entsize})
        return sections

    def _section(self, kind=None, name=None):
        return next((s for s in self.sections if (kind is None or s['type'] == kind)
                     and (name is None or s['name'] == name)), None)

    def _bytes(self, section):
        if section['offset'] + section['size'] > len(self.map):
            raise PluginError(self.path, f"is a truncated ELF file ({section['name']} past the end)")
        return self.map[section['offset']:section['offset'] + section['size']]

    def _versions(self, strings):
        """({index: version name} of definitions, {index: (file, version name)} of requirements)."""
        defined, needed = {}, {}
        verdef = self._section(SHT_GNU_VERDEF)
        if verdef:
            data, offset = self._bytes(verdef), 0
            for _ in range(verdef['info']):
                _v, _flags, index, count, _hash, aux, following = struct.unpack_from(self.order + 'HHHHIII', data,
                                                                                     offset)
                if count:
                    name = struct.unpack_from(self.order + 'I', data, offset + aux)[0]
                    defined[index] = _cstring(strings, name)
                if not following:
                    break
                offset += following
        verneed = self._section(SHT_GNU_VERNEED)
        if verneed:
            data, offset = self._bytes(verneed), 0
            for _ in range(verneed['info']):
                _v, count, filename, aux, following = struct.unpack_from(self.order + 'HHIII', data, offset)
                library = _cstring(strings, filename)
                position = offset + aux
                for _ in range(count):
                    _hash, _flags, other, name, nxt = struct.unpack_from(self.order + 'IHHII', data, position)
                    needed[other] = (library, _cstring(strings, name))
                    if not nxt:
                        break
                    position += nxt
                if not following:
                    break
                offset += following
        return defined, needed

    def symbols(self) -> SymbolTable:
        """SymbolTable of .dynsym, with GNU symbol versions.

        The hot loop of doctor (libtorch_cpu.so alone has 90,000 dynamic symbols): the entries are unpacked
        in bulk, only the three fields used are kept, and each version's set of names is one shared frozenset
        (a set per symbol was half the time)."""
        table = SymbolTable()
        dynsym = self._section(SHT_DYNSYM)
        if dynsym is None:
            return table
        strings = self._bytes(self.sections[dynsym['link']])
        data = self._bytes(dynsym)
        versym_section = self._section(SHT_GNU_VERSYM)
        versym = struct.unpack(f"{self.order}{versym_section['size'] // 2}H", self._bytes(versym_section)) \
            if versym_section else ()
        defined_versions, needed_versions = self._versions(strings)
        if self.is64:  # (st_name, st_info, st_shndx)
            rows = [(e[0], e[1], e[3]) for e in struct.iter_unpack(self.order + 'IBBHQQ', data)]
        else:
            rows = [(e[0], e[3], e[5]) for e in struct.iter_unpack(self.order + 'IIIBBH', data)]
        count, find = len(versym), strings.find
        defined, undefined = table.defined, table.undefined
        shared: dict = {}  # version index -> frozenset({its version name})
        for index, (name_offset, info, shndx) in enumerate(rows):
            if not name_offset:
                continue
            version_index = versym[index] & 0x7fff if index < count else 1
            if shndx == 0:
                if info >> 4 == STB_WEAK:
                    continue  # a weak reference may stay undefined: the loader never fails on it
                library, version = needed_versions.get(version_index, ('', ''))
                undefined.append((strings[name_offset:find(b'\0', name_offset)], version, library))
            elif version_index != 0:  # 0: local
                name = strings[name_offset:find(b'\0', name_offset)]
                versions = shared.get(version_index)
                if versions is None:
                    versions = shared[version_index] = frozenset((defined_versions.get(version_index, ''),))
                old = defined.get(name)
                defined[name] = versions if old is None else old | versions
        return table

    def rodata_sonames(self) -> Set[str]:
        """Library names (lib*.so[.N]) that appear as NUL-terminated strings in .rodata: dlopen() candidates."""
        rodata = self._section(name='.rodata')
        if rodata is None or rodata['type'] == 8:  # SHT_NOBITS
            return set()
        end = rodata['offset'] + rodata['size']
        if end > len(self.map):
            raise PluginError(self.path, 'is a truncated ELF file (.rodata past the end)')
        found: Set[str] = set()
        data, position = self.map, rodata['offset']
        while True:  # bytes.find runs at memchr speed; a regex over hundreds of MB would not
            position = data.find(b'.so', position, end)
            if position < 0:
                return found
            low = max(rodata['offset'], position - 200)
            nul = data.rfind(b'\0', low, position)
            start = nul + 1 if nul >= 0 else low
            stop = data.find(b'\0', position, min(end, position + 64))
            position += 3
            if stop > 0:
                match = _SONAME_STRING.fullmatch(data[start:stop + 1])
                if match:
                    found.add(match.group(1).decode('ascii', 'replace'))


def _cstring(data, offset):
    return data[offset:data.find(b'\0', offset)].decode('utf-8', 'replace')
