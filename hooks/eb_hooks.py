"""EasyBuild hooks file for PyTorch with CUDA on RPATH-linked stacks: `eb --hooks hooks/eb_hooks.py ...`.

It only forwards to eb_pytorch_cuda.eb.hooks (install it with `pip install .`, or run from a
checkout: the src/ directory next to this file is used when the package is not installed).  The one
PyTorchCudaHooks object below holds what this eb run remembers between hooks; a site with its own
hooks file creates one there (with its settings) and calls its methods instead of using this file.
"""

import os
import sys

try:
    from eb_pytorch_cuda.eb.hooks import PyTorchCudaHooks
except ImportError:  # running from a source checkout
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, 'src'))
    from eb_pytorch_cuda.eb.hooks import PyTorchCudaHooks

_pytorch_cuda = PyTorchCudaHooks()

pre_test_hook = _pytorch_cuda.pre_test_hook
post_test_hook = _pytorch_cuda.post_test_hook
pre_run_shell_cmd_hook = _pytorch_cuda.pre_run_shell_cmd_hook
post_install_hook = _pytorch_cuda.post_install_hook
pre_sanitycheck_hook = _pytorch_cuda.pre_sanitycheck_hook
