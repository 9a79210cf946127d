"""Our EB_PyTorch and hooks in real `eb` runs (4.9.4 and 5.4.1) on the REAL torch 2.1.2 wheel and the REAL
2.1-line test harness: the main job's versions, with nothing of PyTorch stood in for.

Real artifacts: torch 2.1.2 and nvidia-cudnn-cu12 8.9.2.26 from PyPI (.venvs/harness-2.1), the 2.1-line
harness rebuilt from public pytorch/pytorch files (.venvs/pytorch-2.1-harness, see its PROVENANCE.md), real
EasyBuild with real Lmod, --rpath and --filter-env-vars=LD_LIBRARY_PATH (tests/eb_runner.py), the real glibc
loader.  tests/real_torch21.py makes the sources (and says what differs from a source build; so does the
easyconfig, tests/data/easyconfigs-real-torch21/PyTorch-2.1.2-wheel.eb).

EasyBuild 5.4.1 installs the cuDNN module once per run of this file (a Tarball of the pip libraries without
RUNPATH, as NVIDIA's tarball is installed); each EasyBuild version then installs PyTorch with our easyblock
and hooks on top of it.  The test step runs six real suites of the tree; test_license fails for real
(torch 2.1.2's wheel LICENSE says "Pytorch") and is the easyconfig's one known failure.  Takes 6 minutes
on a quiet 2-core machine, 9 to 13 when other work shares its cores (3.3 to 3.7 minutes of CPU), and up to
4 GB of disk, removed at the end; run alone with `pytest tests/test_eb_real_torch21.py`.
"""

import ast
import json
import os
import re
import shutil
import subprocess
import zipfile

import pytest

import real_torch21
from helpers import cli
from eb_runner import EB_VERSIONS, EbRunner, eb_venv
from eb_pytorch_cuda.elf.reader import read_elf
from test_doctor_cudnn8_real import CHECKS, run_orders
from environment import missing

pytestmark = pytest.mark.harness21  # every test installs what real_torch21 makes of the 2.1-line tree

EASYBLOCK = real_torch21.REPO / 'easybuild' / 'easyblocks' / 'p' / 'pytorch.py'
EASYCONFIG = real_torch21.EASYCONFIGS / 'PyTorch-2.1.2-wheel.eb'
INSTALL = ('PyTorch', '2.1.2-wheel')
PYLIB = os.path.join('lib', 'python3.11', 'site-packages')
SUITES = {'test_license', 'test_per_overload_api', 'test_type_info', 'test_cuda_primary_ctx', 'test_show_pickle',
          'test_set_default_mobile_cpu_allocator'}
NEEDED = 'libcudnn_cnn_train.so.8'  # the catalog's default for cuDNN 8 (docs/design.md)
KNOWN = 'TestLicense.test_distinfo_license'


def _env(python, version, extra=None):
    """What EbRunner sets, with the test Python first on $PATH (EasyBuild's `python` for a SYSTEM build);
    the `eb` script itself runs on its venv's Python ($EB_PYTHON)."""
    env = {'PATH': f"{python.parent}:{eb_venv(version) / 'bin'}:/usr/local/bin:/usr/bin:/bin",
           'EB_PYTHON': str(eb_venv(version) / 'bin' / 'python'),
           'EASYBUILD_ROBOT_PATHS': str(real_torch21.EASYCONFIGS)}
    env.update(extra or {})
    return env


