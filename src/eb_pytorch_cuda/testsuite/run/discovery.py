"""Which suites a run_test.py command selects, asked of the harness itself, and how to run a subset of them.

What a harness prints with `--dry-run` depends on its version: 2.0 prints `Selected tests:` and one name
per line (on stderr) only with `--verbose`; 2.6 prints its batch (`Name: tests to run ...`, `  Serial tests
(N):`, `    test_x 1/1`, `  Parallel tests (N):`); the 2.1 line prints nothing at all (its main() returns
right after building its batches: measured on ../shared/pytorch-2.1-harness, docs/design.md).  So the
selection is not read from what it prints: selection_probe.py runs in the test Python, in the suites'
directory and environment (no shell), imports the harness's `run_test` module, runs its `main()` with
`--dry-run` and records what its own `get_selected_tests()` (and, for `--shard`, `do_sharding()`) returns,
then asks its `must_serial()` of each suite.  The printed list, where the version prints one, is a cross-check: a
disagreement is an error naming both.  Selection options of the command (`-x`, `--shard`, `--exclude-*`,
`-i`) are applied there, once (a name after `-x` that is none of the tree's test files is left out, and said:
Selection); the suites are then run with `-i <suites>` and without `--shard`/`-i`
(`-i x --shard 1 2` shards the one suite: "Number of shards must be less than 1").
"""

import json
import os
import subprocess
import tempfile
from typing import List, Mapping, NamedTuple, Optional, Sequence, Set, Tuple

from eb_pytorch_cuda import process
from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.testsuite.results import grammar
from eb_pytorch_cuda.testsuite.run.command import TestCommand

_PROBE = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'selection_probe.py')

# options that select suites; they take values up to the next option
SELECTION_OPTIONS = ('-i', '--include', '--shard')


def _names_and_serial(output):
    """([suite names in order], {suites the harness lists as serial} or None when it does not say)."""
    batch = grammar.DRY_RUN_BATCH.search(output)
    if batch:
        names, serial, in_serial = [], set(), False
        for line in batch.group(1).splitlines():
            if grammar.DRY_RUN_SERIAL_HEADER.match(line) or grammar.DRY_RUN_PARALLEL_HEADER.match(line):
                in_serial = bool(grammar.DRY_RUN_SERIAL_HEADER.match(line))
                continue
            match = grammar.DRY_RUN_BATCH_LINE.match(line)
            if match and match.group('name') not in names:
                names.append(match.group('name'))
                if in_serial:
                    serial.add(match.group('name'))
        return names, serial
    selected = grammar.DRY_RUN_SELECTED.search(output)
    if selected:
        return [line.strip() for line in selected.group(1).splitlines() if line.strip()], None
    return None, None


def check_command(command) -> None:
    """PluginError (bad input) unless command runs a run_test.py, which discovery asks which suites it runs;
    called before anything is created for a run (sourcetree.test_source_tree), and again by the probe."""
    if len(command.argv) < 2 or not command.argv[1].endswith('run_test.py'):
        raise PluginError('runtest', f"'{' '.join(command.argv)}' does not run a run_test.py: the test step asks "
                                     f"PyTorch's harness which suites it runs (write it as '[cd test &&] "
                                     f"%(python)s run_test.py ...')")


def _probe_argv(command, out):
    """The probe's command line: the test Python, the probe script, OUT, run_test.py and the runtest arguments."""
    check_command(command)
    with open(_PROBE, encoding='utf-8') as handle:  # as `-c`: the plugin's own directory stays off sys.path
        source = handle.read()
    return [command.argv[0], '-c', source, out, command.argv[1], *command.argv[2:]]


def _cross_check(shown, names, printed):
    """PluginError when what the harness printed in its dry run lists other suites than its own selection."""
    listed, _ = _names_and_serial(printed)
    if listed is None or set(listed) == set(names):
        return
    only_listed = sorted(set(listed) - set(names))
    only_selected = sorted(set(names) - set(listed))
    raise PluginError('runtest', f"'{shown}': the harness's selection (get_selected_tests) and its printed dry run "
                                 f"disagree: only printed: {' '.join(only_listed) or '-'}; "
                                 f"only selected: {' '.join(only_selected) or '-'}")


