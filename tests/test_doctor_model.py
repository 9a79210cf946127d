"""doctor's model, each part on real ELF files built with gcc and, where it can judge, the real loader:
.note.dlopen targets, plugins' host-program symbols, files that are not regular, severities and fixes."""

import json
import os
import subprocess
import sys
from pathlib import Path

from helpers import cli, gcc_shared
from eb_pytorch_cuda.loader.dlopen_note import dlopen_note_sonames

NOTE = r'''
#define DESC "[{\"feature\":\"x\",\"description\":\"optional x\",\"priority\":\"recommended\"," \
    "\"soname\":[\"libx.so.1\"]}]"
__attribute__((used, section(".note.dlopen"), aligned(4)))
static const struct { unsigned n_namesz, n_descsz, n_type; char name[4]; char desc[(sizeof(DESC) + 3) & ~3]; }
note = {4, sizeof(DESC), 0x407c0c0a, "FDO", DESC};
'''
OPENER = r'''
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
static char message[512];
const char *open_x(void) {
    char buffer[32];  /* the name is put together at run time: no .rodata string doctor could read */
    snprintf(buffer, sizeof(buffer), "%s%s", "lib", "x.so.1");
    void *handle = dlopen(buffer, RTLD_NOW);
    if (handle) return "ok";
    strncpy(message, dlerror(), sizeof(message) - 1);
    return message;
}
'''


def _note_layout(tmp_path, with_note):
    """root (RPATH=b) NEEDS libmid.so.1 (in b), which dlopen()s libx.so.1 (in b), which NEEDS liblost.so.1
    (in b): libx.so.1, opened by dlopen(), inherits no RPATH chain and cannot find liblost.so.1."""
    a, b = tmp_path / 'a', tmp_path / 'b'
    a.mkdir()
    b.mkdir()
    gcc_shared(b / 'liblost.so.1', 'int lost(void){return 1;}\n', '-Wl,-soname,liblost.so.1')
    gcc_shared(b / 'libx.so.1', 'int lost(void);\nint x(void){return lost();}\n', '-Wl,-soname,libx.so.1',
               f'-L{b}', '-l:liblost.so.1')
    gcc_shared(b / 'libmid.so.1', OPENER + (NOTE if with_note else ''), '-Wl,-soname,libmid.so.1', '-ldl')
    gcc_shared(a / 'libroot.so', 'const char *open_x(void);\nconst char *r(void){return open_x();}\n',
               f'-L{b}', '-l:libmid.so.1', '-Wl,--disable-new-dtags', f'-Wl,-rpath,{b}')
    return a / 'libroot.so'


def _real_dlopen(root):
    """Load root and let libmid.so.1 dlopen() libx.so.1, in a clean process: the loader's own answer."""
    code = ('import ctypes, os, sys; lib = ctypes.CDLL(sys.argv[1], mode=os.RTLD_GLOBAL); '
            'f = lib.r; f.restype = ctypes.c_char_p; print(f().decode())')
    return subprocess.run([sys.executable, '-I', '-c', code, str(root)], env={}, capture_output=True,
                          text=True, check=True).stdout.strip()


def test_dlopen_note_names_a_target_doctor_follows_and_the_loader_agrees(tmp_path):
    root = _note_layout(tmp_path, with_note=True)
    assert dlopen_note_sonames(str(tmp_path / 'b' / 'libmid.so.1')) == ['libx.so.1']
    assert 'liblost.so.1: cannot open shared object file' in _real_dlopen(root)
    data = json.loads(cli('doctor', '--from', root, root.parent, tmp_path / 'b', '--format', 'json', check_rc=1).stdout)
    [finding] = [f for f in data['findings'] if f['kind'] == 'needed-unresolved']
    assert finding['object'].endswith('/b/libx.so.1') and finding['details']['soname'] == 'liblost.so.1'
    assert finding['severity'] == 'fails' and data['blocking'] is True


