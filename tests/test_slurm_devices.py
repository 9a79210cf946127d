"""A spread run's CUDA device tests are decided by each Slurm job on its own node (real Slurm: tests/slurm_cluster.py).

One node runs every job here, so "a node with a GPU" and "a node without" are made by a stand-in nvidia-smi on the
jobs' PATH that lists the H200's GPU (its answers as recorded on the H200: tests/helpers.H200) to the first job
that asks, and no GPU to any other job: what two nodes of a partition would answer.  The build's CUDA is a
stand-in too (a `torch` whose lib/ holds a libtorch_cuda.so, as a CUDA wheel's does: what the step looks for), and
so is the suite: a device-generic class instantiated for CUDA (`TestDevicesCUDA`, results/cudatests' rule) whose
test runs under SANDCASTLE=0 and is skipped under upstream's SANDCASTLE=1, the way PyTorch's device-generic CUDA
tests are left out there.  Nothing of this can be shown with real GPUs on this machine; the harness, Slurm, the
queue and the step are the real ones.
"""

import json
import os
import subprocess
import sys

import pytest

from helpers import H200, stand_in_nvidia_smi, standin_test_tree

DEVICES_SUITE = '''import os
import time
import unittest

from common import run_tests


class TestDevicesCUDA(unittest.TestCase):
    def test_add_cuda(self):
        time.sleep(2)  # long enough for both jobs to claim a suite
        if os.environ.get('SANDCASTLE') != '0':
            raise unittest.SkipTest('SANDCASTLE=1: no CUDA test base')
        self.assertTrue(True)


if __name__ == '__main__':
    run_tests(__file__)
'''

FIRST_JOB_SEES_THE_GPU = '''#!/bin/sh
# the first Slurm job to ask is the node with a GPU; every other job is a node without one
claim="{claim}"
if mkdir "$claim.d" 2>/dev/null; then echo "$SLURM_JOB_ID" > "$claim"; fi
while [ ! -s "$claim" ]; do sleep 0.1; done
if [ -n "$SLURM_JOB_ID" ] && [ "$(cat "$claim")" = "$SLURM_JOB_ID" ]; then exec "{gpu}" "$@"; fi
exec "{none}" "$@"
'''


@pytest.fixture
def spread_tree(tmp_path):
    source = tmp_path / 'src'
    test_dir = standin_test_tree(source, keep=(), distributed=False)
    for index in range(4):
        (test_dir / f'test_devices_{index}.py').write_text(DEVICES_SUITE)
    torch = tmp_path / 'cuda-build' / 'torch'  # the stand-in CUDA build the step asks about (see the docstring)
    (torch / 'lib').mkdir(parents=True)
    (torch / '__init__.py').write_text('')
    (torch / 'lib' / 'libtorch_cuda.so').write_bytes(b'')
    bin_dir = tmp_path / 'bin'
    gpu = stand_in_nvidia_smi(tmp_path / 'gpu-bin', [H200])
    none = stand_in_nvidia_smi(tmp_path / 'none-bin', [])
    bin_dir.mkdir()
    script = bin_dir / 'nvidia-smi'
    script.write_text(FIRST_JOB_SEES_THE_GPU.format(claim=tmp_path / 'gpu-job', gpu=gpu, none=none))
    script.chmod(0o755)
    return source, tmp_path


def _spread(source, workdir, *extra, python=sys.executable):
    env = dict(os.environ, EB_PYTORCH_CUDA_SHARED_PATHS=str(workdir),
               PATH=os.pathsep.join([str(workdir / 'bin'), os.environ['PATH']]),
               PYTHONPATH=os.pathsep.join([str(workdir / 'cuda-build')] + sys.path))
    env.pop('CUDA_VISIBLE_DEVICES', None)
    done = subprocess.run([sys.executable, '-m', 'eb_pytorch_cuda', 'test-suite', str(source), '--python',
                           str(python), '--results', str(workdir / 'results'), '--format', 'json', '--timeout',
                           '120', '--parallel', '1', '--jobs', '2', *extra],
                          capture_output=True, text=True, env=env, timeout=600)
    return done, json.loads(done.stdout) if done.stdout.strip().startswith('{') else None


def test_auto_is_decided_by_each_job_on_its_own_node(slurm, spread_tree):
    source, workdir = spread_tree
    done, report = _spread(source, workdir)
    assert report is not None, done.stderr[-3000:]
    mode = report['cuda_device_tests']
    jobs = mode['jobs']
    assert len(jobs) == 2, jobs
    seen = {job: facts for job, facts in jobs.items() if facts['gpus']}
    blind = {job: facts for job, facts in jobs.items() if not facts['gpus']}
    assert len(seen) == 1 and len(blind) == 1, jobs
    (gpu_job, gpu_facts), = seen.items()
    (cpu_job, cpu_facts), = blind.items()
    assert gpu_facts['enabled'] is True and cpu_facts['enabled'] is False
    assert gpu_facts['suites'] >= 1 and cpu_facts['suites'] >= 1, jobs  # each job ran suites of its own
    assert gpu_facts['cuda_tests_ran'] == gpu_facts['suites']  # its suites ran their CUDA test
    assert cpu_facts['cuda_tests_ran'] == 0
    assert mode['enabled'] is True and mode['gpus'] == [H200[0]]
    assert 'decided by each Slurm job on its own node: 1 of 2 job(s)' in mode['reason']
    assert report['warnings'] == []  # the job without a GPU is not warned about, the one with ran CUDA tests
    assert 'CUDA and CPU device tests' in done.stderr or 'SANDCASTLE=0' in (workdir / 'results').joinpath(
        'pytorch-test-summary.md').read_text()
    markdown = (workdir / 'results' / 'pytorch-test-summary.md').read_text()
    assert '## CUDA device tests per Slurm job' in markdown