class Selection(NamedTuple):
    """What the harness said of a command: its suites, its serial ones (None: it does not say), the names after
    -x that are none of its test files (its TESTS), and the command without them, which every run_test.py call
    of the step then runs (the harness's argparse stops on such a name: `invalid choice`)."""
    suites: List[str]
    serial: Optional[Set[str]]
    unknown_excluded: List[str]
    command: TestCommand


def unknown_exclusions_line(names: Sequence[str]) -> str:
    """The test step's one line for -x names that the tree has no test file of (Selection.unknown_excluded)."""
    return (f"excluded_tests: {', '.join(map(repr, names))}: no such test file in this tree (its run_test.py's "
            f"TESTS), so nothing to exclude; left out of -x")


def discover(command: TestCommand, env: Mapping[str, str], timeout: float = 3600
             ) -> Tuple[List[str], Optional[Set[str]]]:
    """(suites, serial set or None) of command's selection (select)."""
    selection = select(command, env, timeout)
    return selection.suites, selection.serial


def select(command: TestCommand, env: Mapping[str, str], timeout: float = 3600) -> Selection:
    """The Selection of command, asked of the harness itself (module docstring); PluginError naming the command
    and showing its stderr when the harness cannot answer, and when the selection is empty."""
    shown = ' '.join(command.argv)
    with tempfile.TemporaryDirectory(prefix='eb-pytorch-cuda-select-') as scratch:
        out = os.path.join(scratch, 'selection.json')
        try:
            done = process.capture(_probe_argv(command, out), timeout=timeout, cwd=command.cwd, env=env, text=True,
                                   errors='replace', stdin=subprocess.DEVNULL)
        except (OSError, subprocess.SubprocessError) as err:
            raise PluginError('runtest', f"'{shown}' (in {command.cwd}) could not run: {err}") from None
        answer = None
        if done.returncode == 0:
            try:
                with open(out, encoding='utf-8') as handle:
                    answer = json.load(handle)
            except (OSError, ValueError):
                answer = None
    if not isinstance(answer, dict):
        tail = ' | '.join(line for line in (done.stderr or done.stdout).strip().splitlines()[-5:])
        raise PluginError('runtest', f"'{shown}' (in {command.cwd}): asking its run_test.py which suites it runs "
                                     f"(parse_args, get_selected_tests) failed (exit {done.returncode})"
                                     f"{': ' + tail if tail else ''}")
    if answer.get('missing'):
        raise PluginError('runtest', f"'{shown}' (in {command.cwd}): its {command.argv[1]} has no "
                                     f"{', '.join(name + '()' for name in answer['missing'])}: the test step asks "
                                     f"PyTorch's harness for its own selection (parse_args, get_selected_tests "
                                     f"and main, which every PyTorch run_test.py has)")
    if answer.get('main_error') or answer.get('main_exit') not in (0, None):
        tail = ' | '.join(line for line in str(answer.get('printed', '')).strip().splitlines()[-5:])
        dry_run = ' '.join(command.argv[:2] + list(answer.get('dry_run_argv') or []))  # what the probe ran
        raise PluginError('runtest', f"'{dry_run}' (in {command.cwd}) stopped "
                                     f"({answer.get('main_error') or 'exit ' + str(answer.get('main_exit'))})"
                                     f"{': ' + tail if tail else ''}")
    if not answer.get('selected_calls'):
        raise PluginError('runtest', f"'{shown}' (in {command.cwd}): its dry run never called its "
                                     f"get_selected_tests(): this run_test.py selects its suites in a way the test "
                                     f"step cannot ask")
    names = [str(name) for name in answer.get('suites') or []]
    if not names:
        raise PluginError('runtest', f"'{shown}' (in {command.cwd}) selected no test suite: nothing would be tested "
                                     f"(check -x/-i/--shard)")
    _cross_check(shown, names, str(answer.get('printed', '')))
    serial = answer.get('serial')
    if serial is None:
        serial = _names_and_serial(str(answer.get('printed', '')))[1]
    unknown = [str(name) for name in answer.get('unknown_excluded') or []]
    ran = command if not unknown else TestCommand(command.cwd, dict(command.env),
                                                  command.argv[:2] + [str(word) for word in answer['argv']])
    return Selection(names, set(map(str, serial)) if serial is not None else None, unknown, ran)


def run_argv(argv: Sequence[str], suites: Sequence[str], extra: Sequence[str] = ()) -> List[str]:
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
