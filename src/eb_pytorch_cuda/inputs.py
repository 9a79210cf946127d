"""Reading a user-supplied input file whole, with the one-line error the CLI shows for any failure.

Only regular files are read: a FIFO named `*.xml` in a report directory would block a plain open()
forever, and a device or socket is never a test log.  The file is opened non-blocking and checked with
fstat() on the opened descriptor, so a file swapped for a FIFO between a check and the open is refused too.
"""

import os
import stat

from eb_pytorch_cuda.errors import PluginError

_KINDS = ((stat.S_ISFIFO, 'a FIFO'), (stat.S_ISCHR, 'a character device'), (stat.S_ISBLK, 'a block device'),
          (stat.S_ISSOCK, 'a socket'))


def _refuse_unless_regular(path, mode):
    if stat.S_ISDIR(mode):
        raise PluginError(path, 'is a directory, not a file')
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _KINDS if test(mode)), 'not a regular file')
        raise PluginError(path, f'is {kind}, not a regular file; refused')


def check_regular_file(path: str) -> None:
    """PluginError unless path is (a symbolic link to) a regular file."""
    try:
        mode = os.stat(path).st_mode
    except OSError as err:
        raise PluginError(path, f'cannot be read: {err.strerror}') from None
    _refuse_unless_regular(path, mode)


def read_bytes(path: str) -> bytes:
    """The bytes of path, or PluginError naming the file and why it cannot be read (not a regular file,
    missing, unreadable)."""
    check_regular_file(path)
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as err:
        raise PluginError(path, f'cannot be read: {err.strerror}') from None
    try:  # the type checked again on the open descriptor: the path may have been swapped meanwhile
        _refuse_unless_regular(path, os.fstat(descriptor).st_mode)
        handle = os.fdopen(descriptor, 'rb')
    except BaseException:
        os.close(descriptor)
        raise
    try:
        with handle:
            return handle.read()
    except OSError as err:
        raise PluginError(path, f'cannot be read: {err.strerror}') from None
