"""What more than one test module needs, written once (issue 34, item 6): the commands, the stand-in trees.

Before, 19 helper names were defined in more than one test file (3 of them identical) and four modules had
their own copier of the stand-in test tree; a fix to one copy (a report directory left behind, a missing
`tools/`) reached only that module.  Modules of one job stay beside this one: procs.py (the process table),
scratch.py (trees a module fixture removes), environment.py (what tools/setup.sh provides).

Two ways to run a command, one per tier: `cli` starts the installed console script (a real process, for
the tiers that may start one), `run_main` calls `eb_pytorch_cuda.cli.main` in this process (the `unit`
tier, which starts none: tests/test_unit_tier_pure.py).
"""

import contextlib
import io
import os
import shutil
import subprocess
import sys
from typing import NamedTuple, Optional

from eb_pytorch_cuda import standins

CLEAN_ENV = {k: v for k, v in os.environ.items() if k not in ('LD_LIBRARY_PATH', 'LD_PRELOAD')}


class Ran(NamedTuple):
    """What a command gave: the fields of subprocess.CompletedProcess that the tests read."""
    returncode: int
    stdout: str
    stderr: str


def run_loadcheck(loadcheck, library):
    """Run the C harness on library with LD_LIBRARY_PATH unset: the real glibc loader decides."""
    return subprocess.run([loadcheck, str(library)], env=CLEAN_ENV, capture_output=True, text=True)


def console_script():
    """The installed eb-pytorch-cuda of this Python's environment (then PATH's)."""
    return shutil.which('eb-pytorch-cuda', path=os.path.dirname(sys.executable) + os.pathsep + os.environ['PATH'])


def cli(*args, check_rc=None):
    """Run the installed eb-pytorch-cuda console script; return the CompletedProcess."""
    done = subprocess.run([console_script(), *map(str, args)], capture_output=True, text=True)
    if check_rc is not None:
        assert done.returncode == check_rc, (done.stdout, done.stderr)
    return done


def run_main(*args, check_rc: Optional[int] = None) -> Ran:
    """The command's main() in this process, its standard output and error captured: what the console script
    runs, without the process (argparse's exit on a bad option is its status, as the script's would be)."""
    out, err = io.StringIO(), io.StringIO()
    from eb_pytorch_cuda.cli import main
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(arg) for arg in args])
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 2
    done = Ran(code, out.getvalue(), err.getvalue())
    if check_rc is not None:
        assert done.returncode == check_rc, (done.stdout, done.stderr)
    return done


def one_line_error(done, *parts):
    """Bad input as the standards say: exit 2, nothing on standard output, one line on standard error naming
    each of parts, no traceback."""
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert done.stdout == ''
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    for part in parts:
        assert str(part) in lines[0], lines[0]
    assert 'Traceback' not in done.stderr


def standin_test_tree(root, keep=None):
    """root/test: a fresh copy of the stand-in test tree (XML reports of one run must not mix with another's),
    holding of its suites only those named in keep (None: all of them)."""
    test_dir = root / 'test'
    shutil.copytree(os.path.join(standins.TORCH_SOURCES, 'test'), test_dir)
    if keep is not None:
        for name in os.listdir(test_dir):
            if name.startswith('test_') and name.endswith('.py') and name[:-3] not in keep:
                os.unlink(test_dir / name)
    return test_dir
