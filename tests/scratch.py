"""Scratch trees for module-scoped fixtures that must not outlive their module.

tmp_path_factory keeps every tree to the end of the session; the real-library layouts (a few GB of cuDNN,
cuBLAS and libtorch_cuda.so copies) then add up until CI's disk is full.  A module fixture that builds
such a tree yields it from scratch_dir, which removes it at the module's teardown."""

import contextlib
import shutil


@contextlib.contextmanager
def scratch_dir(tmp_path_factory, name):
    """A new directory under the session's tmp root, removed (whatever the tests did) when the block ends."""
    path = tmp_path_factory.mktemp(name)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
