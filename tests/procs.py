"""What the tests ask of the kernel's process table about processes that must be gone."""

import signal
import time


def terminal_signals() -> None:
    """preexec_fn for a process that must see SIGINT, SIGTERM and SIGHUP as in a terminal, whatever the
    test session inherited (CI runs with SIGHUP ignored, and a background job has SIGINT ignored)."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)


def running(pid: int) -> bool:
    """pid exists and has not ended (a zombie has: only its exit status is left for its parent)."""
    try:
        with open(f'/proc/{pid}/stat') as handle:
            return handle.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except FileNotFoundError:
        return False


def none_left(pids, seconds: float) -> bool:
    """Wait up to seconds for every pid to end; True when none is left running."""
    deadline = time.monotonic() + seconds
    while any(running(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True
