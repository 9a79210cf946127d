"""Read /etc/ld.so.cache (the 'glibc-ld.so.cache1.1' format) into a soname -> paths map.

glibc consults this cache after RPATH and RUNPATH; reading it directly (instead of running
`ldconfig -p`) keeps resolution free of subprocesses and works on any host.  Entries are kept in file
order; the caller picks the first whose ELF header suits the object that asks.
"""

import struct

NEW_MAGIC = b'glibc-ld.so.cache'
NEW_VERSION = b'1.1'
OLD_MAGIC = b'ld.so-1.7.0'
NEW_HEADER = struct.Struct('<17s3sIIB3sI12x')  # magic, version, nlibs, len_strings, flags, pad, ext offset
NEW_ENTRY = struct.Struct('<iIIIQ')  # flags, key, value, osversion, hwcap
OLD_ENTRY_SIZE = 12

DEFAULT_CACHE = '/etc/ld.so.cache'


def _cstring(data, offset):
    end = data.find(b'\0', offset)
    return data[offset:end if end >= 0 else len(data)].decode('utf-8', 'surrogateescape')


def _new_format_start(data):
    """Offset of the new-format header: at 0, or after an old-format table (older ldconfig)."""
    if data.startswith(NEW_MAGIC):
        return 0
    if data.startswith(OLD_MAGIC) and len(data) >= 16:
        nlibs = struct.unpack_from('<I', data, 12)[0]
        offset = 16 + nlibs * OLD_ENTRY_SIZE
        offset = (offset + 7) & ~7
        if data[offset:offset + len(NEW_MAGIC)] == NEW_MAGIC:
            return offset
    return None


def parse_ld_so_cache(data):
    """Return {soname: [path, ...]} from the bytes of an ld.so.cache; {} for an unknown format."""
    start = _new_format_start(data)
    if start is None or len(data) < start + NEW_HEADER.size:
        return {}
    flags = data[start + 28]  # 3 = big endian, 2 = little endian, 0 = unspecified (host order)
    order = '>' if flags == 3 else '<'
    _magic, version, nlibs, _len_strings, _flags, _pad, _ext = struct.unpack_from(
        order + NEW_HEADER.format[1:], data, start)
    if version != NEW_VERSION:
        return {}
    entry = struct.Struct(order + NEW_ENTRY.format[1:])
    table = start + NEW_HEADER.size
    if table + nlibs * entry.size > len(data):
        return {}
    # in the new format, string offsets are relative to the new header (0 when it starts the file)
    result: dict = {}
    for index in range(nlibs):
        _flags, key, value, _osv, _hwcap = entry.unpack_from(data, table + index * entry.size)
        result.setdefault(_cstring(data, start + key), []).append(_cstring(data, start + value))
    return result


def read_ld_so_cache_file(path):
    """A cache named by the user (doctor --ld-so-cache): parsed, or a one-line PluginError naming the file."""
    from eb_pytorch_cuda.errors import PluginError
    from eb_pytorch_cuda.inputs import require_regular
    require_regular(path)
    try:
        with open(path, 'rb') as handle:
            data = handle.read()
    except OSError as err:
        raise PluginError(path, f'cannot read: {err.strerror}') from None
    parsed = parse_ld_so_cache(data)
    if not parsed and _new_format_start(data) is None:
        raise PluginError(path, 'not an ld.so.cache (no glibc-ld.so.cache1.1 header)')
    return parsed


_CACHE: dict = {}


def load_ld_so_cache(path=DEFAULT_CACHE):
    """Parsed cache at path, read once per process; {} when the file is missing or unreadable."""
    if path not in _CACHE:
        try:
            with open(path, 'rb') as handle:
                _CACHE[path] = parse_ld_so_cache(handle.read())
        except OSError:
            _CACHE[path] = {}
    return _CACHE[path]
