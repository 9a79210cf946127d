"""Bad input: one-line error naming the file and the problem, non-zero exit, nothing modified."""

import os

import pytest

from conftest import cli


def _assert_clean_failure(done, path, problem):
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert str(path) in lines[0] and problem in lines[0], lines[0]


def _snapshot(directory):
    return {name: open(os.path.join(directory, name), 'rb').read() for name in sorted(os.listdir(directory))
            if name.endswith('.so')}


@pytest.fixture
def bad_files(tmp_path, standin8):
    good = open(standin8.torch_lib, 'rb').read()
    tmp_path = tmp_path / 'bad'
    tmp_path.mkdir()
    files = {
        'text.so': b'just some text\n',
        'script.so': b'/* GNU ld script */\nINPUT(libfoo.so.1)\n',
        'group.so': b'GROUP ( /lib/libc.so.6 )\n',
        'empty.so': b'',
        'tiny.so': good[:30],
        'truncated.so': good[:len(good) // 3],
        'header_only.so': good[:64],
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    return tmp_path


@pytest.mark.parametrize('name,problem', [
    ('text.so', 'is not an ELF file'),
    ('script.so', 'is a linker script'),
    ('group.so', 'is a linker script'),
    ('empty.so', 'is not an ELF file'),
    ('tiny.so', 'is a truncated ELF file'),
    ('truncated.so', 'truncated'),
    ('header_only.so', 'truncated'),
])
@pytest.mark.parametrize('command', ['add-needed', 'check-needed'])
def test_bad_file_gives_one_line_error_and_is_untouched(bad_files, name, problem, command):
    before = _snapshot(bad_files)
    done = cli(command, bad_files / name, 'libcudnn_cnn_train.so.8')
    _assert_clean_failure(done, bad_files / name, problem)
    assert _snapshot(bad_files) == before


def test_missing_file_and_directory(tmp_path):
    _assert_clean_failure(cli('add-needed', tmp_path / 'nope.so', 'libx.so.1'), tmp_path / 'nope.so', 'no such file')
    _assert_clean_failure(cli('add-needed', tmp_path, 'libx.so.1'), tmp_path, 'is a directory')


def test_relocatable_object_is_rejected(tmp_path):
    source = tmp_path / 'a.c'
    source.write_text('int f(void) { return 1; }\n')
    import subprocess
    subprocess.run(['gcc', '-c', '-fPIC', '-o', str(tmp_path / 'a.o'), str(source)], check=True)
    _assert_clean_failure(cli('add-needed', tmp_path / 'a.o', 'libx.so.1'), tmp_path / 'a.o', 'ET_REL')


def test_foreign_architecture_is_read_but_not_loaded(standin8, tmp_path):
    # same file with e_machine set to AArch64: readable and patchable, but the host loader cannot map it
    foreign = tmp_path / 'foreign.so'
    data = bytearray(open(standin8.torch_lib, 'rb').read())
    data[18:20] = (183).to_bytes(2, 'little')
    foreign.write_bytes(bytes(data))
    done = cli('add-needed', foreign, 'libcudnn.so.8', check_rc=0)  # reading is architecture-independent
    assert 'already present' in done.stdout
    _assert_clean_failure(cli('check-needed', '--load', foreign, 'libcudnn.so.8'), foreign,
                          'cannot be loaded on this host: it is EM_AARCH64')


def test_read_only_directory_is_refused_before_anything_is_written(standin8):
    if os.geteuid() == 0:
        pytest.skip('root ignores directory permissions')  # pragma: no cover
    libdir = os.path.dirname(standin8.torch_lib)
    os.chmod(libdir, 0o555)
    try:
        _assert_clean_failure(cli('add-needed', standin8.torch_lib, 'libcudnn_cnn_train.so.8'),
                              standin8.torch_lib, 'is not writable')
    finally:
        os.chmod(libdir, 0o755)


@pytest.mark.parametrize('soname', ['', 'lib/x.so.1', 'lib x.so'])
def test_values_that_are_not_sonames_are_rejected(standin8, soname):
    before = open(standin8.torch_lib, 'rb').read()
    _assert_clean_failure(cli('add-needed', standin8.torch_lib, soname), standin8.torch_lib, 'is not a soname')
    assert open(standin8.torch_lib, 'rb').read() == before


def test_patchelf_failure_leaves_no_temporary_file(standin8, monkeypatch, tmp_path):
    # a patchelf that fails (real binary, given a bogus option) must not leave a half-written copy
    from eb_pytorch_cuda.elf import patchelf as writer
    from eb_pytorch_cuda.errors import PluginError
    fake = tmp_path / 'patchelf'
    fake.write_text('#!/bin/sh\necho "patchelf: cannot write" >&2\nexit 1\n')
    fake.chmod(0o755)
    monkeypatch.setattr(writer, 'patchelf_binary', lambda: str(fake))
    before = open(standin8.torch_lib, 'rb').read()
    with pytest.raises(PluginError, match='patchelf failed'):
        writer.write_needed(standin8.torch_lib, ['libcudnn_cnn_train.so.8'])
    assert open(standin8.torch_lib, 'rb').read() == before
    assert os.listdir(os.path.dirname(standin8.torch_lib)) == ['libtorch_cuda.so']


@pytest.mark.parametrize('command', ['add-needed', 'check-needed'])
def test_fifo_named_like_a_library_is_refused_without_blocking(tmp_path, command):
    fifo = tmp_path / 'libfifo.so'
    os.mkfifo(fifo)
    import shutil
    import subprocess
    import sys
    script = shutil.which('eb-pytorch-cuda', path=os.path.dirname(sys.executable) + os.pathsep + os.environ['PATH'])
    try:
        done = subprocess.run([script, command, str(fifo), 'libm.so.6'], capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:  # pragma: no cover
        pytest.fail(f'{command} blocked on a FIFO')
    _assert_clean_failure(done, fifo, 'is a FIFO (named pipe), not a regular file')
    assert os.listdir(tmp_path) == ['libfifo.so']


def test_missing_expect_dir_is_bad_input_not_a_failed_check(standin8, tmp_path):
    missing = tmp_path / 'nonexistent'
    _assert_clean_failure(cli('check-needed', standin8.torch_lib, 'libcudnn.so.8', '--expect-dir', missing),
                          missing, 'no such directory (given as --expect-dir)')
    _assert_clean_failure(cli('check-needed', standin8.torch_lib, 'libcudnn.so.8', '--expect-dir',
                              standin8.torch_lib), standin8.torch_lib, 'is not a directory')


def test_missing_preload_is_bad_input_not_a_failed_check(standin8, tmp_path):
    missing = tmp_path / 'nonexistent' / 'libcuda.so.1'
    _assert_clean_failure(cli('check-needed', '--load', standin8.torch_lib, 'libcudnn.so.8', '--preload', missing),
                          missing, 'no such file')


@pytest.mark.parametrize('offset,value,problem', [
    (4, 1, 'but a 32-bit little-endian header is 52 bytes'),  # EI_CLASS 64 -> 32
    (5, 2, 'but a 64-bit big-endian header is 64 bytes'),  # EI_DATA little -> big
])
def test_flipped_ident_byte_is_named_not_called_static(standin8, tmp_path, offset, value, problem):
    flipped = tmp_path / 'flipped.so'
    data = bytearray(open(standin8.torch_lib, 'rb').read())
    data[offset] = value
    flipped.write_bytes(bytes(data))
    for command in ('add-needed', 'check-needed'):
        done = cli(command, flipped, 'libcudnn.so.8')
        _assert_clean_failure(done, flipped, 'has an inconsistent ELF header')
        assert problem in done.stderr and 'EI_CLASS or EI_DATA byte corrupt' in done.stderr
        assert 'statically linked' not in done.stderr
    assert open(flipped, 'rb').read() == bytes(data)
