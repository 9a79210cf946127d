"""Each suite process's intra-op threads when the test step runs several run_test.py calls at a time (measured
on the H200 node, docs/validation/h200-2026-12-03-bench-cpu-pool-ours/: with torch's default of
a thread per core in every process, 8 calls of up to 3 suites on 16 cores ran test_masked in 194 s whole and in
844 s as two pieces side by side, so the second, cut run took 0.80x of the plain call where the first took 0.48x).

The rule (run/node.threads_per_suite, RunPlan.call_env): OMP_NUM_THREADS = CPUs // (calls x the suite processes
of the call: 1 for a piece or a call of one suite, the harness's pool size for a batch of as many), at least 1,
set only where the plan runs more than one call and the user (the environment, the runtest line) has not set it.
The suites the harness runs alone (its serial list, after the other calls) get torch's own count, as in the plain
call: on the H100 the CUDA tests of nn/test_convolution took 55 s in the plain call and 188 s alone at 1 thread
(docs/validation/h100-2026-12-06-bench-gpu/).  The pool size is read from the real harness trees
(tools/testing/test_selections.py's NUM_PROCS: 2 on the 2.1 line, 3 on 2.6), and a real 2.6.0 run_test.py run by
the executor here shows that torch in a suite process gets the planned count, keeps the user's own, and gets its
own count when it runs alone.
"""

import os
import subprocess

import pytest
from environment import HARNESS21_TREE, REAL_PYTHON, REAL_TREE
from helpers import real_tree

from eb_pytorch_cuda.testsuite.run.command import TestCommand as Command  # not a pytest test class
from eb_pytorch_cuda.testsuite.run.executor import execute
from eb_pytorch_cuda.testsuite.run.harness import harness_of
from eb_pytorch_cuda.testsuite.run.here import HereExecutor
from eb_pytorch_cuda.testsuite.run.node import threads_per_suite, usable_cpus
from eb_pytorch_cuda.testsuite.run.plan import RunRequest, sets_threads
from eb_pytorch_cuda.testsuite.run.store import ResultStore

STANDIN = '''import os

import torch
from torch.testing._internal.common_utils import TestCase, run_tests


class TestThreads(TestCase):
    def test_torch_has_the_expected_intra_op_threads(self):
        self.assertEqual(str(torch.get_num_threads()), os.environ['EXPECTED_THREADS'])


if __name__ == '__main__':
    run_tests()
'''


def test_the_rule_shares_cpus_among_calls_pools_at_least_one_each():
    assert threads_per_suite(16, 8, 3) == 1  # the H200 node under auto: 8 calls of up to 3 suites
    assert threads_per_suite(64, 4, 3) == 5 and threads_per_suite(64, 2, 2) == 16
    assert threads_per_suite(2, 16, 3) == 1 and threads_per_suite(0, 0, 0) == 1


def test_one_call_or_a_user_setting_leaves_the_environment_as_upstream_runs_it():
    assert sets_threads({}, 1, 16) is None  # upstream's test step: one run_test.py call
    assert sets_threads({'OMP_NUM_THREADS': '4'}, 8, 16) is None
    assert sets_threads({}, 8, 16) == 16


def test_the_pool_size_is_read_from_the_real_26_harness(harness26):
    assert harness_of(os.path.join(REAL_TREE, 'test')).pool_size == 3


@pytest.mark.harness21
def test_the_pool_size_is_read_from_the_real_21_line_harness():
    assert harness_of(os.path.join(HARNESS21_TREE, 'test')).pool_size == 2


def _run(tmp_path, name, env, parallel, serial=()):
    tree = real_tree(tmp_path / name)
    (tree / 'test_threads_standin.py').write_text(STANDIN)
    lines = []
    plan, result = execute(HereExecutor(lines.append),
                           RunRequest(Command(str(tree), {}, [REAL_PYTHON, 'run_test.py']), env,
                                      str(tmp_path / f'{name}-out'), REAL_PYTHON, {'': 900}, parallel=parallel,
                                      units=['test_threads_standin'], serial=frozenset(serial)),
                           ResultStore(str(tmp_path / f'{name}-results' / 'r.jsonl'), 'real'), lines.append)
    return plan, result.suites['test_threads_standin'], lines


def _clean_env():
    return {k: v for k, v in os.environ.items() if k not in ('PYTHONPATH', 'CI', 'OMP_NUM_THREADS')}


def test_a_real_suite_process_gets_the_planned_threads_and_keeps_the_users_own(harness26, tmp_path):
    env = _clean_env()
    planned = str(threads_per_suite(usable_cpus(), 2, 1))  # a call of one suite beside one other call
    plan, suite, lines = _run(tmp_path, 'planned', dict(env, EXPECTED_THREADS=planned), 2)
    assert plan.call_env(1)['OMP_NUM_THREADS'] == planned and 'OMP_NUM_THREADS' not in plan.env, lines
    assert suite.status == 'passed' and suite.counts['passed'] == 1, lines
    said = f'OMP_NUM_THREADS for each suite process: {planned} in a piece'
    assert any(line.startswith(said) for line in lines), lines
    plan, suite, lines = _run(tmp_path, 'users', dict(env, OMP_NUM_THREADS='2', EXPECTED_THREADS='2'), 2)
    assert plan.call_env(3)['OMP_NUM_THREADS'] == '2' and suite.status == 'passed', lines
    assert not any(line.startswith('OMP_NUM_THREADS') for line in lines), lines


def test_a_suite_the_harness_runs_alone_gets_torchs_own_thread_count_not_the_shared_one(harness26, tmp_path):
    """The serial list's suites run after the other calls, with none beside them: as in the plain call, torch
    picks its threads (one per core).  Before, they kept the count shared among the calls (1 on the H100 node)."""
    env = _clean_env()
    own = subprocess.run([REAL_PYTHON, '-c', 'import torch; print(torch.get_num_threads())'], env=env, check=True,
                         capture_output=True, text=True).stdout.strip()
    shared = str(threads_per_suite(usable_cpus(), 2, 1))
    if own == shared:
        pytest.skip(f'torch picks {own} thread(s) here, as many as the shared rule gives: nothing to tell apart')
    plan, suite, lines = _run(tmp_path, 'alone', dict(env, EXPECTED_THREADS=own), 2, serial=['test_threads_standin'])
    assert plan.harness.must_serial('test_threads_standin') and plan.shared_cpus == usable_cpus(), lines
    assert suite.status == 'passed' and suite.counts['passed'] == 1, (lines, suite)
    assert plan.call_env(1, alone=True) == plan.env and 'OMP_NUM_THREADS' not in plan.env
