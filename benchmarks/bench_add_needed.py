"""Benchmark: add-needed on a large shared object against a plain copy of the same file.

Why: patchelf rewrites the whole file (3.2 s for the real 739 MB libtorch_cuda.so, against 0.6 s to copy
it).  Our atomic copy-verify-rename must not add a second full rewrite on top of patchelf's: patchelf
writes straight to the temporary file that is then renamed over the original.

What it measures, each operation followed by os.sync(), median of --rounds rounds in one run:
  copy        shutil.copyfile of the unpatched library
  patchelf    the bare `patchelf --add-needed X --output OUT LIB` (the floor for any atomic patch)
  add-needed  eb_pytorch_cuda.patch.needed.add_needed (resolve, patchelf to temp file, verify, rename)
The library is built by gcc: the libtorch_cuda.so stand-in plus --size-mb of data (.incbin), linked
against the cuDNN stand-in with DT_RPATH, so the soname added resolves as in real use.  The same three
are also timed, without sync, on the small stand-in (--small-rounds rounds): there the file costs
nothing and what remains is our fixed cost per call (lock, exec wrapper that ties patchelf's life to
ours, verification, owner/xattr/mode copy), which the large library's noise would hide.

    python benchmarks/bench_add_needed.py [--size-mb 700] [--rounds 5] [--workdir DIR]
    python benchmarks/bench_add_needed.py --library .venvs/cudnn8-torch212/torch/lib/libtorch_cuda.so

--library times a real library instead (the torch 2.1.2 wheel's, set up by tools/setup.sh): its copies
are made in a directory beside the library's own, so its $ORIGIN-relative RPATH still finds cuDNN and
add-needed's check that the new soname resolves is the real one.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time

from eb_pytorch_cuda import standins
from eb_pytorch_cuda.patch.needed import add_needed
from eb_pytorch_cuda.elf.patchelf import patchelf_binary

SONAME = 'libcudnn_cnn_train.so.8'


def build_large_library(workdir, size_mb):
    """A gcc-built shared object of about size_mb MB with DT_RPATH to a cuDNN stand-in."""
    cudnn_prefix = os.path.join(workdir, 'cudnn')
    standins.build_cudnn(cudnn_prefix, major=8)
    blob = os.path.join(workdir, 'blob.bin')
    with open(blob, 'wb') as handle:
        chunk = os.urandom(1 << 20)
        for _ in range(size_mb):
            handle.write(chunk)
    source = os.path.join(workdir, 'big.c')
    with open(source, 'w') as handle:
        handle.write('int cudnnConvolutionForward(int x);\n'
                     'int torch_conv(int x) { return cudnnConvolutionForward(x); }\n'
                     '__asm__(".section .rodata\\n.global big_blob\\nbig_blob:\\n'
                     f'.incbin \\"{blob}\\"\\n.previous");\n')
    library = os.path.join(workdir, 'original', 'libtorch_cuda.so')
    os.makedirs(os.path.dirname(library))
    subprocess.run(['gcc', '-shared', '-fPIC', '-o', library, source, f'-L{cudnn_prefix}/lib', '-lcudnn',
                    '-Wl,--disable-new-dtags', f'-Wl,-rpath,{cudnn_prefix}/lib', '-Wl,-z,noexecstack'], check=True)
    os.unlink(blob)
    return library


def timed(action, sync=True):
    start = time.perf_counter()
    action()
    if sync:
        os.sync()
    return time.perf_counter() - start


def measure(original, target_dir, rounds, sync=True):
    """{'copy': [...], 'patchelf': [...], 'add-needed': [...]} seconds for the library at original."""
    target = os.path.join(target_dir, 'libtorch_cuda.so')
    out = os.path.join(target_dir, 'patched.so')
    results = {'copy': [], 'patchelf': [], 'add-needed': []}
    for _ in range(rounds):
        results['copy'].append(timed(lambda: shutil.copyfile(original, target), sync))
        results['patchelf'].append(timed(lambda: subprocess.run(
            [patchelf_binary(), '--add-needed', SONAME, '--output', out, target], check=True), sync))
        os.unlink(out)
        results['add-needed'].append(timed(lambda: add_needed(target, [SONAME]), sync))
        os.unlink(target)
    return results


def show(results):
    copy = statistics.median(results['copy'])
    for name, values in results.items():
        median = statistics.median(values)
        print(f'  {name:11} {median:7.3f} s   {median / copy:5.2f}x copy   '
              f'(min {min(values):.3f}, max {max(values):.3f})')
    overhead = statistics.median(results['add-needed']) - statistics.median(results['patchelf'])
    print(f'  add-needed minus bare patchelf: {overhead:+.3f} s')


def measure_real(library, rounds):
    """Time a real library; its copies sit in a sibling directory of its own (same $ORIGIN depth)."""
    target_dir = tempfile.mkdtemp(prefix='.bench-add-needed-', dir=os.path.dirname(os.path.dirname(library)))
    try:
        print(f'library: {library}, {os.path.getsize(library) / 1e6:.0f} MB, {rounds} rounds, median seconds '
              f'(each followed by sync)')
        show(measure(library, target_dir, rounds))
    finally:
        shutil.rmtree(target_dir)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--size-mb', type=int, default=700)
    parser.add_argument('--rounds', type=int, default=5)
    parser.add_argument('--small-rounds', type=int, default=30)
    parser.add_argument('--workdir', default=None, help='where to build (default: a temporary directory)')
    parser.add_argument('--library', default=None, help='time this real library instead of a built one')
    args = parser.parse_args()
    if args.library:
        return measure_real(os.path.abspath(args.library), args.rounds)
    workdir = tempfile.mkdtemp(prefix='bench-add-needed-', dir=args.workdir)
    try:
        original = build_large_library(workdir, args.size_mb)
        target_dir = os.path.join(workdir, 'work')
        os.makedirs(target_dir)
        print(f'library: {os.path.getsize(original) / 1e6:.0f} MB, {args.rounds} rounds, median seconds '
              f'(each followed by sync)')
        show(measure(original, target_dir, args.rounds))
        small = standins.build_torch_lib(os.path.join(workdir, 'small'), os.path.join(workdir, 'cudnn'))
        print(f'small stand-in: {os.path.getsize(small) / 1e3:.0f} kB, {args.small_rounds} rounds, median seconds '
              f'(no sync: the fixed cost per call)')
        show(measure(small, target_dir, args.small_rounds, sync=False))
    finally:
        shutil.rmtree(workdir)


if __name__ == '__main__':
    main()
