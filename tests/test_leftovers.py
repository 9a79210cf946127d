"""The leftover registry (`<store>.children`) on real processes: the next run stops only what a run of this store
started, whatever the file says (eb_pytorch_cuda.leftovers).

Each fault is a line that names a real running group we never started: a `setsid sleep` with its true start
time, a group whose leader has exited (any start time, the pid with leading zeros), `0 0` (killpg(0) would be
the run's own group: its caller and siblings), a 20-million-digit number.  The judge is /proc: every such
process still runs after the next `test-suite` on the store, which gives its verdict.  What a killed run did
leave is stopped (tests/test_no_orphans.py, and here a live supervisor of this store's).
"""

import os
import signal
import subprocess
import time

import pytest

from eb_pytorch_cuda import leftovers, process
from eb_pytorch_cuda.errors import PluginError
from helpers import module_env, standin_source, suite_command
from procs import none_left, running, runs_program

PASSES = '''
import unittest


class TestOk(unittest.TestCase):
    def test_ok(self):
        pass


if __name__ == '__main__':
    from common import run_tests
    run_tests(__file__)
'''


@pytest.fixture
def tree(tmp_path):
    source = standin_source(tmp_path / 'src')
    (source / 'test' / 'test_ok.py').write_text(PASSES)
    return source


@pytest.fixture
def unrelated():
    """Start real process groups of nobody's (the caller's own started with start_new_session: setsid);
    every one still running is killed at the end."""
    started = []

    def start(argv):
        child = subprocess.Popen(argv, start_new_session=True, stdout=subprocess.PIPE, text=True)
        started.append(child.pid)
        return child
    yield start
    for pgid in started:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _start_time(pid):
    with open(f'/proc/{pid}/stat') as handle:
        return int(handle.read().rsplit(')', 1)[1].split()[19])


def _test_suite(tmp_path, source, argv_prefix=(), timeout=300):
    """`test-suite` on the tree and tmp_path/results, in a process group and session of its own (what a '0 0'
    line would signal is then the run and argv_prefix's processes, never this test session): (status, stderr)."""
    done = subprocess.run([*argv_prefix, *suite_command(source, tmp_path / 'results')], env=module_env(),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout,
                          start_new_session=True)
    return done.returncode, done.stderr


def test_groups_not_started_by_this_store_survive_the_next_run(tmp_path, tree, unrelated):
    sleeper = unrelated(['sleep', '600'])  # a `setsid sleep`: its true pid and start time go into the registry
    # a group whose leader has exited: the shell prints its background sleep's pid and ends
    orphaned = unrelated(['sh', '-c', 'sleep 600 >/dev/null 2>&1 & echo $!'])
    member = int(orphaned.stdout.readline())
    orphaned.wait()
    # a sibling in the run's own group: started by the same shell that becomes the run ('0 0' would SIGTERM it)
    sibling_file = tmp_path / 'sibling'
    (tmp_path / 'results').mkdir()
    registry = tmp_path / 'results' / 'results.jsonl.children'
    registry.write_text(f'{sleeper.pid} {_start_time(sleeper.pid)}\n'
                        f'{orphaned.pid} 12345\n'
                        f'000{orphaned.pid} 12345\n'
                        '0 0\n'
                        '1 1\n'
                        f'{"9" * 20_000_000} 1\n'
                        'garbage \x1b[2J\n')
    wrapper = ['sh', '-c', 'sleep 600 >/dev/null 2>&1 & echo $! > "$1"; shift; exec "$@"', 'sh', str(sibling_file)]
    code, err = _test_suite(tmp_path, tree, wrapper)
    sibling = int(sibling_file.read_text())
    try:
        assert code == 0, err  # its verdict, on its one passing suite
        assert 'Traceback' not in err
        assert running(sleeper.pid) and running(member) and running(sibling)
        assert f'line 1: process group {sleeper.pid} runs, but nothing in it shows a run of this store started it' \
            in err
        assert f'line 2: process group {orphaned.pid} runs, but nothing in it shows' in err
        assert f"line 3: '000{orphaned.pid} 12345' is not '<pgid> <start time>' as a run writes it" in err
        assert "line 4: process group 0 is never signalled (killpg(0) signals this run's own group)" in err
        assert 'line 5: process group 1 is never signalled' in err
        assert 'line 6: longer than 64 bytes, not a registry line; set aside' in err
        assert "line 7: 'garbage \\x1b[2J' is not '<pgid> <start time>'" in err  # escaped: one inert line
        assert 'stopped process group' not in err
        entries, notes = leftovers.read_registry(str(registry))  # read and removed: only this run's groups now
        assert notes == [] and entries and not {e.pgid for e in entries} & {sleeper.pid, orphaned.pid, 0, 1}
    finally:
        if runs_program(sibling, 'sleep'):  # not a pid given to another process since (it is nobody's child to keep it)
            os.kill(sibling, signal.SIGKILL)


