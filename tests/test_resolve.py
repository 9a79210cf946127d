"""Resolution follows glibc: RPATH chains through NEEDED loaders, RUNPATH is the object's own, $ORIGIN."""

import os
import subprocess

import pytest

from eb_pytorch_cuda.elf.reader import read_elf
from eb_pytorch_cuda.loader.ldcache import load_ld_so_cache
from eb_pytorch_cuda.loader.resolve import Resolver


def _lib(path, soname, source='int f(void) { return 1; }\n', flags=()):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    c_file = str(path) + '.c'
    with open(c_file, 'w') as handle:
        handle.write(source)
    subprocess.run(['gcc', '-shared', '-fPIC', '-o', str(path), c_file, f'-Wl,-soname,{soname}', *flags], check=True)
    os.unlink(c_file)
    return read_elf(path)


@pytest.fixture
def tree(tmp_path):
    _lib(tmp_path / 'deps' / 'libdep.so.1', 'libdep.so.1')
    return tmp_path


def test_rpath_entry_resolves_and_reports_where(tree):
    top = _lib(tree / 'top' / 'libtop.so', 'libtop.so', flags=['-Wl,--disable-new-dtags', f'-Wl,-rpath,{tree}/deps'])
    assert top.rpath == (f'{tree}/deps',) and top.runpath == ()
    found = Resolver().resolve('libdep.so.1', top)
    assert found.path == f'{tree}/deps/libdep.so.1' and found.via == f'DT_RPATH of {top.path}'


def test_runpath_and_origin(tree):
    top = _lib(tree / 'top' / 'libtop.so', 'libtop.so', flags=['-Wl,--enable-new-dtags', '-Wl,-rpath,$ORIGIN/../deps'])
    assert top.runpath == ('$ORIGIN/../deps',) and top.rpath == ()
    found = Resolver().resolve('libdep.so.1', top)
    assert found.path == f'{tree}/deps/libdep.so.1' and found.via.startswith('DT_RUNPATH')


def test_rpath_is_inherited_by_needed_objects_but_runpath_is_not(tree):
    rpath_loader = _lib(tree / 'a' / 'liba.so', 'liba.so', flags=['-Wl,--disable-new-dtags', f'-Wl,-rpath,{tree}/deps'])
    runpath_loader = _lib(tree / 'b' / 'libb.so', 'libb.so',
                          flags=['-Wl,--enable-new-dtags', f'-Wl,-rpath,{tree}/deps'])
    middle = _lib(tree / 'm' / 'libm1.so', 'libm1.so')
    resolver = Resolver(use_system=False)
    assert resolver.resolve('libdep.so.1', middle, loader_chain=[rpath_loader]).found
    assert not resolver.resolve('libdep.so.1', middle, loader_chain=[runpath_loader]).found
    assert not resolver.resolve('libdep.so.1', middle).found  # loaded by dlopen(): no chain


def test_requester_with_runpath_ignores_the_rpath_chain(tree):
    rpath_loader = _lib(tree / 'a' / 'liba.so', 'liba.so', flags=['-Wl,--disable-new-dtags', f'-Wl,-rpath,{tree}/deps'])
    own_runpath = _lib(tree / 'r' / 'libr.so', 'libr.so', flags=['-Wl,--enable-new-dtags', '-Wl,-rpath,/nonexistent'])
    assert not Resolver(use_system=False).resolve('libdep.so.1', own_runpath, loader_chain=[rpath_loader]).found


def test_already_loaded_soname_wins(tree):
    lonely = _lib(tree / 'l' / 'libl.so', 'libl.so')
    found = Resolver(use_system=False).resolve('libdep.so.1', lonely, loaded={'libdep.so.1': '/x/libdep.so.1'})
    assert found.path == '/x/libdep.so.1' and found.via == 'already loaded'


def test_candidate_of_another_architecture_is_skipped(tree):
    # glibc skips a file whose ELF header does not match and goes on searching
    wrong = tree / 'wrong'
    wrong.mkdir()
    data = bytearray((tree / 'deps' / 'libdep.so.1').read_bytes())
    data[18:20] = (183).to_bytes(2, 'little')
    (wrong / 'libdep.so.1').write_bytes(bytes(data))
    top = _lib(tree / 'top' / 'libtop.so', 'libtop.so',
               flags=['-Wl,--disable-new-dtags', f'-Wl,-rpath,{wrong}:{tree}/deps'])
    found = Resolver().resolve('libdep.so.1', top)
    assert found.path == f'{tree}/deps/libdep.so.1' and found.tried[:2] == [str(wrong), f'{tree}/deps']


def test_nodeflib_skips_cache_and_system_dirs(tree):
    plain = _lib(tree / 'p' / 'libp.so', 'libp.so')
    nodeflib = _lib(tree / 'n' / 'libn.so', 'libn.so', flags=['-Wl,-z,nodefaultlib'])
    assert nodeflib.nodeflib and not plain.nodeflib
    assert Resolver().resolve('libc.so.6', plain).found
    assert not Resolver().resolve('libc.so.6', nodeflib).found


def test_ld_so_cache_matches_ldconfig():
    cache = load_ld_so_cache()
    listed = subprocess.run(['ldconfig', '-p'], capture_output=True, text=True).stdout.splitlines()[1:]
    expected = {}
    for line in filter(lambda text: ' => ' in text, listed):
        name, _, path = line.strip().partition(' => ')
        expected.setdefault(name.split(' (')[0], set()).add(path)
    assert expected, 'ldconfig -p listed nothing'
    assert {k: set(v) for k, v in cache.items()} == expected