@pytest.fixture(scope='module')
def stack(tmp_path_factory):
    """Sources, the test Python and the cuDNN + FlexiBLAS modules (installed by EasyBuild 5.4.1), made once."""
    absent = real_torch21.missing_inputs()
    if absent:
        missing(', '.join(absent))
    base = tmp_path_factory.mktemp('real-torch21')
    try:
        sources, prefix = base / 'sources', base / 'stack'
        sources.mkdir()
        python = real_torch21.make_test_python(base / 'python')
        real_torch21.make_harness_tarball(sources)
        cudnn_tarball = real_torch21.make_cudnn_tarball(sources, base / 'staging-cudnn')
        runner = EbRunner('5.4.1', prefix, sources)
        easyconfigs = [real_torch21.EASYCONFIGS / name
                       for name in ('cuDNN-8.9.2.26-pip-wheel.eb', 'FlexiBLAS-3.3.1-standin.eb')]
        done = runner.run(*easyconfigs, hooks=False, env=_env(python, '5.4.1'))
        assert done.returncode == 0, done.stdout + done.stderr
        cudnn_root = runner.installdir('cuDNN', real_torch21.CUDNN_VERSION + real_torch21.CUDNN_SUFFIX)
        cudnn_tarball.unlink()  # 1.2 GB, installed now
        cuda_lib = real_torch21.make_cuda_libs(base / 'cuda-libs')
        wheel = real_torch21.make_torch_wheel(sources, base / 'staging-wheel', str(cudnn_root / 'lib'), str(cuda_lib))
        yield {'base': base, 'sources': sources, 'python': python, 'modules': prefix / 'modules' / 'all',
               'cudnn_root': cudnn_root, 'cuda_lib': cuda_lib, 'wheel': wheel}
    finally:  # several GB: not left for pytest's keep-three-runs rotation, nor after a failed setup
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope='module', params=EB_VERSIONS, ids=[f'eb{v}' for v in EB_VERSIONS])
def installed(request, stack, tmp_path_factory):
    """One `eb` run of PyTorch-2.1.2-wheel.eb with our easyblock and hooks; its prefix removed afterwards
    (its console output kept in a small file of pytest's temporary directory, for a look after a failure)."""
    prefix = stack['base'] / f'eb-{request.param}'
    eb = EbRunner(request.param, prefix, stack['sources'], modulepath=[stack['modules']])
    done = eb.run(EASYCONFIG, f'--include-easyblocks={EASYBLOCK}', env=_env(stack['python'], request.param))
    (tmp_path_factory.mktemp('eb-output') / f'eb-{request.param}.log').write_text(done.stdout + done.stderr)
    installdir = eb.installdir(*INSTALL)
    yield {'done': done, 'out': done.stdout + done.stderr, 'installdir': installdir,
           'library': installdir / PYLIB / 'torch' / 'lib' / 'libtorch_cuda.so', 'eb': eb}
    shutil.rmtree(prefix, ignore_errors=True)


def test_eb_installs_and_the_test_step_judges_the_real_suites_pass(installed):
    done, out = installed['done'], installed['out']
    assert done.returncode == 0, out
    # the suites import a test installation (EasyBuild's temporary prefix) that was patched before they ran
    patched = re.search(rf'== patched (/\S+/torch/lib/libtorch_cuda\.so): added NEEDED {re.escape(NEEDED)}\n', out)
    assert patched and patched.start() < out.index('== running 6 suites: '), out
    assert not patched.group(1).startswith(str(installed['installdir']))
    # the harness was asked its own selection (the 2.1 line prints none), and all six suites ran
    assert re.search(r'== suite 6/6: ', out), out
    assert re.search(r'== suite \d/6: test_license failed', out), out
    assert 'known: 1, unknown: 0 (budget 0), flaky: 0' in out and '== verdict: PASS' in out
    # no GPU here: upstream's device tests, said, and the CUDA tests counted (none)
    assert "== cuda_device_tests='auto': upstream's device tests (CPU only under SANDCASTLE=1): no GPU seen" in out
    assert re.search(r'== CUDA device tests: (0 ran, 0 failed, \d+ skipped|not counted \(no XML report\))', out), out
    assert f'reproducible on rerun: test_license::{KNOWN}' in out  # rerun by its exact pytest id


def test_the_report_names_the_real_suites_with_their_real_counts(installed):
    assert installed['done'].returncode == 0, installed['out']
    reports = installed['installdir'] / 'easybuild'
    data = json.loads((reports / 'pytorch-test-results.json').read_text())
    assert data['verdict'] == 'pass' and data['failed_tests'] == 1
    suites = {suite['name']: suite for suite in data['suites']}
    assert set(suites) == SUITES
    counts = {name: suite['counts'] for name, suite in suites.items()}
    # what the plain run_test.py call of the same suites prints on this machine (docs/design.md)
    assert counts['test_per_overload_api']['passed'] == 3 and counts['test_type_info']['passed'] == 3
    assert counts['test_show_pickle']['passed'] == 1 and counts['test_set_default_mobile_cpu_allocator']['passed'] == 2
    assert sum(counts['test_cuda_primary_ctx'].values()) == 0  # no GPU: 'Running 0 items in this shard', exit 0
    assert counts['test_license']['failed'] == 1 and counts['test_license']['skipped'] == 1
    assert {s: suite['status'] for s, suite in suites.items() if suite['status'] != 'passed'} == \
        {'test_license': 'failed'}
    assert [(f['suite'], f['test']) for f in data['known_failures']] == [('test_license', KNOWN)]
    assert (reports / 'pytorch-test-summary.md').read_text().startswith('### PyTorch 2.1.2 test suite: PASS')