def test_a_fifo_registry_is_refused_in_one_line_without_blocking(tmp_path, tree):
    (tmp_path / 'results').mkdir()
    registry = tmp_path / 'results' / 'results.jsonl.children'
    os.mkfifo(registry)
    code, err = _test_suite(tmp_path, tree, timeout=120)  # a hang fails the test (a run takes seconds)
    assert code == 2
    assert err.strip().splitlines()[-1].endswith(f'{registry}: is a FIFO (named pipe), not a regular file')
    assert 'Traceback' not in err
    assert os.path.exists(registry)  # refused: nothing removed


def test_a_live_group_is_stopped_and_another_stores_registry_cannot_name_it(tmp_path):
    """The leader-alive proof (the supervisor at its recorded start time, this store's token in its environment):
    a group started under this store's registry is stopped by it; the same line in another store's registry is a
    group that store never started, left alone."""
    ours, theirs = str(tmp_path / 'a.jsonl.children'), str(tmp_path / 'b.jsonl.children')
    with process.recorded_in(ours):
        child = process.start(['sleep', '600'])
    try:
        members = process.group_members(child.pid)
        with open(ours) as handle:
            line = handle.read()
        assert line == f'{child.pid} {_start_time(child.pid)}\n'
        with open(theirs, 'w') as handle:
            handle.write(line)
        other = leftovers.stop_leftovers(theirs)
        assert other.stopped == [] and 'nothing in it shows a run of this store started it' in other.notes[0]
        assert all(running(pid) for pid in members)
        done = leftovers.stop_leftovers(ours)
        assert done.stopped == [child.pid] and done.notes == []
        assert none_left(members, 5)
    finally:
        child.stop()


def test_what_each_line_is_read_as(tmp_path):
    """The one reader: the lines as a run writes them, every other one a note naming the file and the line."""
    registry = tmp_path / 'r'
    registry.write_bytes(b'123 456\n\n0123 456\n4194305 1\n12 -3\n12 3 4\n\xff\xfe\n1 2\n77 8')
    entries, notes = leftovers.read_registry(str(registry))
    assert [(e.pgid, e.started, e.line) for e in entries] == [(123, 456, 1), (1, 2, 8), (77, 8, 9)]
    assert [note.split(': ')[1] for note in notes] == ['line 3', 'line 4', 'line 5', 'line 6', 'line 7']
    assert all(note.startswith(f'{registry}: ') and note.endswith('set aside') for note in notes)
    assert leftovers.read_registry(str(tmp_path / 'none')) == ([], [])
    with pytest.raises(PluginError, match='is a directory, not a regular file'):
        leftovers.read_registry(str(tmp_path))


def test_no_killpg_of_ours_reaches_group_0_1_or_our_own():
    for pgid in (0, 1, os.getpgrp(), os.getsid(0)):
        assert process.never_signalled(pgid)
        with pytest.raises(ValueError):
            process.stop_group(pgid)
    assert process.never_signalled(os.getpgrp() + 100000) is None  # any other group may be (if proven ours)


