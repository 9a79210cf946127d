"""Benchmark: what the cuDNN NEEDED entries cost every process that loads libtorch_cuda.so.

Why: the entries make the loader map cuDNN sub-libraries at start-up, in every process that imports
torch, whether it uses cuDNN or not.  Where cuDNN's own RUNPATH makes them unnecessary (the pip wheels,
NVIDIA's cuDNN 9 tarballs) they are a cost without a benefit; where they are the fix (cuDNN 8's
tarballs) the cost is the price of the fix.  This puts a number on it for the main job's versions.

On the RPATH-only layout of cuDNN 8.9.2 + PyTorch 2.1.2 (built in a scratch directory from
.venvs/cudnn8-torch212 as the tests build it), for libtorch_cuda.so unpatched, with the catalog default
(libcudnn_cnn_train.so.8) and with the complete fix doctor names (also libcudnn_adv_train.so.8): load it
in a fresh `python -I` (empty environment, RTLD_NOW | RTLD_GLOBAL as Python's import does) --rounds times,
the variants interleaved, page cache warm; report the median wall time of the load and the median peak
resident memory (ru_maxrss) of the process.

    python benchmarks/bench_needed_cost.py [--rounds 9]
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_doctor import LIBS_212, layout_212  # noqa: E402  (one way to build the layout)

PROBE = ('import ctypes, json, os, resource, sys, time\n'
         'start = time.perf_counter()\n'
         'ctypes.CDLL(sys.argv[1], mode=os.RTLD_NOW | os.RTLD_GLOBAL)\n'
         'print(json.dumps([time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss]))\n')


def load_once(library):
    done = subprocess.run([sys.executable, '-I', '-c', PROBE, library], env={}, capture_output=True, text=True,
                          check=True)
    seconds, max_kib = json.loads(done.stdout)
    return seconds, max_kib / 1024


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--rounds', type=int, default=9)
    args = parser.parse_args()
    if not os.path.exists(os.path.join(LIBS_212, '.complete')):
        sys.exit(f'no {LIBS_212}: run bash tools/setup.sh')
    from eb_pytorch_cuda.elf.patchelf import patchelf_binary
    from eb_pytorch_cuda.patch.needed import add_needed
    with tempfile.TemporaryDirectory(dir='.venvs') as scratch:
        root = layout_212(os.path.join(scratch, 'layout'), patchelf_binary())
        library = os.path.join(root, 'torch', 'lib', 'libtorch_cuda.so')
        variants = {'unpatched': library}
        for label, sonames in (('cnn_train (default)', ['libcudnn_cnn_train.so.8']),
                               ('cnn_train + adv_train', ['libcudnn_cnn_train.so.8', 'libcudnn_adv_train.so.8'])):
            copy = os.path.join(root, 'torch', 'lib', f'libtorch_cuda-{len(variants)}.so')
            shutil.copyfile(library, copy)
            add_needed(copy, sonames)
            variants[label] = copy
        for path in variants.values():
            load_once(path)  # warm the page cache
        samples = {label: [] for label in variants}
        for _ in range(args.rounds):
            for label, path in variants.items():
                samples[label].append(load_once(path))
    base_time = statistics.median(s for s, _ in samples['unpatched'])
    base_mem = statistics.median(m for _, m in samples['unpatched'])
    print(f'loading libtorch_cuda.so (cuDNN 8.9.2 + PyTorch 2.1.2, RPATH-only), median of {args.rounds}')
    for label, values in samples.items():
        seconds = statistics.median(s for s, _ in values)
        memory = statistics.median(m for _, m in values)
        print(f'  {label:22} {seconds:6.3f} s ({(seconds / base_time - 1) * 100:+5.1f}%)   '
              f'peak {memory:7.0f} MiB ({memory - base_mem:+5.0f} MiB)')


if __name__ == '__main__':
    main()
