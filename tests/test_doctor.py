"""doctor on the cuDNN stand-ins, an NCCL-like symbol clash, a soname conflict, bad input, and real torch."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from helpers import cli, gcc_shared
from eb_pytorch_cuda.patch.needed import add_needed
from environment import missing


def _doctor(*args, rc):
    return cli('doctor', '--executable', 'none', *args, check_rc=rc)


def test_names_the_cudnn_sub_library_its_opener_and_the_fix_then_nothing_after_it(standin):
    done = _doctor(standin.torch_lib, rc=1)
    opener = {8: 'libcudnn_cnn_infer.so.8', 9: 'libcudnn_graph.so.9'}[standin.major]
    leaf = standin.leaves[0]
    assert (f'[dlopen-unresolved] {leaf}, dlopen()ed by {standin.cudnn_lib}/{opener}, will not be found: '
            f'the opener inherits no RPATH chain (it was itself loaded by dlopen())') in done.stdout
    assert f'adding it as NEEDED of {standin.torch_lib} fixes it: eb-pytorch-cuda add-needed' in done.stdout
    add_needed(standin.torch_lib, standin.leaves)
    assert 'nothing found' in _doctor(standin.torch_lib, rc=0).stdout


def test_missing_needed_library_is_reported_with_the_search_path(standin8):
    os.rename(f'{standin8.cudnn_lib}/libcudnn.so.8', f'{standin8.cudnn_lib}/gone')
    data = json.loads(_doctor(standin8.torch_lib, '--format', 'json', rc=1).stdout)
    finding = data['findings'][0]
    assert finding['kind'] == 'needed-unresolved' and finding['details']['soname'] == 'libcudnn.so.8'
    assert finding['details']['searched'][0] == standin8.cudnn_lib


def test_versioned_symbol_missing_from_the_library_that_is_found_first(tmp_path):
    # torch built against NCCL 2.20 (which has ncclCommRegister), a system-like NCCL 2.16 found first
    new, old, torch = tmp_path / 'nccl-2.20', tmp_path / 'nccl-2.16', tmp_path / 'torch'
    for directory in (new, old, torch):
        directory.mkdir()
    script = tmp_path / 'nccl.map'
    script.write_text('NCCL_2.16 { global: ncclCommInitRank; local: *; };\n'
                      'NCCL_2.20 { global: ncclCommRegister; } NCCL_2.16;\n')
    gcc_shared(new / 'libnccl.so.2', 'int ncclCommInitRank(void){return 0;}\nint ncclCommRegister(void){return 0;}\n',
               '-Wl,-soname,libnccl.so.2', f'-Wl,--version-script={script}')
    script.write_text('NCCL_2.16 { global: ncclCommInitRank; local: *; };\n')
    gcc_shared(old / 'libnccl.so.2', 'int ncclCommInitRank(void){return 0;}\n', '-Wl,-soname,libnccl.so.2',
               f'-Wl,--version-script={script}')
    gcc_shared(torch / 'libtorch_cuda.so', 'int ncclCommRegister(void);\nint f(void){return ncclCommRegister();}\n',
               f'-L{new}', '-l:libnccl.so.2', '-Wl,--disable-new-dtags', f'-Wl,-rpath,{old}:{new}')
    done = _doctor(torch / 'libtorch_cuda.so', rc=1)
    assert (f'{torch}/libtorch_cuda.so: undefined symbol ncclCommRegister@NCCL_2.20; libnccl.so.2 resolved to '
            f'{old}/libnccl.so.2, which lacks it') in done.stdout


def test_the_same_soname_from_two_directories_is_a_conflict(tmp_path):
    first, second, top = tmp_path / 'a', tmp_path / 'b', tmp_path / 'top'
    for directory in (first, second, top):
        directory.mkdir()
    for directory in (first, second):
        gcc_shared(directory / 'libdup.so.1', 'int dup(void){return 1;}\n', '-Wl,-soname,libdup.so.1')
    gcc_shared(top / 'libuser.so', 'int dup(void);\nint u(void){return dup();}\n', f'-L{second}', '-l:libdup.so.1',
               '-Wl,--disable-new-dtags', f'-Wl,-rpath,{second}', '-Wl,-soname,libuser.so')
    gcc_shared(top / 'libroot.so', 'int u(void);\nint dup(void);\nint r(void){return u() + dup();}\n',
               f'-L{first}', f'-L{top}', '-l:libdup.so.1', '-l:libuser.so', '-Wl,--enable-new-dtags',
               f'-Wl,-rpath,{first}:{top}')
    done = _doctor(top / 'libroot.so', rc=1)
    assert (f'libdup.so.1: {top}/libuser.so would load {second}/libdup.so.1 (DT_RPATH of {top}/libuser.so), '
            f'but {first}/libdup.so.1 is already loaded') in done.stdout


@pytest.mark.parametrize('content', [b'not elf', b'/* GNU ld script */ INPUT(libc.so.6)'])
def test_bad_input_is_a_one_line_error(tmp_path, content):
    bad = tmp_path / 'libbad.so'
    bad.write_bytes(content)
    done = _doctor(bad, rc=2)
    assert str(bad) in done.stderr and done.stderr.count('\n') == 1


TORCH_VENV = Path(__file__).resolve().parent.parent / '.venvs' / 'torch'


@pytest.fixture(scope='module')
def torch_site(tmp_path_factory):
    """A tree of symlinks to the CUDA build of torch (pip install torch==2.14.1), faults planted in it."""
    found = sorted(TORCH_VENV.glob('lib/python3*/site-packages/torch'))
    if not found:
        missing(f'no CUDA build of torch in {TORCH_VENV}')
    site = found[0].parent
    return site, tmp_path_factory


def _mirror(site, destination, names=('torch', 'nvidia')):
    """Symlink every file of site/<names> into destination (directories real, so files can be swapped)."""
    for name in names:
        for directory, _, files in os.walk(site / name):
            target = destination / Path(directory).relative_to(site)
            target.mkdir(parents=True, exist_ok=True)
            for file_name in files:
                os.symlink(os.path.join(directory, file_name), target / file_name)
    return destination


def _torch_python(site):
    return str(TORCH_VENV / 'bin' / 'python')


def test_intact_torch_install_is_clean(torch_site):
    site, _ = torch_site
    done = cli('doctor', site / 'torch', site / 'nvidia', '--executable', _torch_python(site), check_rc=0)
    assert 'nothing found' in done.stdout


def test_planted_faults_in_torch_are_each_found(torch_site, tmp_path):
    site, _ = torch_site
    mirror = _mirror(site, tmp_path / 'torch-faults')
    # 1. a removed library
    cusparse = next((mirror / 'nvidia').rglob('libcusparse.so.*'))
    cusparse.unlink()
    # 2. a stub libnccl.so.2 without the symbols torch needs
    nccl = next((mirror / 'nvidia').rglob('libnccl.so.2'))
    nccl.unlink()
    gcc_shared(nccl, 'int ncclGetVersion(int *v){*v=0;return 0;}\n', '-Wl,-soname,libnccl.so.2')
    # 3. a cuDNN sub-library dlopen()ed out of reach: libcudnn_graph.so.9 without its $ORIGIN RPATH
    graph = next((mirror / 'nvidia').rglob('libcudnn_graph.so.9'))
    real = os.path.realpath(graph)
    graph.unlink()
    subprocess.run(['cp', real, str(graph)], check=True)
    from eb_pytorch_cuda.elf.patchelf import patchelf_binary
    subprocess.run([patchelf_binary(), '--remove-rpath', str(graph)], check=True)
    done = cli('doctor', mirror / 'torch', mirror / 'nvidia', '--executable', _torch_python(site), check_rc=1)
    out = done.stdout
    assert f'NEEDED {cusparse.name} not found without LD_LIBRARY_PATH' in out
    assert f'libnccl.so.2 resolved to {nccl}, which lacks it' in out
    assert f'libcudnn_engines_precompiled.so.9, dlopen()ed by {graph}, will not be found' in out
    assert 'eb-pytorch-cuda add-needed' in out


def test_another_architectures_build_is_audited_without_running_it(standin8):
    # the same tree relabelled as AArch64: nothing can be loaded here, the prediction is the same
    for path in [standin8.torch_lib, *Path(standin8.cudnn_lib).glob('libcudnn*.so.8')]:
        data = bytearray(Path(path).read_bytes())
        data[18:20] = (183).to_bytes(2, 'little')
        Path(path).write_bytes(bytes(data))
    done = _doctor(standin8.torch_lib, rc=1)
    assert f'[dlopen-unresolved] libcudnn_cnn_train.so.8, dlopen()ed by {standin8.cudnn_lib}/libcudnn_cnn_infer.so.8' \
        in done.stdout


def test_a_dlopen_finding_another_copy_than_the_openers_neighbour_is_reported(standin8, tmp_path):
    # as on the H200 image: the search fell through to a system cuDNN of another version
    from eb_pytorch_cuda.elf.patchelf import patchelf_binary
    elsewhere = tmp_path / 'system-cudnn'
    elsewhere.mkdir()
    shutil.copy(f'{standin8.cudnn_lib}/libcudnn_cnn_train.so.8', elsewhere)
    subprocess.run([patchelf_binary(), '--force-rpath', '--set-rpath', str(elsewhere),
                    f'{standin8.cudnn_lib}/libcudnn_cnn_infer.so.8'], check=True)
    done = _doctor(standin8.torch_lib, rc=1)
    assert (f'[dlopen-shadowed] libcudnn_cnn_train.so.8, dlopen()ed by {standin8.cudnn_lib}/libcudnn_cnn_infer.so.8, '
            f'resolves to {elsewhere}/libcudnn_cnn_train.so.8') in done.stdout
    assert f'eb-pytorch-cuda add-needed {standin8.torch_lib} libcudnn_cnn_train.so.8' in done.stdout
    add_needed(standin8.torch_lib, ['libcudnn_cnn_train.so.8'])
    assert 'nothing found' in _doctor(standin8.torch_lib, rc=0).stdout


def _cache_of(tmp_path, directory):
    """A real ld.so.cache listing `directory`, written by this machine's ldconfig (no links made, nothing else
    touched): the cache another machine's loader would read, for doctor --ld-so-cache."""
    conf, cache = tmp_path / 'ld.so.conf', tmp_path / 'ld.so.cache'
    conf.write_text(f'{directory}\n')
    subprocess.run(['ldconfig', '-X', '-C', str(cache), '-f', str(conf)], check=True, capture_output=True)
    return cache


