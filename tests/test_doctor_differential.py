"""doctor against the real loader: random library graphs built with gcc, loaded by a C harness; and a
stand-in of libtorch_cuda.so whose dependency is truncated or has a corrupt dynamic section.

Each graph has libraries in several directories, linked with DT_RPATH, DT_RUNPATH (absolute or
$ORIGIN-relative) or nothing, joined by NEEDED edges and by dlopen() calls made in constructors, with
some NEEDED libraries missing and some shadowed by a copy that lacks the symbol its users call.  The
harness dlopen()s the root with RTLD_NOW and LD_LIBRARY_PATH unset under LD_DEBUG=libs,files; doctor
must predict, for every library the loader looked for, the same file (or none), and the undefined
symbol the loader complained about.
"""

import json
import os
import random
import shutil
import struct
import subprocess

import pytest
from elftools.elf.elffile import ELFFile

from helpers import CLEAN_ENV, cli
from eb_pytorch_cuda.loader.doctor import Process, SymbolCache
from eb_pytorch_cuda.elf.reader import read_elf
from eb_pytorch_cuda.loader.lddebug import trace_outcomes
from eb_pytorch_cuda.loader.resolve import Resolver

HARNESS = r'''
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char **argv) {
    void *handle = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
    if (!handle) { printf("ROOTFAIL %s\n", dlerror()); return 1; }
    printf("ROOTOK\n");
    return 0;
}
'''


def _source(index, needed, dlopened, define=True):
    lines = ['#include <dlfcn.h>', '#include <stdio.h>']
    lines += [f'int f{n}(void);' for n in needed]
    body = ' + '.join([f'f{n}()' for n in needed] or ['0'])
    name = f'f{index}' if define else f'g{index}'
    lines.append(f'int {name}(void) {{ return {index} + {body}; }}')
    opens = ''.join(f'if (!dlopen("libg{d}.so.1", RTLD_NOW)) fprintf(stderr, "DLOPENFAIL %s\\n", dlerror());'
                    for d in dlopened)
    lines.append(f'__attribute__((constructor)) static void init{index}(void) {{ {opens} }}')
    return '\n'.join(lines) + '\n'


def build_graph(root, seed):
    """Build one random graph under root; return the path of the root library."""
    rng = random.Random(seed)
    count = rng.randint(3, 6)
    dirs = [root / f'd{k}' for k in range(4)]
    for directory in dirs:
        directory.mkdir(parents=True, exist_ok=True)
    place = {i: dirs[rng.randrange(4)] for i in range(count)}
    needed = {i: [] for i in range(count)}
    dlopened = {i: [] for i in range(count)}
    for child in range(1, count):
        parent = rng.randrange(child)
        (needed if rng.random() < 0.6 else dlopened)[parent].append(child)
    for lib in reversed(range(count)):  # children first: a parent links against them
        kind = rng.choice(['none', 'rpath', 'runpath'])
        flags = []
        if kind != 'none':
            chosen = rng.sample(dirs, rng.randint(1, 3))
            entries = [f'$ORIGIN/../{d.name}' if rng.random() < 0.5 else str(d) for d in chosen]
            flags = ['-Wl,--enable-new-dtags' if kind == 'runpath' else '-Wl,--disable-new-dtags',
                     '-Wl,-rpath,' + ':'.join(entries)]
        link = [f'-L{place[n]}' for n in needed[lib]] + [f'-l:libg{n}.so.1' for n in needed[lib]]
        _compile(root, lib, place[lib], _source(lib, needed[lib], dlopened[lib]), flags + link + ['-ldl'])
    # faults: a missing NEEDED library, or a shadowing copy without the symbol its users call
    fault = rng.random()
    needed_children = [n for kids in needed.values() for n in kids]
    if needed_children and fault < 0.25:
        missing = rng.choice(needed_children)
        os.unlink(place[missing] / f'libg{missing}.so.1')
    elif needed_children and fault < 0.6:
        victim = rng.choice(needed_children)
        elsewhere = [d for d in dirs if d != place[victim]]
        _compile(root, victim, rng.choice(elsewhere), _source(victim, [], [], define=False), [])
    return str(place[0] / 'libg0.so.1')


def _compile(root, index, directory, source, flags):
    c_file = root / f'g{index}-{directory.name}.c'
    c_file.write_text(source)
    subprocess.run(['gcc', '-shared', '-fPIC', '-o', str(directory / f'libg{index}.so.1'), str(c_file),
                    f'-Wl,-soname,libg{index}.so.1', *flags], check=True, capture_output=True)


