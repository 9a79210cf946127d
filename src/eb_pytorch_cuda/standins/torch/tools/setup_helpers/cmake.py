"""Stand-in for PyTorch's tools/setup_helpers/cmake.py: upstream EB_PyTorch edits this list of the
environment variables passed to CMake (it adds 'WITH_BLAS'), so the file must exist and hold it."""

PASSED_TO_CMAKE = [
    'BLAS',
    'CUDNN_LIBRARY',
]