def test_true_stops_the_run_naming_the_job_whose_node_has_no_gpu(slurm, spread_tree):
    source, workdir = spread_tree
    done, report = _spread(source, workdir, '--cuda-device-tests', 'true')
    assert done.returncode == 2, (done.returncode, done.stderr[-3000:])
    last = done.stderr.strip().splitlines()[-1]
    assert 'ran no suite' in last and 'cuda_device_tests: is True, but the test step cannot run CUDA tests here' \
        in last, last


def test_a_refused_job_does_not_stop_the_next_run(slurm, spread_tree):
    # the refusal of a run with True stays in the queue (the run failed: its queue is kept for a resume); the next
    # run's jobs decide again on their nodes, so 'auto' runs its suites instead of stopping on the old refusal
    source, workdir = spread_tree
    (workdir / 'results').mkdir()  # one the site made (a results directory this call made goes with its error)
    refused, _ = _spread(source, workdir, '--cuda-device-tests', 'true')
    assert refused.returncode == 2 and 'ran no suite' in refused.stderr, refused.stderr[-3000:]
    queues = list((workdir / 'results').glob('*.queue-*'))
    assert queues and any((queue / 'devices').iterdir() for queue in queues)  # the refusal, as it was left
    again, report = _spread(source, workdir)
    assert report is not None and 'ran no suite' not in again.stderr, again.stderr[-3000:]
    assert report['verdict'] == 'pass' and len(report['suites']) >= 4
    # the refused run's job that saw the GPU kept what it ran (resumed), with its CUDA tests
    assert any(facts['cuda_tests_ran'] for facts in report['cuda_device_tests']['jobs'].values()), report


FLAKY_CUDA_SUITE = '''import os
import unittest

from common import run_tests

# as PyTorch's instantiate_device_type_tests: the CUDA class exists only where CUDA tests run (SANDCASTLE=0 here,
# the step's setting where a job sees a GPU); rerun where they do not, the test is not there to pass
if os.environ.get('SANDCASTLE') == '0':
    class TestFlakyCUDA(unittest.TestCase):
        def test_once_cuda(self):
            # run by the test step's Python (a wrapper that says so), as the suites are: a rerun too
            self.assertEqual(os.environ.get('RUN_BY_THE_TEST_PYTHON'), '1')
            marker = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'failed-once')
            if not os.path.exists(marker):
                open(marker, 'w').close()
                self.fail('fails on its first run only')


if __name__ == '__main__':
    run_tests(__file__)
'''


def test_a_flaky_cuda_test_is_rerun_by_its_job_on_the_node_that_runs_cuda_tests(slurm, tmp_path):
    # both jobs' nodes see the GPU; the submitting node is not asked (nothing is probed there) and its environment
    # runs no CUDA test: rerun there, the failed CUDA test could not pass (the class is not there) and would be
    # judged reproducible, a failure of the budget
    source = tmp_path / 'src'
    test_dir = standin_test_tree(source, keep=(), distributed=False)
    (test_dir / 'test_flaky_cuda.py').write_text(FLAKY_CUDA_SUITE)
    for index in range(2):
        (test_dir / f'test_devices_{index}.py').write_text(DEVICES_SUITE)
    torch = tmp_path / 'cuda-build' / 'torch'
    (torch / 'lib').mkdir(parents=True)
    (torch / '__init__.py').write_text('')
    (torch / 'lib' / 'libtorch_cuda.so').write_bytes(b'')
    stand_in_nvidia_smi(tmp_path / 'bin', [H200])
    # the test step's Python is not the one the jobs' worker runs under (EasyBuild's): the rerun must use the former
    python = tmp_path / 'test-python' / 'python'
    python.parent.mkdir()
    python.write_text(f'#!/bin/sh\nRUN_BY_THE_TEST_PYTHON=1 exec {sys.executable} "$@"\n')
    python.chmod(0o755)
    done, report = _spread(source, tmp_path, '--rerun', '1', python=python)
    assert report is not None, done.stderr[-3000:]
    assert (test_dir / 'failed-once').exists()  # it failed once, in a job that ran CUDA tests
    assert report['flaky_failures'] == [{'suite': 'test_flaky_cuda', 'test': 'TestFlakyCUDA.test_once_cuda'}], report
    assert report['verdict'] == 'pass', report['reasons'] if 'reasons' in report else report
    assert ('rerun of test_flaky_cuda::TestFlakyCUDA.test_once_cuda: flaky (rerun in the Slurm job that ran it)'
            in done.stderr), done.stderr[-3000:]
