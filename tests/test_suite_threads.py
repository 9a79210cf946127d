"""Each suite process's intra-op threads when the test step runs several run_test.py calls at a time (measured
on the H200 node, docs/validation/h200-2026-12-03-bench-cpu-pool-ours/: with torch's default of
a thread per core in every process, 8 calls of up to 3 suites on 16 cores ran test_masked in 194 s whole and in
844 s as two pieces side by side, so the second, cut run took 0.80x of the plain call where the first took 0.48x).

The rule (run/node.threads_per_suite, run/plan.suite_threads): OMP_NUM_THREADS = CPUs // (calls x the harness's
pool size), at least 1, set only where the plan runs more than one call and the user (the environment, the
runtest line) has not set it.  The pool size is read from the real harness trees (tools/testing/test_selections.py's
NUM_PROCS: 2 on the 2.1 line, 3 on 2.6), and a real 2.6.0 run_test.py run by the executor here shows that torch in a
suite process gets the planned count, and keeps the user's own.
"""

import os

import pytest
from environment import HARNESS21_TREE, REAL_PYTHON, REAL_TREE
from helpers import real_tree

from eb_pytorch_cuda.testsuite.run.command import TestCommand as Command  # not a pytest test class
from eb_pytorch_cuda.testsuite.run.executor import execute
from eb_pytorch_cuda.testsuite.run.harness import harness_of
from eb_pytorch_cuda.testsuite.run.here import HereExecutor
from eb_pytorch_cuda.testsuite.run.node import threads_per_suite, usable_cpus
from eb_pytorch_cuda.testsuite.run.plan import RunRequest, suite_threads
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
    assert suite_threads({}, 1, 3, 16) is None  # upstream's test step: one run_test.py call
    assert suite_threads({'OMP_NUM_THREADS': '4'}, 8, 3, 16) is None
    assert suite_threads({}, 8, 3, 16) == '1' and suite_threads({}, 2, 2, 64) == '16'


def test_the_pool_size_is_read_from_the_real_26_harness(harness26):
    assert harness_of(os.path.join(REAL_TREE, 'test')).pool_size == 3


@pytest.mark.harness21
def test_the_pool_size_is_read_from_the_real_21_line_harness():
    assert harness_of(os.path.join(HARNESS21_TREE, 'test')).pool_size == 2


def _run(tmp_path, name, env, parallel):
    tree = real_tree(tmp_path / name)
    (tree / 'test_threads_standin.py').write_text(STANDIN)
    lines = []
    plan, result = execute(HereExecutor(lines.append),
                           RunRequest(Command(str(tree), {}, [REAL_PYTHON, 'run_test.py']), env,
                                      str(tmp_path / f'{name}-out'), REAL_PYTHON, {'': 900}, parallel=parallel,
                                      units=['test_threads_standin']),
                           ResultStore(str(tmp_path / f'{name}-results' / 'r.jsonl'), 'real'), lines.append)
    return plan, result.suites['test_threads_standin'], lines


def test_a_real_suite_process_gets_the_planned_threads_and_keeps_the_users_own(harness26, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ('PYTHONPATH', 'CI', 'OMP_NUM_THREADS')}
    planned = str(threads_per_suite(usable_cpus(), 2, 3))
    plan, suite, lines = _run(tmp_path, 'planned', dict(env, EXPECTED_THREADS=planned), 2)
    assert plan.env['OMP_NUM_THREADS'] == planned and suite.status == 'passed' and suite.counts['passed'] == 1, lines
    assert any(line.startswith(f'OMP_NUM_THREADS={planned} for each suite process') for line in lines), lines
    plan, suite, lines = _run(tmp_path, 'users', dict(env, OMP_NUM_THREADS='2', EXPECTED_THREADS='2'), 2)
    assert plan.env['OMP_NUM_THREADS'] == '2' and suite.status == 'passed', lines
    assert not any(line.startswith('OMP_NUM_THREADS=') for line in lines), lines