def test_the_installed_needed_entry_resolves_into_the_cudnn_module(installed, stack):
    assert installed['done'].returncode == 0, installed['out']
    library, cudnn_lib = installed['library'], stack['cudnn_root'] / 'lib'
    info = read_elf(library)
    assert NEEDED in info.needed and 'libcudnn.so.8' in info.needed
    assert str(cudnn_lib) in info.rpath and not info.runpath  # RPATH only, as the wrapper links
    assert not any(read_elf(path).rpath or read_elf(path).runpath for path in cudnn_lib.iterdir())  # as NVIDIA's
    cli('check-needed', library, NEEDED, '--expect-dir', cudnn_lib, '--load', check_rc=0)
    # the hooks patched it after the install and the sanity check proved it with a real load
    assert f'patched {library}: added NEEDED {NEEDED}' in installed['out']
    assert (f'sanity check: {library} has NEEDED {NEEDED} -> {cudnn_lib / NEEDED}, mapped by a real load'
            in installed['out'])


def test_the_entry_is_what_makes_cudnn_load_its_sub_library_in_this_layout(installed, stack, tmp_path):
    """cuDNN's own dlopen() of libcudnn_cnn_train.so.8 (its version check) from the installation, against the
    same libtorch_cuda.so as the wheel has it (unpatched), next to the installation's other libraries."""
    assert installed['done'].returncode == 0, installed['out']
    unpatched = tmp_path / 'torch' / 'lib'
    unpatched.mkdir(parents=True)
    try:
        for path in installed['library'].parent.iterdir():
            if path.name != 'libtorch_cuda.so':
                os.link(path, unpatched / path.name)
        with zipfile.ZipFile(stack['wheel'].path) as wheel:
            wheel.extract('torch/lib/libtorch_cuda.so', tmp_path)
        assert NEEDED not in read_elf(unpatched / 'libtorch_cuda.so').needed
        calls = [[CHECKS[NEEDED]]]
        patched_result = run_orders(installed['library'], 'libcudnn.so.8', calls, tmp_path)[0]
        unpatched_result = run_orders(unpatched / 'libtorch_cuda.so', 'libcudnn.so.8', calls, tmp_path)[0]
    finally:
        shutil.rmtree(tmp_path / 'torch')  # 1.4 GB (the hard links keep the installation's files alive)
    assert patched_result['ok'] and NEEDED in patched_result['loaded'], patched_result
    assert not unpatched_result['ok'], unpatched_result
    # glibc names the first of libcudnn_cnn_train.so.8's NEEDED entries that nothing on the search path holds
    assert unpatched_result['message'].startswith(
        f'Could not load library {NEEDED}. Error: libcudnn_ops_infer.so.8: cannot open shared object file')


def _apply_lmod_python(text, env):
    """Apply Lmod's `python` output (`os.environ["K"] = "V";`, `del os.environ["K"]`) to env, without running it."""
    for line in text.splitlines():
        assignment = re.match(r'os\.environ\[("(?:[^"\\]|\\.)*")\] = ("(?:[^"\\]|\\.)*");?$', line)
        removal = re.match(r'del os\.environ\[("(?:[^"\\]|\\.)*")\];?$', line)
        if assignment:
            env[ast.literal_eval(assignment.group(1))] = ast.literal_eval(assignment.group(2))
        elif removal:
            env.pop(ast.literal_eval(removal.group(1)), None)


def test_the_module_imports_installed_torch_without_ld_library_path(installed, stack):
    """`module load` of the installation (Lmod's Python output applied as EasyBuild applies it), then a fresh
    Python: torch is the installed one and maps the cuDNN module's libraries, with no LD_LIBRARY_PATH."""
    assert installed['done'].returncode == 0, installed['out']
    eb = installed['eb']
    env = eb.env(_env(stack['python'], eb.version,
                      {'MODULEPATH': f"{eb.prefix / 'modules' / 'all'}:{stack['modules']}"}))
    lmod = subprocess.run([env['LMOD_CMD'], 'python', 'load', f'{INSTALL[0]}/{INSTALL[1]}'], env=env,
                          capture_output=True, text=True, timeout=300)
    assert lmod.returncode == 0 and lmod.stdout, lmod.stderr
    _apply_lmod_python(lmod.stdout, env)
    assert 'LD_LIBRARY_PATH' not in env
    script = ("import json, torch; print(json.dumps([torch.__file__, torch.__version__, sorted("
              "{l.split()[-1] for l in open('/proc/self/maps') if 'libcudnn' in l})]))")
    done = subprocess.run([str(stack['python']), '-c', script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    cudnn_lib = stack['cudnn_root'] / 'lib'
    # libcudnn.so.8, and the NEEDED entry with its own NEEDED sub-libraries: all from the cuDNN module
    names = ('libcudnn.so.8', 'libcudnn_cnn_infer.so.8', NEEDED, 'libcudnn_ops_infer.so.8', 'libcudnn_ops_train.so.8')
    mapped = [str(cudnn_lib / name) for name in names]
    assert json.loads(done.stdout) == [str(installed['installdir'] / PYLIB / 'torch' / '__init__.py'),
                                       '2.1.2+cu121', mapped]
