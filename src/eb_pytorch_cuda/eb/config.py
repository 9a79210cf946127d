"""Where our EasyBuild-facing files are, and the EasyBuild configuration that makes `eb` use all of them.

In a source checkout (pip install -e) the files are taken from the checkout; an installed package
carries copies under <prefix>/share/eb-pytorch-cuda (setup.cfg data_files).
"""

import os
import sys
from typing import Dict, List

from eb_pytorch_cuda.errors import PluginError

RELATIVE = {
    'easyblock': os.path.join('easybuild', 'easyblocks', 'p', 'pytorch.py'),
    'hooks': os.path.join('hooks', 'eb_hooks.py'),
    'easyconfigs': 'easyconfigs',
}
SHARED = {
    'easyblock': os.path.join('easyblocks', 'pytorch.py'),
    'hooks': os.path.join('hooks', 'eb_hooks.py'),
    'easyconfigs': 'easyconfigs',
}


def plugin_files() -> Dict[str, str]:
    """{'easyblock', 'hooks', 'easyconfigs': absolute path}, from the checkout or the installed share dir."""
    checkout = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, os.pardir))
    if all(os.path.exists(os.path.join(checkout, path)) for path in RELATIVE.values()):
        return {key: os.path.join(checkout, path) for key, path in RELATIVE.items()}
    share = os.path.join(sys.prefix, 'share', 'eb-pytorch-cuda')
    if all(os.path.exists(os.path.join(share, path)) for path in SHARED.values()):
        return {key: os.path.join(share, path) for key, path in SHARED.items()}
    raise PluginError(share, 'eb-pytorch-cuda files not found (neither a source checkout nor an installed share dir)')


def upstream_robot_paths() -> List[str]:
    """The easybuild-easyconfigs directories EasyBuild would use by default (its DEFAULT_ROBOT_PATHS)."""
    try:
        from easybuild.framework.easyconfig.tools import get_paths_for
    except ImportError:
        return []
    path = os.environ.get('PATH', '')
    os.environ['PATH'] = os.pathsep.join([os.path.dirname(sys.executable), path])  # it looks for `eb` there
    try:
        return get_paths_for(subdir='easyconfigs', robot_path=None) or []
    finally:
        os.environ['PATH'] = path


def config_file_text() -> str:
    """An EasyBuild configuration file (for eb --configfiles) using our easyblock, hooks and easyconfigs."""
    files = plugin_files()
    return '\n'.join([
        '# EasyBuild configuration for PyTorch with CUDA on RPATH-only stacks, written by eb-pytorch-cuda config',
        '# use: eb --configfiles=THIS_FILE PyTorch-2.1.2-foss-2023a-CUDA-12.1.1.eb',
        '[config]',
        f"include-easyblocks = {files['easyblock']}",
        f"hooks = {files['hooks']}",
        f"robot-paths = {files['easyconfigs']}:%(DEFAULT_ROBOT_PATHS)s",
        '',
    ])


def environment_text() -> str:
    """The same as `export EASYBUILD_...` lines, the upstream robot paths spelled out."""
    files = plugin_files()
    robot = [files['easyconfigs'], *upstream_robot_paths()]
    return '\n'.join([
        f"export EASYBUILD_INCLUDE_EASYBLOCKS={files['easyblock']}",
        f"export EASYBUILD_HOOKS={files['hooks']}",
        f"export EASYBUILD_ROBOT_PATHS={':'.join(robot)}",
        '',
    ])
