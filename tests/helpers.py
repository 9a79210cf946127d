"""What more than one test module needs, written once: the commands, the stand-in trees.

Written once so that a fix (a report directory left behind, a missing `tools/`) reaches every module.  Modules
of one job stay beside this one: procs.py (the process table), scratch.py (trees a module fixture removes),
environment.py (what tools/setup.sh provides).

Two ways to run a command, one per tier: `cli` starts the installed console script (a real process, for
the tiers that may start one), `run_main` calls `eb_pytorch_cuda.cli.main` in this process (the `unit`
tier, which starts none: tests/test_unit_tier_pure.py).
"""

import contextlib
import gzip
import io
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple, Optional

from environment import REAL_TREE

from eb_pytorch_cuda import standins

CLEAN_ENV = {k: v for k, v in os.environ.items() if k not in ('LD_LIBRARY_PATH', 'LD_PRELOAD')}
DATA = Path(__file__).resolve().parent / 'data'


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


def cli(*args, check_rc=None, timeout=None, env=None):
    """Run the installed eb-pytorch-cuda console script (with env in place of this environment, for at most
    timeout seconds, where given); return the CompletedProcess."""
    done = subprocess.run([console_script(), *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          env=env)
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


def module_env():
    """The environment for a child `python -m eb_pytorch_cuda`: it imports the library this session imports
    (src/ on this session's path), not the venv's."""
    return dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))


def suite_command(source, results, *extra):
    """argv of `test-suite` on the tree source, results in results, by this Python (run it with module_env())."""
    return [sys.executable, '-m', 'eb_pytorch_cuda', 'test-suite', str(source), '--python', sys.executable,
            '--results', str(results), *map(str, extra)]


# the H200 node's GPU as nvidia-smi answers run/gpus's queries (tests/data/h200-cuda-visible-devices-probe.json):
# index, UUID, compute_cap, memory.total (MiB), name
H200 = ('0', 'GPU-8d175d91-c8dd-50ef-3b16-d57680faa78c', '9.0', '143771', 'NVIDIA H200')
NVIDIA_SMI_FIELDS = {'compute_cap': 2, 'memory.total': 3}  # the column of each field in such a GPU


def stand_in_nvidia_smi(bin_dir, gpus, migs=()):
    """bin_dir/nvidia-smi, a stand-in (no GPU is here): answers `--query-gpu=index,uuid[,compute_cap|memory.total]
    --format=csv,noheader,nounits` and -L for gpus (the last one holding migs, its MIG devices) as the real one
    does; with no GPU, `No devices were found` and exit status 6, taken (not seen here) as a node without GPUs'
    answer: run/gpus reads any non-zero exit as no list."""
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / 'nvidia-smi'
    if not gpus:
        script.write_text('#!/bin/sh\necho "No devices were found"\nexit 6\n')
    else:
        def answer(lines):  # printf, a builtin of sh: PATH may hold nothing else
            return "printf '%s\\n' " + ' '.join(f"'{line}'" for line in lines) + ' ;;'
        cases = []
        for field, column in [(None, None), *NVIDIA_SMI_FIELDS.items()]:
            rows = [f'{gpu[0]}, {gpu[1]}' + (f', {gpu[column]}' if column else '') for gpu in gpus]
            query = 'index,uuid' + (f',{field}' if field else '')
            cases.append(f'--query-gpu={query}\\ *) ' + answer(rows))
        listing = [f'GPU {gpu[0]}: {gpu[4]} (UUID: {gpu[1]})' for gpu in gpus]
        listing += [f'  MIG 3g.40gb     Device  {number}: (UUID: {mig})' for number, mig in enumerate(migs)]
        cases.append('-L) ' + answer(listing))
        script.write_text('#!/bin/sh\ncase "$*" in\n' + '\n'.join(cases) +
                          '\n*) echo "stand-in: no answer for $*" >&2; exit 2;;\nesac\n')
    script.chmod(0o755)
    return script


def standin_test_tree(root, keep=None, distributed=True):
    """root/test: a fresh copy of the stand-in test tree (XML reports of one run must not mix with another's),
    holding of its suites only those named in keep (None: all of them), and distributed/ unless told not."""
    test_dir = root / 'test'
    shutil.copytree(os.path.join(standins.TORCH_SOURCES, 'test'), test_dir)
    if keep is not None:
        for name in os.listdir(test_dir):
            if name.startswith('test_') and name[:-3] not in keep:
                os.unlink(test_dir / name)
    if not distributed:
        shutil.rmtree(test_dir / 'distributed')
    return test_dir


def standin_source(source):
    """source: the whole stand-in source tree (test/run_test.py, tools/, torch/, ...) without any suite."""
    shutil.copytree(standins.TORCH_SOURCES, source, ignore=shutil.ignore_patterns('test_*.py'))
    return source


def real_tree(root):
    """root/test: test/ and tools/ (run_test.py imports tools.testing) and version.txt of PyTorch's real 2.6.0
    tree, copied (the harness writes test/test-reports into its tree; a report left in REAL_TREE is not)."""
    for part in ('test', 'tools'):
        shutil.copytree(os.path.join(REAL_TREE, part), root / part, ignore=shutil.ignore_patterns('test-reports'))
    shutil.copy(os.path.join(REAL_TREE, 'version.txt'), root)
    return root / 'test'


def comparable(result):
    """What the verdict and report depend on: each suite's status, counts and failing tests (not its time)."""
    return {name: (suite.status, suite.counts, sorted(t.test_id for t in suite.failed_tests))
            for name, suite in result.suites.items()}


def stored_records(results):
    """{suite name: its record} of the results directory's results.jsonl (a later line of a suite wins)."""
    records = {}
    with open(results / 'results.jsonl') as handle:
        for line in handle:
            record = json.loads(line)
            records[record['suite']['name']] = record
    return records


def recorded_junit(tarball, tmp_path):
    """(the test directory, its JUnit XML files, sorted) of an H200 record's reports-<phase>.tar.gz
    (tools/validate-gpu/eb_gpu_run.py: the phase's build directory's test-reports), extracted into tmp_path."""
    import tarfile
    with tarfile.open(tarball) as tar:
        tar.extractall(tmp_path, filter='data')
    test_dir = next(tmp_path.glob('PyTorch/*/*/pytorch-v2.11.0/test'))
    return test_dir, sorted(str(path) for path in test_dir.rglob('*.xml'))


def gcc(out, source, *flags):
    """out, compiled by the real gcc from the C text source (kept beside it as out.c) with flags."""
    c_file = Path(str(out) + '.c')
    c_file.write_text(source)
    subprocess.run(['gcc', '-o', str(out), str(c_file), *flags], check=True)
    return out


def gcc_shared(out, source, *flags):
    """A shared object out, compiled by the real gcc from the C text source."""
    return gcc(out, source, '-shared', '-fPIC', *flags)


def h200_lddebug_trace(phase):
    """The lines of the LD_DEBUG=libs,files trace recorded on the H200 (cuDNN 9.1.9) in phase."""
    with gzip.open(DATA / f'h200-cudnn919-lddebug-full-{phase}.txt.gz', 'rt') as handle:
        return handle.read().splitlines()


def wait_for(condition, what, timeout=60, interval=0.002):
    """Return once condition() holds; fail naming what after timeout seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f'timed out waiting for {what}'
        time.sleep(interval)
