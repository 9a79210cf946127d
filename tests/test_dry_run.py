"""The extended dry run of the main job, on a machine with no CUDA and none of the dependencies installed.

`eb -x PyTorch-2.1.2-foss-2023a-CUDA-12.1.1.eb --cuda-compute-capabilities=8.0,9.0` with our
configuration completes without a single "ignoring error" and shows the whole plan.
"""

import os
import re
import subprocess
from pathlib import Path

import pytest

from helpers import cli
from eb_runner import EB_VERSIONS, LMOD_CMD, eb_venv
from environment import missing

EC = 'PyTorch-2.1.2-foss-2023a-CUDA-12.1.1.eb'


def dry_run(version, tmp_path, configfile=None, target='x86_64/intel/haswell', easyconfigs=(EC,), extra_env=None):
    """(exit status, output) of `eb -x` for target ($EESSI_SOFTWARE_SUBDIR; None: not set, detected)."""
    venv = eb_venv(version)
    env = {k: v for k, v in os.environ.items() if not k.startswith(('EASYBUILD_', 'EBROOT', 'EESSI_'))}
    env.update(PATH=f"{venv / 'bin'}:/usr/bin:/bin", LMOD_CMD=LMOD_CMD, EASYBUILD_PREFIX=str(tmp_path / 'eb'),
               EASYBUILD_MODULES_TOOL='Lmod', EASYBUILD_MODULE_SYNTAX='Lua',
               EASYBUILD_ALLOW_USE_AS_ROOT_AND_ACCEPT_CONSEQUENCES='1', **(extra_env or {}))
    if target:
        env['EESSI_SOFTWARE_SUBDIR'] = target
    command = [str(venv / 'bin' / 'eb'), '-x', *map(str, easyconfigs), '--cuda-compute-capabilities=8.0,9.0']
    if configfile:
        command.insert(1, f'--configfiles={configfile}')
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    return done.returncode, done.stdout + done.stderr


@pytest.fixture
def configfile(tmp_path):
    path = tmp_path / 'pytorch-cuda.cfg'
    path.write_text(cli('config', check_rc=0).stdout)
    return path


@pytest.mark.parametrize('version', EB_VERSIONS)
def test_dry_run_is_clean_and_shows_the_whole_plan(tmp_path, configfile, version):
    code, out = dry_run(version, tmp_path, configfile)
    assert code == 0, out[-3000:]
    assert 'ignoring error' not in out, re.findall(r'ignoring error.*', out)
    # configure options
    assert "export TORCH_CUDA_ARCH_LIST='8.0;9.0'" in out
    assert re.search(r'USE_CUDA=1 CUDNN_LIB_DIR=\$EBROOTCUDNN/lib64', out)
    # the exact test command, run without a shell, with its exclusions
    assert re.search(r'command \(no shell\): \S+/bin/python run_test.py --continue-through-error --verbose '
                     r'-x test_cuda_expandable_segments distributed/test_distributed_spawn ', out)
    # the failure policy for this target
    assert ('scope: x86_64, target x86_64/intel/haswell (from $EESSI_SOFTWARE_SUBDIR), compute capabilities 8.0, '
            '9.0') in out
    assert 'budget for unknown failures: 0; reruns: 1' in out
    # who retries a failed test: PyTorch's own retries off, the step's one rerun only
    assert ("retries: PyTorch's own off (PYTEST_PLUGINS=eb_pytorch_cuda_no_retries: no --reruns, no single-test "
            "retries; PYTORCH_RETRY_TEST_CASES, PYTORCH_TEST_RERUN_DISABLED_TESTS unset): a failing test runs once, "
            "then up to 1 isolated rerun(s) (rerun_failed_tests)") in out
    # which CUDA device tests the step will run, and what decides it: the main job has CUDA
    assert ("cuda_device_tests='auto': where the test step sees a GPU (nvidia-smi, CUDA_VISIBLE_DEVICES): CUDA and "
            "CPU device tests, SANDCASTLE=0; where it sees none: CPU device tests only, SANDCASTLE=1 "
            "(cuda_compute_capabilities: 8.0, 9.0)") in out
    # the batches at a time, and that long suites run as pieces with more than one
    assert ("as many calls as the test step's node holds (parallel_test_suites='auto': its CPUs, memory and GPU "
            "memory; run/node) (with more than one and the previous build's results, a suite longer than its share "
            "of the node, at least 120 s, runs as pieces side by side) at a time") in out.replace('\n', ' ')
    assert len(re.findall(r'^  known failure \[', out, re.M)) == 8  # cc 8.0 8; haswell has no public data
    assert 'known failure [8.0]: distributed/test_c10d_nccl (at most 1) -- PR 20156' in out
    # what the hooks will patch, with what, and the sanity checks
    assert ('[pytorch-cuda hooks] would add NEEDED libcudnn_cnn_train.so.8 (cuDNN 8.9.2.26-CUDA-12.1.1) '
            'to every libtorch_cuda.so') in out
    assert ('[pytorch-cuda hooks] sanity check: every installed libtorch_cuda.so must have NEEDED '
            'libcudnn_cnn_train.so.8') in out
    assert 'Sanity check commands' in out and 'libcaffe2_nvrtc.so' in out


