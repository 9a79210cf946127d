"""Which suites a run_test.py command selects, from its own `--dry-run`, and how to run a subset of them.

run_test.py 2.1 prints `Selected tests:` and one name per line (on stderr) only with `--verbose`;
2.6 prints its batch instead: `Name: tests to run ...`, `  Serial tests (N):`, `    test_x 1/1`,
`  Parallel tests (N):` (and a second batch, `excluded`, of tests target determination left out).
So the dry run is made with `--verbose` and both forms are read.  Selection options of the command
(`-x`, `--shard`, `--exclude-*`, `-i`) are applied there, once; the suites are then run with
`-i <suites>` and without `--shard`/`-i` (`-i x --shard 1 2` shards the one suite: "Number of shards
must be less than 1").
"""

import re
import subprocess

from eb_pytorch_cuda.errors import PluginError

_SELECTED = re.compile(r'^Selected tests:[ \t]*\n((?:[ \t]+\S.*\n?)*)', re.M)
_BATCH = re.compile(r'^Name: tests to run\b.*\n((?:[ \t]+.*\n?)*)', re.M)
_BATCH_LINE = re.compile(r'^[ \t]{4,}(?P<name>[\w./-]+)(?: \d+/\d+)?[ \t]*$')
_SERIAL_HEADER = re.compile(r'^[ \t]+Serial tests \(\d+\):')
_PARALLEL_HEADER = re.compile(r'^[ \t]+Parallel tests \(\d+\):')
# options that select suites; they take values up to the next option
SELECTION_OPTIONS = ('-i', '--include', '--shard')


def _names_and_serial(output):
    """([suite names in order], {suites the harness lists as serial} or None when it does not say)."""
    batch = _BATCH.search(output)
    if batch:
        names, serial, in_serial = [], set(), False
        for line in batch.group(1).splitlines():
            if _SERIAL_HEADER.match(line) or _PARALLEL_HEADER.match(line):
                in_serial = bool(_SERIAL_HEADER.match(line))
                continue
            match = _BATCH_LINE.match(line)
            if match and match.group('name') not in names:
                names.append(match.group('name'))
                if in_serial:
                    serial.add(match.group('name'))
        return names, serial
    selected = _SELECTED.search(output)
    if selected:
        return [line.strip() for line in selected.group(1).splitlines() if line.strip()], None
    return None, None


def discover(command, env, timeout=3600):
    """(suites, serial set or None) of command's selection; PluginError naming the command when there is no list,
    and when the list is empty."""
    argv = list(command.argv) + ['--dry-run'] + ([] if '--verbose' in command.argv or '-v' in command.argv
                                                 else ['--verbose'])
    shown = ' '.join(argv)
    try:
        done = subprocess.run(argv, cwd=command.cwd, env=env, capture_output=True, text=True, errors='replace',
                              timeout=timeout)
    except (OSError, subprocess.SubprocessError) as err:
        raise PluginError('runtest', f"'{shown}' (in {command.cwd}) could not run: {err}") from None
    names, serial = _names_and_serial(done.stderr + '\n' + done.stdout)
    if names is None:
        tail = ' | '.join(line for line in (done.stderr or done.stdout).strip().splitlines()[-5:])
        raise PluginError('runtest', f"'{shown}' (in {command.cwd}) listed no tests (exit {done.returncode})"
                                     f"{': ' + tail if tail else ''}")
    if not names:
        raise PluginError('runtest', f"'{shown}' (in {command.cwd}) selected no test suite: nothing would be tested "
                                     f"(check -x/-i/--shard)")
    return names, serial


def run_argv(argv, suites, extra=()):
    """argv without its selection options, running exactly suites (`-i suite ...`), plus extra options."""
    kept, skipping = [], False
    for word in argv:
        if word in SELECTION_OPTIONS or any(word.startswith(option + '=') for option in ('--include', '--shard')):
            skipping = word in SELECTION_OPTIONS
            continue
        if skipping and not word.startswith('-'):
            continue
        skipping = False
        kept.append(word)
    extra = list(extra)
    trailing = extra[extra.index('--'):] if '--' in extra else []  # arguments for the test files: last
    extra = extra[:len(extra) - len(trailing)]
    if '--' in kept:
        trailing, kept = kept[kept.index('--'):] + trailing[1:], kept[:kept.index('--')]
    return kept + [option for option in extra if option not in kept] + ['-i', *suites] + trailing
