"""Benchmark: `eb-pytorch-cuda doctor` over a whole CUDA PyTorch install against an `ldd -r` loop.

Why: doctor must be cheap enough to run on every build, while doing more than `ldd -r` (the dlopen()
chain, symbol versions, soname conflicts) without running the loader on the files it audits.

Measured in one run, median of --rounds, page cache warm (one untimed pass first), wall time and CPU
time (user + system of the commands), for two trees:
the CUDA build of torch in .venvs/torch (torch 2.14.1, cuDNN 9), and the RPATH-only layout of the main
job's cuDNN 8.9.2 + PyTorch 2.1.2 (built in a scratch directory from .venvs/cudnn8-torch212 as the tests
build it: hardlinks, cuDNN copies without RUNPATH):
  ldd -r    `ldd -r FILE` for every shared object under torch/ and nvidia/ (runs the loader on each)
  nm -D     `nm -D FILE` for the same files (symbol listing only)
  doctor    the whole `eb-pytorch-cuda doctor ...` command (Python start included): `<site>/torch
            <site>/nvidia --executable python` for the first tree, `--from libtorch_cuda.so <layout>` for
            the second

    python benchmarks/bench_doctor.py [--site .venvs/torch/lib/python3.11/site-packages] [--rounds 5]

Measured (2-core machine shared with other sessions; load average in brackets; the 2.1.2 layout, doctor against
the ldd -r loop, wall / CPU):
  issue 25, before:                              3.2x / 3.5x (2.2x / 3.3x the run before)
  issue 25, read_elf with struct (no pyelftools): 1.95x / 2.44x (load 2.6), 5 rounds: 1.50 s against 0.77 s
  + realpath once per path:                      1.50x / 2.13x (load 3.6), 7 rounds: 1.16 s against 0.77 s
                                                 1.60x / 2.01x (load 7.0), 7 rounds: 2.22 s against 1.39 s
  torch 2.14.1 tree, same runs: 0.59x / 0.62x, 0.40x / 0.61x, 0.52x / 0.55x
Where the rest goes (cProfile, load 3.6, 1.9 s in all): decoding .dynsym of the 47 objects 0.9 s, scanning .rodata
for library names 0.4 s (0.36 s of it libcudnn_cnn_infer.so.8's 132 MB: Python's substring search runs at about
450 MB/s on that data, bytes.count too), imports 0.1 s, resolution 0.1 s.
"""

import argparse
import glob
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

LIBS_212 = os.path.join('.venvs', 'cudnn8-torch212')


def shared_objects(site):
    files = []
    for name in ('torch', 'nvidia'):
        for directory, _, names in os.walk(os.path.join(site, name)):
            files += [os.path.join(directory, n) for n in names if '.so' in n
                      and not os.path.islink(os.path.join(directory, n))]
    return sorted(files)


def timed(commands):
    """(wall seconds, CPU seconds of the commands: user + system) for running the commands one after another.

    CPU time is reported beside wall time because a shared machine's load moves wall time between rounds."""
    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    for command in commands:
        subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return time.perf_counter() - start, cpu


def layout_212(scratch, patchelf):
    """The RPATH-only layout of cuDNN 8.9.2 + torch 2.1.2 under scratch (hardlinks; cuDNN copies without RUNPATH)."""
    for directory, _, names in os.walk(LIBS_212):
        target = os.path.join(scratch, os.path.relpath(directory, LIBS_212))
        os.makedirs(target, exist_ok=True)
        for name in names:
            if '.so' not in name:
                continue
            source, destination = os.path.join(directory, name), os.path.join(target, name)
            if name.startswith('libcudnn'):
                shutil.copyfile(source, destination)
                subprocess.run([patchelf, '--remove-rpath', destination], check=True)
            else:
                os.link(source, destination)
    return scratch


def measure(label, files, doctor_command, rounds):
    runs = {
        'ldd -r': [['ldd', '-r', f] for f in files],
        'nm -D': [['nm', '-D', f] for f in files],
        'doctor': [doctor_command],
    }
    for commands in runs.values():
        timed(commands)  # warm the page cache
    samples = {name: [timed(c) for _ in range(rounds)] for name, c in runs.items()}
    wall = {name: statistics.median(w for w, _ in values) for name, values in samples.items()}
    cpu = {name: statistics.median(c for _, c in values) for name, values in samples.items()}
    size = sum(os.path.getsize(f) for f in files) / 1e9
    print(f'{label}: {len(files)} shared objects, {size:.1f} GB, median of {rounds} rounds')
    for name in runs:
        print(f"  {name:7} {wall[name]:6.2f} s wall ({wall[name] / wall['ldd -r']:.2f}x the ldd -r loop)   "
              f"{cpu[name]:6.2f} s CPU ({cpu[name] / cpu['ldd -r']:.2f}x)")


def main():
    default_site = next(iter(sorted(glob.glob('.venvs/torch/lib/python3*/site-packages'))), None)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--site', default=default_site, help='site-packages holding torch/ and nvidia/')
    parser.add_argument('--rounds', type=int, default=5)
    args = parser.parse_args()
    doctor = shutil.which('eb-pytorch-cuda', path=os.path.dirname(sys.executable)) or 'eb-pytorch-cuda'
    python = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(args.site)))),
                          'bin', 'python')
    measure(f'torch at {args.site}', shared_objects(args.site),
            [doctor, 'doctor', os.path.join(args.site, 'torch'), os.path.join(args.site, 'nvidia'),
             '--executable', python if os.path.exists(python) else 'none'], args.rounds)
    if os.path.exists(os.path.join(LIBS_212, '.complete')):
        from eb_pytorch_cuda.elf.patchelf import patchelf_binary
        with tempfile.TemporaryDirectory(dir='.venvs') as scratch:
            root = layout_212(scratch, patchelf_binary())
            measure('cuDNN 8.9.2 + PyTorch 2.1.2, RPATH-only layout', shared_objects(root),
                    [doctor, 'doctor', '--from', os.path.join(root, 'torch', 'lib', 'libtorch_cuda.so'), root],
                    args.rounds)
    else:
        print(f'no {LIBS_212}: run bash tools/setup.sh for the cuDNN 8.9.2 + PyTorch 2.1.2 layout')


if __name__ == '__main__':
    main()
