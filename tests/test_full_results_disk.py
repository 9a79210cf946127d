"""A full results disk is one line naming the file that could not be written (issue 28, item 7).

`test-suite` on the stand-in harness (one quick suite) with --results on a real tmpfs of 8 to 40 KiB, so
the disk fills at each write in turn (the results store, a suite's output, the JSON result, the Markdown
summary): every run either finishes with a verdict (exit 0 or 1) or stops with exit 2 and one line
`<file under the results directory>: cannot be written: No space left on device`, no traceback, and
leaves no process of its own behind.  Needs root and mount(8) (skipped otherwise, saying so).
"""

import os
import shutil
import subprocess

import pytest

from helpers import cli
from eb_pytorch_cuda import standins

SIZES = ('8k', '12k', '16k', '20k', '24k', '40k')


@pytest.fixture(scope='module')
def source(tmp_path_factory):
    tree = tmp_path_factory.mktemp('tree') / 'src'
    shutil.copytree(os.path.join(standins.TORCH_SOURCES, 'test'), tree / 'test')
    for name in os.listdir(tree / 'test'):
        if name.startswith('test_') and name != 'test_known_failure.py':
            os.unlink(tree / 'test' / name)
    return tree


@pytest.fixture
def tmpfs(tmp_path):
    points = []

    def mount(size):
        if os.geteuid() != 0 or not shutil.which('mount'):
            pytest.skip('mounting a tmpfs needs root and mount(8)')
        point = tmp_path / f'tmpfs-{size}'
        point.mkdir()
        done = subprocess.run(['mount', '-t', 'tmpfs', '-o', f'size={size},mode=755', 'tmpfs', str(point)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f'cannot mount a tmpfs here: {done.stderr.strip() or done.returncode}')
        points.append(point)
        return point
    yield mount
    for point in points:
        subprocess.run(['umount', str(point)], check=True)


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
