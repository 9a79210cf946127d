"""Fixtures that build real ELF files with gcc: the cuDNN stand-in and a libtorch_cuda.so linked to it."""

import os
import platform
import shutil
import subprocess
import sys
from types import SimpleNamespace

import pytest

from eb_pytorch_cuda import standins
from environment import DEFAULT_HARNESS21_TREE, HARNESS21_TREE

pytest_plugins = ['slurm_cluster']  # the session-wide `slurm` fixture


@pytest.fixture(scope='session')
def loadcheck(tmp_path_factory):
    return standins.build_loadcheck(str(tmp_path_factory.mktemp('harness') / 'loadcheck'))


def _standin(root, major, loadcheck):
    cudnn_lib = standins.build_cudnn(root / 'cudnn', major=major)
    torch_lib = standins.build_torch_lib(root / 'torch' / 'lib', root / 'cudnn')
    leaves = {8: ['libcudnn_cnn_train.so.8'],
              9: ['libcudnn_engines_precompiled.so.9', 'libcudnn_engines_runtime_compiled.so.9']}[major]
    return SimpleNamespace(root=root, major=major, cudnn_prefix=str(root / 'cudnn'), cudnn_lib=cudnn_lib,
                           torch_lib=torch_lib, leaves=leaves, loadcheck=loadcheck)


@pytest.fixture
def standin8(tmp_path, loadcheck):
    """A cuDNN 8 stand-in (no RUNPATH) and a libtorch_cuda.so with DT_RPATH to it."""
    return _standin(tmp_path, 8, loadcheck)


@pytest.fixture(params=[8, 9], ids=['cudnn8', 'cudnn9'])
def standin(request, tmp_path, loadcheck):
    """The same layout for cuDNN 8 and cuDNN 9."""
    return _standin(tmp_path, request.param, loadcheck)


@pytest.fixture
def tmpfs(tmp_path):
    """mount(size, inodes=None): a tmpfs of that size (and inode count) under tmp_path, unmounted at teardown;
    the test is skipped, with the reason, where mounting is refused (not root, no mount(8), a container)."""
    points = []

    def mount(size, inodes=None):
        if os.geteuid() != 0 or not shutil.which('mount'):
            pytest.skip('mounting a tmpfs needs root and mount(8)')
        point = tmp_path / f'tmpfs{len(points)}-{size}'
        point.mkdir()
        options = f'size={size},mode=755' + (f',nr_inodes={inodes}' if inodes is not None else '')
        done = subprocess.run(['mount', '-t', 'tmpfs', '-o', options, 'tmpfs', str(point)], capture_output=True,
                              text=True)
        if done.returncode != 0:
            pytest.skip(f'cannot mount a tmpfs here: {done.stderr.strip() or done.returncode}')
        points.append(point)
        return point
    yield mount
    for point in points:
        subprocess.run(['umount', str(point)], check=True)


@pytest.fixture(scope='session')
def eb_sources(tmp_path_factory):
    """Source tarballs of the stand-ins, made once per test session."""
    from eb_runner import make_sources
    return make_sources(tmp_path_factory.mktemp('sources'))


