"""The EasyBuild configuration a site already has, read the way `eb --show-config` reads it.

`eb --configfiles=OURS` adds OURS to the configuration files EasyBuild reads anyway (the `configfiles`
option's action is `add`, onto EasyBuildOptions.DEFAULT_CONFIGFILES: $XDG_CONFIG_DIRS/easybuild.d/*.cfg and
$XDG_CONFIG_HOME/easybuild/config.cfg), and of two files the later one wins each key.  So a key our file
sets replaces the site's value of it: `eb-pytorch-cuda config` must know the site's `hooks`, `robot-paths`
and `include-easyblocks` to keep them.  They are taken from the installed EasyBuild itself, in this process,
with the arguments its own `--show-config` uses (EasyBuildOptions, no --include, one configuration level):
configuration files, then $EASYBUILD_* variables.
"""

import os
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple

from eb_pytorch_cuda.errors import PluginError

# our configuration file's keys, with the $EASYBUILD_* variable that overrides each in eb
OUR_KEYS = {'hooks': 'EASYBUILD_HOOKS', 'robot-paths': 'EASYBUILD_ROBOT_PATHS',
            'include-easyblocks': 'EASYBUILD_INCLUDE_EASYBLOCKS', 'use-entrypoints': 'EASYBUILD_USE_ENTRYPOINTS'}


@dataclass(frozen=True)
class EasyBuildSettings:
    """What EasyBuild would use for the keys our configuration sets, before ours is added.

    robot_paths: the effective list (EasyBuild's default robot paths when nothing sets it);
    default_robot_paths: that default (what %(DEFAULT_ROBOT_PATHS)s stands for in a configuration file);
    configfiles: the files read; from_environment: {key: variable} for keys an $EASYBUILD_* variable sets;
    ignore_dirs, consider_archived: how eb searches the robot path for an easyconfig named by its file name
    (eb/ecfind)."""

    hooks: Optional[str] = None
    robot_paths: Tuple[str, ...] = ()
    default_robot_paths: Tuple[str, ...] = ()
    include_easyblocks: Tuple[str, ...] = ()
    configfiles: Tuple[str, ...] = ()
    from_environment: Dict[str, str] = field(default_factory=dict)
    ignore_dirs: Tuple[str, ...] = ('.git', '.svn')  # directories eb's easyconfig search skips (--ignore-dirs)
    consider_archived: bool = False  # --consider-archived-easyconfigs: the robot path's __archive__ searched too

    def hooks_origin(self) -> str:
        """Where the hooks setting comes from, in words (the variable, else the configuration files)."""
        if 'hooks' in self.from_environment:
            return f"${self.from_environment['hooks']}"
        return f"configuration file {', '.join(self.configfiles)}" if self.configfiles else 'EasyBuild configuration'


def read_settings() -> EasyBuildSettings:
    """The installed EasyBuild's configuration (files and environment); the default one when EasyBuild is not
    importable here (EasyBuild then cannot read ours either).  A configuration EasyBuild refuses raises
    PluginError naming its files."""
    try:
        from easybuild.tools.options import CONFIG_ENV_VAR_PREFIX, EasyBuildOptions
        from easybuild.tools.build_log import EasyBuildError
    except ImportError:
        return EasyBuildSettings()
    saved_env, saved_tempdir = dict(os.environ), tempfile.tempdir
    # EasyBuild finds its default robot paths relative to the `eb` on PATH: this Python's venv has it
    os.environ['PATH'] = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get('PATH', '')])
    options = None
    try:
        try:
            options = EasyBuildOptions(go_args=[], envvar_prefix=CONFIG_ENV_VAR_PREFIX, with_include=False,
                                       single_cfg_level=True)
        except (EasyBuildError, SystemExit) as err:
            files = ', '.join(EasyBuildOptions.DEFAULT_CONFIGFILES) or '$EASYBUILD_* variables'
            message = getattr(err, 'msg', None) or str(err)  # 4.9.4's str() is the message's repr
            raise PluginError(files, f'EasyBuild cannot read this configuration: {message}') from None
        values = options.options
        return EasyBuildSettings(
            hooks=values.hooks or None, robot_paths=tuple(values.robot_paths or ()),
            default_robot_paths=tuple(options.default_robot_paths),
            include_easyblocks=tuple(values.include_easyblocks or ()),
            configfiles=tuple(values.configfiles or ()),
            from_environment={key: variable for key, variable in OUR_KEYS.items() if variable in saved_env},
            ignore_dirs=tuple(values.ignore_dirs or ()),
            consider_archived=bool(values.consider_archived_easyconfigs))
    finally:
        if options is not None and getattr(options, 'tmpdir', None):  # EasyBuild made one (set_tmpdir)
            shutil.rmtree(options.tmpdir, ignore_errors=True)
        os.environ.clear()
        os.environ.update(saved_env)
        tempfile.tempdir = saved_tempdir
