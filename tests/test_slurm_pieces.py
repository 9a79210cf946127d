"""Long suites split into pieces on the real single-node Slurm (tests/slurm_cluster.py), with
PyTorch's real harness: Debian's 2.6.0 run_test.py and torch 2.6.0 (tools/setup.sh's harness block).

One spread run holds everything, because each run_test.py call imports torch three times on a 2-core
machine: a real suite (test_native_functions) as 3 pieces and a suite of the same harness with a known
failure (test_piece_standin: a stand-in file in the real tree, since no real CPU suite of this tree fails
a test by design) as 2 pieces, on 3 jobs, one job scancelled while it runs a piece.  The result must be
the unsplit serial run's: same statuses, counts and failing test ids, the same test ids in the XML
reports; the known failure is still known; only the cancelled piece ran twice.
"""

import json
import os
import subprocess
import threading
import time
import urllib.parse
import xml.etree.ElementTree as ET

from environment import REAL_PYTHON
from helpers import comparable, real_tree
from procs import stop_what_runs

from eb_pytorch_cuda.testsuite.policy.judging import KnownFailure, Policy, judge
from eb_pytorch_cuda.testsuite.results.pieces import SEPARATOR
from eb_pytorch_cuda.testsuite.run.executor import execute
from eb_pytorch_cuda.testsuite.run.here import HereExecutor
from eb_pytorch_cuda.testsuite.run.plan import PieceRule, RunRequest
from eb_pytorch_cuda.testsuite.run.command import TestCommand as Command  # not a pytest test class
from eb_pytorch_cuda.testsuite.run.store import ResultStore
from eb_pytorch_cuda.testsuite.spread import controller
from eb_pytorch_cuda.testsuite.spread.workqueue import SuiteQueue

SUITES = ['test_native_functions', 'test_piece_standin']
PREVIOUS = {'test_native_functions': 1799, 'test_piece_standin': 1199}  # 3 and 2 pieces of at most 600 s
KNOWN = 'test_piece_standin::test_zz_known_failure'

# the failing test last, so that a run that stops at its first failure (Debian's tree has no pytest.ini:
# docs/design.md section 5) runs the same tests whole as in pieces
STANDIN = '''from torch.testing._internal.common_utils import TestCase, run_tests


class TestPieces(TestCase):
{tests}
    def test_zz_known_failure(self):
        self.assertEqual(1, 2)


if __name__ == '__main__':
    run_tests()
'''


def _tree(root):
    """The real tree (helpers.real_tree) with the stand-in suite test_piece_standin of 16 passing tests and the
    known failure."""
    real_tree(root)
    tests = ''.join(f'    def test_{index:02d}(self):\n        self.assertEqual({index} + 1, {index + 1})\n\n'
                    for index in range(16))
    (root / 'test' / 'test_piece_standin.py').write_text(STANDIN.format(tests=tests))
    return root / 'test'


def _xml_test_ids(test_dir, suite):
    """(classname, name) of every testcase in the suite's XML reports, from every report directory."""
    ids = []
    reports = test_dir / 'test-reports'
    for runner in sorted(os.listdir(reports)):
        directory = reports / runner / suite
        for name in sorted(os.listdir(directory)) if directory.is_dir() else []:
            ids += [(case.get('classname'), case.get('name')) for case in ET.parse(directory / name).iter('testcase')]
    return sorted(ids)


