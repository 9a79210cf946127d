"""A test that always fails: the easyconfig lists it as a known failure, with its reason."""
import os
import unittest

from common import run_tests


class TestKnown(unittest.TestCase):
    def test_always_fails(self):
        self.fail('fails in this environment (see known_test_failures)')

    def test_passes(self):
        self.assertTrue(True)

    @unittest.skipUnless(os.environ.get('STANDIN_UNKNOWN_FAILURE'), 'only when STANDIN_UNKNOWN_FAILURE is set')
    def test_new_regression(self):
        self.fail('a regression nobody listed')


if __name__ == '__main__':
    run_tests(__file__)
