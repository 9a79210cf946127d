"""Read the `.note.dlopen` ELF note: the libraries an object declares it may dlopen().

The FDO "ELF dlopen metadata" specification (https://systemd.io/ELF_DLOPEN_METADATA/, used by systemd and
others) puts, in a SHT_NOTE section named .note.dlopen, notes of owner "FDO" and type 0x407c0c0a whose
descriptor is a NUL-terminated JSON array of objects: {"feature": ..., "description": ...,
"priority": "required"|"recommended"|"suggested", "soname": ["libfoo.so.1", ...]}.  Where present it is
the object's own statement of its dlopen() targets, better than guessing from .rodata strings.
"""

import json
import struct
from typing import Any, Dict, List

from eb_pytorch_cuda.elf.symbols import ElfSymbols
from eb_pytorch_cuda.errors import PluginError

SHT_NOTE = 7
NT_FDO_DLOPEN_METADATA = 0x407c0c0a


def dlopen_note_entries(path: str) -> List[Dict[str, Any]]:
    """The JSON entries of every FDO dlopen note of the file at path ([] when it has none)."""
    elf = ElfSymbols(path)
    try:
        entries = []
        for section in elf.sections:
            if section['type'] != SHT_NOTE or section['name'] != '.note.dlopen':
                continue
            data, offset = elf._bytes(section), 0
            while offset + 12 <= len(data):
                namesz, descsz, kind = struct.unpack_from(elf.order + 'III', data, offset)
                offset += 12
                name = bytes(data[offset:offset + namesz]).rstrip(b'\0')
                offset += (namesz + 3) & ~3
                desc = bytes(data[offset:offset + descsz]).rstrip(b'\0')
                offset += (descsz + 3) & ~3
                if name != b'FDO' or kind != NT_FDO_DLOPEN_METADATA:
                    continue
                try:
                    value = json.loads(desc.decode('utf-8'))
                except (UnicodeDecodeError, ValueError):
                    raise PluginError(path, 'has a .note.dlopen note that is not valid JSON') from None
                entries += [entry for entry in (value if isinstance(value, list) else [value])
                            if isinstance(entry, dict)]
        return entries
    finally:
        elf.close()


def dlopen_note_sonames(path: str) -> List[str]:
    """Sonames named by the object's .note.dlopen notes, in the order given (their dlopen() preference)."""
    names = []
    for entry in dlopen_note_entries(path):
        sonames = entry.get('soname', [])
        for soname in sonames if isinstance(sonames, list) else [sonames]:
            if isinstance(soname, str) and soname not in names:
                names.append(soname)
    return names
