"""Every process the plugin starts: in its own process group, dying with us, killed whole at its timeout.

A ten-hour test step is killed in every way a cluster kills things: `scancel` (SIGTERM), Ctrl-C, a lost
ssh session (SIGHUP), the OOM killer or `kill -9` (SIGKILL, no cleanup).  None of them may leave a suite
running on, writing XML reports into the directory a resumed run reads.  Killing only the child we
started is not enough: run_test.py's pool workers and multiprocessing's resource tracker are its children,
and they outlive it.  So each child is started through a supervisor, a small `python -I -S` that:

- asks the kernel for SIGTERM when its parent thread dies (PR_SET_PDEATHSIG), and checks that the parent
  did not die before it asked (it exits 125 then);
- leads a new session and process group, runs the command as its only child, and waits for it;
- is the child subreaper of what the command starts (PR_SET_CHILD_SUBREAPER): a descendant that leaves the
  group (a daemon: fork, setsid(), its parent ends) is reparented to it, not to init, and stays its descendant;
- on SIGTERM, SIGINT or SIGHUP (ours, the kernel's parent-death signal, or a killpg of its group) sends
  SIGTERM to every other member of its group and every descendant, waits up to a grace period, then SIGKILLs
  what is left;
- after the command ends by itself, stops what the command left behind (in the group, or below it) the same
  way, reaping the orphans it became the parent of as they end;
- ends with the command's own status (its exit code, or the same signal), so callers read it as if the
  command had been started directly.

The supervisor is an exec'd program, not a `preexec_fn` (which Python documents as unsafe in a process
with threads; the test step starts suites from thread pools and worker slot threads).

Each group is also recorded, while a run of a results store runs (recorded_in), in that store's registry,
for the next run to stop what a killed run left (eb_pytorch_cuda.leftovers); the supervisor carries the
proof that a group is ours: MARK_VARIABLE in its environment (the store's token, from Child) and in the
command's (the token, the supervisor's pid and start time, added by the supervisor before it forks).

Our own side keeps a registry of live children: `stop_all()` (and `terminating_signals_stop_children()`,
which installs it for SIGTERM/SIGHUP where nobody else handles them) kills each group and waits for it, so
a `test-suite` or `eb` that is told to stop leaves nothing running when it exits.  A child's group is signalled
only while its supervisor is not reaped (a zombie keeps its pid, so the group's id): a reaped supervisor's pid is
free, and with pid_max at 32768 (Debian's default) a process started later, ours or another run's, may soon lead
a group of that id, which a SIGTERM would stop (tests/test_process.py forces that reuse through
/proc/sys/kernel/ns_last_pid).  The one exception is Child.wait's, right after it reaped a supervisor killed by
SIGKILL: the members it left still hold the group's id, so no other process can have it.
"""

import contextlib
import errno
import hashlib
import inspect
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from stat import S_ISREG
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.inputs import file_kind

GRACE_SECONDS = 10  # between SIGTERM and SIGKILL of a group: run_test.py's pool needs a few seconds to stop
TERMINATING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
STOPPING_SIGNALS = (signal.SIGINT,) + TERMINATING_SIGNALS
# the environment variable that proves a group is a recorded run's (eb_pytorch_cuda.leftovers): the
# supervisor's has the store's token, the command's (and its descendants') '<token> <pgid> <start time>'
MARK_VARIABLE = 'EB_PYTORCH_CUDA_GROUP'


# the one scan of /proc: used here, and its source is compiled into the supervisor program (which must stand
# alone: python -I -S -c), so both sides agree on what "still running" means
def running_processes() -> Iterator[Tuple[int, List[bytes]]]:
    """(pid, the fields of /proc/PID/stat after its command name) of every process that still runs (a zombie has
    ended: only its exit status is left); field 1 is the parent's pid, field 2 the process group."""
    for name in os.listdir('/proc'):
        if name.isdigit():
            try:
                with open('/proc/' + name + '/stat', 'rb') as handle:
                    stat = handle.read()
            except OSError:
                continue
            fields = stat[stat.rindex(b')') + 2:].split()
            if fields[0] != b'Z':
                yield int(name), fields


