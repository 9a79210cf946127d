"""The failure we exist to fix, reproduced with the real glibc loader, and fixed by add-needed."""

from helpers import cli, run_loadcheck


def test_unpatched_library_fails_to_dlopen_the_leaf_sub_library(standin):
    done = run_loadcheck(standin.loadcheck, standin.torch_lib)
    assert done.returncode == 1
    assert f'Could not load library {standin.leaves[0]}' in done.stderr
    assert 'cannot open shared object file' in done.stderr


def test_adding_the_leaf_as_needed_makes_the_real_loader_succeed(standin):
    cli('add-needed', standin.torch_lib, *standin.leaves, check_rc=0)
    done = run_loadcheck(standin.loadcheck, standin.torch_lib)
    assert done.returncode == 0, done.stdout + done.stderr
    assert 'torch_conv(20) = 41' in done.stdout
    assert done.stderr == ''


def test_runpath_on_the_sub_library_also_fixes_it_as_in_the_pip_wheels(standin8, tmp_path):
    # NVIDIA's wheels carry RUNPATH=$ORIGIN; we may not patch cuDNN itself, but the loader agrees it works
    import subprocess
    from eb_pytorch_cuda.elf.patchelf import patchelf_binary
    sub = f'{standin8.cudnn_lib}/libcudnn_cnn_infer.so.8'
    subprocess.run([patchelf_binary(), '--set-rpath', '$ORIGIN', sub], check=True)
    assert run_loadcheck(standin8.loadcheck, standin8.torch_lib).returncode == 0
