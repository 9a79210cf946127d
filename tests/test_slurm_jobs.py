"""Builds handed to a real Slurm with `eb --job --job-backend=Slurm`, and EESSI-style easystacks.

Our easyblock, hooks and policy work unchanged inside the job, and the per-target policy is resolved
where the build runs: two jobs with different EESSI_SOFTWARE_SUBDIR apply their own excluded tests
and known failures.
"""

import json
import os
import subprocess

import pytest

from eb_pytorch_cuda.eb import demo
from eb_pytorch_cuda import standins
from eb_pytorch_cuda.elf.reader import read_elf
from eb_runner import EB_VERSIONS, LMOD_CMD, eb_venv
from slurm_cluster import submitted_job_ids, wait_for_jobs

EC = 'PyTorch-2.1.2-standin-easyblock.eb'
PER_TARGET = {
    'excluded_tests': "{'': ['test_crash', 'test_hang'], 'x86_64/intel/haswell': ['distributed/test_c10d_standin']}",
    'known_test_failures': ("{'': [('test_known_failure::TestKnown.test_always_fails', 'on purpose')], "
                            "'aarch64/nvidia/grace': [('test_cudnn', 'grace nodes only')]}"),
}


def _variant(directory):
    import re
    text = open(os.path.join(standins.EASYCONFIGS, EC)).read()
    for key, value in PER_TARGET.items():
        text = re.sub(rf'^{key} = (\{{.*?^\}}|.*?)$', f'{key} = {value}', text, count=1, flags=re.M | re.S)
    path = os.path.join(directory, EC)
    with open(path, 'w') as handle:
        handle.write(text)
    return path


def _easystack(version):
    """--easystack, with --experimental on EasyBuild 4 (where easystacks still are experimental)."""
    options = ['--easystack', os.path.join(standins.EASYCONFIGS, 'easystack-demo.yml')]
    return options + (['--experimental'] if version.startswith('4.') else [])


def _eb(version, workdir, args, target=None):
    standins.make_sources(os.path.join(workdir, 'sources'))
    env = demo.eb_environment(str(workdir), LMOD_CMD)
    env['PATH'] = f"{eb_venv(version) / 'bin'}:{env['PATH']}"
    env['EASYBUILD_ALLOW_USE_AS_ROOT_AND_ACCEPT_CONSEQUENCES'] = '1'
    env.pop('EESSI_SOFTWARE_SUBDIR', None)
    if target:
        env['EESSI_SOFTWARE_SUBDIR'] = target
    return subprocess.run([str(eb_venv(version) / 'bin' / 'eb'), '--robot', *args], env=env, cwd=workdir,
                          capture_output=True, text=True, timeout=900)


def _report(workdir):
    path = workdir / 'easybuild' / 'software' / 'PyTorch' / '2.1.2-standin-easyblock' / 'easybuild'
    return json.loads((path / 'pytorch-test-results.json').read_text())


def _check_installation(workdir):
    install = workdir / 'easybuild' / 'software' / 'PyTorch' / '2.1.2-standin-easyblock'
    assert (workdir / 'easybuild' / 'modules' / 'all' / 'PyTorch' / '2.1.2-standin-easyblock.lua').exists()
    library = next(install.rglob('libtorch_cuda.so'))
    assert 'libcudnn_cnn_train.so.8' in read_elf(library).needed
    assert (install / 'easybuild' / 'pytorch-test-summary.md').exists()


@pytest.mark.parametrize('version', EB_VERSIONS)
def test_jobs_for_two_targets_each_apply_their_own_policy(slurm, tmp_path, version):
    variant_dir = tmp_path / 'ecs'
    variant_dir.mkdir()
    easyconfig = _variant(str(variant_dir))
    jobs, workdirs = [], {}
    for target in ('x86_64/intel/haswell', 'aarch64/nvidia/grace'):
        workdir = tmp_path / target.replace('/', '_')
        workdir.mkdir()
        done = _eb(version, workdir, [easyconfig, '--job', '--job-backend=Slurm', '--job-cores=1'], target)
        assert done.returncode == 0, done.stdout + done.stderr
        ids = submitted_job_ids(done.stdout)
        assert len(ids) == 3, done.stdout
        jobs += ids
        workdirs[target] = workdir
    wait_for_jobs(jobs)
    for target, workdir in workdirs.items():
        _check_installation(workdir)
        job = jobs[2 if 'haswell' in target else 5]
        job_output = (workdir / f'PyTorch-2.1.2-standin-easyblock-{job}.out').read_text()
        assert 'sanity check:' in job_output and 'mapped by a real load' in job_output  # our hooks ran in the job
        assert 'patched' in job_output
        report = _report(workdir)
        assert report['verdict'] == 'pass' and report['scope']['target'] == target
    haswell, grace = _report(workdirs['x86_64/intel/haswell']), _report(workdirs['aarch64/nvidia/grace'])
    assert 'distributed/test_c10d_standin' not in {s['name'] for s in haswell['suites']}  # its own exclusion
    assert 'distributed/test_c10d_standin' in {s['name'] for s in grace['suites']}
    assert [e['pattern'] for e in grace['stale_known_failures']] == ['test_cudnn']  # its own known failure
    assert haswell['stale_known_failures'] == []


@pytest.mark.parametrize('version', EB_VERSIONS)
def test_the_demo_easystack_builds_locally(tmp_path, version):
    done = _eb(version, tmp_path, _easystack(version))
    assert done.returncode == 0, done.stdout + done.stderr
    _check_installation(tmp_path)


@pytest.mark.parametrize('version', EB_VERSIONS)
def test_the_demo_easystack_builds_through_slurm(slurm, tmp_path, version):
    done = _eb(version, tmp_path, [*_easystack(version), '--job', '--job-backend=Slurm', '--job-cores=1'])
    assert done.returncode == 0, done.stdout + done.stderr
    wait_for_jobs(submitted_job_ids(done.stdout))
    _check_installation(tmp_path)
