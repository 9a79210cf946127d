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


def missing(what: str) -> None:
    """Skip (or, under CI, fail) the test for lack of what, named with how to get it."""
    message = f'{what}: run bash tools/setup.sh' if 'setup.sh' not in what else what
    if os.environ.get(REQUIRE_ALL) == '1':
        pytest.fail(f'{message} ({REQUIRE_ALL}=1: nothing may be skipped)')
    pytest.skip(message)