def group_members(pgid: int) -> List[int]:
    """Processes of group pgid that still run (running_processes)."""
    return [pid for pid, fields in running_processes() if int(fields[2]) == pgid]


def running_groups() -> Dict[int, List[int]]:
    """{process group: its processes that still run} of every group, in one scan of /proc (running_processes),
    for a caller that asks about many groups at once (eb_pytorch_cuda.leftovers)."""
    found: Dict[int, List[int]] = {}
    for pid, fields in running_processes():
        found.setdefault(int(fields[2]), []).append(pid)
    return found


_SUPERVISOR = r'''
import ctypes, os, resource, signal, sys, time
libc = ctypes.CDLL(None)
libc.prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG
if os.getppid() != int(sys.argv[1]):
    os._exit(125)  # the parent died before the request: nobody would stop us
# PR_SET_CHILD_SUBREAPER: a descendant orphaned by its parent's end (a daemon that forked, called setsid() and
# left its group) becomes our child, not init's, so that the descendants below are all of what the command started
libc.prctl(36, 1, 0, 0, 0)
grace, me = float(sys.argv[2]), os.getpid()
STOPPING = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
if MARK in os.environ:  # a recorded group: the command carries the proof of whose it is (leftovers.py)
    with open('/proc/self/stat', 'rb') as handle:
        stat = handle.read()
    os.environ[MARK] = '%s %d %s' % (os.environ[MARK], me, stat[stat.rindex(b')') + 2:].split()[19].decode())

def members():
    """Our group's other running members and every running descendant (whatever its group or session)."""
    children, found = {}, set()
    for pid, fields in running_processes():
        children.setdefault(int(fields[1]), []).append(pid)
        if int(fields[2]) == me:
            found.add(pid)
    below = list(children.get(me, ()))
    while below:
        pid = below.pop()
        found.add(pid)
        below.extend(children.get(pid, ()))
    found.discard(me)
    return sorted(found)

def signal_members(signum):
    for pid in members():
        try:
            os.kill(pid, signum)
        except OSError:
            pass

def reap():
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass

def stop_group():
    signal_members(signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        reap()
        if not members():
            return
        time.sleep(0.05)
    deadline = time.monotonic() + 30
    while True:  # again while any is left: one may have forked between the scan and its kill
        signal_members(signal.SIGKILL)
        reap()
        if not members() or time.monotonic() > deadline:
            return
        time.sleep(0.05)

def end_like(status):
    if os.WIFSIGNALED(status):  # the same signal, so the caller reads it as the command's own death
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # the command's core, if any, is already written
        signum = os.WTERMSIG(status)
        if signum != signal.SIGKILL:  # (whose handler cannot be set: OSError, and the status was lost as 1)
            signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, (signum,))
        os.kill(me, signum)
        os._exit(128 + signum)
    os._exit(os.waitstatus_to_exitcode(status))

def on_stop(signum, frame):
    for other in STOPPING:
        signal.signal(other, signal.SIG_IGN)
    stop_group()
    end_like(signum)  # a status word whose low bits are the signal: "killed by signum"

signal.pthread_sigmask(signal.SIG_BLOCK, STOPPING)
for signum in STOPPING:
    signal.signal(signum, on_stop)
child = os.fork()
if child == 0:
    for signum in STOPPING:
        signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, ())
    try:
        os.execvp(sys.argv[3], sys.argv[3:])
    except OSError as err:
        os.write(2, ('cannot run %s: %s\n' % (sys.argv[3], err.strerror)).encode())
        os._exit(127)
signal.pthread_sigmask(signal.SIG_UNBLOCK, STOPPING)
while True:  # any child: the orphans we became the parent of are reaped as they end, not kept as zombies
    try:
        pid, status = os.waitpid(-1, 0)
    except ChildProcessError:
        status = 127 << 8
        break
    if pid == child:
        break
for signum in STOPPING:
    signal.signal(signum, signal.SIG_IGN)
stop_group()  # what the command left running in its group or below it (pool workers, resource tracker, daemons)
end_like(status)
'''

