"""EasyBuild hooks file for PyTorch with CUDA on RPATH-linked stacks: `eb --hooks hooks/eb_hooks.py ...`.

It only forwards to eb_pytorch_cuda.eb.hooks (install it with `pip install .`, or run from a
checkout: the src/ directory next to this file is used when the package is not installed).  A site
with its own hooks file calls the same functions from it instead of using this file.
"""

import os
import sys

try:
    from eb_pytorch_cuda.eb import hooks as easybuild_hooks
except ImportError:  # running from a source checkout
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, 'src'))
    from eb_pytorch_cuda.eb import hooks as easybuild_hooks

pre_test_hook = easybuild_hooks.pre_test_hook
post_test_hook = easybuild_hooks.post_test_hook
pre_run_shell_cmd_hook = easybuild_hooks.pre_run_shell_cmd_hook
post_install_hook = easybuild_hooks.post_install_hook
pre_sanitycheck_hook = easybuild_hooks.pre_sanitycheck_hook
