"""Run inside the test Python, in the suites' directory and environment: ask run_test.py which suites it runs.

This file's text is run as `python -c TEXT OUT RUN_TEST_PY ARGS...` (so that no directory of the plugin is on
sys.path, where a module of a standard library's name, as spread/workqueue.py once was queue.py, would shadow
the standard library's), never imported by the plugin: it imports the harness's own `run_test` module (which
imports torch and the tree's tools/) and runs the harness's own `main()` with `--dry-run`, recording what its
own selection returns: `get_selected_tests(options)` on the options of its own `parse_args()` (every run_test.py
from 1.x to 2.9 has both; 2.1's parse_args cannot be called twice in one process: `argument -h/--help:
conflicting option strings`, so main() is the one caller) and, with `--shard`, `do_sharding()` (2.1 and later
shard in main(), 2.0 in get_selected_tests), so the shard is the harness's own answer (its test-times file, its
round robin); then its `must_serial(name)` for each suite.  Names after -x that are not in the harness's
TESTS list (its every test file) are taken out first: its argparse takes only those (choices) and would stop the
run on one; which ones is written out, and the plugin says so (run/discovery).  The dry run also captures what
the harness prints (2.0's `Selected tests:` with --verbose, 2.6's batches; 2.1 prints nothing), which the
plugin compares with the selection.

Written to OUT as JSON: {"suites": [...], "serial": [...] or null, "printed": "...", "main_exit": int or null,
"main_error": str or null, "argv": the runtest arguments it ran, "unknown_excluded": [...]}.  Standard library
only: it runs in whatever Python the suites run in.
"""

import contextlib
import io
import json
import os
import sys
import traceback
from typing import Optional


def _name(test):
    """A suite's name: run_test.py 2.1+ hands out ShardedTest records (`.name`), older ones strings."""
    return getattr(test, 'name', test)


def _names(result):
    """The suite names in what a selection function returned: a list of names or ShardedTest records, or (2.6's
    do_sharding) nested tuples that also hold the shard's expected time."""
    if isinstance(getattr(result, 'name', None), str) or isinstance(result, str):
        return [_name(result)]  # 2.1's ShardedTest is a NamedTuple: a record, not a list
    if isinstance(result, (list, tuple)):
        return [name for item in result for name in _names(item)]
    return []  # a shard's expected time


def _recorder(run_test, name, calls):
    """Wrap run_test.<name> so that what it returns (as suite names) is appended to calls."""
    original = getattr(run_test, name, None)
    if original is None:
        return

    def recording(*args, **kwargs):
        result = original(*args, **kwargs)
        calls.append(_names(result))
        return result
    setattr(run_test, name, recording)


def _without_unknown_exclusions(argv, tests):
    """(argv without the -x/--exclude names that are not in tests, those names): the harness's argparse takes
    only names of its TESTS there (choices) and would stop the whole run on one it has not; an option left
    with no name goes too (-x takes one or more).  Arguments after '--' are the test files' own."""
    kept, unknown, index = [], [], 0
    while index < len(argv):
        word = argv[index]
        index += 1
        if word == '--':
            kept += argv[index - 1:]
            break
        if word.startswith('--exclude='):
            name = word[len('--exclude='):]
            if name in tests:
                kept.append(word)
            else:
                unknown.append(name)
            continue
        if word not in ('-x', '--exclude'):
            kept.append(word)
            continue
        names = []
        while index < len(argv) and not argv[index].startswith('-'):
            names.append(argv[index])
            index += 1
        unknown += [name for name in names if name not in tests]
        if any(name in tests for name in names):
            kept += [word] + [name for name in names if name in tests]
    return kept, unknown


def main() -> None:
    out, script, argv = sys.argv[1], sys.argv[2], sys.argv[3:]  # sys.argv[0] is '-c'
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    # common_utils builds its parser with add_help only when `"run_test.py" in __main__.__file__` is false,
    # and run_test's parser (its child) then clashes on -h: look like the script run_test.py is run as
    sys.modules['__main__'].__file__ = os.path.abspath(script)
    import run_test  # the harness of this directory
    missing = [name for name in ('main', 'parse_args', 'get_selected_tests') if not hasattr(run_test, name)]
    if missing:
        with open(out, 'w', encoding='utf-8') as handle:
            json.dump({'missing': missing}, handle, allow_nan=False)
        return
    tests = getattr(run_test, 'TESTS', None)  # every test file of the tree (2.1 line: its own; 2.6: discover_tests')
    unknown: list = []
    if isinstance(tests, (list, tuple)) and all(isinstance(name, str) for name in tests):
        argv, unknown = _without_unknown_exclusions(argv, set(tests))
    selected: list = []
    sharded: list = []
    _recorder(run_test, 'get_selected_tests', selected)
    _recorder(run_test, 'do_sharding', sharded)
    printed = io.StringIO()
    dry_run_argv = [*argv, '--dry-run', *([] if '--verbose' in argv or '-v' in argv else ['--verbose'])]
    sys.argv = ['run_test.py', *dry_run_argv]
    code: Optional[int] = 0
    error: Optional[str] = None
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
        try:
            run_test.main()
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
            if not isinstance(stop.code, int) and stop.code is not None:
                print(stop.code)
        except Exception:  # noqa: BLE001 - reported to the plugin, which names the command
            code, error = None, traceback.format_exc(limit=3).strip().splitlines()[-1]
    suites = selected[0] if selected else []
    if '--shard' in argv or any(word.startswith('--shard=') for word in argv):
        if hasattr(run_test, 'do_sharding'):
            suites = [name for batch in sharded for name in batch]  # main()'s batches, TD off: all one batch
    must_serial = getattr(run_test, 'must_serial', None)
    serial = [name for name in suites if must_serial(name)] if callable(must_serial) else None
    with open(out, 'w', encoding='utf-8') as handle:
        json.dump({'suites': suites, 'serial': serial, 'printed': printed.getvalue(), 'main_exit': code,
                   'main_error': error, 'selected_calls': len(selected), 'dry_run_argv': dry_run_argv,
                   'argv': argv, 'unknown_excluded': unknown}, handle,
                  allow_nan=False)


if __name__ == '__main__':
    main()
