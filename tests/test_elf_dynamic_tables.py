"""DT_SYMTAB, DT_GNU_HASH, DT_HASH and DT_STRSZ against the real loader and the real patchelf.

Real gcc-built libraries (libmain.so NEEDED libdep.so, RUNPATH $ORIGIN; hash styles gnu, both and sysv),
one dynamic entry or section header changed by a byte edit at the offset pyelftools gives.  A C harness
(dlopen RTLD_NOW, dlsym "run", call it; LD_LIBRARY_PATH unset) is the judge of what the loader does with
the tree; the edited file is then given to check-needed, add-needed and doctor:
- what the loader fails on (crash, assertion, undefined symbol) is refused by all three with one message,
  CorruptElf.loader_fails True;
- what it loads although the section headers contradict the dynamic section is refused too (loader_fails
  False), because the real patchelf turns it into a file the loader fails on (measured here each time);
- what only DT_STRSZ gets wrong loads, before and after patchelf: all three accept it.
"""

import shutil
import struct
import subprocess

import pytest
from elftools.elf.elffile import ELFFile

from helpers import CLEAN_ENV, cli
from eb_pytorch_cuda.elf.patchelf import patchelf_binary
from eb_pytorch_cuda.elf.reader import read_elf
from eb_pytorch_cuda.errors import CorruptElf

HARNESS = r'''
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char **argv) {
    void *handle = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
    if (!handle) { printf("ROOTFAIL %s\n", dlerror()); return 1; }
    int (*run)(void) = (int (*)(void)) dlsym(handle, "run");
    if (!run) { printf("NOSYM %s\n", dlerror()); return 3; }
    printf("ROOTOK %d\n", run());
    return 0;
}
'''
STYLES = ('gnu', 'both', 'sysv')


@pytest.fixture(scope='module')
def built(tmp_path_factory):
    """{style: directory with libmain.so and libdep.so of that hash style}, and the harness."""
    root = tmp_path_factory.mktemp('dyntables')
    (root / 'dep.c').write_text('int dep(void) { return 1; }\n')
    (root / 'main.c').write_text('int dep(void);\nint run(void) { return dep(); }\n')
    (root / 'h.c').write_text(HARNESS)
    subprocess.run(['gcc', '-o', str(root / 'h'), str(root / 'h.c'), '-ldl'], check=True)
    dirs = {}
    for style in STYLES:
        directory = dirs[style] = root / style
        directory.mkdir()
        flag = f'-Wl,--hash-style={style}'
        subprocess.run(['gcc', '-shared', '-fPIC', flag, '-o', str(directory / 'libdep.so'), str(root / 'dep.c')],
                       check=True)
        subprocess.run(['gcc', '-shared', '-fPIC', flag, '-o', str(directory / 'libmain.so'), str(root / 'main.c'),
                        '-L', str(directory), '-ldep', '-Wl,-rpath,$ORIGIN', '-Wl,--enable-new-dtags'], check=True)
    return dirs, str(root / 'h')


def _edits(path, case):
    """[(file offset, 8-byte value)] that make `case` out of the library at path (x86_64: Elf64)."""
    with open(path, 'rb') as handle:
        elf = ELFFile(handle)
        dynamic = next(s for s in elf.iter_segments() if s['p_type'] == 'PT_DYNAMIC')
        where = {t.entry.d_tag: dynamic['p_offset'] + i * 16 for i, t in enumerate(dynamic.iter_tags())}
        value = {t.entry.d_tag: t.entry.d_val for t in dynamic.iter_tags()}
        size, start = elf.header['e_shentsize'], elf.header['e_shoff']
        header = {s.name: start + i * size for i, s in enumerate(elf.iter_sections())}
        section = {s.name: s for s in elf.iter_sections()}
    kind, _, change = case.partition(':')
    tag = {'symtab': 'DT_SYMTAB', 'gnuhash': 'DT_GNU_HASH', 'hash': 'DT_HASH', 'strsz': 'DT_STRSZ'}.get(kind)
    if kind.endswith('-section'):  # sh_addr and sh_offset moved together
        name = {'dynsym-section': '.dynsym', 'gnuhash-section': '.gnu.hash', 'hash-section': '.hash'}[kind]
        shift = int(change)
        return [(header[name] + 16, section[name]['sh_addr'] + shift),
                (header[name] + 24, section[name]['sh_offset'] + shift)]
    if change == 'gone':  # the entry's tag becomes one glibc ignores (DT_GNU_PRELINKED)
        return [(where[tag], 0x6ffffdf5)]
    if change.startswith('+'):
        return [(where[tag] + 8, value[tag] + int(change[1:]))]
    return [(where[tag] + 8, int(change, 0))]


