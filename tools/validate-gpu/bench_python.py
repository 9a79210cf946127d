"""A Python for benchmarks/bench_gpu_node.py on the GPU machine: a venv of this Python that sees its own torch and
packages and the carried test plugins first, and none of the machine's own pytest plugins (binary_torch's
make_test_python with keep_torch).  Usage: python3 bench_python.py ROOT CARRIED; prints ROOT/bin/python."""

import sys
import sysconfig
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import binary_torch  # noqa: E402 - beside this script

if __name__ == '__main__':
    root, carried = Path(sys.argv[1]), Path(sys.argv[2])
    print(binary_torch.make_test_python(sys.executable, Path(sysconfig.get_path('purelib')), root, first=carried,
                                        keep_torch=True))
