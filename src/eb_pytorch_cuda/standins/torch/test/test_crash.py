"""A suite that dies from a signal (like test_cuda_expandable_segments with SIGIOT on some GPUs)."""
import os

os.abort()
