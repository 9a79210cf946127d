"""`python -m eb_pytorch_cuda ...` runs the eb-pytorch-cuda command (useful where no console script exists)."""
import sys

from eb_pytorch_cuda.cli import main

sys.exit(main())
