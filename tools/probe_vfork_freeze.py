"""How often a freeze (SIGSTOP of a process's group, then of its children's groups) leaves the process in
vfork, state D, with its child stopped between Popen's setsid() and exec (the fact behind
tests/test_patch_faults.py's `_frozen`).

Usage: python3 tools/probe_vfork_freeze.py [SECONDS]   (default 30)

A parent loops `Popen(['/bin/true'], start_new_session=True)`; every 2 ms this probe stops the parent's group
and each child's group, looks 50 ms later, and lets them go on.  Prints `freezes N, parent left D with a child
T: M`.  The parent is killed at the end, and on any error.
"""
import os
import signal
import subprocess
import sys
import time


def _stat(pid):
    """The fields of /proc/pid/stat after the command name (state first, then ppid), None when it has gone."""
    try:
        with open(f'/proc/{pid}/stat') as handle:
            return handle.read().rsplit(')', 1)[1].split()
    except OSError:
        return None


def _children(pid):
    return [int(name) for name in filter(str.isdigit, os.listdir('/proc'))
            if (_stat(name) or ['', '0'])[1] == str(pid)]


def _signal_groups(pids, signum):
    for pid in pids:
        try:
            os.killpg(os.getpgid(pid), signum)
        except ProcessLookupError:
            pass


def main(seconds):
    parent = subprocess.Popen([sys.executable, __file__, '--parent'], start_new_session=True)
    freezes = stuck = 0
    try:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            time.sleep(0.002)
            os.killpg(parent.pid, signal.SIGSTOP)
            children = _children(parent.pid)
            _signal_groups(children, signal.SIGSTOP)
            time.sleep(0.05)
            freezes += 1
            states = [(_stat(child) or ['gone'])[0] for child in children]
            if (_stat(parent.pid) or ['gone'])[0] == 'D' and 'T' in states:
                stuck += 1
            _signal_groups(children, signal.SIGCONT)
            os.killpg(parent.pid, signal.SIGCONT)
    finally:
        os.killpg(parent.pid, signal.SIGKILL)
        parent.wait()
    print(f'freezes {freezes}, parent left D with a child T: {stuck}')


if __name__ == '__main__':
    if sys.argv[1:] == ['--parent']:
        while True:
            subprocess.Popen(['/bin/true'], start_new_session=True).wait()
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 30)