@pytest.fixture(scope='module')
def harness(tmp_path_factory):
    directory = tmp_path_factory.mktemp('harness')
    (directory / 'h.c').write_text(HARNESS)
    subprocess.run(['gcc', '-o', str(directory / 'h'), str(directory / 'h.c'), '-ldl'], check=True)
    return str(directory / 'h')


@pytest.mark.parametrize('seed', range(40))
def test_doctor_predicts_what_the_loader_does(tmp_path, harness, seed):
    root = build_graph(tmp_path, seed)
    env = dict(CLEAN_ENV, LD_DEBUG='libs,files', LD_DEBUG_OUTPUT=str(tmp_path / 'trace'))
    done = subprocess.run([harness, root], env=env, capture_output=True, text=True)
    lines = [line for path in tmp_path.glob('trace.*') for line in path.read_text().splitlines()]
    truth = {name: outcome for name, outcome in trace_outcomes(lines).items() if name.startswith('libg')}

    # the harness is the program: named, so symbols nothing defines would be its to supply (it supplies none)
    process = Process(read_elf(root), Resolver(), SymbolCache(), executable=read_elf(harness))
    process.simulate_dlopens()
    process.check_symbols()
    predicted = {soname: os.path.realpath(entry.path) for soname, entry in process.by_soname.items()}

    for name, outcome in truth.items():
        if outcome['path']:
            assert predicted.get(name) == os.path.realpath(outcome['path']), (name, outcome, predicted)
        else:
            assert name not in predicted, (name, predicted)
    undefined = {f.details['symbol'] for f in process.findings if f.kind == 'undefined-symbol'}
    # the loader names the first undefined symbol of each load that failed (the root's, or a dlopen()'s)
    reported = {part.split()[0].rstrip(')') for part in (done.stdout + done.stderr).split('undefined symbol: ')[1:]}
    assert reported <= undefined, (done.stdout, done.stderr, process.findings)
    if not reported:
        assert not undefined, process.findings


# A corrupt dependency of the root: a stand-in of libtorch_cuda.so (gcc-built, the real one's
# names: NEEDED libc10_cuda.so and libc10.so, RUNPATH $ORIGIN), one dependency truncated or with one dynamic
# entry or section header edited; the real loader (the harness above) and doctor must agree on whether
# loading the root fails, and doctor must name the corrupt file when it does.
TORCH_LIKE = {
    'libc10.so': ('int c10(void) { return 1; }\n', []),
    'libc10_cuda.so': ('int c10(void);\nint c10_cuda(void) { return c10() + 1; }\n', ['libc10.so']),
    'libtorch_cuda.so': ('int c10(void); int c10_cuda(void);\nint torch_cuda(void) { return c10() + c10_cuda(); }\n',
                         ['libc10_cuda.so', 'libc10.so']),
}
# (what is changed, value): a dynamic entry ('DT_...'), a section moved (address and offset), or a truncation
EDITS = [('DT_STRTAB', 0x7fff0000), ('DT_SYMTAB', 0x7fff0000), ('DT_SYMTAB', '+24'), ('DT_GNU_HASH', 0x7fff0000),
         ('DT_GNU_HASH', '+8'), ('DT_GNU_HASH', 'gone'), ('DT_STRSZ', 1), ('.dynsym', 24), ('.dynstr', 40),
         ('.gnu.hash', 8), ('truncate', None)]


@pytest.fixture(scope='module')
def torch_like(tmp_path_factory):
    root = tmp_path_factory.mktemp('torchlike')
    for name, (source, needed) in TORCH_LIKE.items():
        (root / f'{name}.c').write_text(source)
        subprocess.run(['gcc', '-shared', '-fPIC', '-o', str(root / name), str(root / f'{name}.c'),
                        f'-Wl,-soname,{name}', '-L', str(root), *[f'-l:{n}' for n in needed],
                        '-Wl,-rpath,$ORIGIN', '-Wl,--enable-new-dtags'], check=True)
    return root


def _corrupt_copy(source, target, edit, value, rng):
    """Copy source to target with one edit (offsets from pyelftools; x86_64 Elf64)."""
    data = bytearray(source.read_bytes())
    if edit == 'truncate':
        data = data[:value if value is not None else rng.randrange(len(data))]
    else:
        with open(source, 'rb') as handle:
            elf = ELFFile(handle)
            dynamic = next(s for s in elf.iter_segments() if s['p_type'] == 'PT_DYNAMIC')
            tags = {t.entry.d_tag: (dynamic['p_offset'] + i * 16, t.entry.d_val)
                    for i, t in enumerate(dynamic.iter_tags())}
            sections = {s.name: (elf.header['e_shoff'] + i * elf.header['e_shentsize'], s)
                        for i, s in enumerate(elf.iter_sections())}
        if edit.startswith('DT_'):
            where, old = tags[edit]
            if value == 'gone':
                struct.pack_into('<q', data, where, 0x6ffffdf5)  # a tag glibc ignores
            else:
                struct.pack_into('<Q', data, where + 8, old + int(value[1:]) if isinstance(value, str) else value)
        else:
            where, section = sections[edit]
            struct.pack_into('<QQ', data, where + 16, section['sh_addr'] + value, section['sh_offset'] + value)
    shutil.copy(source, target)  # the mode
    target.write_bytes(bytes(data))
    return edit if edit != 'truncate' else f'truncated at {len(data)} of {source.stat().st_size} bytes'


