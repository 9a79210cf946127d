"""Where our EasyBuild-facing files are, and the EasyBuild configuration that makes `eb` use all of them.

In a source checkout (pip install -e) the files are taken from the checkout; an installed package
carries copies under <prefix>/share/eb-pytorch-cuda (setup.cfg data_files).
"""

import os
import sys
from typing import Dict, List, Optional

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


ENTRY_POINT_GROUPS = {'easybuild.hooks': 'eb_pytorch_cuda.eb.entry_hooks',
                      'easybuild.easyblock': 'eb_pytorch_cuda.eb.entry_easyblock:EB_PyTorch'}


def easybuild_version() -> Optional[str]:
    """The installed EasyBuild framework's version, or None."""
    try:
        from easybuild.tools.version import VERSION
    except ImportError:
        return None
    return str(VERSION)


def has_entry_points_support(version: Optional[str]) -> bool:
    """EasyBuild 5 and later have --use-entrypoints (easybuild.tools.entrypoints); 4.x has not."""
    return version is not None and int(version.split('.')[0]) >= 5


def entry_points_line(version: Optional[str]) -> str:
    """One comment line saying which way this EasyBuild offers besides the files."""
    if has_entry_points_support(version):
        return (f'# EasyBuild {version}: `eb-pytorch-cuda config --entrypoints` uses the installed hooks and '
                'easyblock as entry points instead (beside a site hooks file)')
    return f'# EasyBuild {version} has no entry points (EasyBuild 5 has): hooks and easyblock are given as files'


def check_entry_points() -> None:
    """Refuse (PluginError) unless this EasyBuild has entry points and this installation registers ours."""
    version = easybuild_version()
    if not has_entry_points_support(version):
        raise PluginError(None, f'EasyBuild {version} has no entry points (--use-entrypoints is EasyBuild 5): use '
                                '`eb-pytorch-cuda config` (--hooks and --include-easyblocks)')
    from importlib.metadata import distribution
    dist = distribution('eb-pytorch-cuda')
    registered = {(ep.group, ep.value) for ep in dist.entry_points}
    missing = [group for group, value in ENTRY_POINT_GROUPS.items() if (group, value) not in registered]
    if missing:
        where = getattr(dist, '_path', None) or 'eb-pytorch-cuda'
        raise PluginError(str(where), f"registers no {', '.join(missing)} entry point (installed from an older "
                                      'version): reinstall it with `pip install .`')


def entrypoints_config_text() -> str:
    """An EasyBuild configuration file that takes our hooks and easyblock from the entry points (EasyBuild 5)."""
    check_entry_points()
    files = plugin_files()
    return '\n'.join([
        '# EasyBuild configuration for PyTorch with CUDA on RPATH-only stacks, written by eb-pytorch-cuda config '
        '--entrypoints',
        '# our hooks and EB_PyTorch come from the installed package (entry points); a site --hooks file still runs',
        '# use: eb --configfiles=THIS_FILE [--hooks=SITE_HOOKS] PyTorch-2.1.2-foss-2023a-CUDA-12.1.1.eb',
        '[config]',
        'use-entrypoints = True',
        f"robot-paths = {files['easyconfigs']}:%(DEFAULT_ROBOT_PATHS)s",
        '',
    ])


def entrypoints_environment_text() -> str:
    """The same as `export EASYBUILD_...` lines."""
    check_entry_points()
    files = plugin_files()
    robot = [files['easyconfigs'], *upstream_robot_paths()]
    return '\n'.join(['export EASYBUILD_USE_ENTRYPOINTS=1', f"export EASYBUILD_ROBOT_PATHS={':'.join(robot)}", ''])


def config_file_text() -> str:
    """An EasyBuild configuration file (for eb --configfiles) using our easyblock, hooks and easyconfigs."""
    files = plugin_files()
    return '\n'.join([
        '# EasyBuild configuration for PyTorch with CUDA on RPATH-only stacks, written by eb-pytorch-cuda config',
        '# use: eb --configfiles=THIS_FILE PyTorch-2.1.2-foss-2023a-CUDA-12.1.1.eb',
        entry_points_line(easybuild_version()),
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
