"""A stand-in suite (written here, not PyTorch's): a failing test that prints 150 lines, so the real 2.1-line
run_test.py replays its log as `PRINTING BEGINNING OF LOG FILE` plus the last 100 lines."""
from torch.testing._internal.common_utils import TestCase, run_tests


class TestLongFailureStandin(TestCase):
    def test_passes(self):
        self.assertTrue(True)

    def test_fails_after_long_output(self):
        for line in range(150):
            print(f'output line {line}')
        self.assertEqual(1, 2)


if __name__ == '__main__':
    run_tests()
