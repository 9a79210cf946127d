"""check-needed, add-needed and doctor give one answer on a corrupt dynamic string table.

Real gcc-built libraries (libmain.so NEEDED libdep.so, RUNPATH $ORIGIN), corrupted by editing bytes at
offsets pyelftools finds: DT_STRTAB moved outside every loaded segment (glibc's loader segfaults loading
it), and the `.dynstr` section header's sh_offset moved by 40 bytes (the loader ignores section headers and
loads it; patchelf and the section-based symbol reader would read wrong names).  The real loader, through
the project's load probe in a child process, is the judge of what loads.  Also: a setuid or setgid library
is refused by add-needed unless --allow-setid is given.
"""

import json
import os
import shutil
import stat
import struct
import subprocess
import sys

import pytest
from elftools.elf.elffile import ELFFile

from helpers import cli
from eb_pytorch_cuda.elf.reader import read_elf
from eb_pytorch_cuda.loader import loadprobe


@pytest.fixture(scope='module')
def libs(tmp_path_factory):
    root = tmp_path_factory.mktemp('strtab')
    (root / 'dep.c').write_text('int dep(void) { return 1; }\n')
    (root / 'main.c').write_text('int dep(void);\nint run(void) { return dep(); }\n')
    subprocess.run(['gcc', '-shared', '-fPIC', '-o', str(root / 'libdep.so'), str(root / 'dep.c')], check=True)
    subprocess.run(['gcc', '-shared', '-fPIC', '-o', str(root / 'libmain.so'), str(root / 'main.c'), '-L',
                    str(root), '-ldep', '-Wl,-rpath,$ORIGIN', '-Wl,--enable-new-dtags'], check=True)
    with open(root / 'libmain.so', 'rb') as handle:
        elf = ELFFile(handle)
        assert elf.elfclass == 64 and elf.little_endian
        dynamic = next(s for s in elf.iter_segments() if s['p_type'] == 'PT_DYNAMIC')
        index = next(i for i, tag in enumerate(dynamic.iter_tags()) if tag.entry.d_tag == 'DT_STRTAB')
        strtab_value = dynamic['p_offset'] + index * 16 + 8  # Elf64_Dyn: d_tag, then d_val
        section = next(i for i, s in enumerate(elf.iter_sections()) if s.name == '.dynstr')
        sh_offset = elf.header['e_shoff'] + section * elf.header['e_shentsize'] + 24  # Elf64_Shdr.sh_offset
        dynstr_offset = elf.get_section(section)['sh_offset']
    _corrupt(root, 'libbad-strtab.so', strtab_value, 0x7fff0000)
    _corrupt(root, 'libbad-dynstr.so', sh_offset, dynstr_offset + 40)
    return root


def _corrupt(root, name, offset, value):
    shutil.copy(root / 'libmain.so', root / name)
    with open(root / name, 'r+b') as handle:
        handle.seek(offset)
        handle.write(struct.pack('<Q', value))


def _real_load(path):
    """(exit status, the probe's report or None) of the project's load probe on path, in a child process."""
    done = subprocess.run([sys.executable, '-I', loadprobe.__file__, str(path)], capture_output=True, text=True)
    return done.returncode, json.loads(done.stdout) if done.returncode == 0 else None


def _three_answers(libs, name, tmp_path):
    """stderr of check-needed, add-needed (on a copy) and doctor for libs/name; each must be exit 2."""
    copy = tmp_path / name
    shutil.copy(libs / name, copy)
    shutil.copy(libs / 'libdep.so', tmp_path / 'libdep.so')
    before = copy.read_bytes()
    answers = []
    for args, shown in ((('check-needed', libs / name, 'libdep.so'), libs / name),
                        (('add-needed', '--force', copy, 'libm.so.6'), copy),
                        (('doctor', libs / name), libs / name)):
        done = cli(*args, check_rc=2)
        assert done.stdout == '' and done.stderr.count('\n') == 1 and str(shown) in done.stderr, done.stderr
        answers.append(done.stderr.replace(str(shown), 'LIB'))
    assert copy.read_bytes() == before  # add-needed modified nothing
    return answers


def test_the_good_library_loads_and_reads(libs):
    status, report = _real_load(libs / 'libmain.so')
    assert status == 0 and report['loaded']
    assert read_elf(libs / 'libmain.so').needed == ('libdep.so',)
    cli('check-needed', '--load', libs / 'libmain.so', 'libdep.so', check_rc=0)


def test_a_strtab_the_loader_crashes_on_is_refused_alike_by_all_three(libs, tmp_path):
    status, _ = _real_load(libs / 'libbad-strtab.so')
    assert status == -11  # the real loader: SIGSEGV
    answers = _three_answers(libs, 'libbad-strtab.so', tmp_path)
    assert len(set(answers)) == 1, answers
    assert 'DT_STRTAB 0x7fff0000 is outside every loaded segment' in answers[0]


def test_section_headers_that_disagree_get_one_answer_from_all_three(libs, tmp_path):
    status, report = _real_load(libs / 'libbad-dynstr.so')
    assert status == 0 and report['loaded']  # the loader ignores section headers
    answers = _three_answers(libs, 'libbad-dynstr.so', tmp_path)
    assert len(set(answers)) == 1, answers
    assert 'section headers that disagree with its dynamic section: .dynstr at file offset' in answers[0]


@pytest.mark.parametrize('bits, word', [(stat.S_ISUID, 'setuid'), (stat.S_ISGID, 'setgid')])
def test_a_setid_library_is_refused_unless_asked(libs, tmp_path, bits, word):
    shutil.copy(libs / 'libdep.so', tmp_path / 'libdep.so')
    copy = tmp_path / 'libmain.so'
    shutil.copy(libs / 'libmain.so', copy)
    os.chmod(copy, 0o755 | bits)
    before = copy.read_bytes()
    done = cli('add-needed', '--force', copy, 'libm.so.6', check_rc=2)
    assert done.stderr.count('\n') == 1 and str(copy) in done.stderr and f'is {word}' in done.stderr
    assert '--allow-setid' in done.stderr
    assert copy.read_bytes() == before and stat.S_IMODE(os.stat(copy).st_mode) == 0o755 | bits
    cli('add-needed', '--force', '--allow-setid', copy, 'libm.so.6', check_rc=0)
    assert sorted(read_elf(copy).needed) == ['libdep.so', 'libm.so.6']
    assert stat.S_IMODE(os.stat(copy).st_mode) == 0o755 | bits  # kept, as asked
    assert _real_load(copy)[1]['loaded']
