##
# This file is part of eb-pytorch-cuda and, like the easyblock it extends (easybuild-easyblocks'
# EB_PyTorch), licensed under the GNU General Public License v2 (GPL-2.0-only).
##
"""EasyBuild support for PyTorch with CUDA on RPATH-linked stacks: `eb --include-easyblocks <this file>`.

A thin adapter: it extends the installed easybuild-easyblocks EB_PyTorch (configure logic, BLAS
selection, CUDA capabilities) with the parameters of the eb_pytorch_cuda library, whose hooks
(hooks/eb_hooks.py) read them.  The upstream module is loaded from its file because this one takes
its name once included.
"""

import importlib.util
import os
import sys

import easybuild.easyblocks.generic.pythonpackage as _pythonpackage
from easybuild.framework.easyconfig import CUSTOM


def _load_upstream():
    """The EB_PyTorch class of the installed easybuild-easyblocks (shadowed by this file when included)."""
    easyblocks_dir = os.path.dirname(os.path.dirname(os.path.abspath(_pythonpackage.__file__)))
    path = os.path.join(easyblocks_dir, 'p', 'pytorch.py')
    spec = importlib.util.spec_from_file_location('easybuild.easyblocks.upstream_pytorch', path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # EasyBuild's reproducibility copy inspects the class's source file
    spec.loader.exec_module(module)
    return module.EB_PyTorch


UpstreamPyTorch = _load_upstream()


class EB_PyTorch(UpstreamPyTorch):
    """Upstream EB_PyTorch plus the parameters of eb_pytorch_cuda (see extra_options)."""

    @staticmethod
    def extra_options():
        extra_vars = UpstreamPyTorch.extra_options()
        extra_vars.update({
            'cudnn_needed': [None, "cuDNN sub-libraries to add as NEEDED entries of libtorch_cuda.so (a list of "
                                   "sonames, or a dict {cuDNN major version: list}); None: the catalog default "
                                   "(cuDNN 8: libcudnn_cnn_train.so.8; cuDNN 9: libcudnn_engines_precompiled.so.9, "
                                   "libcudnn_engines_runtime_compiled.so.9), [] to switch the patch off; entries "
                                   "missing from the cuDNN installation are always skipped. Applied by "
                                   "hooks/eb_hooks.py; see `eb-pytorch-cuda cudnn-catalog`", CUSTOM],
        })
        return extra_vars