def _make(built, style, which, case, directory):
    """A copy of the style's tree in directory, lib{which}.so edited; its path."""
    dirs, _harness = built
    for name in ('libmain.so', 'libdep.so'):
        shutil.copy(dirs[style] / name, directory / name)
    target = directory / f'lib{which}.so'
    with open(target, 'r+b') as handle:
        for offset, value in _edits(dirs[style] / f'lib{which}.so', case):
            handle.seek(offset)
            handle.write(struct.pack('<Q', value))
    return target


def _loads(built, directory):
    """True when the real loader loads libmain.so of directory and calls run(); else the reason."""
    done = subprocess.run([built[1], str(directory / 'libmain.so')], env=CLEAN_ENV, capture_output=True, text=True)
    return True if done.returncode == 0 else f'exit {done.returncode}: {(done.stdout + done.stderr).strip()}'


def _three_refusals(path, scratch):
    """The one message check-needed, add-needed (on a copy) and doctor give for path, each exit 2."""
    copy = scratch / path.name
    shutil.copy(path, copy)
    before = copy.read_bytes()
    answers = set()
    for args, shown in ((('check-needed', path, 'libdep.so'), path),
                        (('add-needed', '--force', copy, 'libm.so.6'), copy), (('doctor', path), path)):
        done = cli(*args, check_rc=2)
        assert done.stdout == '' and done.stderr.count('\n') == 1 and str(shown) in done.stderr, done.stderr
        answers.add(done.stderr.replace(str(shown), 'LIB'))
    assert copy.read_bytes() == before, 'add-needed modified a file it refused'
    assert len(answers) == 1, answers
    return answers.pop()


# (hash style, library edited, edit, what the real loader does (measured, glibc 2.36), words of the message)
LOADER_FAILS = [
    ('gnu', 'main', 'symtab:0x7fff0000', 'exit -11', 'DT_SYMTAB 0x7fff0000 is outside every loaded segment'),
    ('gnu', 'dep', 'symtab:0x7fff0000', 'exit -11', 'DT_SYMTAB 0x7fff0000 is outside every loaded segment'),
    ('gnu', 'main', 'symtab:gone', 'exit -11', 'no DT_SYMTAB'),
    ('gnu', 'main', 'symtab:+24', 'undefined symbol: run', 'does not start with the null symbol'),
    ('both', 'dep', 'symtab:0', 'undefined symbol', 'DT_SYMTAB 0x0 does not start with the null symbol'),
    ('gnu', 'main', 'gnuhash:0x7fff0000', 'exit -11', 'DT_GNU_HASH 0x7fff0000 is outside every loaded segment'),
    ('gnu', 'main', 'gnuhash:+8', "Assertion `(bitmask_nwords & (bitmask_nwords - 1)) == 0' failed",
     'not a power of two'),
    ('gnu', 'dep', 'gnuhash:+8', 'exit -11', 'not a power of two'),
    ('gnu', 'dep', 'gnuhash:gone', 'undefined symbol: dep', 'neither DT_GNU_HASH nor DT_HASH'),
    ('gnu', 'main', 'gnuhash:gone', 'undefined symbol: run', 'neither DT_GNU_HASH nor DT_HASH'),
    ('sysv', 'dep', 'hash:0x7fff0000', 'exit -11', 'DT_HASH 0x7fff0000 is outside every loaded segment'),
    ('sysv', 'dep', 'hash:gone', 'undefined symbol: dep', 'neither DT_GNU_HASH nor DT_HASH'),
]


