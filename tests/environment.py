"""What the tests need from tools/setup.sh, and the one rule for when it is missing.

A developer's machine may lack some of it (no root for Slurm, no Debian for lmod, no 2 GB of wheels):
there a test that needs it is skipped, with the reason and the command that provides it.  CI must
never pass by skipping: .ci/run sets EB_PYTORCH_CUDA_REQUIRE_ALL=1, and then the same call fails.
"""

import os

import pytest

REQUIRE_ALL = 'EB_PYTORCH_CUDA_REQUIRE_ALL'


def missing(what: str) -> None:
    """Skip (or, under CI, fail) the test for lack of what, named with how to get it."""
    message = f'{what}: run bash tools/setup.sh' if 'setup.sh' not in what else what
    if os.environ.get(REQUIRE_ALL) == '1':
        pytest.fail(f'{message} ({REQUIRE_ALL}=1: nothing may be skipped)')
    pytest.skip(message)