def test_outside_the_paths_given_a_library_is_context(tmp_path):
    root = _note_layout(tmp_path, with_note=True)  # b/ holds libmid.so.1 and its dlopen() target: not audited
    assert 'nothing found' in cli('doctor', root, check_rc=0).stdout


def test_without_the_note_the_target_is_invisible(tmp_path):
    root = _note_layout(tmp_path, with_note=False)
    assert dlopen_note_sonames(str(tmp_path / 'b' / 'libmid.so.1')) == []
    done = cli('doctor', '--from', root, root.parent, tmp_path / 'b', check_rc=0)
    assert 'nothing found' in done.stdout  # what doctor cannot see (docs/reference.md)


def test_a_plugins_symbols_come_from_its_host_program_unless_the_program_is_named(tmp_path):
    plugin = tmp_path / 'plugin.so'  # like perl's re.so or a Slurm plugin: no soname, symbols from the host
    gcc_shared(plugin, 'int host_function(void);\nint plugin_entry(void){return host_function();}\n')
    assert 'nothing found' in cli('doctor', plugin, check_rc=0).stdout
    host = tmp_path / 'host'
    Path(str(host) + '.c').write_text('int host_function(void){return 0;}\nint main(void){return 0;}\n')
    subprocess.run(['gcc', '-rdynamic', '-o', str(host), str(host) + '.c'], check=True)
    assert 'nothing found' in cli('doctor', plugin, '--executable', host, check_rc=0).stdout
    other = tmp_path / 'other'
    Path(str(other) + '.c').write_text('int main(void){return 0;}\n')
    subprocess.run(['gcc', '-o', str(other), str(other) + '.c'], check=True)
    done = cli('doctor', plugin, '--executable', other, check_rc=1)
    assert f'{plugin}: undefined symbol host_function' in done.stdout


