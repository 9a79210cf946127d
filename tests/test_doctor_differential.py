"""doctor against the real loader: random library graphs built with gcc, loaded by a C harness.

Each graph has libraries in several directories, linked with DT_RPATH, DT_RUNPATH (absolute or
$ORIGIN-relative) or nothing, joined by NEEDED edges and by dlopen() calls made in constructors, with
some NEEDED libraries missing and some shadowed by a copy that lacks the symbol its users call.  The
harness dlopen()s the root with RTLD_NOW and LD_LIBRARY_PATH unset under LD_DEBUG=libs,files; doctor
must predict, for every library the loader looked for, the same file (or none), and the undefined
symbol the loader complained about.
"""

import os
import random
import subprocess

import pytest

from conftest import CLEAN_ENV
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
