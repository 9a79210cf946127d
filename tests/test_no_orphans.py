"""`test-suite` killed during a batch, a suite run alone and an isolated rerun leaves no process of the suites.

The tree is the stand-in harness (a suite that hangs on demand cannot be made from a real PyTorch suite)
plus suites that start a grandchild (as run_test.py's pool workers and multiprocessing's resource tracker
are) and write both pids.  The judge is /proc: after the kill, no pid of theirs may still run.  The
same for `eb` is in tests/test_eb_easyblock_tests.py (the eb killed by its own suite).
"""

import os
import signal
import subprocess
import time

import pytest

from eb_pytorch_cuda import process
from helpers import module_env, standin_source, suite_command, wait_for
from procs import none_left, running, terminal_signals

# spawns a grandchild, records both pids in <pid dir>/<suite>.<n>, then fails (first run) or hangs
SUITE = '''
import os, subprocess, sys, time, unittest
PIDS = os.environ['NO_ORPHANS_PIDS']
NAME = os.path.splitext(os.path.basename(__file__))[0]
MODE = {mode!r}


class TestWork(unittest.TestCase):
    def test_it(self):
        grandchild = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])
        runs = len([name for name in os.listdir(PIDS) if name.startswith(NAME + '.')])
        with open(os.path.join(PIDS, '%s.%d.tmp' % (NAME, runs)), 'w') as handle:
            handle.write('%d %d' % (os.getpid(), grandchild.pid))
        os.rename(os.path.join(PIDS, '%s.%d.tmp' % (NAME, runs)), os.path.join(PIDS, '%s.%d' % (NAME, runs)))
        if MODE == 'fail-then-hang' and runs == 0:
            grandchild.kill()
            self.fail('fails in the run; its rerun hangs')
        time.sleep(600)


if __name__ == '__main__':
    from common import run_tests
    run_tests(__file__)
'''


def _tree(tmp_path, suites):
    source = standin_source(tmp_path / 'src')
    for name, mode in suites.items():
        (source / 'test' / f'{name}.py').write_text(SUITE.format(mode=mode))
    (tmp_path / 'pids').mkdir()
    return source


def _start(tmp_path, source, *options):
    env = dict(module_env(), NO_ORPHANS_PIDS=str(tmp_path / 'pids'))
    return subprocess.Popen(suite_command(source, tmp_path / 'results', *options), env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, preexec_fn=terminal_signals)


def _wait_for(tmp_path, name, seconds=120):
    path = tmp_path / 'pids' / name
    wait_for(path.exists, f'{name} to start', seconds, 0.1)
    return [int(pid) for pid in path.read_text().split()]


def _killed_by(signum):
    """The CLI turns SIGTERM into cleanup and exit 128+N (cli.main); SIGKILL allows nothing."""
    return -signum if signum == signal.SIGKILL else 128 + signum


@pytest.mark.parametrize('signum', [signal.SIGKILL, signal.SIGTERM])
def test_killed_during_a_batch(tmp_path, signum):
    source = _tree(tmp_path, {'test_hangs': 'hang'})
    cli = _start(tmp_path, source, '--timeout', '600')
    pids = _wait_for(tmp_path, 'test_hangs.0')
    cli.send_signal(signum)
    assert cli.wait(timeout=60) == _killed_by(signum)
    if signum == signal.SIGTERM:  # told to stop: its groups are gone before it exits
        assert not any(running(pid) for pid in pids)
    assert none_left(pids, process.GRACE_SECONDS + 50)  # bounded generously for a loaded machine


@pytest.mark.parametrize('signum', [signal.SIGKILL, signal.SIGTERM])
def test_killed_during_a_suite_run_alone(tmp_path, signum):
    """test_a hangs past its timeout, so its batch is killed; test_b, unfinished in it, then runs alone."""
    source = _tree(tmp_path, {'test_a_hangs': 'hang', 'test_b_hangs': 'hang'})
    cli = _start(tmp_path, source, '--timeout', '5')
    first = _wait_for(tmp_path, 'test_a_hangs.0')
    alone = _wait_for(tmp_path, 'test_b_hangs.0')  # the batch never got to it: this is the run alone
    cli.send_signal(signum)
    assert cli.wait(timeout=60) == _killed_by(signum)
    assert none_left(first + alone, process.GRACE_SECONDS + 50)  # bounded generously for a loaded machine


@pytest.mark.parametrize('signum', [signal.SIGKILL, signal.SIGTERM])
def test_killed_during_an_isolated_rerun(tmp_path, signum):
    source = _tree(tmp_path, {'test_fails_then_hangs': 'fail-then-hang'})
    cli = _start(tmp_path, source, '--timeout', '600', '--rerun', '1')
    run = _wait_for(tmp_path, 'test_fails_then_hangs.0')
    rerun = _wait_for(tmp_path, 'test_fails_then_hangs.1')
    cli.send_signal(signum)
    assert cli.wait(timeout=60) == _killed_by(signum)
    assert none_left(run + rerun, process.GRACE_SECONDS + 50)  # bounded generously for a loaded machine


def _children(pid):
    """Pids whose parent is pid (from /proc)."""
    found = []
    for name in os.listdir('/proc'):
        if name.isdigit():
            try:
                with open(f'/proc/{name}/stat') as handle:
                    if int(handle.read().rsplit(')', 1)[1].split()[1]) == pid:
                        found.append(int(name))
            except (OSError, ValueError):
                continue
    return found


def test_a_killed_runs_leftovers_stop_before_the_next_run_starts_a_suite(tmp_path):
    """The supervisor itself killed too (the OOM killer, `kill -9` of everything): only the next run on the same
    results can stop what is left, and it does so before it runs anything."""
    source = _tree(tmp_path, {'test_hangs': 'hang'})
    cli = _start(tmp_path, source, '--timeout', '600')
    pids = _wait_for(tmp_path, 'test_hangs.0')
    # the run stopped first: it stops a group whose supervisor died by SIGKILL (process.Child.wait), and under load
    # its batch thread reaped the supervisor and killpg'd the group before the run's own SIGKILL landed
    os.kill(cli.pid, signal.SIGSTOP)
    for supervisor in _children(cli.pid):
        os.kill(supervisor, signal.SIGKILL)  # first, so no parent-death signal can reach a living supervisor
    cli.kill()
    cli.wait()
    time.sleep(1)
    assert all(running(pid) for pid in pids)  # orphans now: nothing of ours is left to stop them
    again = _start(tmp_path, source, '--timeout', '600')
    try:
        assert none_left(pids, process.GRACE_SECONDS + 30)
        assert _wait_for(tmp_path, 'test_hangs.1')  # and then it ran the suite again
    finally:
        again.send_signal(signal.SIGTERM)
        again.wait(timeout=60)
