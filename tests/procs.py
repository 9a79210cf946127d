"""What the tests ask of the kernel's process table about processes that must be gone."""

import os
import signal
import time
from typing import Callable, Optional


def terminal_signals() -> None:
    """preexec_fn for a process that must see SIGINT, SIGTERM and SIGHUP as in a terminal, whatever the
    test session inherited (CI runs with SIGHUP ignored, and a background job has SIGINT ignored)."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)


def running(pid: int) -> bool:
    """pid exists and has not ended (a zombie has: only its exit status is left for its parent)."""
    return state(pid) not in (None, 'Z')


def _read(path: str) -> str:
    try:
        with open(path, 'rb') as handle:
            return handle.read().decode(errors='replace').strip()
    except OSError as err:
        return f'<{err.strerror}>'


def state(pid: int) -> Optional[str]:
    """pid's state letter in /proc (R, S, D, T stopped, t traced, Z ended); None when it is gone."""
    stat = _read(f'/proc/{pid}/stat')
    return stat.rsplit(')', 1)[1].split()[0] if ')' in stat else None


def runs_program(pid: int, name: str) -> bool:
    """Whether pid runs the program name (/proc/PID/comm): a process that has ended leaves its pid to another
    process (pid_max 32768), which a signal meant for it would reach."""
    return _read(f'/proc/{pid}/comm') == name


def describe_tree(root: int) -> str:
    """One line per process of root and its descendants: state, wchan, group, session, signal masks, command,
    for a test that waited on a process that never did what it should (ended, stopped, or blocked where)."""
    children: dict = {}
    for name in os.listdir('/proc'):
        stat = _read(f'/proc/{name}/stat') if name.isdigit() else ''
        if ')' in stat:
            children.setdefault(int(stat.rsplit(')', 1)[1].split()[1]), []).append(int(name))
    lines, todo = [], [(root, 0)]
    while todo:
        pid, depth = todo.pop()
        stat = _read(f'/proc/{pid}/stat')
        fields = stat.rsplit(')', 1)[1].split() if ')' in stat else ['?'] * 4
        masks = ' '.join(line.replace('\t', '') for line in _read(f'/proc/{pid}/status').splitlines()
                         if line.split(':')[0] in ('SigPnd', 'ShdPnd', 'SigBlk', 'SigIgn'))
        command = _read(f'/proc/{pid}/cmdline').replace('\0', ' ')[:100]
        lines.append(f"{'  ' * depth}{pid} state={fields[0]} wchan={_read(f'/proc/{pid}/wchan')} pgrp={fields[2]} "
                     f"sid={fields[3]} {masks} {command!r}")
        todo.extend((child, depth + 1) for child in children.get(pid, ()))
    return '\n'.join(lines)


def none_left(pids, seconds: float) -> bool:
    """Wait up to seconds for every pid to end; True when none is left running."""
    deadline = time.monotonic() + seconds
    while any(running(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _job_of(pid: int) -> Optional[str]:
    try:
        with open(f'/proc/{pid}/environ', 'rb') as handle:
            for entry in handle.read().split(b'\0'):
                if entry.startswith(b'SLURM_JOB_ID='):
                    return entry.split(b'=', 1)[1].decode()
    except OSError:
        pass
    return None


def _running_file(pid: int, filename: str) -> bool:
    try:
        with open(f'/proc/{pid}/cmdline', 'rb') as handle:
            argv = handle.read().split(b'\0')
    except OSError:
        return False
    return any(os.path.basename(part.decode(errors='replace')) == filename for part in argv)


def stop_what_runs(job: str, filename: str, finished: Callable[[], bool], seconds: float = 120) -> bool:
    """Stop (SIGSTOP) every process of Slurm job `job` that runs `filename` (a suite's test file), once one
    does; True when at least one is stopped, False when none was seen running it before finished() (the
    suite is recorded as done) or within seconds.

    For a test that cancels a job while it runs a suite: a suite stopped cannot finish before the
    cancellation lands (Slurm's SIGCONT, SIGTERM and SIGKILL end it), whatever the machine's speed; a fixed
    sleep before the cancellation let a loaded machine's suite either not start or finish first."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not finished():
        found = [int(name) for name in os.listdir('/proc')
                 if name.isdigit() and _running_file(int(name), filename) and _job_of(int(name)) == job]
        for pid in found:
            try:
                os.kill(pid, signal.SIGSTOP)
            except ProcessLookupError:
                continue
        stopped = [pid for pid in found if _wait_stopped(pid, deadline)]
        if stopped:
            return True
        time.sleep(0.05)
    return False


def _wait_stopped(pid: int, deadline: float) -> bool:
    """Wait for pid to show as stopped (T); False when it ended first or deadline passed."""
    while time.monotonic() < deadline:
        try:
            with open(f'/proc/{pid}/stat') as handle:
                state = handle.read().rsplit(')', 1)[1].split()[0]
        except OSError:
            return False
        if state == 'T':
            return True
        if state == 'Z':
            return False
        time.sleep(0.001)
    return False
