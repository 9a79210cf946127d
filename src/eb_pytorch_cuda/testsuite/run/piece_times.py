"""The test-times file that makes the harness split a long suite into exactly the pieces we hand out.

Why a file: run_test.py appends its own `--shard-id=1 --num-shards=1` after any arguments it passes on, so
a piece cannot be asked of a suite's pytest directly (measured on Debian's 2.6.0: 11 of 11 tests ran with
`--shard-id=2 --num-shards=3` on the line).  What the harness does honour is its own file sharding: with
`--shard i k` and a test-times file giving the suite t seconds, tools/testing/test_selections.py cuts it into
ceil(t / 600) pytest shards and hands shard i to machine shard i (measured: 4 + 2 + 5 of 11 tests for
shards 1, 2, 3 of 3).  So the file gives each split suite 600 * k - 1 seconds, under the keys it reads
when BUILD_ENVIRONMENT and TEST_CONFIG match nothing ('default', 'default').  It lives in the tree (the
harness reads it from REPO_ROOT); a file there that we did not write is never replaced.
"""

import json
import os
from typing import Iterable, Optional

from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.inputs import read_bytes, require_regular, write_atomically
from eb_pytorch_cuda.testsuite.results.pieces import Piece
from eb_pytorch_cuda.testsuite.run.harness import Harness

THRESHOLD = 600  # tools/testing/test_selections.py THRESHOLD, 2.1 line and 2.6.0 alike
MARK = 'written_by_eb_pytorch_cuda'


def times_path(test_dir: str, harness: Harness) -> Optional[str]:
    if not harness.times_file:
        return None
    return os.path.join(os.path.dirname(os.path.abspath(test_dir)), harness.times_file)


def check_times_file(test_dir: str, harness: Harness) -> None:
    """PluginError naming the times file when what is there is no regular file: the harness opens it at every
    start (run_test.py's load_test_file_times, its dry run too), and a FIFO makes that open, and ours, wait for a
    writer forever.  Checked without blocking (inputs.require_regular) before the harness is first asked."""
    path = times_path(test_dir, harness)
    if path is None or not os.path.exists(path):
        return  # none (a dangling link too: the harness tests os.path.exists, and shards round robin)
    try:
        require_regular(path)
    except PluginError as err:
        raise PluginError(path, f'{err.problem} (run_test.py opens it at its start and would wait on it, or fail)') \
            from None


def _not_ours(path: str) -> Optional[str]:
    """Why the times file at path is not one this plugin wrote (None: it is ours), read without blocking."""
    try:
        data = json.loads(read_bytes(path))
    except PluginError as err:
        return str(err)
    except (ValueError, RecursionError):
        data = None
    if isinstance(data, dict) and MARK in data:
        return None
    return f'{path} exists and was not written by this plugin'


def write_times(test_dir: str, harness: Harness, pieces: Iterable[Piece]) -> Optional[str]:
    """Write the times file for the split suites among pieces; return why splitting is not possible
    (the harness cannot, or a times file of someone else's is there), None once written."""
    path = times_path(test_dir, harness)
    if path is None:
        return f'{harness.path} cannot split a suite into pytest shards (no test-times sharding in its tree)'
    counts = {piece.suite: piece.count for piece in pieces if not piece.whole}
    if os.path.lexists(path):
        why = _not_ours(path)
        if why:
            return f'{why}: suites run whole'
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_atomically(path, json.dumps({MARK: True, 'default': {'default': {
            suite: THRESHOLD * count - 1 for suite, count in sorted(counts.items())}}}, indent=1, allow_nan=False))
    except OSError as err:  # a read-only tree: the suites run whole, said in one line
        return f'{path} cannot be written: {err.strerror}: suites run whole'
    except PluginError as err:  # write_atomically's own (the file itself): the same
        return f'{err}: suites run whole'
    return None


def clear_times(test_dir: str, harness: Harness) -> None:
    """Empty a times file of ours an earlier run left (its counts would still have the harness shard those suites
    in a run that cuts none); a file of anyone else's, or none, is left alone, and so is one we cannot write."""
    path = times_path(test_dir, harness)
    if path is None or not os.path.lexists(path) or _not_ours(path):
        return
    write_times(test_dir, harness, [])
