"""The process helper on real processes: statuses pass through, groups die at timeouts, with a killed parent,
and before a parent told to stop exits.  The judges are the kernel's process table (/proc) and real signals."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from eb_pytorch_cuda import process
from environment import missing
from procs import describe_tree, none_left, running, state

# a command that leaves a grandchild behind, as run_test.py's pool workers and resource tracker do
LEAVES_A_GRANDCHILD = [sys.executable, '-c', textwrap.dedent('''
    import subprocess, sys, time
    grandchild = subprocess.Popen(['sleep', '300'])
    print(grandchild.pid, flush=True)
    time.sleep(float(sys.argv[1]))
''')]


@pytest.mark.parametrize('code, expected', [
    ('import sys; sys.exit(3)', 3),
    ('pass', 0),
    ('import os, signal; os.kill(os.getpid(), signal.SIGABRT)', -signal.SIGABRT),
    ('import os, signal; os.kill(os.getpid(), signal.SIGSEGV)', -signal.SIGSEGV),
    # the OOM killer's signal: its handler cannot be set, and the supervisor ended with 1 and a traceback
    ('import os, signal; os.kill(os.getpid(), signal.SIGKILL)', -signal.SIGKILL),
])
def test_the_commands_own_status_comes_back(code, expected):
    assert process.run([sys.executable, '-c', code]) == (expected, False)


def test_a_program_that_cannot_run_is_refused_as_popen_refuses_it(tmp_path):
    with pytest.raises(FileNotFoundError):
        process.run([str(tmp_path / 'no-such-program')])
    with pytest.raises(FileNotFoundError):
        process.run(['no-such-program-on-path'])
    (tmp_path / 'not-executable').write_text('#!/bin/sh\n')
    with pytest.raises(PermissionError):
        process.run([str(tmp_path / 'not-executable')])
    assert process.live_children() == []


def test_what_the_command_leaves_in_its_group_is_stopped_when_it_ends(tmp_path):
    out = tmp_path / 'out'
    with open(out, 'w') as handle:
        assert process.run(LEAVES_A_GRANDCHILD + ['0'], stdout=handle) == (0, False)
    grandchild = int(out.read_text())
    assert none_left([grandchild], 1)


def test_the_whole_group_dies_at_the_timeout(tmp_path):
    out = tmp_path / 'out'
    start = time.monotonic()
    with open(out, 'w') as handle:
        assert process.run(LEAVES_A_GRANDCHILD + ['300'], timeout=1, stdout=handle) == (None, True)
    assert time.monotonic() - start < 10
    assert not running(int(out.read_text()))
    assert process.live_children() == []


def _parent(tmp_path, body, nohup=False):
    """A real parent process (the role of `eb` or `test-suite`) that starts children with the helper.

    Its SIGTERM, SIGHUP and SIGINT start at their defaults, as in a terminal, whatever this test session inherited
    (CI runs under a SIGHUP that is ignored: the parent then kept ignoring it and the test timed out);
    nohup: SIGHUP ignored, as `nohup eb ...` leaves it."""
    script = tmp_path / 'parent.py'
    script.write_text(textwrap.dedent(f'''
        import os, signal, subprocess, sys, threading, time
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGHUP, signal.SIG_IGN if {nohup!r} else signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)  # ignored in a background job's children
        from eb_pytorch_cuda import process
        LEAVES = {LEAVES_A_GRANDCHILD!r}
        out = open(sys.argv[1], 'w')
    ''') + textwrap.dedent(body))
    return subprocess.Popen([sys.executable, str(script), str(tmp_path / 'pids')],
                            env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))


def _pids(tmp_path, parent, count):
    """The pids the parent's children reported (count of them).  Fails at once, with the parent's status, when
    the parent ends or is stopped before they are all there, and after 120 s with what the parent and its
    descendants are doing: CI once waited 120 s here blind, the parent's fate unknown."""
    deadline = time.monotonic() + 120
    while True:
        lines = (tmp_path / 'pids').read_text().split() if (tmp_path / 'pids').exists() else []
        if len(lines) >= count:
            return [int(pid) for pid in lines]
        code = parent.poll()
        if code is not None:
            how = f'killed by {signal.Signals(-code).name}' if code < 0 else f'exit status {code}'
            raise AssertionError(f'the parent ended ({how}) before its {count} children reported, '
                                 f'having reported {lines}')
        if state(parent.pid) in ('T', 't') or time.monotonic() > deadline:
            raise AssertionError(f'the parent never reported its children (reported {lines}); the parent and its '
                                 f'descendants:\n{describe_tree(parent.pid)}')
        time.sleep(0.05)


