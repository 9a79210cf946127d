"""`eb-pytorch-cuda config` makes a real `eb` (4.9.4 and 5.4.1) use our easyblock, hooks and easyconfigs."""

import os
import re
import subprocess

import pytest

from helpers import cli
from eb_runner import EB_VERSIONS, LMOD_CMD, REPO, eb_venv


def _show_config(version, tmp_path, extra_args=(), extra_env=None):
    venv = eb_venv(version)
    env = {k: v for k, v in os.environ.items() if not k.startswith('EASYBUILD_')}
    env.update({'PATH': f"{venv / 'bin'}:/usr/bin:/bin", 'EASYBUILD_PREFIX': str(tmp_path)}, **(extra_env or {}))
    done = subprocess.run([str(venv / 'bin' / 'eb'), '--show-config', *extra_args], env=env, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    return {line.split('(')[0].strip(): line.split('=', 1)[1].strip()
            for line in done.stdout.splitlines() if '=' in line}


def _paths(value):
    """--show-config's list of paths, each resolved (.venvs may be a link: eb and eb-pytorch-cuda may name the
    same directory through it or not)."""
    return [os.path.realpath(path) for path in value.split(', ')]


def _expected(config, version):
    upstream = str(eb_venv(version) / 'easybuild' / 'easyconfigs')
    assert config['include-easyblocks'] == str(REPO / 'easybuild' / 'easyblocks' / 'p' / 'pytorch.py')
    assert config['hooks'] == str(REPO / 'hooks' / 'eb_hooks.py')
    assert _paths(config['robot-paths']) == _paths(f"{REPO / 'easyconfigs'}, {upstream}")


@pytest.mark.parametrize('version', EB_VERSIONS)
def test_config_file_is_used_by_eb(tmp_path, version):
    path = tmp_path / 'pytorch-cuda.cfg'
    path.write_text(cli('config', check_rc=0).stdout)
    _expected(_show_config(version, tmp_path, [f'--configfiles={path}']), version)


@pytest.mark.parametrize('version', EB_VERSIONS)
def test_environment_exports_are_used_by_eb(tmp_path, version):
    # the exports are parsed here, not sourced through a shell
    venv_cli = eb_venv(version) / 'bin' / 'eb-pytorch-cuda'
    text = subprocess.run([str(venv_cli), 'config', '--env'], capture_output=True, text=True, check=True).stdout
    exports = dict(line[len('export '):].split('=', 1) for line in text.splitlines())
    assert set(exports) == {'EASYBUILD_INCLUDE_EASYBLOCKS', 'EASYBUILD_HOOKS', 'EASYBUILD_ROBOT_PATHS'}
    _expected(_show_config(version, tmp_path, extra_env=exports), version)


def test_the_easyconfig_is_found_through_the_robot_path(tmp_path):
    path = tmp_path / 'pytorch-cuda.cfg'
    path.write_text(cli('config', check_rc=0).stdout)
    venv = eb_venv('5.4.1')
    env = {k: v for k, v in os.environ.items() if not k.startswith('EASYBUILD_')}
    env.update(PATH=f"{venv / 'bin'}:/usr/bin:/bin", EASYBUILD_PREFIX=str(tmp_path),
               EASYBUILD_ALLOW_USE_AS_ROOT_AND_ACCEPT_CONSEQUENCES='1', LMOD_CMD=LMOD_CMD)
    done = subprocess.run([str(venv / 'bin' / 'eb'), f'--configfiles={path}', '--search',
                           'PyTorch-2.1.2-foss-2023a-CUDA-12.1.1.eb'], env=env, capture_output=True, text=True)
    found = [line for line in done.stdout.splitlines() if 'PyTorch-2.1.2-foss-2023a-CUDA-12.1.1.eb' in line]
    assert found and str(REPO / 'easyconfigs') in found[0], done.stdout


# ---- a site's own configuration (hooks file, robot path) in $XDG_CONFIG_DIRS/easybuild.d: kept beside ours ----
# `eb --configfiles=OURS` reads OURS after the site's files (the option adds to EasyBuild's default files), so
# every key our file set replaced the site's: its hooks file and its robot path were gone.

EC = 'PyTorch-2.1.2-foss-2023a-CUDA-12.1.1.eb'
SITE_EC = 'SiteOnly-1.0.eb'
FORWARDING = [
    "# eb-pytorch-cuda's hooks (PyTorch with CUDA on RPATH-only stacks), run from this file",
    'from eb_pytorch_cuda.eb.hooks import PyTorchCudaHooks',
    'pytorch_cuda = PyTorchCudaHooks()',
    'pre_test_hook = pytorch_cuda.pre_test_hook',
    'post_test_hook = pytorch_cuda.post_test_hook',
    'pre_run_shell_cmd_hook = pytorch_cuda.pre_run_shell_cmd_hook',
    'post_install_hook = pytorch_cuda.post_install_hook',
    'pre_sanitycheck_hook = pytorch_cuda.pre_sanitycheck_hook',
]


class Site:
    """A site's EasyBuild configuration file in $XDG_CONFIG_DIRS/easybuild.d setting hooks and robot-paths, its
    hooks file (a parse_hook that says it ran) and its easyconfigs directory (one easyconfig only it has)."""

    def __init__(self, root):
        self.root = root
        self.hooks = root / 'site' / 'site_hooks.py'
        self.easyconfigs = root / 'site' / 'easyconfigs'
        (self.easyconfigs / 's' / 'SiteOnly').mkdir(parents=True)
        (self.easyconfigs / 's' / 'SiteOnly' / SITE_EC).write_text(
            "easyblock = 'Tarball'\nname = 'SiteOnly'\nversion = '1.0'\nhomepage = 'https://example.org'\n"
            "description = 'only the site has it'\ntoolchain = SYSTEM\n")
        self.hooks.write_text("def parse_hook(ec, *args, **kwargs):\n    print('[site hooks] parse_hook', ec.name)\n")
        self.cfg = root / 'xdg' / 'easybuild.d' / 'site.cfg'
        self.cfg.parent.mkdir(parents=True)
        self.cfg.write_text(f'[config]\nhooks = {self.hooks}\n'
                            f'robot-paths = {self.easyconfigs}:%(DEFAULT_ROBOT_PATHS)s\n')

    def env(self, version, extra=None):
        venv = eb_venv(version)
        env = {k: v for k, v in os.environ.items() if not k.startswith(('EASYBUILD_', 'XDG_', 'LMOD', '_LMOD'))}
        env.update(PATH=f"{venv / 'bin'}:/usr/bin:/bin", XDG_CONFIG_DIRS=str(self.cfg.parent.parent),
                   XDG_CONFIG_HOME=str(self.root / 'home'), EASYBUILD_PREFIX=str(self.root / 'eb'), LMOD_CMD=LMOD_CMD,
                   EASYBUILD_MODULES_TOOL='Lmod', EASYBUILD_MODULE_SYNTAX='Lua',
                   EASYBUILD_ALLOW_USE_AS_ROOT_AND_ACCEPT_CONSEQUENCES='1', **(extra or {}))
        return env

    def config(self, version, *args, extra_env=None):
        """`eb-pytorch-cuda config ARGS` of that EasyBuild's venv, in the site's environment."""
        return subprocess.run([str(eb_venv(version) / 'bin' / 'eb-pytorch-cuda'), 'config', *args],
                              env=self.env(version, extra_env), capture_output=True, text=True)

    def eb(self, version, *args, extra_env=None):
        return subprocess.run([str(eb_venv(version) / 'bin' / 'eb'), *map(str, args)], env=self.env(version, extra_env),
                              capture_output=True, text=True, timeout=600)

    def show_config(self, version, *args, extra_env=None):
        done = self.eb(version, *args, '--show-config', extra_env=extra_env)
        assert done.returncode == 0, done.stderr
        return {line.split('(')[0].strip(): line.split('=', 1)[1].strip()
                for line in done.stdout.splitlines() if re.match(r'^[a-z-]+ +\([CDEF]\) = ', line)}

    def dry_run(self, version, cfg):
        done = self.eb(version, f'--configfiles={cfg}', '-x', EC, '--cuda-compute-capabilities=8.0,9.0',
                       '--logtostdout')
        assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
        return done.stdout


@pytest.fixture
def site(tmp_path):
    return Site(tmp_path)


def _robot(site, version):
    """Ours first, then the site's robot path (its directory, then EasyBuild's default)."""
    return _paths(f"{REPO / 'easyconfigs'}, {site.easyconfigs}, {eb_venv(version) / 'easybuild' / 'easyconfigs'}")


def _written(site, name, done):
    assert done.returncode == 0, done.stderr
    path = site.root / name
    path.write_text(done.stdout)
    return path


def test_eb5_keeps_the_sites_hooks_file_and_robot_path_beside_ours(site):
    assert site.show_config('5.4.1')['hooks'] == str(site.hooks)  # the site's configuration as eb reads it
    ours = REPO / 'easybuild' / 'easyblocks' / 'p' / 'pytorch.py'
    cfg = _written(site, 'f.cfg', site.config('5.4.1'))
    config = site.show_config('5.4.1', f'--configfiles={cfg}')
    assert config['configfiles'] == f'{site.cfg}, {cfg}'  # added to the site's file, read after it
    assert config['hooks'] == str(site.hooks) and config['use-entrypoints'] == 'True'
    assert config['include-easyblocks'] == str(ours)
    assert _paths(config['robot-paths']) == _robot(site, '5.4.1')
    entry = _written(site, 'entrypoints.cfg', site.config('5.4.1', '--entrypoints'))
    config = site.show_config('5.4.1', f'--configfiles={entry}')
    assert config['hooks'] == str(site.hooks) and config['use-entrypoints'] == 'True'
    assert _paths(config['robot-paths']) == _robot(site, '5.4.1')
    done = site.config('5.4.1', '--env')
    assert done.returncode == 0, done.stderr
    exports = dict(line[len('export '):].split('=', 1) for line in done.stdout.splitlines())
    assert set(exports) == {'EASYBUILD_INCLUDE_EASYBLOCKS', 'EASYBUILD_USE_ENTRYPOINTS', 'EASYBUILD_ROBOT_PATHS'}
    config = site.show_config('5.4.1', extra_env=exports)
    assert config['hooks'] == str(site.hooks) and _paths(config['robot-paths']) == _robot(site, '5.4.1')
    for easyconfig, where in ((SITE_EC, site.easyconfigs), (EC, REPO / 'easyconfigs')):
        done = site.eb('5.4.1', f'--configfiles={cfg}', '--search', easyconfig)
        found = [line for line in done.stdout.splitlines() if easyconfig in line]
        assert found and str(where) in found[0], done.stdout + done.stderr


def test_eb5_dry_run_runs_the_sites_hooks_and_ours(site):
    out = site.dry_run('5.4.1', _written(site, 'f.cfg', site.config('5.4.1')))
    assert '[site hooks] parse_hook PyTorch' in out
    assert ("*** DRY RUN using 'EB_PyTorch' easyblock (eb_pytorch_cuda.eb.easyblock_pytorch @ "
            f"{REPO / 'easybuild' / 'easyblocks' / 'p' / 'pytorch.py'}) ***") in out
    assert '[pytorch-cuda hooks] would add NEEDED libcudnn_cnn_train.so.8 (cuDNN 8.9.2.26-CUDA-12.1.1)' in out
    entries = set(re.findall(r"Running entry point '(\w+)' hook function", out))
    assert {'pytorch_cuda_pre_test_hook', 'pytorch_cuda_post_install_hook',
            'pytorch_cuda_pre_sanitycheck_hook'} <= entries


def test_eb4_refuses_to_replace_the_sites_hooks_file_and_says_how_it_runs_ours(site):
    for args in ((), ('--env',)):
        done = site.config('4.9.4', *args)
        assert done.returncode == 2 and done.stdout == '', done
        assert done.stderr.splitlines() == [
            f"eb-pytorch-cuda: error: {site.hooks}: the site's hooks file (from configuration file {site.cfg}) would "
            'be replaced by ours: EasyBuild 4.9.4 takes one hooks file and has no entry points (EasyBuild 5 has); add '
            'the lines below to it (it then runs ours) and run `eb-pytorch-cuda config` again', *FORWARDING]
    # the site adds the lines; its file is kept and runs ours, our file names our easyblock and easyconfigs
    site.hooks.write_text(site.hooks.read_text() + '\n'.join(FORWARDING) + '\n')
    done = site.config('4.9.4')
    assert f"# hooks: the site's file {site.hooks} (from configuration file {site.cfg}) runs ours" in done.stdout
    cfg = _written(site, 'f.cfg', done)
    config = site.show_config('4.9.4', f'--configfiles={cfg}')
    assert config['hooks'] == str(site.hooks)
    assert config['include-easyblocks'] == str(REPO / 'easybuild' / 'easyblocks' / 'p' / 'pytorch.py')
    assert _paths(config['robot-paths']) == _robot(site, '4.9.4')
    out = site.dry_run('4.9.4', cfg)
    assert '[site hooks] parse_hook PyTorch' in out
    assert re.search(r"\*\*\* DRY RUN using 'EB_PyTorch' easyblock \(easybuild\.easyblocks\.pytorch @ "
                     r"\S+/included-easyblocks-\w+/easybuild/easyblocks/pytorch\.py\) \*\*\*", out)
    assert '[pytorch-cuda hooks] would add NEEDED libcudnn_cnn_train.so.8 (cuDNN 8.9.2.26-CUDA-12.1.1)' in out


@pytest.mark.parametrize('version', EB_VERSIONS)
def test_a_robot_path_variable_is_kept_and_its_override_said(site, version):
    site.cfg.write_text('[config]\n')
    done = site.config(version, extra_env={'EASYBUILD_ROBOT_PATHS': str(site.easyconfigs)})
    assert done.returncode == 0 and done.stderr.splitlines() == [
        "eb-pytorch-cuda: warning: $EASYBUILD_ROBOT_PATHS is set and overrides this file's robot-paths (eb reads "
        'the environment after configuration files): use `eb-pytorch-cuda config --env`, or unset it']
    assert f"robot-paths = {REPO / 'easyconfigs'}:{site.easyconfigs}\n" in done.stdout
    done = site.config(version, '--env', extra_env={'EASYBUILD_ROBOT_PATHS': str(site.easyconfigs)})
    assert f"export EASYBUILD_ROBOT_PATHS={REPO / 'easyconfigs'}:{site.easyconfigs}\n" in done.stdout


@pytest.mark.parametrize('version', EB_VERSIONS)
def test_a_configuration_eb_refuses_is_named_in_one_line(site, version):
    site.cfg.write_text('[config]\nno-such-option = 1\n')
    done = site.config(version)
    assert done.returncode == 2 and done.stdout == ''
    assert done.stderr.splitlines() == [
        f'eb-pytorch-cuda: error: {site.cfg}: EasyBuild cannot read this configuration: parseconfigfiles: no option '
        'corresponding with opt no-such-option dest no_such_option in section config']