@pytest.mark.parametrize('version', EB_VERSIONS)
def test_other_targets_get_their_own_known_failures(tmp_path, configfile, version):
    code, out = dry_run(version, tmp_path, configfile, target='aarch64/nvidia/grace')
    assert code == 0 and 'ignoring error' not in out
    assert len(re.findall(r'^  known failure \[', out, re.M)) == 8  # cc 8.0 8; grace has no public data
    assert ('known failures of scopes not in force here: aarch64/generic, aarch64/neoverse_n1, aarch64/neoverse_v1, '
            'x86_64/intel/cascadelake, x86_64/intel/icelake, x86_64/intel/sapphirerapids') in out


def _archspec_target(python):
    """The target archspec gives python's process, named as EESSI names its targets; `missing` without archspec."""
    code = ("import archspec.cpu as c, platform; h = c.host(); "
            "v = {'GenuineIntel': 'intel/', 'AuthenticAMD': 'amd/'}.get(h.vendor, ''); "
            "print(f'{platform.machine()}/{v}{h.name}')")
    done = subprocess.run([str(python), '-c', code], capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        missing(f'archspec in {python} (a declared dependency: pip install .)')
    return done.stdout.strip()


@pytest.mark.parametrize('version', EB_VERSIONS)
def test_without_eessi_software_subdir_the_target_is_detected_by_archspec_and_said(tmp_path, configfile, version):
    host = _archspec_target(eb_venv(version) / 'bin' / 'python')
    code, out = dry_run(version, tmp_path, configfile, target=None)
    assert code == 0, out[-3000:]
    assert f'target {host} (detected by archspec), compute capabilities 8.0, 9.0' in out


@pytest.mark.parametrize('version', EB_VERSIONS)
def test_a_fallback_target_is_said_and_its_target_scoped_entries_left_out(tmp_path, configfile, version):
    """archspec hidden from eb's Python (a package of that name that fails to import, first on PYTHONPATH: what a
    machine without it has): before, the plan said `target x86_64/generic` and nothing else."""
    hidden = tmp_path / 'hidden'
    (hidden / 'archspec').mkdir(parents=True)
    (hidden / 'archspec' / '__init__.py').write_text("raise ImportError('archspec hidden by the test')\n")
    path = os.pathsep.join(filter(None, [str(hidden), os.environ.get('PYTHONPATH')]))
    code, out = dry_run(version, tmp_path, configfile, target=None, extra_env={'PYTHONPATH': path})
    assert code == 0, out[-3000:]
    assert ('scope: x86_64, target unknown (fallback x86_64/generic: neither $EESSI_SOFTWARE_SUBDIR nor archspec '
            'names it; entries scoped to a CPU target will not apply: set $EESSI_SOFTWARE_SUBDIR, or --target, to '
            'name it), compute capabilities 8.0, 9.0') in out
    assert len(re.findall(r'^  known failure \[', out, re.M)) == 8  # cc 8.0's alone, as on a target without data
    assert 'x86_64/intel/icelake' in re.search(r'known failures of scopes not in force here: .*', out).group(0)


@pytest.mark.parametrize('version', EB_VERSIONS)
def test_upstream_alone_does_not_get_through_a_dry_run(tmp_path, version):
    # the reference we beat: the same easyconfig with upstream's easyblock and no hooks
    code, out = dry_run(version, tmp_path)
    assert len(re.findall(r'ignoring error', out)) >= 7


@pytest.mark.parametrize('version', EB_VERSIONS)
def test_the_easystack_of_the_main_job_plans_the_same_build(tmp_path, configfile, version):
    venv = eb_venv(version)
    env = {k: v for k, v in os.environ.items() if not k.startswith(('EASYBUILD_', 'EBROOT', 'EESSI_'))}
    env.update(PATH=f"{venv / 'bin'}:/usr/bin:/bin", LMOD_CMD=LMOD_CMD, EASYBUILD_PREFIX=str(tmp_path / 'eb'),
               EASYBUILD_MODULES_TOOL='Lmod', EASYBUILD_MODULE_SYNTAX='Lua',
               EASYBUILD_ALLOW_USE_AS_ROOT_AND_ACCEPT_CONSEQUENCES='1', EESSI_SOFTWARE_SUBDIR='x86_64/intel/haswell')
    easystack = Path(__file__).resolve().parent.parent / 'easyconfigs' / 'easystack-pytorch-cuda.yml'
    command = [str(venv / 'bin' / 'eb'), f'--configfiles={configfile}', '-x', '--easystack', str(easystack)]
    if version.startswith('4.'):
        command.append('--experimental')
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    assert "export TORCH_CUDA_ARCH_LIST='8.0;9.0'" in out and 'ignoring error' not in out
    assert len(re.findall(r'^  known failure \[', out, re.M)) == 8


# The policy each EESSI target resolves to (known_test_failures of the main easyconfig, per scope): the
# targets with public field data, and ones without (no entries: the first unnamed failure fails there)
FIELD_POLICY = {
    'aarch64/neoverse_v1': [
        '[aarch64/neoverse_v1]: inductor/test_torchinductor (at most 1) -- CpuTests.test_min_max_reduction_nan_cpu',
        '[aarch64/neoverse_v1]: test_model_dump (at most 2) -- no reason given in EESSI PR 444',
        '[aarch64/neoverse_v1]: test_ops (at most 2) -- no reason given in EESSI PR 444',
        '[aarch64/neoverse_v1]: test_linalg (at most 2) -- no reason given in EESSI PR 444',
        '[aarch64/neoverse_v1]: test_scatter_gather_ops (at most 1) -- on neoverse_v1 only',
    ],
    'aarch64/generic': [
        '[aarch64/generic]: inductor/test_torchinductor (at most 1)', '[aarch64/generic]: test_model_dump (at most 2)',
        '[aarch64/generic]: test_ops (at most 2)', '[aarch64/generic]: test_linalg (at most 2)',
    ],
    'x86_64/intel/icelake': [
        '[x86_64/intel/icelake]: dynamo/test_functions (at most 1) -- no reason given in EESSI issue 461',
        '[x86_64/intel/icelake]: dynamo/test_dynamic_shapes (at most 2) -- no reason given in EESSI issue 461',
    ],
    'x86_64/intel/sapphirerapids': [
        '[x86_64/intel/sapphirerapids]: dynamo/test_functions (at most 1)',
        '[x86_64/intel/sapphirerapids]: dynamo/test_dynamic_shapes (at most 2)',
        '[x86_64/intel/sapphirerapids]: test_proxy_tensor (at most 1) -- no reason given in EESSI issue 461',
    ],
    'aarch64/a64fx': [], 'aarch64/nvidia/grace': [], 'x86_64/intel/haswell': [], 'x86_64/amd/zen4': [],
}


@pytest.mark.parametrize('target', sorted(FIELD_POLICY))
@pytest.mark.parametrize('version', EB_VERSIONS)
def test_the_dry_run_shows_the_policy_resolved_for_each_target(tmp_path, configfile, version, target):
    code, out = dry_run(version, tmp_path, configfile, target=target)
    assert code == 0 and 'ignoring error' not in out, out[-3000:]
    assert f'target {target} (from $EESSI_SOFTWARE_SUBDIR), compute capabilities 8.0, 9.0' in out
    cpu = [line.strip() for line in re.findall(r'^  known failure (\[.*)$', out, re.M) if not line.startswith('[8.0]')]
    assert len(cpu) == len(FIELD_POLICY[target]), cpu
    for line, expected in zip(cpu, FIELD_POLICY[target]):
        assert line.startswith(expected), (line, expected)
    # the GPU generation's entries come with the compute capability, on every target
    assert len(re.findall(r'^  known failure \[8\.0\]: ', out, re.M)) == 8
    assert 'budget for unknown failures: 0; reruns: 1' in out


# ---- every PyTorch easyconfig EasyBuild ships, with our easyblock: never stricter than upstream on its files ----

# What an extended dry run of upstream's own easyconfigs reports as "ignoring error" in upstream's code, with no
# dependency or source there (EasyBuild 4.9.4's 1.8.1-1.10.0 ones; measured with upstream's EB_PyTorch alone too)
UPSTREAM_DRY_RUN_LIMITS = (
    # upstream's configure step looks for FlexiBLAS/OpenBLAS/imkl among the loaded modules (PyTorch-1.10.0-foss-2021a*;
    # upstream's easyblock alone stops before it, at "Failed to pick Python command")
    "Did not find a supported BLAS in dependencies. Don't know which BLAS lib to use",
    # PyTorch 1.8.1 and 1.9.0 list a `tests` script that is not in the sources: the same with upstream's alone
    'Failed to read checksums.json', 'Test specifies invalid path: ',
)


def shipped_pytorch_easyconfigs(version):
    """Every easyconfig of PyTorch itself in the easybuild-easyconfigs package of EasyBuild version's venv that
    EB_PyTorch builds (the ones naming another easyblock, PythonPackage for 0.3-1.2, PythonBundle for the
    -whl ones, never reach ours)."""
    directory = eb_venv(version) / 'easybuild' / 'easyconfigs' / 'p' / 'PyTorch'
    return sorted(path for path in directory.glob('PyTorch-*.eb')
                  if not re.search(r'^easyblock\s*=', path.read_text(), re.M))


def _sections(out):
    """{easyconfig file name: its part of a many-easyconfig `eb -x` output}."""
    parts = re.split(r'^== processing EasyBuild easyconfig (\S+)$', out, flags=re.M)
    return {os.path.basename(parts[index]): parts[index + 1] for index in range(1, len(parts), 2)}


@pytest.mark.parametrize('version', EB_VERSIONS)
def test_every_shipped_pytorch_easyconfig_dry_runs_with_our_easyblock(
        tmp_path, configfile, version):
    """All of them in one `eb -x` (about 20 s for 5.4.1's 26, 30 s for 4.9.4's 41 on 2 cores): upstream's
    PyTorch-2.9.1 ones exclude 'inductor/test_flex_decoding ' (a trailing space, which upstream's easyblock
    loses when it joins the names into -x), and stopped at once here before."""
    easyconfigs = shipped_pytorch_easyconfigs(version)
    assert len(easyconfigs) == {'4.9.4': 41, '5.4.1': 26}[version]
    code, out = dry_run(version, tmp_path, configfile, easyconfigs=easyconfigs)
    assert code == 0, out[-3000:]
    assert 'Traceback' not in out and 'is not a test name' not in out
    sections = _sections(out)
    assert sorted(sections) == [path.name for path in easyconfigs]
    for name, section in sections.items():
        assert "DRY RUN using 'EB_PyTorch' easyblock" in section and 'test suite (eb_pytorch_cuda):' in section, name
        errors = re.findall(r'ignoring error (.*)', section)
        assert all(any(limit in error for limit in UPSTREAM_DRY_RUN_LIMITS) for error in errors), (name, errors)
    for name in (path.name for path in easyconfigs if path.name.startswith('PyTorch-2.9.1-')):
        excluded = re.search(r'^  excluded \(-x\): (.*)$', sections[name], re.M).group(1).split(' ')
        assert 'inductor/test_flex_decoding' in excluded and '' not in excluded, name
    summary = out[out.rindex('== Summary'):] if '== Summary' in out else out  # 4.9.4 has no summary
    assert 'FAILED' not in summary
