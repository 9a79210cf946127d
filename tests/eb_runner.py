"""Run real `eb` (each supported EasyBuild version from its own venv) with real Lmod, like EESSI does.

EESSI-like configuration: --rpath, and --filter-env-vars=LD_LIBRARY_PATH so that modules never set
LD_LIBRARY_PATH; libraries must find each other through RPATH alone.
"""

import os
import subprocess
from pathlib import Path


from eb_pytorch_cuda import standins
from environment import missing

REPO = Path(__file__).resolve().parent.parent
EB_VERSIONS = ('4.9.4', '5.4.1')
HOOKS = REPO / 'hooks' / 'eb_hooks.py'
TEST_EASYCONFIGS = Path(standins.STANDINS_DIR) / 'easyconfigs'
LMOD_CMD = os.environ.get('LMOD_CMD', '/usr/share/lmod/lmod/libexec/lmod')


def eb_venv(version):
    venv = Path(os.environ.get('EB_PYTORCH_CUDA_VENVS', REPO / '.venvs')) / f'eb-{version}'
    if not (venv / 'bin' / 'eb').exists():
        missing(f'EasyBuild {version} not found in {venv}')
    return venv


def make_sources(directory):
    """Source tarballs of the stand-ins (see eb_pytorch_cuda.standins.make_sources)."""
    return Path(standins.make_sources(str(directory)))


class EbRunner:
    """One EasyBuild version, one install prefix; run() returns the CompletedProcess of `eb ...`."""

    def __init__(self, version, prefix, sources, modulepath=()):
        self.version = version
        self.venv = eb_venv(version)
        self.prefix = Path(prefix)
        self.sources = Path(sources)
        self.modulepath = list(modulepath)

    def env(self, extra=None):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(('EASYBUILD_', 'EBROOT', 'EBVERSION', 'LMOD', '_LMOD', 'LD_LIBRARY_PATH'))}
        env.update({
            'PATH': f"{self.venv / 'bin'}:/usr/local/bin:/usr/bin:/bin",
            'LMOD_CMD': LMOD_CMD,
            'MODULEPATH': ':'.join(map(str, self.modulepath)),
            'EASYBUILD_PREFIX': str(self.prefix),
            'EASYBUILD_SOURCEPATH': str(self.sources),
            'EASYBUILD_MODULES_TOOL': 'Lmod',
            'EASYBUILD_MODULE_SYNTAX': 'Lua',
            'EASYBUILD_ROBOT_PATHS': str(TEST_EASYCONFIGS),
            'EASYBUILD_TMPDIR': str(self.prefix / 'tmp'),
            'EASYBUILD_RPATH': '1',
            'EASYBUILD_FILTER_ENV_VARS': 'LD_LIBRARY_PATH',
            'EASYBUILD_ALLOW_USE_AS_ROOT_AND_ACCEPT_CONSEQUENCES': '1',
        })
        env.update(extra or {})
        return env

    def run(self, *args, hooks=True, env=None):
        command = [str(self.venv / 'bin' / 'eb'), '--robot', *map(str, args)]
        if hooks:
            command.append(f'--hooks={HOOKS}')
        return subprocess.run(command, env=self.env(env), capture_output=True, text=True, timeout=900)

    def installdir(self, name, version):
        return self.prefix / 'software' / name / version
