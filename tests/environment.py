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

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The 2.1-line tree (tools/setup-harness21.sh copies it from ../shared): the tests that read it carry the marker
# `harness21` (tests/conftest.py skips them, or fails them under CI, before any fixture when the tree is not there,
# and fails a test that reads it without the marker).  HARNESS21_VARIABLE points them at another tree, as
# setup-harness21.sh's HARNESS21_TREE does: one that is not there is a tree hidden on purpose (.ci/run's bare-clone
# step), so they skip even under EB_PYTORCH_CUDA_REQUIRE_ALL=1; CI's own run never sets it.
HARNESS21_VARIABLE = 'EB_PYTORCH_CUDA_HARNESS21_TREE'
DEFAULT_HARNESS21_TREE = os.path.join(REPO, '.venvs', 'pytorch-2.1-harness')
HARNESS21_TREE = os.path.abspath(os.environ.get(HARNESS21_VARIABLE) or DEFAULT_HARNESS21_TREE)

# PyTorch's real 2.6.0 harness (tools/setup.sh's harness block): Debian's source (test/, tools/, version.txt) and
# a Python with torch 2.6.0 and run_test.py's needs
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


def need_harness21() -> None:
    """Go on only where the 2.1-line tree (HARNESS21_TREE) is there; else skip, naming why: pointed away by
    HARNESS21_VARIABLE (skipped even under CI), or absent (`missing`: failed under CI)."""
    if os.path.isfile(os.path.join(HARNESS21_TREE, 'test', 'run_test.py')):
        return
    if os.environ.get(HARNESS21_VARIABLE):
        pytest.skip(f'the 2.1-line harness is hidden: {HARNESS21_VARIABLE}={os.environ[HARNESS21_VARIABLE]} has no '
                    f'test/run_test.py (a tree pointed away on purpose skips, even with {REQUIRE_ALL}=1)')
    missing(HARNESS21_ABSENT)
