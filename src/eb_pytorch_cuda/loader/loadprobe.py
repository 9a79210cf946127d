"""Run in a fresh interpreter: load a library with the real glibc loader, report what got mapped.

Invoked as a script (`python -I loadprobe.py [--preload P]... LIB`) with LD_LIBRARY_PATH and
LD_PRELOAD removed from its environment, so the only thing deciding what loads is the files' own
RPATH/RUNPATH, the loader chain and the system configuration.  Prints one JSON object:
{"loaded": bool, "error": str or null, "mapped": [paths from /proc/self/maps]}.
Standard library only, so it needs nothing installed.
"""

import ctypes
import json
import os
import sys
from typing import List, Sequence


def mapped_files() -> List[str]:
    """Paths of the files mapped into this process, from /proc/self/maps."""
    paths = set()
    with open('/proc/self/maps') as maps:
        for line in maps:
            fields = line.split(None, 5)
            if len(fields) == 6 and fields[5].startswith('/'):
                paths.add(fields[5].rstrip('\n').replace(' (deleted)', ''))
    return sorted(paths)


def main(argv: Sequence[str]) -> int:
    preloads, target = [], None
    args = iter(argv)
    for arg in args:
        if arg == '--preload':
            preloads.append(next(args))
        else:
            target = arg
    error = None
    try:
        for preload in preloads:
            ctypes.CDLL(preload, mode=os.RTLD_NOW | os.RTLD_GLOBAL)
        ctypes.CDLL(target, mode=os.RTLD_NOW | os.RTLD_GLOBAL)
    except OSError as err:
        error = str(err)
    json.dump({'loaded': error is None, 'error': error, 'mapped': mapped_files()}, sys.stdout, allow_nan=False)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
