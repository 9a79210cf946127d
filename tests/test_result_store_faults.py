"""The suite-result store under faults: a torn last line, records that are not records, two runs at once.

Each case was found by a fault probe: the resumed run appended onto a torn fragment (a passed suite became
`missing`, a false FAIL); `[1,2]`, invalid UTF-8 or a bare fingerprint crashed test-suite with a traceback,
again on every rerun; two runs on one results directory both ran every suite and counted each other's XML.
The store is a real file; the runs are real `eb-pytorch-cuda test-suite` processes on the stand-in tree.
"""

import fcntl
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eb_pytorch_cuda.testsuite.results.records import StoreRecord
from eb_pytorch_cuda.testsuite.run.store import ResultStore
from helpers import module_env, standin_test_tree, suite_command

PASSED = {'name': 'test_a', 'status': 'passed', 'counts': {'passed': 2}}


def _record(suite: dict) -> StoreRecord:
    return StoreRecord.from_json({'suite': suite})


def _store(tmp_path, fingerprint='fp-a'):
    return ResultStore(str(tmp_path / 'r' / 'results.jsonl'), fingerprint)


def test_a_torn_last_line_is_noted_and_the_next_record_is_not_lost(tmp_path):
    store = _store(tmp_path)
    store.append(_record(PASSED))
    with open(store.path, 'ab') as handle:  # what kill -9 in the middle of a write leaves
        handle.write(json.dumps({'suite': dict(PASSED, name='test_b'), 'fingerprint': 'fp-a'}).encode()[:25])
    notes = []
    store.notice = notes.append
    assert set(store.load()) == {'test_a'}
    store.append(_record(dict(PASSED, name='test_b')))  # the resumed run's record
    assert set(store.load()) == {'test_a', 'test_b'}  # was: {'test_a'}, and test_b 'missing': a false FAIL
    assert store.result(['test_a', 'test_b']).suites['test_b'].status == 'passed'
    assert notes == [f'{store.path}: line 2: unterminated last line of 25 bytes (a write cut short); set aside (a '
                     f'suite with no valid record runs again)',
                     f'{store.path}: line 2: not a JSON record (Unterminated string starting at: line 1 column 20 '
                     f'(char 19)); set aside (a suite with no valid record runs again)']
    assert store.set_aside == notes


@pytest.mark.parametrize('line,problem', [
    (b'[1, 2]', 'not a record (a JSON list, not an object)'),
    (b'{"suite": {"name": "t\xff\xfe"}, "fingerprint": "fp-a"}', 'not UTF-8 (byte 21)'),
    (b'"fp-a"', 'not a record (a JSON str, not an object)'),
    (b'{"fingerprint": "fp-a"}', 'not a record (suite: must be an object)'),
    (b'{"suite": {"name": "t"}}', 'not a record (no fingerprint)'),
    (b'{"suite": {"name": "t", "counts": {"failed": "1"}}, "fingerprint": "fp-a"}',
     'not a record (suite.counts.failed: must be an integer from 0'),
    (b'{"suite": {"name": "t", "seconds": NaN}, "fingerprint": "fp-a"}', 'NaN is not a number JSON allows'),
    (b'{"suite": {"name": "t"}, "fingerprint": "fp-a", "notes": "x"}', 'notes: must be a list of strings'),
    (b'{"suite": {"name": "t", "status": "passed"', 'not a JSON record'),
])
def test_a_line_that_is_not_a_record_is_named_and_set_aside_not_a_traceback(tmp_path, line, problem):
    store = _store(tmp_path)
    store.append(_record(PASSED))
    with open(store.path, 'ab') as handle:
        handle.write(line + b'\n')
    store.append(_record(dict(PASSED, name='test_c')))
    notes = []
    store.notice = notes.append
    assert set(store.load()) == {'test_a', 'test_c'}
    store.load()
    assert len(notes) == 1 and notes[0].startswith(f'{store.path}: line 2: ') and problem in notes[0], notes


def test_records_of_other_builds_stay_apart(tmp_path):
    _store(tmp_path, 'fp-b').append(_record(dict(PASSED, name='test_b')))
    store = _store(tmp_path)
    store.append(_record(PASSED))
    assert set(store.load()) == {'test_a'} and store.set_aside == []


def _tree(root, seconds=0):
    """The stand-in test tree with test_known_failure and one suite that sleeps `seconds`."""
    test_dir = standin_test_tree(root, keep=('test_known_failure',), distributed=False)
    (test_dir / 'test_sleep.py').write_text(
        'import time\nimport unittest\n\nfrom common import run_tests\n\n\nclass TestSleeps(unittest.TestCase):\n'
        f'    def test_sleep(self):\n        time.sleep({seconds})\n\n    def test_other(self):\n'
        '        self.assertTrue(True)\n\n\nif __name__ == "__main__":\n    run_tests(__file__)\n')
    return root


