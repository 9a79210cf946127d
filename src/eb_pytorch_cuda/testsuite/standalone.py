"""`eb-pytorch-cuda test-suite`: the easyblock's test runner, policy and reports, outside EasyBuild.

A site re-tests an installed PyTorch (say after a driver update) against a source tree's test/:
the same batches through run_test.py, per-suite timeouts, isolated reruns and verdict as the test
step.  Results go to DIR (a results store keyed by the tree, the Python and the command), so the same
command again runs only what is missing.
"""

import hashlib
import json
import os

from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.testsuite import service
from eb_pytorch_cuda.testsuite.run.command import parse_runtest
from eb_pytorch_cuda.testsuite.policy.report import RESULTS_JSON
from eb_pytorch_cuda.testsuite.run.solo import ResultStore

DEFAULT_RUNTEST = 'cd test && %(python)s run_test.py --continue-through-error %(excluded_tests)s'


def check_inputs(source: str, python: str) -> str:
    """The test directory of source; PluginError (bad input) when source or python is unusable."""
    test_dir = os.path.join(source, 'test')
    if not os.path.isfile(os.path.join(test_dir, 'run_test.py')):
        raise PluginError(source, 'is not a PyTorch source tree (no test/run_test.py)')
    if not (os.path.isfile(python) and os.access(python, os.X_OK)):
        raise PluginError(python, 'is not an executable Python')
    return test_dir


def store_for(results_dir: str, source: str, python: str, argv) -> ResultStore:
    """The results store of this tree, Python and command in results_dir."""
    key = json.dumps({'source': os.path.realpath(source), 'python': os.path.abspath(python), 'argv': list(argv)})
    fingerprint = hashlib.sha256(key.encode()).hexdigest()
    return ResultStore(os.path.join(results_dir, 'results.jsonl'), fingerprint)


def run_test_suite(source, python, results_dir, runtest=None, excluded=(), parallel=1, timeout=None, reruns=0,
                   progress=None, batch_size=None, jobs=1):
    """RunResult of the test suites of source run with python; results kept in results_dir."""
    check_inputs(source, python)
    python = os.path.abspath(python)  # the command runs in test/; a venv's python must stay a path into the venv
    command = parse_runtest(runtest or DEFAULT_RUNTEST, os.path.abspath(source), python, list(excluded))
    os.makedirs(results_dir, exist_ok=True)
    store = store_for(results_dir, source, python, command.argv)
    env = dict(os.environ, **command.env)
    previous = os.path.join(results_dir, RESULTS_JSON)
    timeouts = service.suite_timeouts(timeout, previous)
    kwargs = {'batch_size': batch_size} if batch_size else {}
    return service.run_suites(command, env, store, os.path.join(results_dir, 'output'), python, timeouts,
                              parallel=parallel, reruns=reruns, progress=progress, jobs=jobs,
                              previous_results=previous, **kwargs)


def notes_of(results_dir, source, python, runtest=None, excluded=()):
    """{suite: [notes]} stored for this run (exit 0 without a summary, log/XML differences)."""
    python = os.path.abspath(python)
    command = parse_runtest(runtest or DEFAULT_RUNTEST, os.path.abspath(source), python, list(excluded))
    return service.notes(store_for(results_dir, source, python, command.argv))
