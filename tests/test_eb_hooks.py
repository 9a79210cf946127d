"""Real `eb` runs (EasyBuild 4.9.4 and 5.4.1, Lmod, SYSTEM toolchain) of the stand-in easyconfigs.

Without our hooks the test step fails with cuDNN's real loader error; with them the tests run against
a patched library (4.9.4 and 5.x patch at different moments), the installation is patched, and the
sanity check proves it.  The negative runs check the sanity check's messages.
"""

import shutil

from eb_pytorch_cuda.elf.reader import read_elf
from eb_runner import REPO

EASYBLOCK = REPO / 'easybuild' / 'easyblocks' / 'p' / 'pytorch.py'

PYTORCH_EC = 'PyTorch-2.1.2-standin.eb'


def installed_library(eb):
    found = list(eb.installdir('PyTorch', '2.1.2-standin').rglob('libtorch_cuda.so'))
    assert len(found) == 1, found
    return str(found[0])


def test_without_hooks_the_test_step_fails_with_the_cudnn_loader_error(eb):
    done = eb.run(PYTORCH_EC, hooks=False)
    assert done.returncode != 0
    logs = ''.join(p.read_text() for p in (eb.prefix / 'tmp').rglob('easybuild-*.log'))
    assert 'Could not load library libcudnn_cnn_train.so.8' in done.stdout + logs
    assert 'libcudnn_cnn_train.so.8: cannot open shared object file' in done.stdout + logs


def test_with_hooks_tests_run_patched_install_is_patched_and_sanity_check_proves_it(eb, eb_stack):
    done = eb.run(PYTORCH_EC)
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    library = installed_library(eb)
    cudnn_lib = eb_stack[1] / 'software' / 'cuDNN' / '8.9.2.26-standin' / 'lib'
    assert read_elf(library).needed.count('libcudnn_cnn_train.so.8') == 1
    # the test step ran against a patched library: the patch happened before the test command
    test_section = out[out.index('== testing...'):out.index('== installing...')]
    assert 'added NEEDED libcudnn_cnn_train.so.8' in test_section
    assert f'sanity check: {library} has NEEDED libcudnn_cnn_train.so.8 -> {cudnn_lib}/libcudnn_cnn_train.so.8, ' \
           f'mapped by a real load' in out
    assert 'COMPLETED: Installation ended successfully' in out
    # each file is reported once: rerunning the patch on a patched file is a no-op
    assert out.count(f'patched {library}') <= 1


def test_sanity_check_fails_for_an_installation_made_without_the_patch(eb):
    done = eb.run(PYTORCH_EC, '--skip-test-step', hooks=False)
    assert done.returncode == 0, done.stdout + done.stderr
    library = installed_library(eb)
    done = eb.run(PYTORCH_EC, '--sanity-check-only')
    assert done.returncode != 0
    assert f'Sanity check failed: {library}: libcudnn_cnn_train.so.8 is not a NEEDED entry' in done.stdout


def test_sanity_check_fails_when_the_entry_resolves_outside_the_cudnn_installation(eb, tmp_path, eb_stack):
    # an older copy earlier in libtorch_cuda.so's RPATH shadows the cuDNN module's library
    stray = tmp_path / 'stray'
    stray.mkdir()
    shutil.copy(eb_stack[1] / 'software' / 'cuDNN' / '8.9.2.26-standin' / 'lib' / 'libcudnn_cnn_train.so.8', stray)
    # (-L as well: EasyBuild's RPATH wrapper puts -L directories first, in order)
    done = eb.run(PYTORCH_EC, env={'EXTRA_LDFLAGS': f'-L{stray} -Wl,-rpath,{stray}'})
    assert done.returncode != 0
    library = installed_library(eb)
    cudnn_root = eb_stack[1] / 'software' / 'cuDNN' / '8.9.2.26-standin'
    assert (f'Sanity check failed: {library}: NEEDED libcudnn_cnn_train.so.8 resolves to '
            f'{stray}/libcudnn_cnn_train.so.8, outside {cudnn_root}') in done.stdout