@pytest.mark.parametrize('seed', range(2 * len(EDITS)))
def test_doctor_agrees_with_the_loader_on_a_corrupt_dependency(tmp_path, harness, torch_like, seed):
    rng = random.Random(seed)
    edit, value = EDITS[seed % len(EDITS)]
    victim = rng.choice(['libc10.so', 'libc10_cuda.so'])
    for name in TORCH_LIKE:
        shutil.copy(torch_like / name, tmp_path / name)
    what = _corrupt_copy(torch_like / victim, tmp_path / victim, edit, value, rng)
    done = subprocess.run([harness, str(tmp_path / 'libtorch_cuda.so')], env=CLEAN_ENV, capture_output=True, text=True)
    loads = done.returncode == 0 and 'ROOTOK' in done.stdout
    answer = json.loads(cli('doctor', '--format', 'json', tmp_path / 'libtorch_cuda.so').stdout)
    failing = [f for f in answer['findings'] if f['severity'] == 'fails']
    context = (victim, what, done.returncode, done.stdout + done.stderr, answer['findings'])
    assert answer['blocking'] == (not loads), context
    if not loads:
        assert any(str(tmp_path / victim) in f['message'] for f in failing), context
    else:
        assert not failing, context


def _cut_points(path):
    """Sizes to truncate the file at: inside the ELF header, the program headers, each PT_LOAD (start, middle,
    its last byte), between the last PT_LOAD and the section headers, inside the section headers."""
    with open(path, 'rb') as handle:
        elf = ELFFile(handle)
        loads = [s for s in elf.iter_segments() if s['p_type'] == 'PT_LOAD']
        shoff, phend = elf.header['e_shoff'], elf.header['e_phoff'] + elf.header['e_phnum'] * elf.header['e_phentsize']
    points = {0, 10, 63, 64, phend - 1, phend}
    for load in loads:
        start, end = load['p_offset'], load['p_offset'] + load['p_filesz']
        points |= {start + 1, (start + end) // 2, end - 1}
    last = max(s['p_offset'] + s['p_filesz'] for s in loads)
    points |= {last, (last + shoff) // 2, shoff, shoff + 100, path.stat().st_size - 1}
    return sorted(p for p in points if 0 <= p < path.stat().st_size)


@pytest.mark.parametrize('victim', ['libc10.so', 'libc10_cuda.so'])
def test_doctor_agrees_with_the_loader_on_a_dependency_truncated_anywhere(tmp_path, harness, torch_like, victim):
    outcomes = {}
    for size in _cut_points(torch_like / victim):
        directory = tmp_path / str(size)
        directory.mkdir()
        for name in TORCH_LIKE:
            shutil.copy(torch_like / name, directory / name)
        _corrupt_copy(torch_like / victim, directory / victim, 'truncate', size, None)
        done = subprocess.run([harness, str(directory / 'libtorch_cuda.so')], env=CLEAN_ENV, capture_output=True,
                              text=True)
        loads = done.returncode == 0 and 'ROOTOK' in done.stdout
        answer = json.loads(cli('doctor', '--format', 'json', directory / 'libtorch_cuda.so').stdout)
        failing = [f for f in answer['findings'] if f['severity'] == 'fails']
        context = (size, done.returncode, done.stdout + done.stderr, answer['findings'])
        assert answer['blocking'] == (not loads), context
        assert all(str(directory / victim) in f['message'] for f in failing), context
        outcomes[size] = 'loads' if loads else done.returncode
    assert 'loads' in outcomes.values() and set(outcomes.values()) - {'loads'}, outcomes  # both kinds were met


@pytest.mark.parametrize('content', [b'x\n', b'not an ELF file, only text ' * 8])
def test_a_file_the_loader_cannot_read_ends_its_search_for_doctor_too(tmp_path, harness, content):
    """glibc stops at a candidate that is not ELF at all (`file too short`, `invalid ELF header`), though a
    good copy lies in the next RUNPATH directory; doctor must not search on either."""
    first, second = tmp_path / 'first', tmp_path / 'second'
    first.mkdir()
    second.mkdir()
    (tmp_path / 'dep.c').write_text('int dep(void) { return 1; }\n')
    (tmp_path / 'main.c').write_text('int dep(void);\nint run(void) { return dep(); }\n')
    subprocess.run(['gcc', '-shared', '-fPIC', '-o', str(second / 'libdep.so'), str(tmp_path / 'dep.c')], check=True)
    subprocess.run(['gcc', '-shared', '-fPIC', '-o', str(tmp_path / 'libmain.so'), str(tmp_path / 'main.c'),
                    '-L', str(second), '-ldep', '-Wl,-rpath,$ORIGIN/first:$ORIGIN/second', '-Wl,--enable-new-dtags'],
                   check=True)
    done = subprocess.run([harness, str(tmp_path / 'libmain.so')], env=CLEAN_ENV, capture_output=True, text=True)
    assert done.returncode == 0 and 'ROOTOK' in done.stdout, done.stdout  # the good copy is found
    answer = json.loads(cli('doctor', '--format', 'json', tmp_path / 'libmain.so', check_rc=0).stdout)
    assert not answer['findings']
    (first / 'libdep.so').write_bytes(content)
    done = subprocess.run([harness, str(tmp_path / 'libmain.so')], env=CLEAN_ENV, capture_output=True, text=True)
    assert done.returncode == 1 and f'{first}/libdep.so: ' in done.stdout, done.stdout
    assert ('file too short' if len(content) < 64 else 'invalid ELF header') in done.stdout
    answer = json.loads(cli('doctor', '--format', 'json', tmp_path / 'libmain.so', check_rc=1).stdout)
    found = [(f['kind'], f['details']['path']) for f in answer['findings']]
    assert found == [('needed-corrupt', str(first / 'libdep.so'))], found


OPENER = r'''
#include <dlfcn.h>
#include <stdio.h>
int torch_cuda(void) { return 1; }
__attribute__((constructor)) static void open_plugin(void) {
    void *handle = dlopen("libc10_plugin.so", RTLD_NOW);
    if (!handle) { fprintf(stderr, "DLOPENFAIL %s\n", dlerror()); return; }
    if (!dlsym(handle, "plugin")) fprintf(stderr, "DLSYMFAIL %s\n", dlerror());
}
'''


@pytest.fixture(scope='module')
def opener_tree(tmp_path_factory):
    """libtorch_cuda.so (stand-in) whose constructor dlopen()s libc10_plugin.so next to it and looks up `plugin`,
    as cuDNN opens its sub-libraries."""
    root = tmp_path_factory.mktemp('opener')
    (root / 'opener.c').write_text(OPENER)
    (root / 'plugin.c').write_text('int plugin(void) { return 2; }\n')
    subprocess.run(['gcc', '-shared', '-fPIC', '-o', str(root / 'libc10_plugin.so'), str(root / 'plugin.c'),
                    '-Wl,-soname,libc10_plugin.so'], check=True)
    subprocess.run(['gcc', '-shared', '-fPIC', '-o', str(root / 'libtorch_cuda.so'), str(root / 'opener.c'),
                    '-Wl,-soname,libtorch_cuda.so', '-Wl,-rpath,$ORIGIN', '-Wl,--enable-new-dtags', '-ldl'], check=True)
    return root


@pytest.mark.parametrize('seed', range(len(EDITS) + 3))
def test_doctor_agrees_with_the_loader_on_a_corrupt_dlopen_target(tmp_path, harness, opener_tree, seed):
    rng = random.Random(seed)
    edit, value = EDITS[seed % len(EDITS)] if seed < len(EDITS) else ('truncate', None)
    for name in ('libtorch_cuda.so', 'libc10_plugin.so'):
        shutil.copy(opener_tree / name, tmp_path / name)
    what = _corrupt_copy(opener_tree / 'libc10_plugin.so', tmp_path / 'libc10_plugin.so', edit, value, rng)
    done = subprocess.run([harness, str(tmp_path / 'libtorch_cuda.so')], env=CLEAN_ENV, capture_output=True, text=True)
    output = done.stdout + done.stderr
    loads = done.returncode == 0 and 'ROOTOK' in done.stdout and 'FAIL' not in done.stderr
    answer = json.loads(cli('doctor', '--format', 'json', tmp_path / 'libtorch_cuda.so').stdout)
    failing = [f for f in answer['findings'] if f['severity'] == 'fails']
    context = (what, done.returncode, output, answer['findings'])
    assert answer['blocking'] == (not loads), context
    if not loads:
        assert [f['kind'] for f in failing] == ['dlopen-corrupt'], context
        assert str(tmp_path / 'libc10_plugin.so') in failing[0]['message'], context
