"""Small real sources that reproduce the cuDNN dlopen() failure: a cuDNN stand-in and a PyTorch stand-in.

They are compiled with gcc and installed with real EasyBuild by the tests and the demo, so every
claim about the fix is checked with the real glibc loader.  build_cudnn()/build_torch_lib() build
them outside EasyBuild for the library-level tests.
"""

import os
import shutil
import subprocess
import tarfile

STANDINS_DIR = os.path.dirname(os.path.abspath(__file__))
CUDNN_SOURCES = os.path.join(STANDINS_DIR, 'cudnn')
TORCH_SOURCES = os.path.join(STANDINS_DIR, 'torch')
EASYCONFIGS = os.path.join(STANDINS_DIR, 'easyconfigs')


def _make(source_dir, build_dir, variables):
    command = ['make', '-s', '-C', source_dir, *[f'{key}={value}' for key, value in variables.items()]]
    subprocess.run(command, check=True, cwd=build_dir)


def build_cudnn(prefix, major=8, others=None):
    """Build the cuDNN stand-in into prefix/lib (no RUNPATH); return the lib directory.

    others: space-separated extra sub-library sonames to build instead of the Makefile's default set.
    """
    prefix = os.path.abspath(prefix)
    os.makedirs(prefix, exist_ok=True)
    variables = {'MAJOR': major, 'LIBDIR': os.path.join(prefix, 'lib'), 'INCDIR': os.path.join(prefix, 'include')}
    if others is not None:
        variables['OTHERS'] = others
    _make(CUDNN_SOURCES, prefix, variables)
    return os.path.join(prefix, 'lib')


def build_torch_lib(out_dir, cudnn_prefix, extra_ldflags=''):
    """Build libtorch_cuda.so into out_dir with DT_RPATH to cudnn_prefix/lib; return its path."""
    out_dir = os.path.abspath(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    _make(os.path.join(TORCH_SOURCES, 'csrc'), out_dir,
          {'CUDNN_ROOT': os.path.abspath(cudnn_prefix), 'OUT': out_dir, 'EXTRA_LDFLAGS': extra_ldflags})
    return os.path.join(out_dir, 'libtorch_cuda.so')


def build_loadcheck(out_path):
    """Compile the loader harness (no RPATH of its own); return its path."""
    subprocess.run(['gcc', '-o', out_path, os.path.join(TORCH_SOURCES, 'csrc', 'loadcheck.c'), '-ldl'], check=True)
    return out_path


def make_sources(directory):
    """Source tarballs the stand-in easyconfigs name: cuDNN as prebuilt binaries (like NVIDIA's
    tarball, built here with gcc, no RUNPATH), PyTorch as a source tree.  Returns directory."""
    os.makedirs(directory, exist_ok=True)
    staging = os.path.join(directory, 'staging', 'cudnn-standin')
    build_cudnn(staging, major=8)
    with tarfile.open(os.path.join(directory, 'cudnn-standin-8.9.2.26.tar.gz'), 'w:gz') as tar:
        tar.add(staging, arcname='cudnn-standin')
    with tarfile.open(os.path.join(directory, 'pytorch-standin-2.1.2.tar.gz'), 'w:gz') as tar:
        tar.add(TORCH_SOURCES, arcname='pytorch-standin',
                filter=lambda info: None if '__pycache__' in info.name or 'test-reports' in info.name else info)
    return directory


SLEEPING_SUITE = '''import time
import unittest

from common import run_tests


class TestSleeps(unittest.TestCase):
    def test_sleep(self):
        time.sleep({seconds})

    def test_maybe_fails(self):
        self.assertFalse({fails})


if __name__ == '__main__':
    run_tests(__file__)
'''


def sleeping_suite_tree(root, suites, seconds):
    """A fresh stand-in test tree (run_test.py, common.py) of `suites` suites that sleep `seconds`, every
    fifth failing one test: for benchmarks of how suites are scheduled, where the suites' own work must be
    a known constant (XML reports of one run must not mix with another's, hence a fresh tree each time)."""
    test_dir = os.path.join(root, 'test')
    os.makedirs(test_dir)
    for name in ('run_test.py', 'common.py'):
        shutil.copy(os.path.join(TORCH_SOURCES, 'test', name), test_dir)
    for index in range(suites):
        with open(os.path.join(test_dir, f'test_bench_{index:03d}.py'), 'w') as handle:
            handle.write(SLEEPING_SUITE.format(seconds=seconds, fails=index % 5 == 0))
    return test_dir