_SUPERVISOR = (inspect.getsource(running_processes).replace(' -> Iterator[Tuple[int, List[bytes]]]', '')
               + f'MARK = {MARK_VARIABLE!r}\n' + _SUPERVISOR)
_SUPERVISOR_ARGV = [b'-I', b'-S', b'-c', _SUPERVISOR.encode()]  # what follows the Python in its command line

_live: set = set()
_live_lock = threading.Lock()
_registry: List[Tuple[str, str]] = []  # (file, token) each started group is recorded in (recorded_in), if any


def _start_time(pid: int) -> Optional[int]:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22), None when it is gone."""
    try:
        with open(f'/proc/{pid}/stat', 'rb') as handle:
            stat = handle.read()
    except OSError:
        return None
    return int(stat[stat.rindex(b')') + 2:].split()[19])


def store_token(registry: str) -> str:
    """The token of the store whose registry this is (its real path, hashed): what a group's MARK_VARIABLE
    must carry for a run of this store to stop it, so that no registry names another store's groups."""
    return hashlib.sha256(os.path.realpath(registry).encode()).hexdigest()[:32]


def _record(pgid: int) -> None:
    """Append '<pgid> <start time>' to the active registry: one write of one short line, whole or absent.
    Opened without blocking and checked to be a regular file (a FIFO there would hang the start), never through a
    symbolic link (another store's registry: eb_pytorch_cuda.leftovers)."""
    started = _start_time(pgid)
    if not _registry or started is None:
        return  # nothing records, or the supervisor is gone already (reaped: its group has ended)
    path = _registry[-1][0]
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
                     | os.O_NOFOLLOW, 0o644)
    except OSError as err:
        raise PluginError(path, f'cannot be written: {err.strerror}') from None
    try:
        mode = os.fstat(fd).st_mode
        if not S_ISREG(mode):
            raise PluginError(path, f'is {file_kind(mode)}, not a regular file')
        os.write(fd, f'{pgid} {started}\n'.encode())
    except OSError as err:
        raise PluginError(path, f'cannot be written: {err.strerror}') from None
    finally:
        os.close(fd)


def is_supervisor(pid: int) -> bool:
    """pid runs the supervisor program of this very version (its command line after the Python's name)."""
    try:
        with open(f'/proc/{pid}/cmdline', 'rb') as handle:
            argv = handle.read().split(b'\0')
    except OSError:
        return False
    return argv[1:1 + len(_SUPERVISOR_ARGV)] == _SUPERVISOR_ARGV


@contextlib.contextmanager
def recorded_in(registry: str) -> Iterator[None]:
    """While the block runs, every started group is recorded in registry and marked with its store's token
    (for eb_pytorch_cuda.leftovers, which the next run on the store calls)."""
    _registry.append((registry, store_token(registry)))
    try:
        yield
    finally:
        _registry.pop()


def _marked(env: Optional[dict]) -> Optional[dict]:
    """The supervisor's environment: MARK_VARIABLE set to the active registry's token, else removed (a marker
    inherited from elsewhere proves nothing about this group)."""
    base = os.environ if env is None else env
    if _registry:
        return dict(base, **{MARK_VARIABLE: _registry[-1][1]})
    if MARK_VARIABLE in base:
        return {name: value for name, value in base.items() if name != MARK_VARIABLE}
    return env


