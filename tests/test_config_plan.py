"""`eb-pytorch-cuda config` beside a site's configuration, from records: where our hooks, easyblock and
easyconfigs go when the site has its own hooks file, robot path and included easyblocks (a key our file sets
replaces the site's, since `eb --configfiles` adds our file after the site's).  The same cases with real eb
reading real configuration files: tests/test_config.py."""

import pytest

from eb_pytorch_cuda.eb import config
from eb_pytorch_cuda.eb.siteconfig import EasyBuildSettings
from eb_pytorch_cuda.eb.sitehooks import forwarding_text, read_hooks_file
from eb_pytorch_cuda.errors import PluginError

FILES = config.plugin_files()
UPSTREAM = ('/eb/easybuild/easyconfigs',)
FORWARDING = [
    "# eb-pytorch-cuda's hooks (PyTorch with CUDA on RPATH-only stacks), run from this file",
    'from eb_pytorch_cuda.eb.hooks import PyTorchCudaHooks',
    'pytorch_cuda = PyTorchCudaHooks()',
]


def settings(hooks=None, robot_paths=UPSTREAM, include=(), environment=None):
    return EasyBuildSettings(hooks=hooks, robot_paths=tuple(robot_paths), default_robot_paths=UPSTREAM,
                             include_easyblocks=tuple(include), configfiles=('/etc/xdg/easybuild.d/site.cfg',),
                             from_environment=environment or {})


@pytest.fixture
def site_hooks(tmp_path):
    path = tmp_path / 'site_hooks.py'
    path.write_text('def parse_hook(ec, *args, **kwargs):\n    pass\n\n\n'
                    'def pre_test_hook(self, *args, **kwargs):\n    pass\n')
    return path


def config_lines(site, version, entrypoints=False):
    return config.config_file_text(config.plan(site, version, entrypoints), entrypoints).splitlines()


def test_without_a_site_setting_the_file_is_as_before():
    lines = config_lines(settings(), '5.4.1')
    assert lines[3:] == ['[config]', f"include-easyblocks = {FILES['easyblock']}", f"hooks = {FILES['hooks']}",
                         f"robot-paths = {FILES['easyconfigs']}:%(DEFAULT_ROBOT_PATHS)s"]
    assert config.environment_text(config.plan(settings(), '4.9.4')).splitlines() == [
        f"export EASYBUILD_INCLUDE_EASYBLOCKS={FILES['easyblock']}", f"export EASYBUILD_HOOKS={FILES['hooks']}",
        f"export EASYBUILD_ROBOT_PATHS={FILES['easyconfigs']}:{UPSTREAM[0]}"]


def test_the_sites_robot_path_and_easyblocks_are_kept_ours_first_and_last():
    site = settings(robot_paths=('/site/ecs', *UPSTREAM, '/site/more%'), include=('/site/eb/foo.py',))
    lines = config_lines(site, '4.9.4')
    assert f"robot-paths = {FILES['easyconfigs']}:/site/ecs:%(DEFAULT_ROBOT_PATHS)s:/site/more%%" in lines
    assert f"include-easyblocks = /site/eb/foo.py,{FILES['easyblock']}" in lines
    env = config.environment_text(config.plan(site, '4.9.4')).splitlines()
    assert f"export EASYBUILD_ROBOT_PATHS={FILES['easyconfigs']}:/site/ecs:{UPSTREAM[0]}:/site/more%" in env
    # a robot path without EasyBuild's default keeps none; ours, already there, is not written twice
    lines = config_lines(settings(robot_paths=(FILES['easyconfigs'], '/site/ecs')), '5.4.1', entrypoints=True)
    assert lines[-1] == f"robot-paths = {FILES['easyconfigs']}:/site/ecs"


