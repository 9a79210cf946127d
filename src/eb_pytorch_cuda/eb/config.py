"""Where our EasyBuild-facing files are, and the EasyBuild configuration that makes `eb` use all of them beside
the site's own configuration (its hooks file, robot path and included easyblocks are kept: siteconfig.py).

In a source checkout (pip install -e) the files are taken from the checkout; an installed package
carries copies under <prefix>/share/eb-pytorch-cuda (setup.cfg data_files).
"""

import filecmp
import os
import shlex
import sys
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from eb_pytorch_cuda.eb.siteconfig import EasyBuildSettings
from eb_pytorch_cuda.eb.sitehooks import HooksFile, forwarding_text, read_hooks_file
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


class SiteHooksKept(PluginError):
    """A site's hooks file that only the site itself can make run ours (EasyBuild 4, or no entry points here):
    the one-line message, and in forwarding the lines that do it."""

    def __init__(self, path: str, problem: str, forwarding: str) -> None:
        super().__init__(path, problem)
        self.forwarding = forwarding


@dataclass(frozen=True)
class Plan:
    """How our configuration sits beside the site's.

    hooks: 'file' (our hooks file: the site has none), 'site' (the site's file already runs ours: it is kept and
    ours is not named), 'entrypoints' (EasyBuild 5: the site's file is kept, ours come as entry points);
    site_hooks: the site's file, where it has one; robot_paths: the site's robot path, ours taken out (ours
    goes first); include_easyblocks: the site's, ours taken out (ours goes last)."""

    hooks: str
    site_hooks: Optional[HooksFile]
    robot_paths: Tuple[str, ...]
    default_robot_paths: Tuple[str, ...]
    include_easyblocks: Tuple[str, ...]
    notes: Tuple[str, ...] = field(default=())


def _same_file(path: str, ours: str) -> bool:
    """path is our file (the same file, or a copy of it: an installed share/ copy, a site's copy)."""
    if os.path.realpath(path) == os.path.realpath(ours):
        return True
    try:
        return filecmp.cmp(path, ours, shallow=False)
    except OSError:
        return False


def _without(paths: Sequence[str], ours: str) -> Tuple[str, ...]:
    return tuple(path for path in paths if os.path.realpath(path) != os.path.realpath(ours))


def plan(settings: EasyBuildSettings, version: Optional[str], entrypoints: bool = False) -> Plan:
    """Where each of our settings goes beside the site's (settings: EasyBuild's configuration before ours).

    A site hooks file is never replaced: with EasyBuild 5 and our entry points installed, ours run beside it
    (use-entrypoints); a file that already runs ours is kept as it is; otherwise SiteHooksKept, with the lines
    that make the file run ours.  entrypoints: `config --entrypoints` (our hooks as entry points either way)."""
    files = plugin_files()
    site = None if not settings.hooks or _same_file(settings.hooks, files['hooks']) else read_hooks_file(settings.hooks)
    notes: List[str] = []
    if site is None:
        hooks = 'entrypoints' if entrypoints else 'file'
    elif site.runs_ours:
        if entrypoints:
            raise PluginError(site.path, f"the site's hooks file (from {settings.hooks_origin()}) already runs ours "
                                         '(it imports eb_pytorch_cuda): entry points would run them twice; use '
                                         '`eb-pytorch-cuda config`')
        hooks = 'site'
        notes.append(f"# hooks: the site's file {site.path} (from {settings.hooks_origin()}) runs ours "
                     '(it imports eb_pytorch_cuda): kept')
    else:
        problem = _entry_points_problem(version)
        if problem:
            raise SiteHooksKept(site.path, f"the site's hooks file (from {settings.hooks_origin()}) would be "
                                           f'replaced by ours: {problem}; add the lines below to it (it then runs '
                                           'ours) and run `eb-pytorch-cuda config` again',
                                forwarding_text(site))
        hooks = 'entrypoints'
        notes.append(f"# hooks: the site's file {site.path} (from {settings.hooks_origin()}) is kept; ours run "
                     'beside it as entry points (EasyBuild runs the file\'s hook of a step first)')
    return Plan(hooks, site, _without(settings.robot_paths, files['easyconfigs']), settings.default_robot_paths,
                _without(settings.include_easyblocks, files['easyblock']), tuple(notes))


def _entry_points_problem(version: Optional[str]) -> Optional[str]:
    """Why our hooks cannot come as entry points here, or None."""
    if not has_entry_points_support(version):
        return f'EasyBuild {version} takes one hooks file and has no entry points (EasyBuild 5 has)'
    try:
        check_entry_points()
    except PluginError as err:
        return f'this eb-pytorch-cuda installation cannot give ours as entry points ({err})'
    return None


