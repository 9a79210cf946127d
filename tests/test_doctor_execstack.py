"""doctor's executable-stack findings judged by the real glibc 2.41 loader (Debian trixie's libc6, which
tools/setup.sh unpacks into .venvs/glibc-2.41), on gcc-built libraries with and without `-z execstack`.

Programs built here are run through that loader (`ld-linux-x86-64.so.2 --library-path <its libs> PROGRAM`,
clean environment); dlopen() of each library decides.  One input is a stand-in no toolchain here makes
directly: a gcc-built `-z execstack` library whose PT_GNU_STACK header is rewritten to PT_NULL (an object
with no header at all, as old assembler files produce), since glibc's default for x86 is what is tested.
The real torch 2.1.2 and 2.14.1 libraries (.venvs/cudnn8-torch212, .venvs/torch) are dlopen()ed by 2.41 too.
"""

import json
import os
import shlex
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from helpers import cli, gcc
from eb_pytorch_cuda.elf.patchelf import patchelf_binary
from environment import missing

GLIBC = Path(__file__).resolve().parent.parent / '.venvs' / 'glibc-2.41' / 'root' / 'usr' / 'lib' / 'x86_64-linux-gnu'
LOADER = GLIBC / 'ld-linux-x86-64.so.2'
REFUSED = 'cannot enable executable stack as shared object requires: Invalid argument'
DLOPEN_ALL = r'''
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (!dlopen(argv[i], RTLD_NOW)) { printf("%s\n", dlerror()); return 1; }
    }
    return 0;
}
'''
PT_GNU_STACK, PT_NULL = 0x6474e551, 0


def _drop_stack_header(source, destination):
    """A copy of source with its PT_GNU_STACK program header turned into PT_NULL (ELF64 little-endian)."""
    data = bytearray(source.read_bytes())
    phoff, = struct.unpack_from('<Q', data, 0x20)
    phentsize, phnum = struct.unpack_from('<HH', data, 0x36)
    changed = 0
    for index in range(phnum):
        offset = phoff + index * phentsize
        if struct.unpack_from('<I', data, offset)[0] == PT_GNU_STACK:
            struct.pack_into('<I', data, offset, PT_NULL)
            changed += 1
    assert changed == 1
    destination.write_bytes(bytes(data))
    return destination


@pytest.fixture(scope='module')
def built(tmp_path_factory):
    """{name: path}: shared objects with an executable stack or without, a library that needs one of the
    first kind, and the dlopen() driver; each library in a directory of its own (doctor audits directories)."""
    if not LOADER.exists():
        missing(f'no glibc 2.41 loader at {LOADER}')
    version = subprocess.run([str(LOADER), '--version'], capture_output=True, text=True).stdout
    assert 'release version 2.41' in version, version
    base = tmp_path_factory.mktemp('execstack')
    paths = {}
    for name, flags in (('plain', ()), ('execstack', ('-Wl,-z,execstack',))):
        directory = base / name
        directory.mkdir()
        paths[name] = gcc(directory / f'lib{name}.so', 'int f(void) { return 42; }\n', '-shared', '-fPIC',
                          f'-Wl,-soname,lib{name}.so', *flags)
    (base / 'noheader').mkdir()
    paths['noheader'] = _drop_stack_header(paths['execstack'], base / 'noheader' / 'libexecstack.so')
    (base / 'user').mkdir()
    paths['user'] = gcc(base / 'user' / 'libuser.so', 'int f(void);\nint g(void) { return f(); }\n', '-shared',
                        '-fPIC', f"-L{base / 'execstack'}", '-l:libexecstack.so', '-Wl,--disable-new-dtags',
                        f"-Wl,-rpath,{base / 'execstack'}")
    paths['driver'] = gcc(base / 'dlopen-all', DLOPEN_ALL, '-ldl')
    # a program that has the execstack library NEEDED: loaded at start-up, not by dlopen()
    paths['linked'] = gcc(base / 'linked', 'int f(void);\nint main(void) { return f() == 42 ? 0 : 3; }\n',
                          f"-L{base / 'execstack'}", '-l:libexecstack.so', '-Wl,--disable-new-dtags',
                          f"-Wl,-rpath,{base / 'execstack'}")
    return paths


def _run_241(program, *args, tunables=None):
    env = {'GLIBC_TUNABLES': tunables} if tunables else {}
    return subprocess.run([str(LOADER), '--library-path', str(GLIBC), str(program), *map(str, args)],
                          env=env, capture_output=True, text=True)


def _doctor_json(library, *options, tree=None):
    done = cli('doctor', '--from', library, tree or library.parent, '--format', 'json', *options)
    return done.returncode, json.loads(done.stdout)


@pytest.mark.parametrize('name', ['plain', 'execstack', 'noheader', 'user'])
def test_doctor_for_2_41_fails_exactly_where_the_real_loader_refuses(built, name):
    real = _run_241(built['driver'], built[name])
    rc, data = _doctor_json(built[name], '--glibc', '2.41')
    findings = [f for f in data['findings'] if f['kind'] == 'execstack']
    assert data['glibc'] == {'version': '2.41', 'source': '--glibc'}
    if real.returncode == 0:
        assert name == 'plain' and rc == 0 and not findings
        return
    assert REFUSED in real.stdout and rc == 1
    # the object glibc names is the one doctor names (for libuser.so: the library it needs)
    refused = real.stdout.split(':')[0]
    assert [f['details']['path'] for f in findings] == [refused] or \
        [os.path.basename(f['details']['path']) for f in findings] == [os.path.basename(refused)]
    assert findings[0]['severity'] == 'fails'
    assert 'patchelf --clear-execstack' in findings[0]['message'] and 'glibc.rtld.execstack=2' in findings[0]['message']


