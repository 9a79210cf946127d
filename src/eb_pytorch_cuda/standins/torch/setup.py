"""PyTorch stand-in: a Python package `torch` whose torch/lib/libtorch_cuda.so links a cuDNN stand-in.

USE_CUDA=0 makes a CPU-only build, without libtorch_cuda.so, as in PyTorch.
"""
import os
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildWithLibrary(build_py):
    """Compile libtorch_cuda.so into the package before the Python files are collected."""

    def run(self):
        if os.environ.get('USE_CUDA', '1') != '0':  # PyTorch's own switch for a CPU-only build
            subprocess.run(['make', '-C', 'csrc', 'OUT=' + os.path.abspath('torch/lib')], check=True)
        super().run()


setup(
    name='torch',
    version=os.environ.get('TORCH_STANDIN_VERSION', '2.1.2'),
    packages=['torch'],
    package_data={'torch': ['lib/*.so']},
    cmdclass={'build_py': BuildWithLibrary},
    zip_safe=False,
)
