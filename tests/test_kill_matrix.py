"""A PASS means every selected suite ran: the fault matrix.  A real `eb-pytorch-cuda test-suite` over real CPU
suites of PyTorch's real harnesses (Debian's 2.6.0 with torch 2.6.0; the 2.1 line with torch 2.1.2), three suites
in two batches side by side, is killed from outside while a chosen suite runs (tests/killpoints.py: SIGTERM,
SIGKILL or SIGINT to the batch's process group, its run_test.py, our supervisor of it, or the suite's own
process), the way the OOM killer, a Slurm preemption or an operator's `kill` do.  Each case: the run is not a
PASS (exit 1), the killed suite is `terminated` with the signal named, nothing of the run is left running, and the
same command again runs only what the kill interrupted and finishes with the counts of an unkilled run.
"""

import json
import os
import shutil
import signal
import subprocess

import pytest
from environment import HARNESS21_TREE, REAL_PYTHON, REAL_TREE, need_harness21, need_real_harness
from helpers import console_script
from killpoints import Kill, processes_in, run_killed

PYTHON21 = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), '.venvs', 'harness-2.1', 'bin',
                        'python')
SUITES = {'2.6': ['test_type_info', 'test_per_overload_api', 'test_native_functions'],
          '2.1': ['test_type_info', 'test_per_overload_api', 'test_set_default_mobile_cpu_allocator']}
# the counts of an unkilled run (tests/test_real_harness.py, tests/test_real_harness_21.py)
PASSED = {'2.6': {'test_type_info': 5, 'test_per_overload_api': 3, 'test_native_functions': 11},
          '2.1': {'test_type_info': 3, 'test_per_overload_api': 3, 'test_set_default_mobile_cpu_allocator': 2}}
CASES = [  # 2.6 runs a pool suite twice (`-m serial`, then the rest): session 2 is its main run
    ('2.6', Kill('group', signal.SIGTERM, 'test_native_functions', 2)),
    ('2.6', Kill('run_test', signal.SIGINT, 'test_native_functions', 2)),
    ('2.6', Kill('supervisor', signal.SIGKILL, 'test_native_functions', 2)),
    ('2.6', Kill('suite', signal.SIGKILL, 'test_native_functions', 2)),
    pytest.param('2.1', Kill('group', signal.SIGKILL, 'test_type_info'), marks=pytest.mark.harness21),
    pytest.param('2.1', Kill('run_test', signal.SIGTERM, 'test_type_info'), marks=pytest.mark.harness21),
]


def _tree(line, root):
    """A private copy of the line's real tree (the harness writes its reports into it)."""
    if line == '2.6':
        need_real_harness()
        for part in ('test', 'tools'):
            shutil.copytree(os.path.join(REAL_TREE, part), root / part, ignore=shutil.ignore_patterns('test-reports'))
        shutil.copy(os.path.join(REAL_TREE, 'version.txt'), root)
        return REAL_PYTHON
    need_harness21()
    shutil.copytree(HARNESS21_TREE, root, dirs_exist_ok=True, ignore=shutil.ignore_patterns('test-reports'))
    return PYTHON21


def _records(results):
    records = {}
    with open(results / 'results.jsonl') as handle:
        for line in handle:
            record = json.loads(line)
            records[record['suite']['name']] = record
    return records


@pytest.mark.parametrize('line, kill', CASES, ids=lambda value: str(value))
def test_a_kill_from_outside_is_never_a_pass_and_the_same_command_finishes_the_run(line, kill, tmp_path):
    tree, results = tmp_path / 'pytorch', tmp_path / 'results'
    tree.mkdir()
    python = _tree(line, tree)
    argv = ['test-suite', str(tree), '--python', python, '--runtest',
            'cd test && %(python)s run_test.py --continue-through-error -i ' + ' '.join(SUITES[line]),
            '--parallel', '2', '--results', str(results), '--format', 'json']
    code, out, err, what = run_killed(argv, kill, str(results / 'output'))
    assert code == 1 and json.loads(out)['verdict'] == 'fail', (what, err[-2000:])
    record = _records(results)[kill.suite]
    assert record['suite']['status'] == 'terminated' and record['suite']['signal'] == kill.name, (what, record)
    assert record['interrupted'] == kill.name  # not the suite's own failure: run again by the same command
    assert processes_in(str(tree)) == [], what
    # what the kill left measured: the other batch's suites, and its own batch's that had ended before it (2.1's
    # run_test.py runs a batch's suites side by side: a group kill ends a companion still running too)
    measured = [name for name, found in _records(results).items() if found['suite']['status'] == 'passed']
    assert measured and kill.suite not in measured and set(measured) < set(SUITES[line]), (what, measured)
    again = subprocess.run([console_script(), *argv], capture_output=True, text=True, timeout=900)
    assert again.returncode == 0 and json.loads(again.stdout)['verdict'] == 'pass', again.stderr[-2000:]
    assert (f'resuming: {len(measured)} suite(s) already measured for this build, '
            f'{len(SUITES[line]) - len(measured)} to run') in again.stderr, (measured, again.stderr[-2000:])
    final = _records(results)
    assert {name: final[name]['suite']['counts']['passed'] for name in SUITES[line]} == PASSED[line]
    assert processes_in(str(tree)) == []
