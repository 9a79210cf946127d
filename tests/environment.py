"""What the tests need from tools/setup.sh, and the one rule for when it is missing.

A developer's machine may lack some of it (no root for Slurm, no Debian for lmod, no 2 GB of wheels):
there a test that needs it is skipped, with the reason and the command that provides it.  CI must
never pass by skipping: .ci/run sets EB_PYTORCH_CUDA_REQUIRE_ALL=1, and then the same call fails.
"""

import os

import pytest

REQUIRE_ALL = 'EB_PYTORCH_CUDA_REQUIRE_ALL'

# why a clone with nothing beside it has no 2.1-line harness (tools/setup-harness21.sh says the same in one line)
HARNESS21_ABSENT = ('the 2.1-line harness (.venvs/pytorch-2.1-harness) is not there: tools/setup.sh copies it from '
                    '../shared/pytorch-2.1-harness, which a clone with nothing beside it lacks')

# PyTorch's real 2.6.0 harness (tools/setup.sh's harness block): Debian's source (test/, tools/, version.txt) and
# a Python with torch 2.6.0 and run_test.py's needs
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REAL_TREE = os.path.join(REPO, '.venvs', 'pytorch-src', 'pytorch-v2.6.0')
REAL_PYTHON = os.path.join(REPO, '.venvs', 'harness', 'bin', 'python')


def missing(what: str) -> None:
    """Skip (or, under CI, fail) the test for lack of what, named with how to get it."""
    message = f'{what}: run bash tools/setup.sh' if 'setup.sh' not in what else what
    if os.environ.get(REQUIRE_ALL) == '1':
        pytest.fail(f'{message} ({REQUIRE_ALL}=1: nothing may be skipped)')
    pytest.skip(message)


def need_real_harness() -> None:
    """Go on only where the real 2.6.0 harness (REAL_TREE, REAL_PYTHON) is there; else `missing` names it."""
    if not (os.path.isfile(os.path.join(REAL_TREE, 'test', 'run_test.py')) and os.access(REAL_PYTHON, os.X_OK)):
        missing("PyTorch's real harness (.venvs/pytorch-src, .venvs/harness of tools/setup.sh's harness block)")
