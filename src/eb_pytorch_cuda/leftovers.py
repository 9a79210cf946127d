"""The one reader of a store's registry (`<store>.children`): stop what a killed run of this store left running.

The supervisors stop their groups when we die (eb_pytorch_cuda.process); only a kill of the supervisor
itself too (the OOM killer, `kill -9` of every process) leaves a group running, writing XML reports a resumed
run would read.  So each run records every group it starts, one line `<pgid> <start time>` (the supervisor's
pid, which is the group's id, and its start time in clock ticks since boot), and the next run on the store
stops what is left before it runs anything.

The file is only a list of candidates, never trusted: anyone may have written it, a pid is reused, a group
outlives its leader.  A group is stopped only when the kernel shows it is a group a run of this store started:
one of its running members, in session and group pgid,

- is its leader, started at the recorded time, running this version's supervisor program, with this store's
  token (process.store_token) in its environment as it was started (/proc/PID/stat, cmdline, environ); or
- has '<token> <pgid> <start time>' in its environment: what the supervisor of that very pid and start time
  gave its command, and what the command's descendants inherit (the leader may be gone; while members are
  left, the kernel never gives the pgid to another process).

What is never signalled: group 0 (killpg(0) is the caller's own group), 1, our own group and session
(process.never_signalled).  A line that is not '<pgid> <start time>' as a run writes it (garbage, leading
zeros, a 20-million-digit number, a pgid above the kernel's PID_MAX_LIMIT) is set aside with a note, and so
is a running group without the proof (left alone).  The registry must be this store's own regular file: a
symbolic link (to another run's registry, whose groups would then carry the token of the link's target: its own
run's, stopped as "ours"), a FIFO, a device or a directory there is refused (PluginError) without blocking, before
anything is stopped or removed.

The work is bounded whatever the file holds: only its last KEPT_LINES lines are read (a killed run's groups that
can still run are among the last it recorded: it records each as it starts, runs at most its slots' batches and
pieces at once, a few thousand groups in all before its reruns, which run one at a time; the lines before are
counted, not read, and set aside with one note), at most NOTES_SHOWN notes name a line (one more counts the rest),
and the running groups are read from /proc once (process.running_groups), not once per line.
"""

import os
import re
from dataclasses import dataclass, field
from itertools import islice
from typing import BinaryIO, Dict, Iterator, List, Optional, Tuple

from eb_pytorch_cuda import process
from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.escape import printable
from eb_pytorch_cuda.inputs import is_dangling, open_regular

PID_MAX_LIMIT = 4194304  # the kernel's largest pid_max (include/linux/threads.h, 64-bit): no pgid is above it
LONGEST_LINE = 64  # bytes: '<pgid> <start time>' is at most 7 + 1 + 20; a longer line is read past, not kept
KEPT_LINES = 10000  # the last lines read (module doc): the rest of a longer registry is set aside with one note
NOTES_SHOWN = 20  # notes naming a set-aside line; one more says how many others were set aside
_LINE = re.compile(rb'(0|[1-9][0-9]{0,6}) (0|[1-9][0-9]{0,19})')


@dataclass(frozen=True)
class Entry:
    """One registry line as written: the group's id (its supervisor's pid) and that supervisor's start time."""

    pgid: int
    started: int
    line: int  # its line number, for the notes


@dataclass
class Leftovers:
    """What stop_leftovers did: the groups stopped, and a note on every line set aside or group left alone."""

    stopped: List[int] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)


def _lines(handle: BinaryIO) -> Iterator[Tuple[int, Optional[bytes]]]:
    """(line number, line without its newline) of the file, None for a line longer than LONGEST_LINE (read
    past in pieces, never held whole)."""
    number = 0
    while True:
        line = handle.readline(LONGEST_LINE + 1)
        if not line:
            return
        number += 1
        if len(line) > LONGEST_LINE and not line.endswith(b'\n'):
            while line and not line.endswith(b'\n'):
                line = handle.readline(1 << 16)
            yield number, None
        else:
            yield number, line.rstrip(b'\n')


def _open_own(registry: str) -> int:
    """A descriptor of registry, which must be this store's own regular file: a symbolic link there (to another
    store's registry, or to nothing) is refused, and so is anything inputs.open_regular refuses."""
    if os.path.islink(registry):
        target = printable(os.readlink(registry))[:200]
        problem = 'is a dangling symlink' if is_dangling(registry) else f'is a symbolic link (to {target})'
        raise PluginError(registry, f"{problem}, not this store's own regular file (remove it)")
    return open_regular(registry)


def _tail(fd: int) -> Tuple[int, int]:
    """(offset, lines before it) of the first of the file's last KEPT_LINES lines: the file read from its end in
    large pieces (newlines counted, never a line held), so a registry of any size costs one pass at bytes.count's
    speed, and the lines read one by one are at most KEPT_LINES."""
    size = os.fstat(fd).st_size
    if size == 0:
        return 0, 0
    wanted = KEPT_LINES + (os.pread(fd, 1, size - 1) == b'\n')  # the newline after the start of the last lines
    seen, start, end = 0, 0, size
    found = False
    while end > 0:
        begin = max(0, end - (1 << 20))
        chunk = os.pread(fd, end - begin, begin)
        count = chunk.count(b'\n')
        if not found and seen + count >= wanted:
            index = len(chunk)
            for _ in range(wanted - seen):
                index = chunk.rindex(b'\n', 0, index)
            start, found = begin + index + 1, True
        seen += count
        end = begin
    return (start, seen - wanted + 1) if found else (0, 0)