def test_a_sub_library_missing_and_found_in_another_cudnn_is_a_wrong_copy(standin8, tmp_path):
    """cnn_train missing from the stand-in cuDNN, a copy in a directory the (real, ldconfig-written) cache lists:
    cnn_infer's dlopen() takes that copy (the H200's case with a system cuDNN 9.14, docs/validation/
    gpu-mixed-cudnn.md; here a copy of the same stand-in, so its version is unknown); without the cache it is
    simply missing, and nothing is reported (no copy of it exists anywhere near)."""
    system = tmp_path / 'system-cudnn'
    system.mkdir()
    os.rename(f'{standin8.cudnn_lib}/libcudnn_cnn_train.so.8', system / 'libcudnn_cnn_train.so.8')
    cache = _cache_of(tmp_path, system)
    data = json.loads(_doctor(standin8.torch_lib, '--ld-so-cache', cache, '--format', 'json', rc=1).stdout)
    found = [f for f in data['findings'] if f['kind'] == 'sublibrary-elsewhere']
    assert len(found) == 1 and found[0]['severity'] == 'wrong-copy'
    assert found[0]['details']['resolved'] == str(system / 'libcudnn_cnn_train.so.8')
    assert found[0]['details']['via'] == 'ld.so.cache' and found[0]['details']['missing_from'] == standin8.cudnn_lib
    assert 'is missing from the installation' in found[0]['message']
    data = json.loads(_doctor(standin8.torch_lib, '--ld-so-cache', 'none', '--format', 'json', rc=0).stdout)
    assert not [f for f in data['findings'] if f['details'].get('soname') == 'libcudnn_cnn_train.so.8']


