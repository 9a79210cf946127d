"""PyTorch stand-in test driver: runs the cuDNN-using test and prints a unittest-style summary."""
import sys
import unittest


class TestCudnnConvolution(unittest.TestCase):
    def test_conv2d(self):
        import torch
        self.assertEqual(torch.conv(20), 41)


if __name__ == '__main__':
    result = unittest.main(module=__name__, exit=False, argv=[sys.argv[0], '-v']).result
    sys.exit(0 if result.wasSuccessful() else 1)