def test_a_fifo_named_like_a_library_is_skipped_with_a_note_and_never_opened(tmp_path):
    gcc_shared(tmp_path / 'libok.so.1', 'int ok(void){return 0;}\n', '-Wl,-soname,libok.so.1')
    os.mkfifo(tmp_path / 'libfifo.so')  # opening it for reading would block doctor forever
    done = subprocess.run([sys.executable, '-m', 'eb_pytorch_cuda', 'doctor', str(tmp_path)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert f'note: {tmp_path}/libfifo.so: not a regular file' in done.stdout
    assert 'nothing found' in done.stdout
    named = subprocess.run([sys.executable, '-m', 'eb_pytorch_cuda', 'doctor', str(tmp_path / 'libfifo.so')],
                           capture_output=True, text=True, timeout=60)
    assert named.returncode == 2 and named.stderr.count('\n') == 1
    assert f'{tmp_path}/libfifo.so' in named.stderr and 'not a regular file' in named.stderr


def test_text_output_groups_by_root_and_ends_with_the_fix_commands(standin8):
    done = cli('doctor', standin8.torch_lib, check_rc=1)
    lines = done.stdout.splitlines()
    assert lines[1] == f'== loading {standin8.torch_lib}'
    assert lines[-2] == 'fix:'
    assert lines[-1] == f'  eb-pytorch-cuda add-needed {standin8.torch_lib} libcudnn_cnn_train.so.8'
    data = json.loads(cli('doctor', standin8.torch_lib, '--format', 'json', check_rc=1).stdout)
    assert {f['severity'] for f in data['findings']} == {'fails'}
    assert data['fix'] == [lines[-1].strip()]


def test_an_order_hazard_names_the_system_copy_a_dlopened_library_would_take_itself(tmp_path):
    # libshim.so.1 (NEEDED by the root, found through its RPATH) dlopen()s liba.so.1 and libb.so.1; libb needs
    # liba and has no RUNPATH: opened first, it would take liba.so.1 from a "system" directory.  The ld.so.cache
    # here is a dict naming that directory: this machine's real cache must stay untouched (the H200 case with
    # the real cache and a real system cuDNN is in docs/validation/gpu.md).
    from eb_pytorch_cuda.loader.doctor import diagnose
    from eb_pytorch_cuda.loader.resolve import Resolver
    lib, system = tmp_path / 'lib', tmp_path / 'system'
    lib.mkdir()
    system.mkdir()
    for directory in (lib, system):
        gcc_shared(directory / 'liba.so.1', 'int a(void){return 1;}\n', '-Wl,-soname,liba.so.1')
    gcc_shared(lib / 'libb.so.1', 'int a(void);\nint b(void){return a();}\n', '-Wl,-soname,libb.so.1', f'-L{lib}',
               '-l:liba.so.1')
    gcc_shared(lib / 'libshim.so.1', 'const char *names[] = {"liba.so.1", "libb.so.1"};\n', '-Wl,-soname,libshim.so.1')
    top = tmp_path / 'top'  # the library to patch lives apart from the one it would get a NEEDED entry for
    top.mkdir()
    gcc_shared(top / 'libroot.so', 'int r(void){return 0;}\n', f'-L{lib}', '-Wl,--no-as-needed', '-l:libshim.so.1',
               '-Wl,--disable-new-dtags', f'-Wl,-rpath,{lib}')
    resolver = Resolver(ld_so_cache={'liba.so.1': [str(system / 'liba.so.1')]})
    findings, _ = diagnose([str(lib), str(top)], start=str(top / 'libroot.so'), resolver=resolver)
    [hazard] = [f for f in findings if f.kind == 'order-hazard']
    assert hazard.details['soname'] == 'libb.so.1' and hazard.details['needs_first'] == ['liba.so.1']
    assert hazard.details['elsewhere'] == {'liba.so.1': f'{system}/liba.so.1 (ld.so.cache)'}
    assert hazard.severity == 'order' and hazard.fix == [str(top / 'libroot.so'), 'libb.so.1']
    assert 'only outside the installation' in hazard.message


def test_on_an_installation_loads_start_at_libtorch_cuda_as_pytorch_loads_them(standin8):
    """doctor given the installation and its cuDNN, no --from: it starts at libtorch_cuda.so, as PyTorch does
    and as --from would, and its exit status is the real loader's.  Before, every object no other one needs
    was a root: cuDNN's cnn_infer loaded by itself could not find cnn_train by its own dlopen() (no RPATH
    chain), and doctor exited 1 on the patched layout that loads."""
    from eb_pytorch_cuda.cudnn import DEFAULT_NEEDED
    from eb_pytorch_cuda.patch.needed import add_needed
    from helpers import run_loadcheck
    paths = (Path(standin8.torch_lib).parent, standin8.cudnn_prefix)
    note = (f'note: loads start at {standin8.torch_lib}, as PyTorch loads it (the installation\'s libtorch_cuda.so; '
            f'--from LIB to start elsewhere)')
    # unpatched (the field failure): the real loader fails, doctor says so and names the fix
    loaded = run_loadcheck(standin8.loadcheck, standin8.torch_lib)
    assert 'libcudnn_cnn_train.so.8: cannot open shared object file' in loaded.stderr + loaded.stdout
    unpatched = cli('doctor', *paths, check_rc=1).stdout
    assert f'eb-pytorch-cuda add-needed {standin8.torch_lib} libcudnn_cnn_train.so.8' in unpatched
    assert note in unpatched.splitlines()
    # patched as the hooks patch it: the real loader loads it, and doctor finds nothing
    add_needed(standin8.torch_lib, list(DEFAULT_NEEDED[8]))
    assert run_loadcheck(standin8.loadcheck, standin8.torch_lib).returncode == 0
    patched = cli('doctor', *paths, check_rc=0).stdout
    assert patched.splitlines()[0].endswith('nothing found') and note in patched.splitlines()
    assert cli('doctor', '--from', standin8.torch_lib, *paths, check_rc=0).stdout.splitlines()[0] == \
        patched.splitlines()[0]  # the same objects checked as with --from
    data = json.loads(cli('doctor', *paths, '--format', 'json', check_rc=0).stdout)
    assert [(f['kind'], f['severity'], f['object']) for f in data['findings']] == \
        [('started', 'info', standin8.torch_lib)]
