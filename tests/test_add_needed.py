"""add-needed: idempotent, atomic (copy, verify, rename, mode kept), refuses entries that do not resolve."""

import os
import stat

import pytest

from helpers import cli, run_loadcheck
from eb_pytorch_cuda.elf.reader import read_elf
from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.patch.needed import add_needed


def test_adds_entry_and_keeps_existing_ones_and_search_paths(standin8):
    before = read_elf(standin8.torch_lib)
    result = add_needed(standin8.torch_lib, ['libcudnn_cnn_train.so.8'])
    after = read_elf(standin8.torch_lib)
    assert result.added == ['libcudnn_cnn_train.so.8']
    assert sorted(after.needed) == sorted(before.needed + ('libcudnn_cnn_train.so.8',))
    assert after.rpath == before.rpath and after.runpath == before.runpath and after.soname == before.soname


def test_second_run_adds_nothing_and_does_not_rewrite_the_file(standin8):
    cli('add-needed', standin8.torch_lib, 'libcudnn_cnn_train.so.8', check_rc=0)
    first = os.stat(standin8.torch_lib)
    done = cli('add-needed', standin8.torch_lib, 'libcudnn_cnn_train.so.8', check_rc=0)
    assert 'already present, nothing to do' in done.stdout
    second = os.stat(standin8.torch_lib)
    assert (first.st_ino, first.st_mtime_ns, first.st_size) == (second.st_ino, second.st_mtime_ns, second.st_size)
    assert read_elf(standin8.torch_lib).needed.count('libcudnn_cnn_train.so.8') == 1


def test_several_sonames_in_one_call_only_missing_ones_added(standin):
    add_needed(standin.torch_lib, standin.leaves[:1])
    result = add_needed(standin.torch_lib, standin.leaves + ['libcudnn.so.%d' % standin.major])
    assert result.added == standin.leaves[1:]
    assert sorted(result.already_present) == sorted(standin.leaves[:1] + ['libcudnn.so.%d' % standin.major])
    needed = read_elf(standin.torch_lib).needed
    assert all(needed.count(s) == 1 for s in standin.leaves)


def test_file_is_replaced_by_rename_not_written_in_place(standin8):
    inode = os.stat(standin8.torch_lib).st_ino
    with open(standin8.torch_lib, 'rb') as held_open:
        original = held_open.read()
        add_needed(standin8.torch_lib, ['libcudnn_cnn_train.so.8'])
        held_open.seek(0)
        assert held_open.read() == original  # a process holding the old file still sees it intact
    assert os.stat(standin8.torch_lib).st_ino != inode
    leftovers = [f for f in os.listdir(os.path.dirname(standin8.torch_lib)) if f != 'libtorch_cuda.so']
    assert leftovers == []


@pytest.mark.parametrize('mode', [0o555, 0o444, 0o750])
def test_mode_is_kept_including_read_only(standin8, mode):
    os.chmod(standin8.torch_lib, mode)
    cli('add-needed', standin8.torch_lib, 'libcudnn_cnn_train.so.8', check_rc=0)
    assert stat.S_IMODE(os.stat(standin8.torch_lib).st_mode) == mode
    assert 'libcudnn_cnn_train.so.8' in read_elf(standin8.torch_lib).needed


def test_refuses_entry_that_does_not_resolve_and_leaves_file_untouched(standin8):
    original = open(standin8.torch_lib, 'rb').read()
    done = cli('add-needed', standin8.torch_lib, 'libcudnn_engines_tensor_ir.so.9', check_rc=2)
    assert done.stderr.count('\n') == 1
    assert standin8.torch_lib in done.stderr and 'refusing to add NEEDED libcudnn_engines_tensor_ir.so.9' in done.stderr
    assert open(standin8.torch_lib, 'rb').read() == original
    assert os.listdir(os.path.dirname(standin8.torch_lib)) == ['libtorch_cuda.so']


def test_force_adds_an_unresolvable_entry_and_the_loader_then_refuses_the_library(standin8):
    # why the refusal exists: the real loader cannot load a library whose NEEDED entry is missing
    cli('add-needed', '--force', standin8.torch_lib, 'libcudnn_engines_tensor_ir.so.9', check_rc=0)
    done = run_loadcheck(standin8.loadcheck, standin8.torch_lib)
    assert done.returncode == 3
    assert 'libcudnn_engines_tensor_ir.so.9: cannot open shared object file' in done.stdout


def test_a_partly_unresolvable_request_adds_nothing(standin8):
    original = open(standin8.torch_lib, 'rb').read()
    with pytest.raises(PluginError, match='libmissing.so.1'):
        add_needed(standin8.torch_lib, ['libcudnn_cnn_train.so.8', 'libmissing.so.1'])
    assert open(standin8.torch_lib, 'rb').read() == original


def test_symlink_to_library_stays_a_symlink_and_its_target_is_patched(standin8, tmp_path):
    link = tmp_path / 'link.so'
    link.symlink_to(standin8.torch_lib)
    add_needed(str(link), ['libcudnn_cnn_train.so.8'])
    assert link.is_symlink()
    assert 'libcudnn_cnn_train.so.8' in read_elf(standin8.torch_lib).needed
