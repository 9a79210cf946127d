"""Simulates an eb killed in the middle of the test step: with STANDIN_KILL_EB_ONCE=<marker file>, the
first run kills the `eb` process that runs the tests (SIGKILL, no cleanup); later runs pass.  Before it,
the suite starts a grandchild that would run for 10 minutes (as run_test.py's pool workers would) and
writes its own pid and the grandchild's to <marker file>.pids, so a test can see that none outlives eb."""
import os
import signal
import subprocess
import sys
import time
import unittest

from common import run_tests


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


class TestInterrupted(unittest.TestCase):
    def test_survives(self):
        marker = os.environ.get('STANDIN_KILL_EB_ONCE')
        if marker and not os.path.exists(marker):
            open(marker, 'w').close()
            grandchild = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])
            with open(marker + '.pids', 'w') as handle:
                handle.write(f'{os.getpid()} {grandchild.pid}')
            time.sleep(1)  # suites that ended before are stored within a poll of the batch output (0.25 s)
            eb = _eb_ancestor()
            if eb:
                os.kill(eb, signal.SIGKILL)


if __name__ == '__main__':
    run_tests(__file__)
