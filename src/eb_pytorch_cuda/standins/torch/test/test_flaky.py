"""A flaky test: fails on its first run, passes when rerun (the marker lives in the test dir, or at
$STANDIN_FLAKY_MARKER so that it outlives the build directory)."""
import os
import unittest

from common import HERE, run_tests

MARKER = os.environ.get('STANDIN_FLAKY_MARKER') or os.path.join(HERE, '.flaky-already-failed-once')


class TestFlaky(unittest.TestCase):
    def test_sometimes(self):
        if not os.path.exists(MARKER):
            open(MARKER, 'w').close()
            self.fail('first run fails')


if __name__ == '__main__':
    run_tests(__file__)
