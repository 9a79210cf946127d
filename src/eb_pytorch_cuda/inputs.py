"""Opening user-supplied files: regular files only, with the one-line error the CLI shows for any failure.

A FIFO named like a library (`libx.so`) or a report (`*.xml`) makes a plain open() wait for a writer
forever; a device file may have side effects when opened, and is never a library or a test log.  stat()
first refuses anything that is not a regular file, and the open itself is non-blocking with the type
checked again on the descriptor (the name could have been replaced in between).  Used by the patcher
(elf/patchelf, patch/needed) and by the test-result readers alike.
"""

import os
import shutil
import stat
from typing import List

from eb_pytorch_cuda.errors import PluginError

_KINDS = ((stat.S_ISDIR, 'a directory'), (stat.S_ISFIFO, 'a FIFO (named pipe)'), (stat.S_ISSOCK, 'a socket'),
          (stat.S_ISCHR, 'a character device'), (stat.S_ISBLK, 'a block device'))


def file_kind(mode: int) -> str:
    """'a regular file', 'a FIFO (named pipe)', ... for an st_mode."""
    for test, name in _KINDS:
        if test(mode):
            return name
    return 'a regular file' if stat.S_ISREG(mode) else 'not a regular file'


def _refuse(path, mode):
    raise PluginError(path, f'is {file_kind(mode)}, not a regular file')


def is_dangling(path: str) -> bool:
    """path is a symbolic link to nothing (a missing target, or a loop)."""
    return os.path.islink(path) and not os.path.exists(path)


def open_regular(path: str) -> int:
    """Return a read-only descriptor (close-on-exec) of path, which must be a regular file (symlinks followed).

    Raises PluginError naming the path: no such file, not a regular file, or not readable.
    """
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise PluginError(path, 'is a dangling symlink' if is_dangling(path) else 'no such file') from None
    except OSError as err:
        raise PluginError(path, f'cannot be read: {err.strerror}') from None
    if not stat.S_ISREG(mode):
        _refuse(path, mode)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise PluginError(path, 'no such file') from None
    except OSError as err:
        raise PluginError(path, f'cannot be read: {err.strerror}') from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        _refuse(path, mode)
    return fd


def require_regular(path: str) -> None:
    """Raise PluginError unless path is a readable regular file (checked without blocking)."""
    os.close(open_regular(path))


def read_bytes(path: str) -> bytes:
    """The bytes of path, or PluginError naming the file and why it cannot be read (not a regular file,
    missing, unreadable)."""
    with os.fdopen(open_regular(path), 'rb') as handle:
        try:
            return handle.read()
        except OSError as err:
            raise PluginError(path, f'cannot be read: {err.strerror}') from None


def write_atomically(path: str, text: str) -> None:
    """Write text to path whole or not at all: a temporary file beside it, fsync'ed, renamed over it.

    A report read by a script (`report`, a bot) must never be half a file, whatever kills us mid-write;
    PluginError naming the file when it cannot be written (a full disk says which file)."""
    directory = os.path.dirname(os.path.abspath(path))
    temporary = os.path.join(directory, f'.{os.path.basename(path)}.{os.getpid()}.tmp')
    try:
        with open(temporary, 'w', encoding='utf-8') as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except OSError as err:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise PluginError(path, f'cannot be written: {err.strerror}') from None


def make_directory(path: str) -> List[str]:
    """Create the directory path and its missing parents; return those this call created, outermost first (so a
    caller that refuses afterwards can remove exactly what it made: remove_made).

    PluginError naming the path (or the part of it) that is in the way: "is a dangling symlink", "is a character
    device, not a directory" (os.makedirs says only "File exists" for both), or why it cannot be created."""
    path = os.path.abspath(path)
    missing = []
    part = path
    while not os.path.lexists(part) and os.path.dirname(part) != part:
        missing.append(part)
        part = os.path.dirname(part)
    if not os.path.isdir(part):
        if is_dangling(part):
            raise PluginError(part, 'is a dangling symlink')
        try:
            kind = file_kind(os.stat(part).st_mode)
        except OSError as err:
            raise PluginError(part, f'cannot be read: {err.strerror}') from None
        raise PluginError(part, f'is {kind}, not a directory')
    made: List[str] = []
    for directory in reversed(missing):
        try:
            os.mkdir(directory)
        except FileExistsError:  # made meanwhile by someone else: theirs, used as it is
            if not os.path.isdir(directory):
                remove_made(made)
                raise PluginError(directory, 'is a dangling symlink' if is_dangling(directory)
                                  else 'is not a directory') from None
            continue
        except OSError as err:
            remove_made(made)
            raise PluginError(directory, f'cannot be created: {err.strerror}') from None
        made.append(directory)
    return made


def remove_made(made: List[str], with_contents: bool = False) -> None:
    """Remove the directories make_directory created (its list), innermost first, each only if it is empty by
    then (with_contents: the innermost with what is in it, all of it this call's), so what another process put
    there meanwhile stays, and so do the directories above it."""
    if made and with_contents:
        shutil.rmtree(made[-1], ignore_errors=True)
    for directory in reversed(made):
        try:
            os.rmdir(directory)
        except FileNotFoundError:
            continue
        except OSError:
            return
