"""A full results disk is one line naming the file that could not be written.

`test-suite` on the stand-in harness (one quick suite) with --results on a real tmpfs of 8 to 40 KiB, so
the disk fills at each write in turn (the results store, a suite's output, the JSON result, the Markdown
summary): every run either finishes with a verdict (exit 0 or 1) or stops with exit 2 and one line
`<file under the results directory>: cannot be written: No space left on device`, no traceback, and
leaves no process of its own behind.  Needs root and mount(8) (skipped otherwise, saying so).
"""

import os
import shutil

import pytest

from helpers import cli, standin_test_tree

SIZES = ('8k', '12k', '16k', '20k', '24k', '40k')


@pytest.fixture(scope='module')
def source(tmp_path_factory):
    return standin_test_tree(tmp_path_factory.mktemp('tree') / 'src', keep=('test_known_failure',)).parent


def _ours(tree):
    """Processes whose command line names the tree (the suites of this test), from /proc."""
    found = []
    for pid in filter(str.isdigit, os.listdir('/proc')):
        try:
            with open(f'/proc/{pid}/cmdline', 'rb') as handle:
                if str(tree).encode() in handle.read():
                    found.append(pid)
        except OSError:
            continue
    return found


@pytest.mark.parametrize('size', SIZES)
def test_a_full_results_disk_names_the_file(source, tmpfs, size):
    results = tmpfs(size) / 'results'
    done = cli('test-suite', source, '--python', shutil.which('python3'), '--results', results)
    assert 'Traceback' not in done.stderr
    if done.returncode in (0, 1):
        assert os.path.exists(results / 'pytorch-test-results.json')
    else:
        assert done.returncode == 2, done.stderr
        line = done.stderr.splitlines()[-1]
        assert line.startswith(f'eb-pytorch-cuda: error: {results}{os.sep}'), line
        assert line.endswith(': cannot be written: No space left on device'), line
    assert _ours(source) == []


def test_some_size_fills_the_disk(source, tmpfs):
    """The sizes do reach a full disk (else the test above would check nothing)."""
    done = cli('test-suite', source, '--python', shutil.which('python3'), '--results', tmpfs('8k') / 'results')
    assert done.returncode == 2 and 'No space left on device' in done.stderr
