"""The test step and `report` on a plain log agree: the same 13 real suites of Debian's PyTorch
2.6.0 harness (with its pytest.ini, pool of 3) run through `eb-pytorch-cuda test-suite` here, against torch 2.14.1
(two tests fail for real), give the same suites, counts and failing test ids as `report` on the kept plain
run_test.py log of that selection (tests/data/pytorch26-plain/plain.log, README.md there).

The Python is made as the kept log's was: a venv of `.venvs/torch`'s Python with `.pth` files naming `.venvs/torch`'s
site-packages (torch 2.14.1), then `.venvs/harness`'s (the harness's pytest and plugins); nothing is installed.
"""

import json
import os
import shutil
import subprocess

import pytest
from environment import REAL_TREE as TREE, missing
from helpers import cli, real_tree

from test_report_plain26 import PLAIN, TRUTH, outcomes

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTEST_INI = os.path.join(REPO, 'tests', 'data', 'pytorch26-plain', 'pytest.ini')
TORCH_VENV = os.path.join(REPO, '.venvs', 'torch')
HARNESS_VENV = os.path.join(REPO, '.venvs', 'harness')
SUITES = ['test_function_schema', 'test_license', 'test_cuda_primary_ctx', 'test_import_stats', 'test_logging',
          'test_type_info', 'test_show_pickle', 'test_per_overload_api', 'test_native_functions',
          'test_set_default_mobile_cpu_allocator', 'test_itt', 'test_mkl_verbose', 'test_mkldnn_verbose']


def _purelib(python):
    done = subprocess.run([python, '-c', 'import sysconfig; print(sysconfig.get_paths()["purelib"])'],
                          capture_output=True, text=True, timeout=120, check=True)
    return done.stdout.strip()


@pytest.fixture(scope='module')
def python(tmp_path_factory):
    """A Python importing torch 2.14.1 and the harness's plugins, as the kept log's was made."""
    pythons = [os.path.join(venv, 'bin', 'python') for venv in (TORCH_VENV, HARNESS_VENV)]
    if not (os.path.isfile(os.path.join(TREE, 'test', 'run_test.py')) and all(os.access(p, os.X_OK) for p in pythons)):
        missing('the real PyTorch 2.6.0 harness or the torch 2.14.1 venv is missing')
    venv = tmp_path_factory.mktemp('venv') / 'py'
    subprocess.run([pythons[0], '-m', 'venv', str(venv)], check=True, timeout=300)
    site = _purelib(str(venv / 'bin' / 'python'))
    for name, source in (('a-torch.pth', pythons[0]), ('b-harness.pth', pythons[1])):
        with open(os.path.join(site, name), 'w') as handle:
            handle.write(_purelib(source) + '\n')
    done = subprocess.run([str(venv / 'bin' / 'python'), '-c', 'import torch, pytest; print(torch.__version__)'],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.startswith('2.14.1'), done.stderr
    return str(venv / 'bin' / 'python')


@pytest.fixture(scope='module')
def tree(tmp_path_factory):
    """A private copy of the real tree with upstream's top-level pytest.ini, as the kept log's was."""
    copy = tmp_path_factory.mktemp('real') / 'pytorch'
    real_tree(copy)
    shutil.copy(PYTEST_INI, copy / 'pytest.ini')
    return copy


def test_the_test_step_and_report_on_the_plain_log_agree(python, tree, tmp_path, capsys):
    results = tmp_path / 'results'
    runtest = 'cd test && PYTHONUNBUFFERED=1 %(python)s run_test.py --continue-through-error --verbose -i ' + \
        ' '.join(SUITES)
    env = {key: value for key, value in os.environ.items() if key != 'CI'}
    # --harness-retries: the plain log's run_test.py retried its failing tests itself (6 reruns each), so must ours
    done = cli('test-suite', tree, '--python', python, '--runtest', runtest, '--results', results, '--format', 'json',
               '--harness-retries', timeout=2400, env=env)
    assert done.returncode in (0, 1), done.stderr[-3000:]
    step = json.loads(done.stdout)
    step_outcomes = outcomes(step['suites'])
    assert step_outcomes == TRUTH, done.stderr[-3000:]
    # and report on the plain log (what the bot job's EasyBuild log holds) says the same
    from eb_pytorch_cuda.cli import main
    assert main(['report', PLAIN, '--format', 'json']) == done.returncode  # the same default budget
    plain = json.loads(capsys.readouterr().out)
    assert outcomes(plain['suites']) == step_outcomes
    keys = ('verdict', 'unknown_failures')
    assert [plain[key] for key in keys] == [step[key] for key in keys]
    # the batch log the step wrote: the same suites and failing ids, and as many tests ran
    batch = sorted((results / 'output').glob('batch-*.log'))
    assert batch
    assert main(['report', str(batch[0]), '--format', 'json']) == done.returncode
    from_batch = outcomes(json.loads(capsys.readouterr().out)['suites'])
    assert {name: (status, ids) for name, (status, _counts, ids) in from_batch.items()} == \
        {name: (status, ids) for name, (status, _counts, ids) in step_outcomes.items()}