@pytest.mark.parametrize('from_a_thread', [False, True])
def test_a_parent_killed_with_sigkill_takes_the_group_with_it(tmp_path, from_a_thread):
    parent = _parent(tmp_path, f'''
        def go():
            child = process.start(LEAVES + ['300'], stdout=out)
            child.wait()
        if {from_a_thread}:
            threading.Thread(target=go).start()
        else:
            go()
    ''')
    grandchild, = _pids(tmp_path, parent, 1)
    parent.kill()  # no cleanup of ours can run: only the supervisor's parent-death signal
    parent.wait()
    assert none_left([grandchild], process.GRACE_SECONDS + 50)  # bounded generously for a loaded machine


TWO_CHILDREN_WAITED_FOR = '''
    with process.terminating_signals_stop_children():
        children = [process.start(LEAVES + ['300'], stdout=out) for _ in range(2)]
        for child in children:
            code = child.wait()  # the stop ends the parent first: a status here is a child that ended by itself
            print(f'child {child.pid} ended by itself, status {code}', file=sys.stderr, flush=True)
'''


@pytest.mark.parametrize('signum', [signal.SIGTERM, signal.SIGHUP])
def test_a_parent_told_to_stop_stops_its_children_before_it_exits(tmp_path, signum):
    parent = _parent(tmp_path, TWO_CHILDREN_WAITED_FOR)
    grandchildren = _pids(tmp_path, parent, 2)
    parent.send_signal(signum)
    assert parent.wait(timeout=60) == -signum  # it still ends by that signal
    assert not any(running(pid) for pid in grandchildren)  # already gone when the parent's exit is seen


def test_a_parent_under_nohup_keeps_ignoring_sighup_and_so_do_its_children(tmp_path):
    parent = _parent(tmp_path, TWO_CHILDREN_WAITED_FOR, nohup=True)
    grandchildren = _pids(tmp_path, parent, 2)
    parent.send_signal(signal.SIGHUP)
    with pytest.raises(subprocess.TimeoutExpired):
        parent.wait(timeout=2)  # `nohup eb ...` outlives the logout it was started for
    assert all(running(pid) for pid in grandchildren)
    parent.terminate()
    assert parent.wait(timeout=60) == -signal.SIGTERM
    assert not any(running(pid) for pid in grandchildren)


def test_ctrl_c_in_the_parent_stops_the_children_of_its_threads(tmp_path):
    parent = _parent(tmp_path, '''
        with process.terminating_signals_stop_children():
            threads = [threading.Thread(target=lambda: process.start(LEAVES + ['300'], stdout=out).wait())
                       for _ in range(2)]
            for thread in threads:
                thread.start()
            while True:
                time.sleep(0.1)
    ''')
    grandchildren = _pids(tmp_path, parent, 2)
    parent.send_signal(signal.SIGINT)
    assert parent.wait(timeout=60) == -signal.SIGINT  # Python ends an uncaught KeyboardInterrupt by SIGINT
    assert not any(running(pid) for pid in grandchildren)


NS_LAST_PID = '/proc/sys/kernel/ns_last_pid'  # the last pid given out: the next process gets the one after it


def _leader_with_pid(pid, attempts=50):
    """A new process in its own session and group whose pid (so group id) is pid, the kernel's pid reuse forced
    through ns_last_pid (root); None when other processes kept taking it first."""
    for _ in range(attempts):
        with open(NS_LAST_PID, 'w') as handle:
            handle.write(str(pid - 1))
        other = subprocess.Popen(['sleep', '600'], start_new_session=True)
        if other.pid == pid:
            return other
        other.kill()
        other.wait()
    return None


def test_a_reaped_supervisors_pid_given_to_another_group_is_never_signalled():
    """A child whose supervisor its Popen alone reaped (killed by SIGKILL) and whose group has ended holds a pid the
    kernel gives out again (pid_max is 32768 on Debian): here to a new group leader, as another run's supervisor
    would be.  Neither the child's stop nor stop_all (a run told to stop) signals that group, and the child is
    forgotten."""
    if os.geteuid() != 0 or not os.access(NS_LAST_PID, os.W_OK):
        missing('forcing a pid to be reused needs root (/proc/sys/kernel/ns_last_pid)')
    child = process.start(['sleep', '600'])
    os.kill(child.pid, signal.SIGKILL)
    assert child.popen.wait(timeout=60) == -signal.SIGKILL  # reaped by Popen alone, not by Child.wait
    try:
        os.killpg(child.pid, signal.SIGKILL)  # what the supervisor left: the group ends, its id is free
    except ProcessLookupError:
        pass  # it died before it started the command
    assert none_left(process.group_members(child.pid), 30) and process.group_members(child.pid) == []
    other = _leader_with_pid(child.pid)
    assert other is not None, f'pid {child.pid} was never given out again'
    try:
        assert child in process.live_children() and not child.group_is_ours()
        live = process.start(['sleep', '600'])
        process.stop_all()
        assert running(other.pid) and process.live_children() == []
        assert live.returncode is not None and not running(live.pid)  # a group still ours is stopped
        assert child.stop() == -signal.SIGKILL and running(other.pid)
    finally:
        other.kill()
        other.wait()
