"""A stand-in suite (written here, not PyTorch's): one test passes, then the process aborts (SIGABRT), as a
crashing CUDA or cuDNN call would; run by the real 2.1-line run_test.py to record what it prints for it."""
import os

from torch.testing._internal.common_utils import TestCase, run_tests


class TestAbortStandin(TestCase):
    def test_a_passes(self):
        self.assertEqual(1 + 1, 2)

    def test_b_aborts(self):
        os.abort()


if __name__ == '__main__':
    run_tests()