class Child:
    """A started command in its own group; `.popen` is the supervisor's Popen (its pid is the group's id)."""

    def __init__(self, argv: Sequence[str], grace: float = GRACE_SECONDS, **popen_options):
        _check_program(argv[0], popen_options.get('cwd'), popen_options.get('env'))
        wrapped = [sys.executable, '-I', '-S', '-c', _SUPERVISOR, str(os.getpid()), str(grace), *argv]
        self.argv, self.grace = list(argv), grace
        # started and registered with the stopping signals held, so a stop that arrives meanwhile finds it
        # in stop_all's list (it arrives once they are unblocked); the supervisor starts with them blocked
        # too and unblocks them once its handlers are in place
        popen_options['env'] = _marked(popen_options.get('env'))
        with stops_held():
            self.popen = subprocess.Popen(wrapped, start_new_session=True, **popen_options)
            with _live_lock:
                _live.add(self)
            _record(self.popen.pid)

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def returncode(self) -> Optional[int]:
        return self.popen.returncode

    def wait(self, timeout: Optional[float] = None) -> int:
        """The exit status (as Popen gives it); subprocess.TimeoutExpired when timeout passes first.

        A supervisor that died by SIGKILL (the one signal it cannot act on: the OOM killer, `kill -9`) leaves its
        group running without it; that group is stopped here, so nothing of the command outlives its status."""
        code = self.popen.wait(timeout=timeout)
        if code == -signal.SIGKILL:  # its members hold the group's id (module doc)
            _stop_group(self.popen.pid, self.grace)
        self._forget()
        return code

    def communicate(self, timeout: Optional[float] = None):
        try:
            return self.popen.communicate(timeout=timeout)
        finally:
            if self.popen.returncode is not None:
                self._forget()

    def stop(self) -> Optional[int]:
        """SIGTERM the whole group, SIGKILL what is left after the grace period; return the status if known.

        Waits by watching the group in /proc, not through Popen: from a signal handler, the interrupted
        Popen.wait of the main thread holds Popen's lock, and a Popen.wait here could only time out."""
        if self.group_is_ours():
            _stop_group(self.popen.pid, self.grace + 5)  # the supervisor's own grace, and time to act on it
        self.popen.poll()
        self._forget()
        return self.popen.returncode

    def group_is_ours(self) -> bool:
        """Whether the group's id is still this child's: its supervisor is not reaped (module doc)."""
        return self.popen.returncode is None

    def _forget(self):
        with _live_lock:
            _live.discard(self)

    def __enter__(self) -> 'Child':
        return self

    def __exit__(self, *exc_info) -> None:
        if self.popen.poll() is None:
            self.stop()
        self._forget()


def never_signalled(pgid: int) -> Optional[str]:
    """Why group pgid is never signalled (None: it may be): killpg(0) signals the caller's own group, 1 is
    init's, and our own group and session hold this run and its caller (every killpg here asks this first)."""
    if pgid == 0:
        return "process group 0 is never signalled (killpg(0) signals this run's own group)"
    if pgid < 2:
        return f"process group {pgid} is never signalled (init's or no group)"
    if pgid in (os.getpgrp(), os.getsid(0)):
        return f"process group {pgid} is this run's own group or session: never signalled"
    return None


def _killpg(pgid: int, signum: int) -> None:
    """os.killpg, except for a group never_signalled (ValueError: no caller of ours may ask for it)."""
    why = never_signalled(pgid)
    if why:
        raise ValueError(why)
    os.killpg(pgid, signum)


def stop_group(pgid: int, grace: float = GRACE_SECONDS) -> None:
    """Stop group pgid as a Child's is stopped (eb_pytorch_cuda.leftovers: a killed run's group)."""
    _stop_group(pgid, grace)


def _stop_group(pgid: int, grace: float) -> None:
    """SIGTERM group pgid, SIGKILL what is left after grace seconds, and wait (up to 30 s more) until it is gone."""
    for signum, seconds in ((signal.SIGTERM, grace), (signal.SIGKILL, 30)):
        try:
            _killpg(pgid, signum)
        except ProcessLookupError:
            return
        if _group_ends(pgid, seconds):
            return


