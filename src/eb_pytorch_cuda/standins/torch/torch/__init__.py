"""PyTorch stand-in: loads lib/libtorch_cuda.so as the real torch does and exposes one cuDNN call."""
import ctypes
import os

_LIB = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'lib', 'libtorch_cuda.so')
_torch_cuda = ctypes.CDLL(_LIB, mode=os.RTLD_NOW | os.RTLD_GLOBAL) if os.path.exists(_LIB) else None  # CPU-only

__version__ = '2.1.2'


def conv(x):
    """Run the stand-in 'convolution' through cuDNN; raises RuntimeError when cuDNN fails."""
    if _torch_cuda is None:
        return 2 * int(x) + 1  # the CPU path computes the same result
    result = _torch_cuda.torch_conv(int(x))
    if result < 0:
        raise RuntimeError('cuDNN error: CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED (see the message above)')
    return result
