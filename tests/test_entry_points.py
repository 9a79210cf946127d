"""Our hooks and easyblock as EasyBuild 5 entry points, beside a site's own hooks file (EESSI's, unchanged).

Real eb 5.4.1 in the stock venv of tools/setup.sh (`python3 -m venv`, `pip install easybuild==5.4.1 .`: a
plain, non-editable install, whose metadata importlib.metadata reads: the editable install of the
development venvs carries the entry points only once it was made from this setup.cfg).  EESSI's
eb_hooks.py is the real file (tests/data/eessi, commit a45043f of EESSI/software-layer-scripts), run in
the environment EESSI's build scripts set; EasyBuild 4.9.4, which has no entry points, says so.
"""

import os
import re
import subprocess
from pathlib import Path


from helpers import cli
from deployments import stock_venv
from eb_runner import LMOD_CMD, REPO, eb_venv

EC = 'PyTorch-2.1.2-foss-2023a-CUDA-12.1.1.eb'
EESSI_HOOKS = REPO / 'tests' / 'data' / 'eessi' / 'eb_hooks.py'
EESSI_PREFIX = '/cvmfs/software.eessi.io/versions/2023.06'


def eessi_environment(target='x86_64/intel/icelake'):
    """What EESSI's build scripts export before eb runs with its hooks (software-layer-scripts a45043f):
    init/minimal_eessi_env (EESSI_VERSION, EESSI_PREFIX, EESSI_OS_TYPE, EESSI_CPU_FAMILY, EPREFIX) and
    init/eessi_environment_variables (EESSI_SOFTWARE_SUBDIR, EESSI_SOFTWARE_PATH).  Neither
    EESSI_CVMFS_INSTALL nor EESSI_SITE_INSTALL: a user's own installation on top of EESSI, so that
    its install-path checks (pre_fetch_hook) allow a prefix outside /cvmfs."""
    return {'EESSI_VERSION': '2023.06', 'EESSI_PREFIX': EESSI_PREFIX, 'EESSI_OS_TYPE': 'linux',
            'EESSI_CPU_FAMILY': 'x86_64', 'EPREFIX': f'{EESSI_PREFIX}/compat/linux/x86_64',
            'EESSI_SOFTWARE_SUBDIR': target, 'EESSI_SOFTWARE_PATH': f'{EESSI_PREFIX}/software/linux/{target}'}


def environment(venv, tmp_path, extra=None):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(('EASYBUILD_', 'EBROOT', 'EBVERSION', 'EESSI_', 'PYTHONPATH', 'EPREFIX'))}
    env.update(PATH=f"{venv / 'bin'}:/usr/bin:/bin", LMOD_CMD=LMOD_CMD, EASYBUILD_PREFIX=str(tmp_path / 'eb'),
               EASYBUILD_MODULES_TOOL='Lmod', EASYBUILD_MODULE_SYNTAX='Lua',
               EASYBUILD_ALLOW_USE_AS_ROOT_AND_ACCEPT_CONSEQUENCES='1', **(extra or {}))
    return env


