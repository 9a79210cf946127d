"""Simulates an eb killed in the middle of the test step: with STANDIN_KILL_EB_ONCE=<marker file>, the
first run kills the `eb` process that runs the tests (SIGKILL, no cleanup); later runs pass.  Before it,
the suite starts a grandchild that would run for 10 minutes (as run_test.py's pool workers would) and
writes its own pid and the grandchild's to <marker file>.pids, so a test can see that none outlives eb.

The kill lands where a test means it to land by waiting for that point, never by the machine being quick
(on a loaded CI machine a fixed sleep let both ends slip):
- with STANDIN_KILL_EB_WHEN_STORED=<results directory> and STANDIN_RUN_LOG, eb is killed only once its
  results store (<results directory>/*.jsonl) holds a record of every suite that ran before this one (up
  to two minutes; without them, after a second, as before);
- after the kill the suite goes on running, as a real one would, until eb's death stops it; on that
  SIGTERM it leaves only once run_test.py has gone, so run_test.py never sees this suite end and never
  starts the next one (a suite that simply returned let run_test.py start test_known_failure, under load,
  before the stop reached it).
"""
import glob
import json
import os
import signal
import subprocess
import sys
import time
import unittest

from common import run_tests

WAIT_S = 120  # bounded: a wait that never ends would hang the test instead of failing it


def _eb_ancestor():
    pid = os.getppid()
    while pid > 1:
        with open(f'/proc/{pid}/cmdline', 'rb') as handle:
            argv = handle.read().split(b'\0')
        if any(part.endswith((b'/eb', b'easybuild.main')) for part in argv[:3]):
            return pid
        with open(f'/proc/{pid}/stat') as handle:
            pid = int(handle.read().rsplit(')', 1)[1].split()[1])
    return None


def _stored(directory):
    """Names of the suites recorded in the results stores in directory (one JSON line per finished suite,
    {"suite": {"name": ...}, ...}; eb_pytorch_cuda.testsuite.run.store)."""
    names = set()
    for path in glob.glob(os.path.join(directory, '*.jsonl')):
        with open(path, 'rb') as handle:
            for line in handle.read().split(b'\n'):
                try:
                    names.add(json.loads(line)['suite']['name'])
                except (ValueError, KeyError, TypeError):
                    continue  # a line being written, or not a record
    return names


def _wait_until_the_earlier_suites_are_stored():
    directory, run_log = os.environ.get('STANDIN_KILL_EB_WHEN_STORED'), os.environ.get('STANDIN_RUN_LOG')
    if not (directory and run_log):
        time.sleep(1)  # suites that ended before are stored within a poll of the batch output (0.25 s)
        return
    with open(run_log) as handle:
        earlier = set(handle.read().split()) - {'test_kills_eb'}
    deadline = time.monotonic() + WAIT_S
    while not earlier <= _stored(directory) and time.monotonic() < deadline:
        time.sleep(0.05)


def _leave_after_the_harness(signum, frame, harness=os.getppid()):
    deadline = time.monotonic() + WAIT_S
    while os.getppid() == harness and time.monotonic() < deadline:
        time.sleep(0.01)
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


class TestInterrupted(unittest.TestCase):
    def test_survives(self):
        marker = os.environ.get('STANDIN_KILL_EB_ONCE')
        if marker and not os.path.exists(marker):
            open(marker, 'w').close()
            grandchild = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])
            with open(marker + '.pids', 'w') as handle:
                handle.write(f'{os.getpid()} {grandchild.pid}')
            _wait_until_the_earlier_suites_are_stored()
            eb = _eb_ancestor()
            if eb:
                signal.signal(signal.SIGTERM, _leave_after_the_harness)
                os.kill(eb, signal.SIGKILL)
                time.sleep(600)  # still running when eb's death stops this suite


if __name__ == '__main__':
    run_tests(__file__)