def test_a_killed_runs_group_whose_supervisor_died_is_stopped_by_its_members_mark(tmp_path):
    """The leader-gone proof: the supervisor SIGKILLed, the command (its member) carries '<token> <pgid> <start>'."""
    registry = str(tmp_path / 's.jsonl.children')
    with process.recorded_in(registry):
        child = process.start(['sleep', '600'])
    members = [pid for pid in process.group_members(child.pid) if pid != child.pid]
    deadline = time.monotonic() + 30
    while not members or not runs_program(members[0], 'sleep'):  # the supervisor's fork has exec'd the command
        assert time.monotonic() < deadline
        time.sleep(0.05)
        members = [pid for pid in process.group_members(child.pid) if pid != child.pid]
    os.kill(child.pid, signal.SIGKILL)
    child.popen.wait()  # reaped by Popen alone (Child.wait would stop the group): its member runs on in its group
    assert all(running(pid) for pid in members)
    done = leftovers.stop_leftovers(registry)
    assert done.stopped == [child.pid] and done.notes == []
    assert none_left(members, 5)
    child.stop()  # its supervisor reaped: forgotten, nothing signalled (its pid may be another group's now)
    assert child not in process.live_children()


def test_a_registry_that_links_to_another_runs_is_refused_and_that_run_is_untouched(tmp_path, tree):
    """Run B's live group, started as a run starts one (recorded in B's registry, marked with B's token); run A's
    registry a symbolic link to B's.  Before, A read it as its own (the token is the registry's real path: B's) and
    stopped B's group, whose suite then ended as a wrong FAIL."""
    (tmp_path / 'B').mkdir()
    theirs = tmp_path / 'B' / 'results.jsonl.children'
    with process.recorded_in(str(theirs)):
        child = process.start(['sleep', '600'])
    try:
        members = process.group_members(child.pid)
        recorded = theirs.read_text()
        (tmp_path / 'results').mkdir()
        ours = tmp_path / 'results' / 'results.jsonl.children'
        ours.symlink_to(theirs)
        code, err = _test_suite(tmp_path, tree, timeout=120)
        assert code == 2, err
        assert err.strip().splitlines()[-1] == (f"eb-pytorch-cuda: error: {ours}: is a symbolic link (to {theirs}), "
                                                f"not this store's own regular file (remove it)"), err
        assert 'stopped process group' not in err and 'Traceback' not in err
        assert all(running(pid) for pid in members)  # B untouched: its group, its registry
        assert theirs.read_text() == recorded and ours.is_symlink()
        ours.unlink()
        ours.symlink_to(tmp_path / 'nothing')
        with pytest.raises(PluginError, match="is a dangling symlink, not this store's own regular file"):
            leftovers.read_registry(str(ours))
    finally:
        child.stop()


def test_a_registry_of_100000_lines_is_read_in_bounded_work(tmp_path):
    """100,000 valid-looking lines naming no running group (1.2 MB), then a live group of this store's and a line
    that is none: the last KEPT_LINES lines are read, the rest set aside with one note, /proc read once.  Before,
    one scan of /proc per line: the run started after 190 s (issue 50's measurement)."""
    registry = str(tmp_path / 's.jsonl.children')
    with open(registry, 'w') as handle:
        handle.writelines(f'{4_000_000 - index} {index}\n' for index in range(100_000))
    with process.recorded_in(registry):
        child = process.start(['sleep', '600'])
    with open(registry, 'a') as handle:
        handle.write('x y\n')
    try:
        members = process.group_members(child.pid)
        started = time.monotonic()
        done = leftovers.stop_leftovers(registry)
        seconds = time.monotonic() - started
        assert done.stopped == [child.pid] and none_left(members, 5)
        unread = 100_002 - leftovers.KEPT_LINES
        assert done.notes[0] == (f'{registry}: lines 1 to {unread} set aside unread: more than a run records after '
                                 f'the groups it can have left running (only the last {leftovers.KEPT_LINES} lines '
                                 f'are read)')
        assert done.notes[-1].startswith(f"{registry}: line 100002: 'x y' is not '<pgid> <start time>'")
        assert seconds < 10 + process.GRACE_SECONDS, seconds  # the stop itself may take its grace period
        assert not os.path.exists(registry)
    finally:
        child.stop()


def test_the_notes_of_a_registry_are_bounded(tmp_path):
    registry = tmp_path / 'r.jsonl.children'
    registry.write_text('garbage\n' * 5000)
    done = leftovers.stop_leftovers(str(registry))
    assert len(done.notes) == leftovers.NOTES_SHOWN + 1
    assert done.notes[-1] == f'{registry}: {5000 - leftovers.NOTES_SHOWN} more line(s) set aside or left alone'
