"""A PyTorch test file that counts its own runs, put into a scratch copy of a real harness tree by
tests/test_harness_retries.py and benchmarks/bench_harness_retries.py: test_b fails on every run (after
$EB_RETRY_PROBE_SECONDS of sleep), test_c fails on its first run only (a flaky test), a and d pass.  Each run of
b and c appends a line to its file in $EB_RETRY_PROBE_DIR."""

import os
import time

from torch.testing._internal.common_utils import TestCase, run_tests


def _ran(name):
    """Count one more run of `name`; return how many there have been."""
    path = os.path.join(os.environ['EB_RETRY_PROBE_DIR'], name)
    with open(path, 'a') as handle:
        handle.write('run\n')
    with open(path) as handle:
        return len(handle.readlines())


class TestRetryProbe(TestCase):
    def test_a_passes(self):
        self.assertTrue(True)

    def test_b_always_fails(self):
        _ran('always')
        time.sleep(float(os.environ.get('EB_RETRY_PROBE_SECONDS', '0')))
        self.fail('fails on every run')

    def test_c_fails_once(self):
        if _ran('once') == 1:
            self.fail('fails on its first run only')

    def test_d_passes(self):
        self.assertTrue(True)


if __name__ == '__main__':
    run_tests()