@pytest.mark.parametrize('style, which, case, loader, words', LOADER_FAILS)
def test_what_the_loader_fails_on_is_refused_alike_by_all_three(built, tmp_path, style, which, case, loader, words):
    target = _make(built, style, which, case, tmp_path)
    outcome = _loads(built, tmp_path)
    assert outcome is not True and loader in outcome, outcome
    with pytest.raises(CorruptElf) as caught:
        read_elf(target)
    assert caught.value.loader_fails
    scratch = tmp_path / 'scratch'
    scratch.mkdir()
    assert words in _three_refusals(target, scratch)


# edits the loader never sees (it reads the dynamic section only), but patchelf (which rewrites the dynamic
# entries from the sections) turns into a file it fails on: (style, library, edit, the patched file's failure)
SECTIONS_DISAGREE = [
    ('gnu', 'main', 'dynsym-section:24', 'undefined symbol: run', '.dynsym at file offset'),
    ('gnu', 'dep', 'dynsym-section:24', 'undefined symbol: dep', '.dynsym at file offset'),
    ('both', 'dep', 'dynsym-section:24', 'exit -11', '.dynsym at file offset'),
    ('gnu', 'main', 'gnuhash-section:8', "Assertion `(bitmask_nwords & (bitmask_nwords - 1)) == 0' failed",
     '.gnu.hash at file offset'),
    ('gnu', 'dep', 'gnuhash-section:8', 'exit -11', '.gnu.hash at file offset'),
    ('sysv', 'dep', 'hash-section:8', 'undefined symbol: dep', '.hash at file offset'),
]


@pytest.mark.parametrize('style, which, case, patched, words', SECTIONS_DISAGREE)
def test_sections_that_patchelf_would_trust_are_refused_though_the_loader_loads(
        built, tmp_path, style, which, case, patched, words):
    target = _make(built, style, which, case, tmp_path)
    assert _loads(built, tmp_path) is True  # the loader ignores section headers
    with pytest.raises(CorruptElf) as caught:
        read_elf(target)
    assert not caught.value.loader_fails
    assert read_elf(target, check_sections=False).needed == (('libdep.so',) if which == 'main' else ())
    scratch = tmp_path / 'scratch'
    scratch.mkdir()
    assert 'section headers that disagree with its dynamic section: ' + words in _three_refusals(target, scratch)
    # what the real patchelf makes of it: a file the loader fails on
    subprocess.run([patchelf_binary(), '--add-needed', 'libm.so.6', str(target)], check=True, capture_output=True)
    outcome = _loads(built, tmp_path)
    assert outcome is not True and patched in outcome, outcome


@pytest.mark.parametrize('style, which, case', [('gnu', 'main', 'strsz:1'), ('gnu', 'main', 'strsz:0x7fff0000'),
                                                ('both', 'main', 'strsz:gone'), ('sysv', 'dep', 'strsz:1')])
def test_a_wrong_strsz_loads_and_is_accepted_by_all_three(built, tmp_path, style, which, case):
    target = _make(built, style, which, case, tmp_path)
    assert _loads(built, tmp_path) is True  # glibc ignores DT_STRSZ
    if which == 'main':
        assert read_elf(target).needed == ('libdep.so',) and read_elf(target).runpath == ('$ORIGIN',)
        cli('check-needed', target, 'libdep.so', check_rc=0)
    cli('doctor', tmp_path / 'libmain.so', check_rc=0)
    cli('add-needed', '--force', target, 'libm.so.6', check_rc=0)
    assert 'libm.so.6' in read_elf(target).needed
    assert _loads(built, tmp_path) is True  # patchelf wrote DT_STRSZ anew


def test_dt_hash_beside_dt_gnu_hash_is_ignored_by_the_loader(built, tmp_path):
    """glibc looks symbols up through DT_GNU_HASH when both exist: a DT_HASH pointing nowhere loads, and
    is not refused as one the loader fails on (its section then disagrees: refused as such)."""
    target = _make(built, 'both', 'dep', 'hash:0x7fff0000', tmp_path)
    assert _loads(built, tmp_path) is True
    with pytest.raises(CorruptElf) as caught:
        read_elf(target)
    assert not caught.value.loader_fails and '.hash at file offset' in caught.value.problem