def _robot_value(the_plan: Plan, ours: str) -> str:
    """robot-paths for a configuration file: ours first, then the site's, EasyBuild's default written as
    %(DEFAULT_ROBOT_PATHS)s where it appears whole (as when the site sets none); '%' escaped for ConfigParser."""
    paths, default = list(the_plan.robot_paths), list(the_plan.default_robot_paths)
    parts, index = [ours], 0
    while index < len(paths):
        if default and paths[index:index + len(default)] == default:
            parts.append('%(DEFAULT_ROBOT_PATHS)s')
            index, default = index + len(default), []  # written once
        else:
            parts.append(paths[index].replace('%', '%%'))
            index += 1
    return ':'.join(parts)


def _include_value(the_plan: Plan, ours: str) -> List[str]:
    return [*the_plan.include_easyblocks, ours]


def environment_overrides(settings: EasyBuildSettings, the_plan: Plan) -> List[str]:
    """Warnings for keys our configuration file sets that an $EASYBUILD_* variable also sets: eb reads the
    environment after the configuration files, so the variable wins (`config --env` keeps both)."""
    keys = ['robot-paths']
    keys += ['hooks'] if the_plan.hooks == 'file' else []
    keys += ['use-entrypoints'] if the_plan.hooks == 'entrypoints' else ['include-easyblocks']
    return [f'${settings.from_environment[key]} is set and overrides this file\'s {key} (eb reads the '
            'environment after configuration files): use `eb-pytorch-cuda config --env`, or unset it'
            for key in keys if key in settings.from_environment]


def config_file_text(the_plan: Plan, entrypoints: bool = False) -> str:
    """An EasyBuild configuration file (for eb --configfiles) that adds our easyblock, hooks and easyconfigs to
    the site's configuration as the_plan places them; entrypoints: `config --entrypoints` (EasyBuild 5)."""
    files = plugin_files()
    robot = f"robot-paths = {_robot_value(the_plan, files['easyconfigs'])}"
    if entrypoints:
        return '\n'.join([
            '# EasyBuild configuration for PyTorch with CUDA on RPATH-only stacks, written by eb-pytorch-cuda '
            'config --entrypoints',
            '# our hooks and EB_PyTorch come from the installed package (entry points); a site --hooks file still '
            'runs',
            '# use: eb --configfiles=THIS_FILE [--hooks=SITE_HOOKS] PyTorch-2.1.2-foss-2023a-CUDA-12.1.1.eb',
            *the_plan.notes,
            '[config]',
            'use-entrypoints = True',
            robot,
            '',
        ])
    lines = ['# EasyBuild configuration for PyTorch with CUDA on RPATH-only stacks, written by eb-pytorch-cuda config',
             '# use: eb --configfiles=THIS_FILE PyTorch-2.1.2-foss-2023a-CUDA-12.1.1.eb']
    lines += [entry_points_line(easybuild_version())] if the_plan.hooks == 'file' else list(the_plan.notes)
    lines += ['[config]', f"include-easyblocks = {','.join(_include_value(the_plan, files['easyblock']))}"]
    if the_plan.hooks == 'file':
        lines.append(f"hooks = {files['hooks']}")
    elif the_plan.hooks == 'entrypoints':
        lines.append('use-entrypoints = True')
    return '\n'.join([*lines, robot, ''])


def environment_text(the_plan: Plan, entrypoints: bool = False) -> str:
    """The same as `export EASYBUILD_...` lines, the robot paths spelled out."""
    files = plugin_files()
    robot = f"export EASYBUILD_ROBOT_PATHS={_quote(':'.join([files['easyconfigs'], *the_plan.robot_paths]))}"
    if entrypoints:
        return '\n'.join(['export EASYBUILD_USE_ENTRYPOINTS=1', robot, ''])
    lines = [f"export EASYBUILD_INCLUDE_EASYBLOCKS={_quote(','.join(_include_value(the_plan, files['easyblock'])))}"]
    if the_plan.hooks == 'file':
        lines.append(f"export EASYBUILD_HOOKS={_quote(files['hooks'])}")
    elif the_plan.hooks == 'entrypoints':
        lines.append('export EASYBUILD_USE_ENTRYPOINTS=1')
    return '\n'.join([*lines, robot, ''])


def _quote(value: str) -> str:
    """A value for a shell's `export` line (unchanged where it needs no quotes, as paths mostly do)."""
    return shlex.quote(value)
