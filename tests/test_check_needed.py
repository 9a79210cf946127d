"""check-needed proves the entry is present, resolves inside the expected dir, and is mapped by a real load."""

import shutil

from helpers import cli
from eb_pytorch_cuda.elf.reader import read_elf
from eb_pytorch_cuda.patch.needed import add_needed, check_needed


def test_unpatched_library_fails_naming_file_and_soname(standin8):
    done = cli('check-needed', standin8.torch_lib, 'libcudnn_cnn_train.so.8', check_rc=1)
    assert f'{standin8.torch_lib}: libcudnn_cnn_train.so.8 is not a NEEDED entry' in done.stderr


def test_patched_library_passes_all_three_checks(standin):
    add_needed(standin.torch_lib, standin.leaves)
    done = cli('check-needed', standin.torch_lib, *standin.leaves, '--expect-dir', standin.cudnn_prefix, '--load',
               check_rc=0)
    for soname in standin.leaves:
        assert f'ok   {soname}: NEEDED yes, resolves to {standin.cudnn_lib}/{soname}' in done.stdout
    assert done.stdout.count('mapped by a real load') == len(standin.leaves)


def test_resolving_outside_the_expected_directory_fails(standin8, tmp_path):
    # a stray copy earlier in the RPATH (e.g. an old cuDNN) shadows the one in the cuDNN installation
    stray = tmp_path / 'stray'
    stray.mkdir()
    shutil.copy(f'{standin8.cudnn_lib}/libcudnn_cnn_train.so.8', stray)
    from eb_pytorch_cuda import standins
    lib = standins.build_torch_lib(tmp_path / 'shadowed', standin8.cudnn_prefix,
                                   extra_ldflags=f'-Wl,-rpath,{stray}')
    add_needed(lib, ['libcudnn_cnn_train.so.8'])
    checks, _ = check_needed(lib, ['libcudnn_cnn_train.so.8'], expect_dir=standin8.cudnn_prefix)
    assert checks[0].problem == (f'NEEDED libcudnn_cnn_train.so.8 resolves to {stray}/libcudnn_cnn_train.so.8, '
                                 f'outside {standin8.cudnn_prefix}')


def test_load_failure_is_reported_with_the_loader_message(standin8):
    add_needed(standin8.torch_lib, ['libcudnn_cnn_train.so.8'])
    import os
    os.rename(f'{standin8.cudnn_lib}/libcudnn.so.8', f'{standin8.cudnn_lib}/moved')
    checks, report = check_needed(standin8.torch_lib, ['libcudnn_cnn_train.so.8'], load=True)
    assert not report.loaded and 'libcudnn.so.8: cannot open shared object file' in report.error
    assert checks[0].problem.startswith('loading it failed: ')


def test_preload_satisfies_a_soname_by_already_loaded_rule(standin8, tmp_path):
    # the library needs a soname nothing on its path provides (like libcuda.so.1 on a build node);
    # preloading a file with that soname lets the real load proceed, as glibc matches loaded sonames
    from eb_pytorch_cuda import standins
    import subprocess
    stub_dir = tmp_path / 'stubs'
    stub_dir.mkdir()
    src = tmp_path / 'stub.c'
    src.write_text('int fakeDriverInit(int f) { return 0; }\n')
    subprocess.run(['gcc', '-shared', '-fPIC', '-o', str(stub_dir / 'libfakedriver.so'), str(src),
                    '-Wl,-soname,libfakedriver.so.1'], check=True)
    lib = standins.build_torch_lib(tmp_path / 'needs_driver', standin8.cudnn_prefix,
                                   extra_ldflags=f'-L{stub_dir} -lfakedriver')
    assert 'libfakedriver.so.1' in read_elf(lib).needed
    add_needed(lib, ['libcudnn_cnn_train.so.8'])
    checks, report = check_needed(lib, ['libcudnn_cnn_train.so.8'], load=True)
    assert not report.loaded and 'libfakedriver.so.1: cannot open shared object file' in report.error
    checks, report = check_needed(lib, ['libcudnn_cnn_train.so.8'], load=True,
                                  preload=[str(stub_dir / 'libfakedriver.so')])
    assert report.loaded and checks[0].problem is None and checks[0].mapped
