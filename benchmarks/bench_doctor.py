"""Benchmark: `eb-pytorch-cuda doctor` over a whole CUDA PyTorch install against an `ldd -r` loop.

Why: doctor must be cheap enough to run on every build, while doing more than `ldd -r` (the dlopen()
chain, symbol versions, soname conflicts) without running the loader on the files it audits.

Measured in one run, median of --rounds, page cache warm (one untimed pass first):
  ldd -r    `ldd -r FILE` for every shared object under torch/ and nvidia/ (runs the loader on each)
  nm -D     `nm -D FILE` for the same files (symbol listing only)
  doctor    the whole `eb-pytorch-cuda doctor <site>/torch <site>/nvidia` command (Python start included)

    python benchmarks/bench_doctor.py [--site .venvs/torch/lib/python3.11/site-packages] [--rounds 5]
"""

import argparse
import glob
import os
import shutil
import statistics
import subprocess
import sys
import time


def shared_objects(site):
    files = []
    for name in ('torch', 'nvidia'):
        for directory, _, names in os.walk(os.path.join(site, name)):
            files += [os.path.join(directory, n) for n in names if '.so' in n
                      and not os.path.islink(os.path.join(directory, n))]
    return sorted(files)


def timed(commands):
    start = time.perf_counter()
    for command in commands:
        subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main():
    default_site = next(iter(sorted(glob.glob('.venvs/torch/lib/python3*/site-packages'))), None)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--site', default=default_site, help='site-packages holding torch/ and nvidia/')
    parser.add_argument('--rounds', type=int, default=5)
    args = parser.parse_args()
    files = shared_objects(args.site)
    size = sum(os.path.getsize(f) for f in files) / 1e9
    doctor = shutil.which('eb-pytorch-cuda', path=os.path.dirname(sys.executable)) or 'eb-pytorch-cuda'
    python = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(args.site)))),
                          'bin', 'python')
    runs = {
        'ldd -r': [['ldd', '-r', f] for f in files],
        'nm -D': [['nm', '-D', f] for f in files],
        'doctor': [[doctor, 'doctor', os.path.join(args.site, 'torch'), os.path.join(args.site, 'nvidia'),
                    '--executable', python if os.path.exists(python) else 'none']],
    }
    for commands in runs.values():
        timed(commands)  # warm the page cache
    results = {name: statistics.median(timed(c) for _ in range(args.rounds)) for name, c in runs.items()}
    print(f'{len(files)} shared objects, {size:.1f} GB, median of {args.rounds} rounds')
    for name, seconds in results.items():
        print(f"  {name:7} {seconds:6.2f} s   {seconds / results['ldd -r']:.2f}x the ldd -r loop")


if __name__ == '__main__':
    main()