def test_the_real_2_36_loader_here_loads_them_and_doctor_for_2_36_only_notes_them(built):
    assert subprocess.run([str(built['driver']), built['execstack'], built['noheader']]).returncode == 0
    rc, data = _doctor_json(built['execstack'], '--glibc', '2.36')
    assert rc == 0 and [f['severity'] for f in data['findings'] if f['kind'] == 'execstack'] == ['info']
    text = cli('doctor', '--from', built['execstack'], built['execstack'].parent, '--glibc', '2.36').stdout
    assert 'for glibc 2.36 (--glibc), nothing found' in text and 'glibc 2.41 and later refuse' in text


def test_the_fixes_doctor_names_make_the_real_2_41_loader_load_it(built, tmp_path):
    # the tunable, on the unchanged library
    assert _run_241(built['driver'], built['execstack'], tunables='glibc.rtld.execstack=2').returncode == 0
    # clearing the flag with the commands doctor prints (run as argv lists, no shell), on a copy of the layout
    for name in ('execstack', 'noheader'):
        copy = tmp_path / name
        shutil.copytree(built[name].parent, copy)
        library = copy / built[name].name
        rc, data = _doctor_json(library, '--glibc', '2.41')
        assert rc == 1
        command = next(line for line in data['fix'] if 'patchelf' in line)
        for step in command.split(' && '):
            argv = shlex.split(step)
            argv[0] = patchelf_binary() if argv[0] == 'patchelf' else shutil.which(argv[0])
            subprocess.run(argv, check=True)
        assert _run_241(built['driver'], library).returncode == 0
        assert _doctor_json(library, '--glibc', '2.41')[0] == 0
        assert 'export GLIBC_TUNABLES=glibc.rtld.execstack=2' in '\n'.join(data['fix'])


def test_an_object_loaded_at_start_up_is_allowed_by_2_41_and_not_reported(built):
    assert _run_241(built['linked']).returncode == 0  # NEEDED by the program: 2.41 still allows it
    rc, data = _doctor_json(built['execstack'], '--glibc', '2.41', '--executable', built['linked'])
    assert rc == 0 and not [f for f in data['findings'] if f['kind'] == 'execstack']


@pytest.mark.parametrize('how', ['its own flag', 'a NEEDED library'])
def test_a_program_that_starts_with_an_executable_stack_may_dlopen_them(built, tmp_path, how):
    # the stack is made executable at start-up (the program's own PT_GNU_STACK, or an object it NEEDs):
    # then glibc 2.41's dlopen() accepts objects that ask for one, and doctor reports none
    flags = ['-Wl,-z,execstack'] if how == 'its own flag' else [
        f"-L{built['execstack'].parent}", '-Wl,--no-as-needed', '-l:libexecstack.so', '-Wl,--disable-new-dtags',
        f"-Wl,-rpath,{built['execstack'].parent}"]
    program = gcc(tmp_path / 'program', DLOPEN_ALL, '-ldl', *flags)
    assert _run_241(program, built['noheader'], built['user']).returncode == 0
    rc, data = _doctor_json(built['noheader'], '--glibc', '2.41', '--executable', program)
    assert rc == 0 and not [f for f in data['findings'] if f['kind'] == 'execstack']
    rc, data = _doctor_json(built['noheader'], '--glibc', '2.41', '--executable', built['driver'])
    assert rc == 1  # the same with a program that starts without one: refused (see above)


def test_without_glibc_doctor_judges_for_the_interpreter_of_the_executable(built, tmp_path):
    # a program whose PT_INTERP is the 2.41 loader runs under it directly; doctor takes 2.41 from there
    program = gcc(tmp_path / 'on241', DLOPEN_ALL, '-ldl', f'-Wl,--dynamic-linker={LOADER}',
                  '-Wl,--disable-new-dtags', f'-Wl,-rpath,{GLIBC}')
    real = subprocess.run([str(program), str(built['execstack'])], env={}, capture_output=True, text=True)
    assert REFUSED in real.stdout
    rc, data = _doctor_json(built['execstack'], '--executable', program)
    assert rc == 1 and data['glibc']['version'] == '2.41' and str(LOADER) in data['glibc']['source']
    rc, data = _doctor_json(built['execstack'])  # no executable: this machine's glibc (2.36 here), said so
    assert data['glibc']['source'].startswith("this machine's")


def test_a_bad_glibc_version_is_a_one_line_error(built):
    done = cli('doctor', built['plain'], '--glibc', 'two')
    assert done.returncode == 2 and done.stderr.count('\n') == 1 and "--glibc 'two'" in done.stderr


REAL_TORCH = {'2.1.2 + cuDNN 8.9.2': Path(__file__).resolve().parent.parent / '.venvs' / 'cudnn8-torch212',
              '2.14.1 + cuDNN 9.24': next((Path(__file__).resolve().parent.parent / '.venvs' / 'torch' / 'lib').glob(
                  'python3*/site-packages'), Path('missing'))}


@pytest.mark.parametrize('label', sorted(REAL_TORCH))
def test_the_real_torch_wheels_load_under_2_41_and_doctor_finds_no_executable_stack(built, label):
    tree = REAL_TORCH[label]
    library = tree / 'torch' / 'lib' / 'libtorch_cuda.so'
    if not library.exists():
        missing(f'no real torch libraries at {tree}')
    assert _run_241(built['driver'], library).returncode == 0  # the whole closure, dlopen()ed by glibc 2.41
    rc, data = _doctor_json(library, '--glibc', '2.41', tree=tree)
    assert data['objects'] > 20 and not [f for f in data['findings'] if f['kind'] == 'execstack']
