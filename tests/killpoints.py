"""Kills from outside a running `test-suite`, as a cluster and an operator deliver them, for the fault matrix
(tests/test_kill_matrix_26.py, tests/test_kill_matrix_21.py).

A kill lands while a chosen suite runs: its test file's process is found in /proc and stopped (SIGSTOP), so it
cannot end before the kill whatever the machine's speed; then the signal goes to the target, and the suite's
process is continued (SIGCONT), so a signal left pending on it is acted on at once.  Targets:
- `group`: the batch's whole process group (killpg: an operator's `kill -- -PGID`, a batch system's signal to
  the job's processes);
- `run_test`: the batch's run_test.py alone (the direct child of our supervisor: the OOM killer's pick);
- `supervisor`: our supervisor of the batch alone (the group's leader);
- `suite`: the suite's own test process alone.
"""

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import List, Optional

from eb_pytorch_cuda.process import is_supervisor
from helpers import console_script
from procs import running, terminal_signals

TARGETS = ('group', 'run_test', 'supervisor', 'suite')


@dataclass(frozen=True)
class Kill:
    """One case: signal `signum` to `target` while `suite` runs (its main session, for a harness that runs a
    pool suite twice: `session` counts the `Running <suite>` announcements to wait for)."""

    target: str
    signum: int
    suite: str
    session: int = 1

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    def __str__(self) -> str:
        return f'{self.name}-{self.target}-{self.suite}'


def _argv(pid: int) -> List[str]:
    try:
        with open(f'/proc/{pid}/cmdline', 'rb') as handle:
            return [part.decode(errors='replace') for part in handle.read().split(b'\0') if part]
    except OSError:
        return []


def _ppid(pid: int) -> Optional[int]:
    try:
        with open(f'/proc/{pid}/stat', 'rb') as handle:
            stat = handle.read()
    except OSError:
        return None
    return int(stat[stat.rindex(b')') + 2:].split()[1])


def processes_in(tree: str) -> List[int]:
    """Processes (not zombies) whose command line names a path inside tree, or that run in it."""
    found = []
    for name in os.listdir('/proc'):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        pid = int(name)
        try:
            cwd = os.readlink(f'/proc/{pid}/cwd')
        except OSError:
            cwd = ''
        if running(pid) and (cwd.startswith(tree) or any(tree in part for part in _argv(pid))):
            found.append(pid)
    return found


def _announced(output_dir: str, suite: str) -> int:
    count = 0
    if os.path.isdir(output_dir):
        for name in os.listdir(output_dir):
            try:
                with open(os.path.join(output_dir, name), errors='replace') as handle:
                    count = max(count, handle.read().count(f'Running {suite} '))
            except OSError:
                continue
    return count


def _suite_process(suite: str, within: str) -> Optional[int]:
    """The running process of suite's test file whose working directory is inside within (this test's own
    directory: another test running the same suite on another worker is never the one stopped)."""
    for pid in processes_in(within):
        if any(os.path.basename(part) == f'{suite}.py' for part in _argv(pid)):
            return pid
    return None


def _target_pid(kill: Kill, suite_pid: int) -> int:
    """The pid (or, for `group`, the process group id) the kill goes to."""
    pgid = os.getpgid(suite_pid)
    if kill.target == 'suite':
        return suite_pid
    if kill.target in ('group', 'supervisor'):
        assert is_supervisor(pgid), f'group {pgid} is not led by our supervisor'
        return pgid
    children = [int(n) for n in os.listdir('/proc') if n.isdigit() and _ppid(int(n)) == pgid]
    [run_test] = [pid for pid in children if any(part.endswith('run_test.py') for part in _argv(pid))]
    return run_test


def deliver(kill: Kill, output_dir: str, timeout: float = 300) -> str:
    """Wait for kill.suite's process (after its `session`-th announcement), stop it, send the signal to the
    target, continue it; returns what was signalled ('group 123', 'pid 456').  The suite's process is looked for
    under the directory that holds output_dir's results directory (the test's own tree and results)."""
    within = os.path.dirname(os.path.dirname(os.path.abspath(output_dir))) + os.sep
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pid = _suite_process(kill.suite, within) if _announced(output_dir, kill.suite) >= kill.session else None
        if pid is not None:
            try:
                os.kill(pid, signal.SIGSTOP)
                target = _target_pid(kill, pid)
            except (ProcessLookupError, ValueError):
                continue  # the session ended meanwhile (its -m serial one): the next one is waited for
            if kill.target == 'group':
                os.killpg(target, kill.signum)
            else:
                os.kill(target, kill.signum)
            time.sleep(0.2)
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
            return f"{'group' if kill.target == 'group' else 'pid'} {target}"
        time.sleep(0.02)
    raise AssertionError(f'{kill.suite} never ran within {timeout}s')


def run_killed(argv: List[str], kill: Kill, output_dir: str, timeout: float = 900):
    """Run `eb-pytorch-cuda` argv, deliver kill while it runs; (CompletedProcess-like rc, stdout, stderr, what)."""
    child = subprocess.Popen([console_script(), *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             preexec_fn=terminal_signals)
    try:
        what = deliver(kill, output_dir)
        out, err = child.communicate(timeout=timeout)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    return child.returncode, out, err, what


def verdict_of(stdout: str) -> str:
    """The verdict of a `--format json` run's output."""
    return json.loads(stdout)['verdict']