@pytest.fixture(scope='session', params=('4.9.4', '5.4.1'), ids=('eb4.9.4', 'eb5.4.1'))
def eb_stack(request, tmp_path_factory, eb_sources):
    """(EasyBuild version, prefix) where real eb installed the cuDNN and OpenBLAS stand-ins."""
    from eb_runner import EbRunner
    prefix = tmp_path_factory.mktemp(f'stack-{request.param}')
    done = EbRunner(request.param, prefix, eb_sources).run('cuDNN-8.9.2.26-standin.eb', 'OpenBLAS-0.3.23-standin.eb',
                                                           hooks=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return request.param, prefix


@pytest.fixture
def eb(eb_stack, tmp_path, eb_sources):
    """A real eb with a fresh install prefix for PyTorch, seeing the cuDNN module of the stack."""
    from eb_runner import EbRunner
    version, stack = eb_stack
    return EbRunner(version, tmp_path / 'eb', eb_sources, modulepath=[stack / 'modules' / 'all'])


@pytest.fixture(scope='session')
def harness26():
    """PyTorch's real 2.6.0 harness is there (environment.REAL_TREE, REAL_PYTHON): else skipped, or failed under
    CI, before any fixture after it (the real Slurm) starts."""
    from environment import need_real_harness
    need_real_harness()


# ---- tiers (README "Tests"): one marker per test, from what it needs; `-m unit` is the fast loop ----------
# real_harness: PyTorch's own run_test.py (2.1 line, 2.6); real_eb: real EasyBuild runs (4.9.4, 5.4.1);
# slurm: the real single-node Slurm; real_tools: gcc-built ELF files, patchelf, the glibc loader, the real
# cuDNN/torch wheels, real processes (the console script too); unit: none of these, no process started
# (tests/test_unit_tier_pure.py, the audit hook below): seconds serially on a 2-core VM (`-n 2` is slower: the
# workers' start costs more than it saves).
TIER_OF_MODULE = {
    'test_real_harness': 'real_harness', 'test_real_harness_21': 'real_harness', 'test_eb_real_torch21': 'real_harness',
    'test_real_harness_plain26': 'real_harness', 'test_harness_retries': 'real_harness',
    'test_demo': 'real_eb', 'test_dry_run': 'real_eb', 'test_easyblock_deployments': 'real_eb',
    'test_eb_easyblock_tests': 'real_eb', 'test_eb_hooks': 'real_eb', 'test_test_install': 'real_eb',
    'test_upstream_easyblock_suite': 'real_eb', 'test_config': 'real_eb',
    'test_slurm_spread': 'slurm', 'test_slurm_jobs': 'slurm', 'test_slurm_devices': 'slurm',
    'test_slurm_pieces': 'real_harness',
    'test_here_pieces': 'real_harness', 'test_suite_threads': 'real_harness', 'test_kill_matrix': 'real_harness',
    'test_bench_seed': 'real_harness',
    'test_pieces': 'real_tools',
    'test_add_needed': 'real_tools', 'test_bad_inputs': 'real_tools', 'test_check_needed': 'real_tools',
    'test_doctor': 'real_tools', 'test_doctor_cudnn8_real': 'real_tools', 'test_doctor_cudnn9_real': 'real_tools',
    'test_doctor_differential': 'real_tools', 'test_doctor_execstack': 'real_tools', 'test_doctor_model': 'real_tools',
    'test_doctor_field_orders': 'real_tools', 'test_lddebug': 'real_tools', 'test_loader_failure': 'real_tools',
    'test_packaging': 'real_tools', 'test_patch_faults': 'real_tools', 'test_patch_plan': 'real_tools',
    'test_resolve': 'real_tools', 'test_run_here': 'real_tools', 'test_result_store_faults': 'real_tools',
    'test_process': 'real_tools', 'test_no_orphans': 'real_tools', 'test_suggest_policy': 'real_tools',
    'test_names_as_eb': 'real_eb',
    'test_leftovers': 'real_tools', 'test_bad_times': 'real_tools', 'test_results_terms': 'real_tools',
    'test_log_cuts_cli': 'real_tools', 'test_executors': 'real_tools',
    'test_gpu_mixed_record': 'real_tools', 'test_elf_string_tables': 'real_tools',
    'test_elf_dynamic_tables': 'real_tools', 'test_full_results_disk': 'real_tools',
    'test_setup_script': 'real_tools', 'test_entry_points': 'real_eb', 'test_docs_commands': 'real_eb',
    # the parts of unit modules that start the console script or a real process
    'test_field_policy': 'real_tools', 'test_report_escaping': 'real_tools', 'test_test_parameters': 'real_tools',
    'test_report_policy': 'real_tools', 'test_nvidia_smi': 'real_tools', 'test_gpu_triage': 'real_tools',
    'test_heartbeat': 'real_tools', 'test_heartbeat_real': 'real_harness', 'test_gpu_share': 'real_harness',
}
UNIT_MODULES = {'test_store_records', 'test_device_tests', 'test_easyblock_imports', 'test_module_map',
                'test_cudnn_catalog', 'test_gpu_record', 'test_gpu_records', 'test_gpu_bench_records',
                'test_logparse_streaming', 'test_log_cuts',
                'test_settings', 'test_ebsummary_lines',
                'test_results_parsing', 'test_testsuite_policy', 'test_upstream_corpus', 'test_xml_encodings',
                'test_report_plain26', 'test_unit_tier_pure', 'test_docstring_names',
                'test_batch_logic', 'test_cuda_visible_devices', 'test_config_plan', 'test_project_metadata',
                'test_cli_help', 'test_command_words', 'test_scopes', 'test_heartbeat_line', 'test_timechart',
                'test_target_source', 'test_retries'}
TIERS = ('unit', 'real_tools', 'real_eb', 'slurm', 'real_harness')


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups it adds
def pytest_collection_modifyitems(config, items):
    for item in items:
        module = item.module.__name__.rsplit('.', 1)[-1]
        if module not in TIER_OF_MODULE and module not in UNIT_MODULES:  # a new file chooses its tier
            raise pytest.UsageError(f'tests/{module}.py has no tier: add it to TIER_OF_MODULE or UNIT_MODULES in '
                                    f'tests/conftest.py')
        tier = TIER_OF_MODULE.get(module, 'unit')
        item.add_marker(getattr(pytest.mark, tier))
        uses_slurm = 'slurm' in getattr(item, 'fixturenames', ())
        if uses_slurm and tier != 'slurm':
            item.add_marker(pytest.mark.slurm)  # an eb test that spreads its suites over Slurm jobs
        # `pytest -n N --dist loadgroup` (README): a module's tests share one worker and its module fixtures
        # (a real-library layout is built once, not once per worker); every test of the real Slurm shares
        # one worker, so one cluster (and one munged) serves them all
        item.add_marker(pytest.mark.xdist_group('slurm' if uses_slurm else module))


# ---- the unit tier starts no process: tests/test_unit_tier_pure.py reads its files, this watches what they run --
# (a unit test that runs a stand-in script through the library, which no reading of the test file shows, fails
# naming what it started).  Python's audit events see every start: subprocess, os.fork/exec*/spawn*/system.
PROCESS_EVENTS = frozenset({'subprocess.Popen', 'os.fork', 'os.forkpty', 'os.posix_spawn', 'os.spawn', 'os.system',
                            'os.exec', 'os.startfile'})
_started = []  # what the running unit test started, (event, argv)
_watching = [False]  # a unit test is running


def _audit(event, args):
    if _watching[0] and event in PROCESS_EVENTS:
        _started.append((event, args[1] if event == 'subprocess.Popen' else args[:2]))


platform.processor()  # the stdlib runs `uname -p` once per interpreter (EasyBuild's import asks): before any test
sys.addaudithook(_audit)


# ---- the 2.1-line tree (tests/environment.py HARNESS21_TREE): one guard, which no test can forget -------------
# A test marked `harness21` is skipped (failed under CI) before any of its fixtures when the tree is not there; a
# test that reads the tree without the marker fails, naming it, even where the tree is there (it would fail on a
# bare clone): the audit hook below sees its opens, directory listings, copies and the processes it starts there.
READ_EVENTS = frozenset({'open', 'os.listdir', 'os.scandir', 'shutil.copytree', 'shutil.copyfile', 'subprocess.Popen'})
_TREES21 = tuple(dict.fromkeys(os.path.realpath(path) for path in (HARNESS21_TREE, DEFAULT_HARNESS21_TREE)))
_NAMES21 = tuple(dict.fromkeys(os.path.basename(path) for path in (HARNESS21_TREE, DEFAULT_HARNESS21_TREE)))
_tree_reads = []  # what the running test read of the 2.1-line tree


def _in_tree21(value) -> bool:
    if isinstance(value, bytes):
        value = os.fsdecode(value)
    elif isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str) or not any(name in value for name in _NAMES21):  # cheap: most opens are not
        return False
    path = os.path.realpath(value)
    return any(path == tree or path.startswith(tree + os.sep) for tree in _TREES21)