def _group_ends(pgid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while group_members(pgid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def _check_program(program: str, cwd: Optional[str], env: Optional[dict]) -> None:
    """Raise FileNotFoundError/PermissionError for a program that cannot be run, as subprocess.Popen does:
    callers tell a missing program from a command that failed (the supervisor could only exit 127)."""
    if os.sep in program:
        path = program if os.path.isabs(program) else os.path.join(cwd or os.getcwd(), program)
        if not os.path.isfile(path):
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)
        if not os.access(path, os.X_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), program)
    elif shutil.which(program, path=(os.environ if env is None else env).get('PATH', os.defpath)) is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)


@contextlib.contextmanager
def stops_held() -> Iterator[Callable[[], None]]:
    """While the block runs, SIGINT, SIGTERM and SIGHUP wait (blocked in this thread) and arrive after it.

    For steps that must not be cut in two (a file created and its name kept, a child started and owned,
    a rename); yields release(), which lets them arrive earlier, from inside the block."""
    held = signal.pthread_sigmask(signal.SIG_BLOCK, STOPPING_SIGNALS)

    def release() -> None:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
    try:
        yield release
    finally:
        release()


def start(argv: Sequence[str], **popen_options) -> Child:
    """Start argv (no shell) under a supervisor; popen_options go to subprocess.Popen (cwd, env, stdout, ...)."""
    return Child(argv, **popen_options)


def run(argv: Sequence[str], timeout: Optional[float] = None, **popen_options) -> tuple:
    """Run argv to its end or its timeout: (status or None, timed_out). The group is gone either way."""
    with start(argv, **popen_options) as child:
        try:
            return child.wait(timeout=timeout), False
        except subprocess.TimeoutExpired:
            child.stop()
            return None, True


def capture(argv: Sequence[str], timeout: Optional[float] = None, **popen_options) -> subprocess.CompletedProcess:
    """Run argv with its stdout and stderr captured (as subprocess.run(capture_output=True) does); at the
    timeout the group is stopped and subprocess.TimeoutExpired raised, as subprocess.run raises it."""
    popen_options.setdefault('stdout', subprocess.PIPE)
    popen_options.setdefault('stderr', subprocess.PIPE)
    with start(argv, **popen_options) as child:
        try:
            out, err = child.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            child.stop()
            raise subprocess.TimeoutExpired(list(argv), timeout or 0) from None
        return subprocess.CompletedProcess(list(argv), child.popen.returncode, out, err)


def live_children() -> List[Child]:
    with _live_lock:
        return list(_live)


def stop_all() -> None:
    """Stop every live child's group (in parallel: each may take the grace period) and wait for them."""
    children = []
    for child in live_children():
        if child.group_is_ours():
            children.append(child)
        else:
            child._forget()  # reaped (by Child.wait, which stops what a SIGKILLed one left): its id may be another's
    for child in children:
        try:
            _killpg(child.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    for child in children:
        child.stop()  # the SIGTERM again (harmless), the wait, and SIGKILL for what ignored it


@contextlib.contextmanager
def terminating_signals_stop_children() -> Iterator[None]:
    """While the block runs, SIGTERM/SIGHUP stop every child group before this process ends by that signal.

    Installed only from the main thread and only for signals whose handler is the default (a handler of
    the caller, e.g. EasyBuild's, is left alone: the supervisors' parent-death signal still stops the
    children when we die).  On the way out the previous handlers are restored."""
    installed: Dict[signal.Signals, Any] = {}
    if threading.current_thread() is threading.main_thread():
        def handler(signum, frame):
            for other in installed:
                signal.signal(other, signal.SIG_IGN)
            stop_all()
            signal.signal(signum, signal.SIG_DFL)
            signal.raise_signal(signum)
        for signum in TERMINATING_SIGNALS:
            if signal.getsignal(signum) == signal.SIG_DFL:
                installed[signum] = signal.signal(signum, handler)
    try:
        yield
    except BaseException:
        stop_all()  # KeyboardInterrupt or an error: the pool threads' children must not run on
        raise
    finally:
        for installed_signal, previous in installed.items():
            signal.signal(installed_signal, previous)