def _test_suite(source, results, *extra):
    return subprocess.Popen(suite_command(source, results, '--format', 'json', '--timeout', '120', *extra),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(process):
    out, err = process.communicate(timeout=600)
    return process.returncode, out, err


def _verdict(code, stdout):
    """What the run decided (the installed easyblocks' default budget decides pass or fail: 10 in 5.x, 0 in 4.x),
    checked against the exit status."""
    data = json.loads(stdout)
    assert code == (0 if data['verdict'] == 'pass' else 1)
    return data['tests'], data['failed_tests'], sorted(s['name'] for s in data['suites'])


def test_test_suite_resumes_over_a_torn_and_corrupt_store_with_the_same_verdict(tmp_path):
    source, results = _tree(tmp_path / 'src'), tmp_path / 'results'
    code, out, err = _finish(_test_suite(source, results))
    first = _verdict(code, out)
    assert first == (5, 1, ['test_known_failure', 'test_sleep']), err  # test_known_failure fails once
    store = results / 'results.jsonl'
    lines = store.read_bytes().splitlines(keepends=True)
    assert len(lines) == 2
    # corrupt records before the good ones, and the last record torn in the middle
    store.write_bytes(b'[1,2]\n\xff\xfe\n"' + b'0' * 64 + b'"\n' + lines[0] + lines[1][:len(lines[1]) // 2])
    torn = json.loads(lines[1])['suite']['name']
    code, out, err = _finish(_test_suite(source, results))
    assert 'Traceback' not in err, err
    assert _verdict(code, out) == first  # no suite became 'missing'
    assert 'resuming: 1 suite(s) already measured for this build, 1 to run' in err
    for number, problem in ((1, 'not a record (a JSON list'), (2, 'not UTF-8'), (3, 'not a record (a JSON str'),
                            (5, 'unterminated last line')):
        assert f'{store}: line {number}: {problem}' in err, err
    assert 'running it alone' not in err and torn in err
    # the next run finds everything measured: the torn fragment became a line of its own, set aside
    code, out, err = _finish(_test_suite(source, results))
    assert _verdict(code, out) == first
    assert 'resuming: 2 suite(s) already measured for this build, 0 to run' in err
    assert f'{store}: line 5: not a JSON record' in err


def test_a_second_run_on_the_same_results_directory_refuses_in_one_line(tmp_path):
    source, results = _tree(tmp_path / 'src', seconds=6), tmp_path / 'results'
    first = _test_suite(source, results)
    lock = results / 'results.jsonl.lock'
    deadline = time.time() + 120
    while not (lock.exists() and lock.read_text().strip()):
        assert time.time() < deadline and first.poll() is None, first.communicate()
        time.sleep(0.1)
    code, out, err = _finish(_test_suite(source, results))
    assert code == 2 and out == '', (out, err)
    *said, refusal = err.splitlines()  # what it said it would run (the command, the CUDA mode), then one line
    assert all(line.startswith('== ') for line in said), err
    assert refusal == (f'eb-pytorch-cuda: error: {results}: another run (pid {first.pid}) is using this results '
                       f'directory (results.jsonl.lock is locked); wait for it to end or use another results '
                       f'directory')
    code, out, err = _finish(first)
    assert _verdict(code, out) == (5, 1, ['test_known_failure', 'test_sleep']), err  # nothing counted twice
    # the lock goes with the run that held it, even one killed: flock is released by the kernel
    holder = subprocess.Popen([sys.executable, '-c', 'import fcntl, os, sys, time\n'
                               f'fd = os.open({str(lock)!r}, os.O_RDWR)\nfcntl.flock(fd, fcntl.LOCK_EX)\n'
                               'print("held", flush=True)\ntime.sleep(600)\n'], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline() == 'held\n'
    code, out, err = _finish(_test_suite(source, results))
    assert code == 2 and 'is using this results directory' in err
    holder.kill()
    holder.wait()
    code, out, err = _finish(_test_suite(source, results))
    assert code in (0, 1) and 'resuming: 2 suite(s) already measured' in err, err
    with open(lock) as handle:  # and nobody holds it now
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)


def test_a_keep_killed_mid_copy_leaves_nothing_that_a_next_run_would_install(tmp_path):
    """The fault probe's case: kill -9 while the tested installation is copied to be kept.  The copy is made
    beside its place and recorded only after its rename, so a killed copy is never reused (recorded first, the
    next eb installed 24 of 300 files)."""
    installation = tmp_path / 'tested'
    for index in range(300):
        (installation / f'dir{index % 10}').mkdir(parents=True, exist_ok=True)
        (installation / f'dir{index % 10}' / f'file{index}').write_bytes(os.urandom(256 * 1024))
    store = _store(tmp_path)
    script = (
        'import sys\n'
        'from eb_pytorch_cuda.testsuite import service\n'
        'from eb_pytorch_cuda.testsuite.results.model import RunResult\n'
        'from eb_pytorch_cuda.testsuite.run.store import ResultStore\n'
        'service.keep(ResultStore(sys.argv[1], "fp-a"), RunResult(), sys.argv[2])\n')
    child = subprocess.Popen([sys.executable, '-c', script, store.path, str(installation)],
                             env=module_env())
    partial = store.cache_dir + '.partial'
    deadline = time.monotonic() + 60
    while not (os.path.isdir(partial) and len(os.listdir(partial)) >= 2) and child.poll() is None:
        assert time.monotonic() < deadline
        time.sleep(0.005)
    child.kill()
    child.wait()
    if child.returncode == 0:
        pytest.skip('the copy finished before the kill')  # pragma: no cover
    assert store.load_final() is None  # not recorded as kept: the next run rebuilds
    assert not os.path.exists(store.cache_dir)  # and nothing half-copied sits where a kept build would be
    service_keep_again = subprocess.run([sys.executable, '-c', script, store.path, str(installation)],
                                        env=module_env())
    assert service_keep_again.returncode == 0 and store.load_final() is not None
    copied = sorted(str(p.relative_to(store.cache_dir)) for p in Path(store.cache_dir).rglob('*'))
    assert copied == sorted(str(p.relative_to(installation)) for p in installation.rglob('*'))
    assert not os.path.exists(partial)  # the killed run's partial copy was cleared