def entrypoints_config(venv, tmp_path):
    done = subprocess.run([str(venv / 'bin' / 'eb-pytorch-cuda'), 'config', '--entrypoints'],
                          env=environment(venv, tmp_path), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    path = tmp_path / 'pytorch-cuda-entrypoints.cfg'
    path.write_text(done.stdout)
    return path, done.stdout


def test_pip_install_registers_our_hooks_and_easyblock_with_eb(tmp_path):
    venv = stock_venv('5.4.1')
    done = subprocess.run([str(venv / 'bin' / 'eb'), '--use-entrypoints', '--show-config'],
                          env=environment(venv, tmp_path), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert ("Hooks from entrypoints (1):\n- EntryPoint(name='eb-pytorch-cuda', value='eb_pytorch_cuda.eb.entry_hooks', "
            "group='easybuild.hooks')") in done.stdout
    assert ("Easyblocks from entrypoints (1):\n- EntryPoint(name='eb-pytorch-cuda', "
            "value='eb_pytorch_cuda.eb.entry_easyblock:EB_PyTorch', group='easybuild.easyblock')") in done.stdout


def test_config_entrypoints_names_no_file_of_ours_and_eb_takes_it(tmp_path):
    venv = stock_venv('5.4.1')
    path, text = entrypoints_config(venv, tmp_path)
    assert 'use-entrypoints = True' in text and 'hooks =' not in text and 'include-easyblocks' not in text
    done = subprocess.run([str(venv / 'bin' / 'eb'), f'--configfiles={path}', '--show-config'],
                          env=environment(venv, tmp_path), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert re.search(r'^use-entrypoints +\(F\) = True$', done.stdout, re.M), done.stdout
    assert not re.search(r'^(hooks|include-easyblocks) ', done.stdout, re.M)


def dry_run(venv, tmp_path, config, extra_env=None, *extra):
    command = [str(venv / 'bin' / 'eb'), f'--configfiles={config}', '-x', EC, '--cuda-compute-capabilities=8.0,9.0',
               '--logtostdout', *extra]
    done = subprocess.run(command, env=environment(venv, tmp_path, extra_env), capture_output=True, text=True,
                          timeout=600)
    return done.returncode, done.stdout + done.stderr


def assert_our_plan(out, venv):
    easyblock = venv / 'share' / 'eb-pytorch-cuda' / 'easyblocks' / 'pytorch.py'
    assert f"*** DRY RUN using 'EB_PyTorch' easyblock (eb_pytorch_cuda.eb.easyblock_pytorch @ {easyblock}) ***" in out
    assert ('[pytorch-cuda hooks] would add NEEDED libcudnn_cnn_train.so.8 (cuDNN 8.9.2.26-CUDA-12.1.1) '
            'to every libtorch_cuda.so') in out
    assert ('[pytorch-cuda hooks] sanity check: every installed libtorch_cuda.so must have NEEDED '
            'libcudnn_cnn_train.so.8') in out


def ran_hooks(out):
    """Names of the hook functions eb's log says it ran: (file hooks, entry-point hooks)."""
    return (set(re.findall(r"Running '(\w+)' hook function", out)),
            set(re.findall(r"Running entry point '(\w+)' hook function", out)))


def test_dry_run_through_entry_points_alone_shows_our_easyblock_and_patch_plan(tmp_path):
    venv = stock_venv('5.4.1')
    config, _ = entrypoints_config(venv, tmp_path)
    code, out = dry_run(venv, tmp_path, config, {'EESSI_SOFTWARE_SUBDIR': 'x86_64/intel/haswell'})
    assert code == 0, out[-3000:]
    assert 'ignoring error' not in out
    assert_our_plan(out, venv)
    assert 'budget for unknown failures: 0; reruns: 1' in out  # the easyconfig's own
    files, entries = ran_hooks(out)
    assert not files
    assert {'pytorch_cuda_pre_test_hook', 'pytorch_cuda_post_test_hook', 'pytorch_cuda_pre_run_shell_cmd_hook',
            'pytorch_cuda_post_install_hook', 'pytorch_cuda_pre_sanitycheck_hook'} == entries


def test_eessi_hooks_file_and_our_entry_points_both_act_in_the_dry_run(tmp_path):
    venv = stock_venv('5.4.1')
    config, _ = entrypoints_config(venv, tmp_path)
    code, out = dry_run(venv, tmp_path, config, eessi_environment(), f'--hooks={EESSI_HOOKS}')
    assert code == 0, out[-3000:]
    assert 'ignoring error' not in out
    # EESSI's hooks: its parse_hook adds the GPU properties to the module, its pre_test_hook sets
    # max_failed_tests = 4 for PyTorch 2.1.2 on icelake (the easyconfig says 0), which our policy uses
    assert 'setenv("EESSICUDAVERSION","12.1.1")' in out and 'setenv("EESSICUDNNVERSION","8.9.2.26")' in out
    assert 'budget for unknown failures: 4; reruns: 1' in out
    assert_our_plan(out, venv)
    files, entries = ran_hooks(out)
    assert {'parse_hook', 'pre_build_and_install_loop_hook', 'pre_fetch_hook', 'pre_test_hook'} <= files
    # EESSI defines pre_test_hook: EasyBuild 5.4.1 then looks entry points up under step 'pre-test', which only
    # our alias matches (eb_pytorch_cuda/eb/entry_hooks.py); without it our pre_test_hook would not run
    assert 'pytorch_cuda_pre_test_hook_beside_file_hook' in entries
    assert 'pytorch_cuda_pre_test_hook' not in entries
    assert {'pytorch_cuda_post_install_hook', 'pytorch_cuda_pre_sanitycheck_hook'} <= entries


def test_demo_with_eessi_hooks_file_and_our_entry_points_patches_tests_and_checks(tmp_path):
    venv = stock_venv('5.4.1')
    env = environment(venv, tmp_path, eessi_environment())
    done = subprocess.run([str(venv / 'bin' / 'eb-pytorch-cuda'), 'demo', '--entrypoints', '--site-hooks',
                           str(EESSI_HOOKS), '--workdir', str(tmp_path / 'demo')], env=env, capture_output=True,
                          text=True, timeout=600)
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert f'our hooks and easyblock: entry points (--use-entrypoints); site hooks file: {EESSI_HOOKS}' in out
    install = tmp_path / 'demo' / 'easybuild' / 'software' / 'PyTorch' / '2.1.2-standin-easyblock'
    library = next(install.rglob('libtorch_cuda.so'))
    assert f'== patched {library}: added NEEDED libcudnn_cnn_train.so.8' in out
    assert re.search(r'== patched \S+/tmp\w+/lib/python3\.\d+/site-packages/torch/lib/libtorch_cuda\.so: added '
                     r'NEEDED libcudnn_cnn_train\.so\.8', out), out  # the test installation, before the tests
    assert '== known: 1, unknown: 0 (budget 4), flaky: 1' in out  # EESSI's max_failed_tests for icelake
    assert '== verdict: PASS' in out
    assert f'== sanity check: {library} has NEEDED libcudnn_cnn_train.so.8 ->' in out and 'mapped by a real load' in out
    log = Path(tmp_path / 'demo' / 'eb-output.log').read_text()
    assert '== EESSI hook to respect cuDDN license not triggered for installation path' in log  # EESSI's, verbatim


def test_demo_with_entry_points_alone(tmp_path):
    venv = stock_venv('5.4.1')
    done = subprocess.run([str(venv / 'bin' / 'eb-pytorch-cuda'), 'demo', '--entrypoints', '--workdir',
                           str(tmp_path / 'demo')], env=environment(venv, tmp_path), capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert '== known: 1, unknown: 0 (budget 0), flaky: 1' in done.stdout and '== verdict: PASS' in done.stdout
    assert 'mapped by a real load' in done.stdout


def test_eb_4_has_no_entry_points_and_says_so_in_one_line():
    script = str(eb_venv('4.9.4') / 'bin' / 'eb-pytorch-cuda')
    done = subprocess.run([script, 'config', '--entrypoints'], capture_output=True, text=True)
    assert done.returncode == 2 and done.stdout == ''
    assert done.stderr.splitlines() == [
        'eb-pytorch-cuda: error: EasyBuild 4.9.4 has no entry points (--use-entrypoints is EasyBuild 5): use '
        '`eb-pytorch-cuda config` (--hooks and --include-easyblocks)']
    text = subprocess.run([script, 'config'], capture_output=True, text=True, check=True).stdout
    assert '# EasyBuild 4.9.4 has no entry points (EasyBuild 5 has): hooks and easyblock are given as files' in text


def test_site_hooks_without_entry_points_is_refused(tmp_path):
    done = cli('demo', '--site-hooks', str(EESSI_HOOKS), '--workdir', str(tmp_path / 'demo'))
    assert done.returncode == 2 and not (tmp_path / 'demo').exists()
    assert done.stderr.splitlines() == [f'eb-pytorch-cuda: error: {EESSI_HOOKS}: --site-hooks needs --entrypoints '
                                        '(eb --hooks takes one file: ours come from the entry points then)']


def test_an_install_without_our_entry_points_is_named(tmp_path):
    # an install made before setup.cfg had the entry points: its dist-info, first on the path, has none; then
    # `config --entrypoints` names it instead of printing a config eb would ignore
    venv = eb_venv('5.4.1')
    old = tmp_path / 'old' / 'eb_pytorch_cuda-0.0.dist-info'
    old.mkdir(parents=True)
    (old / 'METADATA').write_text('Metadata-Version: 2.1\nName: eb-pytorch-cuda\nVersion: 0.0\n')
    done = subprocess.run([str(venv / 'bin' / 'eb-pytorch-cuda'), 'config', '--entrypoints'], capture_output=True,
                          text=True, env={'PATH': '/usr/bin:/bin',
                                          'PYTHONPATH': f"{tmp_path / 'old'}:{REPO / 'src'}"})
    assert done.returncode == 2 and done.stdout == ''
    assert re.fullmatch(r'eb-pytorch-cuda: error: \S+: registers no easybuild\.hooks, easybuild\.easyblock entry '
                        r'point \(installed from an older version\): reinstall it with `pip install \.`\n', done.stderr)


def test_demo_with_eessi_hooks_outside_eessi_sets_and_names_its_defaults(tmp_path):
    # a shell without EESSI's environment (as README's command is tried): EESSI's hooks file stopped eb with
    # `$EPREFIX is not defined!`; the demo now sets what the file reads, names each value and which are its own.
    # Through this checkout's code (the console script of the test's Python, with its PYTHONPATH)
    from eb_pytorch_cuda.eb.demo import EESSI_VARIABLES, eessi_environment
    env = {k: v for k, v in os.environ.items() if not k.startswith(('EASYBUILD_', 'EBROOT', 'EBVERSION', 'EESSI_'))
           and k != 'EPREFIX'}
    env.update(LMOD_CMD=LMOD_CMD, EASYBUILD_ALLOW_USE_AS_ROOT_AND_ACCEPT_CONSEQUENCES='1')
    done = cli('demo', '--entrypoints', '--site-hooks', EESSI_HOOKS, '--workdir', tmp_path / 'demo', env=env,
               timeout=600)
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    values, defaulted = eessi_environment(env)
    assert defaulted == list(EESSI_VARIABLES) and values['EPREFIX'].endswith('/compat/linux/' + os.uname().machine)
    assert ("  EESSI's environment, which its hooks file reads: "
            + ', '.join(f'{name}={value}' for name, value in values.items())) in out
    assert (f"  (the demo's defaults for {', '.join(EESSI_VARIABLES)}: not set here; export them to choose "
            'others)') in out
    assert '== verdict: PASS' in out and 'mapped by a real load' in out
    assert 'is not defined' not in Path(tmp_path / 'demo' / 'eb-output.log').read_text()
    # what the environment sets is kept, and what follows from it is derived from it
    kept, defaulted = eessi_environment({'EESSI_VERSION': '2025.06', 'EESSI_SOFTWARE_SUBDIR': 'x86_64/amd/zen4'},
                                        'x86_64')
    assert 'EESSI_VERSION' not in defaulted and 'EESSI_SOFTWARE_SUBDIR' not in defaulted
    assert kept['EPREFIX'] == '/cvmfs/software.eessi.io/versions/2025.06/compat/linux/x86_64'
    assert kept['EESSI_SOFTWARE_PATH'] == '/cvmfs/software.eessi.io/versions/2025.06/software/linux/x86_64/amd/zen4'