def test_site_can_switch_the_patch_off_and_then_nothing_is_demanded(eb):
    done = eb.run(PYTORCH_EC, '--skip-test-step', env={'EB_PYTORCH_CUDA_CUDNN_NEEDED': ''})
    assert done.returncode == 0, done.stdout + done.stderr
    assert 'libcudnn_cnn_train.so.8' not in read_elf(installed_library(eb)).needed


def test_our_easyblock_extends_upstream_and_applies_cudnn_needed(eb):
    # upstream EB_PyTorch's configure/build/test steps run; our parameter chooses the sub-libraries
    done = eb.run('PyTorch-2.1.2-standin-easyblock.eb', f'--include-easyblocks={EASYBLOCK}')
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    found = list(eb.installdir('PyTorch', '2.1.2-standin-easyblock').rglob('libtorch_cuda.so'))
    needed = read_elf(found[0]).needed
    assert needed.count('libcudnn_cnn_train.so.8') == 1 and needed.count('libcudnn_ops_train.so.8') == 1
    assert 'libcudnn_cnn_ext.so.8' not in needed  # asked for, but this cuDNN has no such file
    assert out.count('WARNING: libcudnn_cnn_ext.so.8 not in the cuDNN installation') == 1
    for soname in ('libcudnn_cnn_train.so.8', 'libcudnn_ops_train.so.8'):
        assert f'sanity check: {found[0]} has NEEDED {soname} -> ' in out
    assert 'deprecated' not in out.lower()


def test_cpu_only_build_is_skipped_with_one_info_line(eb):
    done = eb.run('PyTorch-2.1.2-standin-cpu.eb')
    assert done.returncode == 0, done.stdout + done.stderr
    assert not list(eb.installdir('PyTorch', '2.1.2-standin-cpu').rglob('libtorch_cuda.so'))
    assert done.stdout.count('(CPU-only build)') == 1
    assert 'patched' not in done.stdout


SITE_HOOKS = '''
from eb_pytorch_cuda.eb.hooks import PyTorchCudaHooks

site = PyTorchCudaHooks(cudnn_needed={8: ['libcudnn_ops_train.so.8']})


def post_install_hook(self, *args, **kwargs):
    site.post_install_hook(self, *args, **kwargs)


def pre_sanitycheck_hook(self, *args, **kwargs):
    site.pre_sanitycheck_hook(self, *args, **kwargs)
'''


def test_a_site_hooks_file_forwards_to_its_own_hooks_object_with_its_settings(eb, tmp_path):
    hooks_file = tmp_path / 'site_hooks.py'
    hooks_file.write_text(SITE_HOOKS)
    done = eb.run(PYTORCH_EC, '--skip-test-step', f'--hooks={hooks_file}', hooks=False)
    assert done.returncode == 0, done.stdout + done.stderr
    library = installed_library(eb)
    needed = read_elf(library).needed
    assert 'libcudnn_ops_train.so.8' in needed and 'libcudnn_cnn_train.so.8' not in needed
    assert f'sanity check: {library} has NEEDED libcudnn_ops_train.so.8 -> ' in done.stdout


def test_site_hooks_with_a_malformed_cudnn_needed_stop_eb_in_one_line(eb, tmp_path):
    hooks_file = tmp_path / 'site_hooks.py'
    hooks_file.write_text(SITE_HOOKS.replace("{8: ['libcudnn_ops_train.so.8']}", "{8: 'libcudnn_ops_train.so.8'}"))
    done = eb.run(PYTORCH_EC, '--skip-test-step', f'--hooks={hooks_file}', hooks=False)
    out = done.stdout + done.stderr
    assert done.returncode != 0
    errors = [row for row in out.splitlines() if 'ERROR' in row]
    assert len(errors) == 1, out
    assert 'PyTorchCudaHooks(cudnn_needed=...): cudnn_needed[8] must be a list of sonames' in errors[0], out
    assert 'Traceback' not in out and 'refusing to add NEEDED' not in out and 'WARNING: l ' not in out
    assert 'libcudnn_ops_train.so.8' not in read_elf(installed_library(eb)).needed  # nothing was patched
