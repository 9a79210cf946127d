"""Make PyTorch with CUDA build, test and run correctly on RPATH-linked EasyBuild stacks.

All logic lives in this package; the EasyBuild-facing files (hooks file, easyblock) are thin
adapters over it.  Nothing here imports EasyBuild at import time, so the library can be used and
tested without a build.
"""

__version__ = '0.1.0'