def test_pieces_on_jobs_give_the_unsplit_result_a_cancelled_one_reruns(
        harness26, slurm, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ('PYTHONPATH', 'CI')}
    serial_dir = _tree(tmp_path / 'serial')
    started = time.time()
    _plan, serial = execute(HereExecutor(), RunRequest(Command(str(serial_dir), {}, [REAL_PYTHON, 'run_test.py']),
                                                       env, str(tmp_path / 'serial-out'), REAL_PYTHON, {'': 900},
                                                       units=SUITES),
                            ResultStore(str(tmp_path / 'serial-results' / 'r.jsonl'), 'real'))
    serial_seconds = time.time() - started

    spread_dir = _tree(tmp_path / 'spread')
    store = ResultStore(str(tmp_path / 'spread-results' / 'r.jsonl'), 'real')
    queue_dir = controller.queue_dir_of(store)
    killed = {}

    def cancel_a_job_running_a_piece():
        deadline = time.time() + 900
        while time.time() < deadline and not killed:
            claims = os.listdir(os.path.join(queue_dir, 'claims')) if os.path.isdir(queue_dir + '/claims') else []
            for name in claims:
                quoted = name.rpartition('~')[0]
                key = urllib.parse.unquote(quoted)
                finished = os.path.exists(os.path.join(queue_dir, 'done', quoted))
                if name.startswith('.') or SEPARATOR not in key or finished:
                    continue
                holder = SuiteQueue(queue_dir).claims().get(key, (0, None))[1]
                job = holder.split('.')[0] if holder else None
                # cancelled while the piece runs, because its suite file is stopped there (a fixed 5 s sleep
                # counted on the machine's speed for the piece to have started and not yet ended)
                done = os.path.join(queue_dir, 'done', quoted)
                if job and stop_what_runs(job, key.split(SEPARATOR)[0] + '.py', lambda: os.path.exists(done)):
                    killed.update(job=job, key=key)
                    subprocess.run(['scancel', job], check=True)
                    return
            time.sleep(0.5)

    killer = threading.Thread(target=cancel_a_job_running_a_piece)
    killer.start()
    lines = []
    started = time.time()
    spread = controller.SpreadOptions(shared_paths=[str(tmp_path)], slurm_settings={'cpus_per_job': 1}, poll=1,
                                      pieces=PieceRule(PREVIOUS))
    _plan, result = execute(controller.SlurmExecutor(3, spread, lines.append),
                            RunRequest(Command(str(spread_dir), {}, [REAL_PYTHON, 'run_test.py']), env,
                                       str(tmp_path / 'spread-out'), REAL_PYTHON, {'': 900}, units=SUITES), store,
                            lines.append)
    spread_seconds = time.time() - started
    killer.join()
    print(f'serial {serial_seconds:.0f} s, spread in pieces on 3 jobs {spread_seconds:.0f} s')  # shown with -s

    assert any(line.startswith('2 long suite(s) run as pieces (5 in all)') for line in lines), lines
    assert comparable(result) == comparable(serial), lines
    assert result.suites['test_piece_standin'].status == 'failed'
    assert [t.test_id for t in result.suites['test_piece_standin'].failed_tests] == ['TestPieces.test_zz_known_failure']
    assert result.suites['test_native_functions'].counts['passed'] == 11
    for suite in SUITES:
        assert _xml_test_ids(spread_dir, suite) == _xml_test_ids(serial_dir, suite) != []
    verdict = judge(result, Policy(known=[KnownFailure(KNOWN, 'fails by design')]))
    assert verdict.passed and [(suite, test) for suite, test, _ in verdict.known] == \
        [('test_piece_standin', 'TestPieces.test_zz_known_failure')]

    with open(os.path.join(queue_dir, 'spec.json')) as handle:
        timeouts = json.load(handle)['timeouts']
    assert timeouts == {'': 900, **{f'test_native_functions{SEPARATOR}{i}/3': 600 for i in (1, 2, 3)},  # 900 / 3,
                        **{f'test_piece_standin{SEPARATOR}{i}/2': 600 for i in (1, 2)}}  # 900 / 2: the floor
    assert killed, 'no job was seen running a piece'
    claims = [urllib.parse.unquote(name) for name in os.listdir(os.path.join(queue_dir, 'claims'))
              if not name.startswith('.')]
    again = sorted(name.rpartition('~')[0] for name in claims if not name.endswith('~1'))
    assert again == [killed['key']], (claims, lines)  # the cancelled piece alone ran again
    assert sorted(name.rpartition('~')[0] for name in claims) == sorted(
        [f'test_native_functions{SEPARATOR}{i}/3' for i in (1, 2, 3)]
        + [f'test_piece_standin{SEPARATOR}{i}/2' for i in (1, 2)] + [killed['key']])
