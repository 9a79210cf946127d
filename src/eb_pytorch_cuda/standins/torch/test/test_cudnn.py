"""cuDNN through the stand-in torch: fails with 'Could not load library' unless libtorch_cuda.so is patched."""
import unittest

from common import run_tests


class TestCudnnConvolution(unittest.TestCase):
    def test_conv2d(self):
        import torch
        self.assertEqual(torch.conv(20), 41)

    def test_import(self):
        import torch
        self.assertTrue(torch.__version__)


if __name__ == '__main__':
    run_tests(__file__)
