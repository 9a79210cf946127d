"""Benchmark: peak memory and time of `eb-pytorch-cuda report LOG` on the logs that are worst for a line reader.

Why: a log is read as lines; a file with no line end for a gigabyte (NULs after a real log's first lines: a
disk image, a core file, a log whose tail was never written; or one enormous line) must not be taken whole
into memory.  Goal: under 300 MB peak on any 1 GiB input (a 1 GiB real log reads in about 120 MB,
benchmarks/bench_big_log.py).

Inputs, each --size-mb MiB (default 1024), written to --workdir (default a temporary directory, removed):
- `nul-tail`: the first 16 KiB of a real run_test.py 2.6 log kept in tests/data (cut at a line end), then
  NULs to the size (a sparse file: no disk);
- `one-line`: one line of `x` without a line end;
- `log-then-line`: the same 16 KiB of real log, then such a line.
Each is given to the real command (`report LOG --format json`) in a fresh process; printed: wall seconds,
the peak resident set of that process (getrusage of the child), its exit status and the first line of its
standard error.

    python benchmarks/bench_log_worst_inputs.py [--size-mb 1024] [--only nul-tail]

Measured on the project's 2-core VM shared with other sessions (load average 7 to 11), 1024 MiB each:
before (only the first 8 KB looked at for NULs, a line of any length kept whole): nul-tail 106.1 s, 5,154 MiB,
exit 1 (`FAIL: ... no summary`); one-line 52.3 s, 3,107 MiB, exit 2; log-then-line 120.9 s, 5,154 MiB, exit 1.
After (a NUL anywhere refuses the file, a line read in pieces of LINE_LIMIT, 8 MiB): nul-tail 1.2 s, 44 MiB,
exit 2 (`is a binary file (a NUL byte at byte 16326)`); one-line 39.2 s, 83 MiB, exit 2 (no run_test.py output);
log-then-line 49.6 s, 106 MiB, exit 1 (the verdict of the 16 KiB of log).
"""

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REAL_LOG = os.path.join(ROOT, 'tests', 'data', 'pytorch_corpus', 'logs', 'real-run_test-2.6.0-plain.log')
HEAD = 16 << 10

MEASURE = """
import resource, subprocess, sys, time
start = time.perf_counter()
done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
elapsed = time.perf_counter() - start
first = (done.stderr.decode(errors='replace').splitlines() or [''])[0]
print(f'{elapsed} {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss} {done.returncode} {first}')
"""


def real_head() -> bytes:
    """The first HEAD bytes of the kept real log, cut after a line end."""
    with open(REAL_LOG, 'rb') as handle:
        data = handle.read(HEAD)
    return data[:data.rfind(b'\n') + 1]


def write_line(handle, size: int) -> None:
    """size bytes of `x`, no line end, in 8 MiB writes."""
    chunk = b'x' * (8 << 20)
    while size > 0:
        handle.write(chunk[:size])
        size -= len(chunk)


def generate(kind: str, path: str, size: int) -> None:
    with open(path, 'wb') as handle:
        if kind == 'nul-tail':
            handle.write(real_head())
            handle.truncate(size)
        elif kind == 'one-line':
            write_line(handle, size)
        else:
            head = real_head()
            handle.write(head)
            write_line(handle, size - len(head))


def measure(log: str):
    """(seconds, peak RSS in MiB, exit status, first line of stderr) of a real `report` process."""
    command = [sys.executable, '-m', 'eb_pytorch_cuda', 'report', log, '--format', 'json']
    out = subprocess.run([sys.executable, '-c', MEASURE, *command], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))).stdout
    elapsed, peak, code, first = (out.strip().split(' ', 3) + [''])[:4]
    return float(elapsed), int(peak) / 1024, int(code), first


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--size-mb', type=int, default=1024)
    parser.add_argument('--only', choices=('nul-tail', 'one-line', 'log-then-line'))
    parser.add_argument('--workdir')
    args = parser.parse_args()
    if args.workdir and not os.path.isdir(args.workdir):
        parser.error(f'--workdir {args.workdir}: no such directory')
    workdir = args.workdir or tempfile.mkdtemp(prefix='bench-log-worst-')
    try:
        for kind in [args.only] if args.only else ['nul-tail', 'one-line', 'log-then-line']:
            log = os.path.join(workdir, f'{kind}.log')
            generate(kind, log, args.size_mb << 20)
            elapsed, peak, code, first = measure(log)
            os.unlink(log)
            print(f'{kind}: {args.size_mb} MiB, {elapsed:.1f} s, peak RSS {peak:.0f} MiB, exit {code}: {first[:200]}')
    finally:
        if not args.workdir:
            shutil.rmtree(workdir)


if __name__ == '__main__':
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    main()