def _tree21_audit(event, args):
    if event not in READ_EVENTS or not _watching_tree21[0]:
        return
    if event == 'subprocess.Popen':  # (executable, args, cwd, env): run in the tree or given a path in it
        words = args[1] if isinstance(args[1], (list, tuple)) else [args[1]]
        candidates = [args[2], *words]
    else:
        candidates = [args[0]] if args else []
    _tree_reads.extend(f'{event} {value}' for value in candidates if _in_tree21(value))


_watching_tree21 = [False]
sys.addaudithook(_tree21_audit)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """The `harness21` guard, before any fixture of the test is set up (a module fixture that copies the tree)."""
    if item.get_closest_marker('harness21') is not None:
        from environment import need_harness21
        need_harness21()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _watching[0] = item.get_closest_marker('unit') is not None
    _watching_tree21[0] = item.get_closest_marker('harness21') is None
    del _started[:]
    del _tree_reads[:]
    yield
    _watching[0] = False
    _watching_tree21[0] = False


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """The last test of a session (or of an xdist worker) also tears down the session's fixtures: the real Slurm
    cluster's `scontrol shutdown` is not the unit test's process (seen on a mixed run with `-n 2`)."""
    if nextitem is None:
        _watching[0] = False
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """The phase (setup, call, teardown) of a unit test that started a process fails, naming the process."""
    report = (yield).get_result()
    if _tree_reads:  # the cause, also of a failure it led to (no tree: FileNotFoundError)
        report.outcome = 'failed'
        report.longrepr = (f'{item.nodeid}: reads the 2.1-line tree without the harness21 marker ({call.when}): '
                           + '; '.join(dict.fromkeys(_tree_reads))
                           + ' -- mark it @pytest.mark.harness21 (tests/conftest.py): a clone without the tree '
                             'skips it then')
        del _tree_reads[:]
    if _started and report.outcome != 'failed':
        report.outcome = 'failed'
        report.longrepr = (f'{item.nodeid}: a unit test started a process ({call.when}): '
                           + '; '.join(f'{event} {argv!r}' for event, argv in _started)
                           + ' -- its tier is real_tools (tests/conftest.py TIER_OF_MODULE), or run it in this '
                             'process (tests/helpers.py run_main)')
    del _started[:]