def test_eb5_keeps_the_sites_hooks_file_and_takes_ours_as_entry_points(site_hooks):
    lines = config_lines(settings(hooks=str(site_hooks)), '5.4.1')
    assert 'use-entrypoints = True' in lines and not any(line.startswith('hooks =') for line in lines)
    assert f"include-easyblocks = {FILES['easyblock']}" in lines
    assert (f"# hooks: the site's file {site_hooks} (from configuration file /etc/xdg/easybuild.d/site.cfg) is kept; "
            "ours run beside it as entry points (EasyBuild runs the file's hook of a step first)") in lines
    env = config.environment_text(config.plan(settings(hooks=str(site_hooks)), '5.4.1')).splitlines()
    assert 'export EASYBUILD_USE_ENTRYPOINTS=1' in env and not any('EASYBUILD_HOOKS' in line for line in env)


def test_eb4_refuses_to_replace_the_sites_hooks_file_and_gives_the_forwarding(site_hooks):
    with pytest.raises(config.SiteHooksKept) as raised:
        config.plan(settings(hooks=str(site_hooks), environment={'hooks': 'EASYBUILD_HOOKS'}), '4.9.4')
    assert str(raised.value) == (
        f"{site_hooks}: the site's hooks file (from $EASYBUILD_HOOKS) would be replaced by ours: EasyBuild 4.9.4 "
        'takes one hooks file and has no entry points (EasyBuild 5 has); add the lines below to it (it then runs '
        'ours) and run `eb-pytorch-cuda config` again')
    assert raised.value.forwarding.splitlines() == FORWARDING + [
        '# pre_test_hook is defined there: call pytorch_cuda.pre_test_hook(self, *args, **kwargs) in it',
        'post_test_hook = pytorch_cuda.post_test_hook',
        'pre_run_shell_cmd_hook = pytorch_cuda.pre_run_shell_cmd_hook',
        'post_install_hook = pytorch_cuda.post_install_hook',
        'pre_sanitycheck_hook = pytorch_cuda.pre_sanitycheck_hook']


def test_a_site_file_that_runs_ours_is_kept_and_entry_points_would_run_them_twice(site_hooks):
    site_hooks.write_text(site_hooks.read_text() + '\n' + forwarding_text(read_hooks_file(str(site_hooks))))
    assert read_hooks_file(str(site_hooks)).runs_ours
    for version in ('4.9.4', '5.4.1'):
        lines = config_lines(settings(hooks=str(site_hooks)), version)
        assert not any(line.startswith(('hooks =', 'use-entrypoints')) for line in lines), lines
        assert f"include-easyblocks = {FILES['easyblock']}" in lines
    with pytest.raises(PluginError, match='already runs ours .* entry points would run them twice'):
        config.plan(settings(hooks=str(site_hooks)), '5.4.1', entrypoints=True)


def test_our_own_hooks_file_as_the_sites_setting_is_no_site_file():
    lines = config_lines(settings(hooks=FILES['hooks']), '4.9.4')
    assert f"hooks = {FILES['hooks']}" in lines


def test_a_site_hooks_file_that_cannot_be_read_is_named(tmp_path):
    with pytest.raises(PluginError) as raised:
        config.plan(settings(hooks=str(tmp_path / 'gone.py')), '4.9.4')
    assert str(raised.value) == (f'{tmp_path / "gone.py"}: the hooks file EasyBuild is configured with cannot be '
                                 'read: No such file or directory')
    broken = tmp_path / 'broken.py'
    broken.write_text('def parse_hook(:\n')
    with pytest.raises(PluginError, match=f'^{broken}: the hooks file EasyBuild is configured with is not Python'):
        config.plan(settings(hooks=str(broken)), '5.4.1')


def test_a_variable_that_overrides_our_files_keys_is_said():
    site = settings(environment={'robot-paths': 'EASYBUILD_ROBOT_PATHS'})
    assert config.environment_overrides(site, config.plan(site, '4.9.4')) == [
        "$EASYBUILD_ROBOT_PATHS is set and overrides this file's robot-paths (eb reads the environment after "
        'configuration files): use `eb-pytorch-cuda config --env`, or unset it']
    assert config.environment_overrides(settings(), config.plan(settings(), '4.9.4')) == []


def test_the_file_is_read_not_run(tmp_path):
    path = tmp_path / 'hooks.py'
    path.write_text("raise SystemExit('ran')\npost_install_hook = None\n")
    assert read_hooks_file(str(path)).defined == frozenset({'post_install_hook'})  # no SystemExit: not run