def read_registry(registry: str) -> Tuple[List[Entry], List[str]]:
    """(entries, notes) of registry: every line of its last KEPT_LINES that is '<pgid> <start time>' as a run
    writes it; a note naming the file and the line for each other one (an empty line, a last line cut short by a
    kill: skipped quietly), and one for the lines before the last KEPT_LINES.  No file: nothing.  PluginError
    naming the file when it is not this store's own regular file or cannot be read (opened without blocking,
    _open_own)."""
    if not os.path.lexists(registry):
        return [], []
    entries: List[Entry] = []
    notes: List[str] = []
    with os.fdopen(_open_own(registry), 'rb') as handle:
        try:
            start, before = _tail(handle.fileno())
            handle.seek(start)
            lines = list(islice(_lines(handle), KEPT_LINES))  # (a file that grows meanwhile: not past these)
        except OSError as err:
            raise PluginError(registry, f'cannot be read: {err.strerror}') from None
    for number, line in lines:
        number += before
        where = f'{registry}: line {number}'
        if line is None:
            notes.append(f'{where}: longer than {LONGEST_LINE} bytes, not a registry line; set aside')
            continue
        match = _LINE.fullmatch(line)
        if match is None:
            if line.strip():
                shown = printable(line[:40].decode('ascii', 'replace'))
                notes.append(f"{where}: '{shown}' is not '<pgid> <start time>' as a run writes it "
                             f"(decimal, no leading zeros); set aside")
            continue
        pgid = int(match.group(1))
        if pgid > PID_MAX_LIMIT:
            notes.append(f'{where}: {pgid} is no process group id (above {PID_MAX_LIMIT}); set aside')
            continue
        entries.append(Entry(pgid, int(match.group(2)), number))
    if before:
        notes.insert(0, f'{registry}: lines 1 to {before} set aside unread: more than a run records after the '
                        f'groups it can have left running (only the last {KEPT_LINES} lines are read)')
    return entries, notes


def _shown(registry: str, notes: List[str]) -> List[str]:
    """The first NOTES_SHOWN notes, and one that counts the others."""
    if len(notes) <= NOTES_SHOWN:
        return notes
    return notes[:NOTES_SHOWN] + [f'{registry}: {len(notes) - NOTES_SHOWN} more line(s) set aside or left alone']


def _stat(pid: int) -> Optional[Tuple[int, int, int]]:
    """(process group, session, start time) of a running pid from /proc/PID/stat; None when it is gone."""
    try:
        with open(f'/proc/{pid}/stat', 'rb') as handle:
            fields = handle.read().rsplit(b')', 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[2]), int(fields[3]), int(fields[19])


def _mark(pid: int) -> Optional[bytes]:
    """The value of process.MARK_VARIABLE in pid's environment as it was started (/proc/PID/environ: only
    readable for our own user's processes), None without one."""
    prefix = process.MARK_VARIABLE.encode() + b'='
    try:
        with open(f'/proc/{pid}/environ', 'rb') as handle:
            environ = handle.read()
    except OSError:
        return None
    return next((entry[len(prefix):] for entry in environ.split(b'\0') if entry.startswith(prefix)), None)


def proven_ours(entry: Entry, token: str, members: Optional[List[int]] = None) -> bool:
    """The kernel shows group entry.pgid is the one a run of the store with this token started (module doc);
    members: the group's running processes, where the caller has read them (process.running_groups)."""
    member_mark = f'{token} {entry.pgid} {entry.started}'.encode()
    for pid in process.group_members(entry.pgid) if members is None else members:
        found = _stat(pid)
        if found is None or found[:2] != (entry.pgid, entry.pgid):
            continue
        mark = _mark(pid)
        if pid == entry.pgid:
            if found[2] == entry.started and mark == token.encode() and process.is_supervisor(pid):
                return True
        elif mark == member_mark:
            return True
    return False


def stop_leftovers(registry: str) -> Leftovers:
    """Stop each group registry names that a run of this store started and left running (proven_ours), then
    remove the registry; the notes say which lines were set aside and which running groups were left alone (the
    first NOTES_SHOWN, and one more that counts the rest).
    Called by the next run on the store, holding its lock, before it starts anything."""
    entries, notes = read_registry(registry)
    done = Leftovers(notes=notes)
    token = process.store_token(registry)
    running: Dict[int, List[int]] = process.running_groups() if entries else {}  # one scan of /proc for all lines
    seen = set()
    for entry in entries:
        if (entry.pgid, entry.started) in seen:
            continue  # a pid recorded twice (reused within the run): one look is enough
        seen.add((entry.pgid, entry.started))
        where = f'{registry}: line {entry.line}'
        why = process.never_signalled(entry.pgid)
        if why:
            done.notes.append(f'{where}: {why}; set aside')
        elif entry.pgid not in running:
            continue  # ended, as recorded groups normally have
        elif not proven_ours(entry, token, running[entry.pgid]):
            done.notes.append(f'{where}: process group {entry.pgid} runs, but nothing in it shows a run of '
                              f'this store started it (the supervisor of pid {entry.pgid} started at '
                              f'{entry.started}, or its commands); left alone')
        else:
            process.stop_group(entry.pgid)
            done.stopped.append(entry.pgid)
    done.notes = _shown(registry, done.notes)
    try:
        os.unlink(registry)
    except FileNotFoundError:
        pass
    except OSError as err:
        raise PluginError(registry, f'cannot be removed: {err.strerror}') from None
    return done
