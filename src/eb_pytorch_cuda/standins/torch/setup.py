"""PyTorch stand-in: a Python package `torch` whose torch/lib/libtorch_cuda.so links a cuDNN stand-in.

STANDIN_CPU_ONLY=1 makes a CPU-only build, without libtorch_cuda.so.  (Not PyTorch's USE_CUDA: upstream
EB_PyTorch sets USE_CUDA=0 whenever CUDA is not a dependency, as for these stand-ins.)
"""
import os
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.install import install as setuptools_install


class BuildWithLibrary(build_py):
    """Compile libtorch_cuda.so into the package before the Python files are collected."""

    def run(self):
        if os.environ.get('STANDIN_BUILD_LOG'):  # lets tests see whether a build happened
            with open(os.environ['STANDIN_BUILD_LOG'], 'a') as log:
                log.write('build\n')
        if os.environ.get('STANDIN_CPU_ONLY') != '1':
            subprocess.run(['make', '-C', 'csrc', 'OUT=' + os.path.abspath('torch/lib')], check=True)
        super().run()


class Install(setuptools_install):
    """PyTorch 2.x's setup.py overrides install the same way; with setuptools < 80 that makes
    `setup.py install --prefix` a plain install, where the base command would make an egg."""

    def run(self):
        super().run()


setup(
    name='torch',
    version=os.environ.get('TORCH_STANDIN_VERSION', '2.1.2'),
    packages=['torch'],
    package_data={'torch': ['lib/*.so']},
    cmdclass={'build_py': BuildWithLibrary, 'install': Install},
    zip_safe=False,
)