def test_a_library_found_only_through_ld_library_path_is_named_so(standin8, tmp_path):
    """doctor never searches LD_LIBRARY_PATH (RPATH-linked stacks do not set it), but takes the caller's as a place
    where files may lie: a dlopen() target found only there fails, and the finding says where it is."""
    elsewhere = tmp_path / 'cuda-like'
    elsewhere.mkdir()
    os.rename(f'{standin8.cudnn_lib}/libcudnn_cnn_train.so.8', elsewhere / 'libcudnn_cnn_train.so.8')
    done = cli('doctor', '--executable', 'none', standin8.torch_lib, '--ld-so-cache', 'none',
               env={**os.environ, 'LD_LIBRARY_PATH': str(elsewhere)})
    assert done.returncode == 1, done.stdout + done.stderr
    assert (f'although {elsewhere}/libcudnn_cnn_train.so.8 exists; {elsewhere} is reached only through '
            f'LD_LIBRARY_PATH') in done.stdout


@pytest.mark.parametrize('content', [b'not a cache', b''])
def test_a_bad_ld_so_cache_is_a_one_line_error(standin8, tmp_path, content):
    bad = tmp_path / 'ld.so.cache'
    bad.write_bytes(content)
    done = _doctor(standin8.torch_lib, '--ld-so-cache', bad, rc=2)
    assert f'{bad}: not an ld.so.cache' in done.stderr and done.stderr.count('\n') == 1
    done = _doctor(standin8.torch_lib, '--ld-so-cache', tmp_path / 'missing', rc=2)
    assert str(tmp_path / 'missing') in done.stderr and done.stderr.count('\n') == 1
