"""The three ways a site deploys our easyblock, each set up for real with one EasyBuild version.

- include: `eb --include-easyblocks=<ours>,<a copy of generic/pythonpackage.py>` (a site that also
  patches upstream's PythonPackage; upstream's p/pytorch.py is then no longer next to pythonpackage.py);
- site: a site easyblocks tree (a full copy of the installed easybuild-easyblocks) whose p/pytorch.py
  is replaced by ours, first on PYTHONPATH, as EasyBuild documents for a development easyblocks tree;
- pip: a venv made as a user makes one (`python3 -m venv`, `pip install easybuild==X .`, setuptools as
  venv brings it), where the easyblock is the copy under <venv>/share/eb-pytorch-cuda, used through
  `eb-pytorch-cuda config`, and eb_pytorch_cuda is a plain (non-editable) install.
"""

import filecmp
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path


from eb_runner import LMOD_CMD, REPO, eb_venv
from environment import missing

OURS = REPO / 'easybuild' / 'easyblocks' / 'p' / 'pytorch.py'
KINDS = ('include', 'site', 'pip')
UPSTREAM_SUITES = REPO / 'tests' / 'upstream_easyblocks'
# upstream's easyblock tests for each EasyBuild version: the release tag where it has them; 5.4.1 is not
# in upstream's public repository snapshot, so its tests are develop of 2026-03-13 (see the README there)
SUITE_REF = {'4.9.4': 'v4.9.4', '5.4.1': 'develop-2026-03-13'}


def stock_venv(version):
    """The stock venv of tools/setup.sh, checked to carry the current package (else: rerun setup)."""
    venv = Path(os.environ.get('EB_PYTORCH_CUDA_VENVS', REPO / '.venvs')) / f'stock-{version}'
    share = venv / 'share' / 'eb-pytorch-cuda'
    if not (share / 'easyblocks' / 'pytorch.py').exists():
        missing(f'{venv} has no pip-installed eb-pytorch-cuda')
    site_packages = next((venv / 'lib').glob('python3*/site-packages'))
    copies = {OURS: share / 'easyblocks' / 'pytorch.py',
              REPO / 'hooks' / 'eb_hooks.py': share / 'hooks' / 'eb_hooks.py'}
    for source in (REPO / 'src').rglob('*.py'):
        copies[source] = site_packages / source.relative_to(REPO / 'src')
    stale = [str(source) for source, copy in copies.items()
             if not copy.exists() or not filecmp.cmp(source, copy, shallow=False)]
    if stale:
        missing(f'{venv} holds an older eb-pytorch-cuda ({stale[0]} changed)')
    return venv


@dataclass
class Deployment:
    """One deployment: the Python and eb to run, their environment, and the eb options that select ours."""

    kind: str
    version: str
    venv: Path
    easyblock: Path  # our file as deployed
    env: dict
    eb_options: list = field(default_factory=list)
    include: list = field(default_factory=list)  # what --include-easyblocks names

    @property
    def python(self):
        return str(self.venv / 'bin' / 'python')

    def eb(self, *args, timeout=600):
        command = [str(self.venv / 'bin' / 'eb'), *self.eb_options, *map(str, args)]
        return subprocess.run(command, env=self.env, capture_output=True, text=True, timeout=timeout)


def base_env(venv, prefix):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(('EASYBUILD_', 'EBROOT', 'EBVERSION', 'LMOD', '_LMOD', 'PYTHONPATH', 'EESSI_'))}
    env.update(PATH=f"{venv / 'bin'}:/usr/local/bin:/usr/bin:/bin", LMOD_CMD=LMOD_CMD,
               EASYBUILD_MODULES_TOOL='Lmod', EASYBUILD_PREFIX=str(prefix),
               EASYBUILD_ALLOW_USE_AS_ROOT_AND_ACCEPT_CONSEQUENCES='1')
    return env


def upstream_easyblocks_dir(venv):
    return next((venv / 'lib').glob('python3*/site-packages/easybuild/easyblocks'))


def deploy(kind, version, tmp_path):
    """Set up one deployment of our easyblock under tmp_path; return its Deployment."""
    if kind == 'pip':
        venv = stock_venv(version)
        env = base_env(venv, tmp_path / 'eb')
        config = tmp_path / 'pytorch-cuda.cfg'
        done = subprocess.run([str(venv / 'bin' / 'eb-pytorch-cuda'), 'config'], env=env, capture_output=True,
                              text=True, check=True)
        config.write_text(done.stdout)
        easyblock = venv / 'share' / 'eb-pytorch-cuda' / 'easyblocks' / 'pytorch.py'
        assert f'include-easyblocks = {easyblock}' in done.stdout, done.stdout
        return Deployment(kind, version, venv, easyblock, env, [f'--configfiles={config}'], [easyblock])
    venv = eb_venv(version)
    env = base_env(venv, tmp_path / 'eb')
    upstream = upstream_easyblocks_dir(venv)
    if kind == 'include':
        site_copy = tmp_path / 'site-easyblocks' / 'pythonpackage.py'
        site_copy.parent.mkdir(parents=True)
        shutil.copy(upstream / 'generic' / 'pythonpackage.py', site_copy)
        include = [OURS, site_copy]
        return Deployment(kind, version, venv, OURS, env, [f"--include-easyblocks={','.join(map(str, include))}"],
                          include)
    assert kind == 'site', kind
    tree = tmp_path / 'site-easyblocks-repo'
    shutil.copytree(upstream, tree / 'easybuild' / 'easyblocks', ignore=shutil.ignore_patterns('__pycache__'))
    shutil.copy(upstream.parent / '__init__.py', tree / 'easybuild' / '__init__.py')
    easyblock = tree / 'easybuild' / 'easyblocks' / 'p' / 'pytorch.py'
    shutil.copy(OURS, easyblock)  # in place of upstream's
    env['PYTHONPATH'] = str(tree)
    return Deployment(kind, version, venv, easyblock, env)
