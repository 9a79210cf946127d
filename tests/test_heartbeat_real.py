"""The heartbeat over PyTorch's real 2.6.0 harness (tools/setup.sh's harness block): the suite it runs is named on
each line with how long its run in progress has lasted.  The suite is a stand-in written into the real tree as
PyTorch writes its test files (no real suite runs for a set time on demand); run_test.py, its `-m serial` session
and its pool, the pytest runs and the output are PyTorch's own."""

import os
import re

from environment import REAL_PYTHON
from helpers import cli, real_tree

# a test file of PyTorch's kind (its common_utils' TestCase and run_tests), written into the real tree
SLEEPS = '''import time

from torch.testing._internal.common_utils import TestCase, run_tests


class TestSleeps(TestCase):
    def test_sleeps(self):
        time.sleep(10)


if __name__ == '__main__':
    run_tests()
'''


def test_the_real_harness_suites_are_named_with_their_times_every_2s(harness26, tmp_path):
    tree = tmp_path / 'pytorch'
    real_tree(tree)
    (tree / 'test' / 'test_sleeps.py').write_text(SLEEPS)
    done = cli('test-suite', tree, '--python', REAL_PYTHON, '--runtest',
               'cd test && %(python)s run_test.py --continue-through-error -i test_sleeps',
               '--heartbeat', 2, '--results', tmp_path / 'r', timeout=900, env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    beats = [line for line in done.stderr.splitlines() if line.startswith('== still running after ')]
    named = [re.search(r': test_sleeps \((\d+)s\); 0/1 suites done; ', line) for line in beats]
    seconds = [int(match.group(1)) for match in named if match]
    assert len(seconds) >= 3 and max(seconds) >= 6, done.stderr
    assert all(line.endswith('no ETA (no previous results)') for line in beats)
    assert re.search(r'^slowest suites: test_sleeps [1-9][0-9]s$', done.stdout, re.M), done.stdout
