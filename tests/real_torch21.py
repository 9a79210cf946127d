"""Sources and a Python for real `eb` runs of the real torch 2.1.2 wheel with the 2.1-line test harness.

What tests/test_eb_real_torch21.py installs with EasyBuild, made from what tools/setup.sh put in .venvs/:

- cuDNN 8.9.2.26 as NVIDIA's tarball has it: the pip wheel's (nvidia-cudnn-cu12) lib/ and include/ in a
  tarball, every library with its RPATH/RUNPATH removed (the wheel gives them `$ORIGIN:...`; NVIDIA's
  tarball none, and EasyBuild's Tarball easyblock never relinks them).
- the 2.1-line harness (test/, tools/, pytest.ini, version.txt of .venvs/pytorch-2.1-harness) in a
  tarball, as a PyTorch source tarball carries them.
- the real torch 2.1.2 wheel, repacked from its installed files (its RECORD): every ELF file's DT_RPATH
  as EasyBuild's RPATH wrapper would have linked a source build, the cuDNN module's lib/ in place of
  `$ORIGIN/../../nvidia/cudnn/lib`, one directory of the other CUDA libraries in place of the other
  `$ORIGIN/../../nvidia/*/lib` entries ($ORIGIN kept, still DT_RPATH); METADATA without the nvidia-* and
  triton requirements (an EasyBuild build takes them from modules); LICENSE, NOTICE and the rest as they are.
- the CUDA libraries other than cuDNN (cuBLAS, cuFFT, cuRAND, cuSPARSE, NCCL, ... of the pip wheels):
  one directory of symlinks to .venvs/harness-2.1's files, standing in for a CUDA module's lib64.
- the test Python: a venv of .venvs/harness-2.1's interpreter that sees every package of that venv (the
  pytest plugins, the harness's imports) except torch's own (torch, torchgen, functorch, nvfuser, nvidia-*,
  triton), so that `import torch` works only through the installation under test.
"""

import csv
import io
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from typing import Dict, List, NamedTuple

from environment import HARNESS21_TREE

from eb_pytorch_cuda.elf.patchelf import patchelf_binary
from eb_pytorch_cuda.elf.reader import read_elf

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / 'tools' / 'validate-gpu'))
from binary_torch import _metadata, _record_line, _tar_filter  # noqa: E402 - the GPU run's wheel tools

REPO = Path(__file__).resolve().parent.parent
VENVS = Path(os.environ.get('EB_PYTORCH_CUDA_VENVS', REPO / '.venvs')).resolve()
HARNESS_VENV = VENVS / 'harness-2.1'
SITE_PACKAGES = HARNESS_VENV / 'lib' / 'python3.11' / 'site-packages'
HARNESS_TREE = Path(HARNESS21_TREE)  # tests/environment.py: the one place that says where it is
EASYCONFIGS = REPO / 'tests' / 'data' / 'easyconfigs-real-torch21'

CUDNN_VERSION = '8.9.2.26'
CUDNN_SUFFIX = '-pip-wheel'
CUDNN_TARBALL = f'cudnn-linux-x86_64-{CUDNN_VERSION}_cuda12-pip-archive.tar'
HARNESS_TARBALL = 'pytorch-v2.1.2-harness21.tar'
WHEEL = 'torch-2.1.2-cp311-cp311-linux_x86_64.whl'
DIST_INFO = 'torch-2.1.2.dist-info'
NVIDIA_RPATH = '$ORIGIN/../../nvidia/'
# top-level names of the torch wheel and of what it pulls in: hidden from the test Python
TORCH_OWN = ('torch', 'torchgen', 'functorch', 'nvfuser', 'nvidia', 'triton')


class WheelInfo(NamedTuple):
    """The repacked wheel and what was changed in it."""
    path: Path
    relinked: Dict[str, List[str]]  # path in the wheel -> its new DT_RPATH entries
    requirements_dropped: List[str]


def missing_inputs() -> List[str]:
    """What tools/setup.sh should have made and is not there."""
    needed = [SITE_PACKAGES / 'torch' / 'lib' / 'libtorch_cuda.so', SITE_PACKAGES / DIST_INFO / 'RECORD',
              SITE_PACKAGES / 'nvidia' / 'cudnn' / 'lib' / 'libcudnn.so.8', HARNESS_TREE / 'test' / 'run_test.py',
              HARNESS_VENV / 'bin' / 'python']
    absent = [str(path) for path in needed if not path.exists()]
    if not (HARNESS_TREE / 'test' / 'run_test.py').exists():
        from environment import HARNESS21_ABSENT
        absent = [HARNESS21_ABSENT if path == str(HARNESS_TREE / 'test' / 'run_test.py') else path for path in absent]
    return absent


def make_harness_tarball(sources: Path) -> Path:
    """The 2.1-line harness as a PyTorch source tarball carries it (top directory pytorch-v2.1.2)."""
    target = sources / HARNESS_TARBALL
    with tarfile.open(target, 'w') as tar:
        for part in ('test', 'tools', 'pytest.ini', 'version.txt'):
            tar.add(HARNESS_TREE / part, arcname=f'pytorch-v2.1.2/{part}', filter=_tar_filter)
    return target


def make_cudnn_tarball(sources: Path, staging: Path) -> Path:
    """cuDNN 8.9.2.26 from the pip wheel laid out as NVIDIA's tarball: lib/ (no RPATH/RUNPATH), include/.
    Uncompressed: gzip of 1.2 GB would cost a minute of this machine's CPU for nothing under test."""
    root = staging / f'cudnn-linux-x86_64-{CUDNN_VERSION}_cuda12-archive'
    wheel_root = SITE_PACKAGES / 'nvidia' / 'cudnn'
    for part in ('lib', 'include'):
        (root / part).mkdir(parents=True)
        for source in sorted((wheel_root / part).iterdir()):
            if source.name.startswith('libcudnn') or source.suffix == '.h':
                shutil.copyfile(source, root / part / source.name)
    for library in sorted((root / 'lib').iterdir()):
        subprocess.run([patchelf_binary(), '--remove-rpath', str(library)], check=True)
    target = sources / CUDNN_TARBALL
    with tarfile.open(target, 'w') as tar:
        tar.add(root, arcname=root.name)
    shutil.rmtree(root)
    return target


def make_cuda_libs(directory: Path) -> Path:
    """One directory with a symlink to every library of the pip CUDA wheels but cuDNN (a CUDA module's lib64)."""
    directory.mkdir(parents=True)
    for package in sorted((SITE_PACKAGES / 'nvidia').iterdir()):
        lib = package / 'lib'
        if package.name == 'cudnn' or not lib.is_dir():
            continue
        for library in sorted(lib.iterdir()):
            if '.so' in library.name:
                (directory / library.name).symlink_to(library)
    return directory


def _new_rpath(entries, cudnn_lib: str, cuda_lib: str) -> List[str]:
    """entries with the wheel's nvidia/<package>/lib entries replaced as an RPATH-linked build has them."""
    result: List[str] = []
    for entry in entries:
        if entry.startswith(NVIDIA_RPATH):
            entry = cudnn_lib if entry == NVIDIA_RPATH + 'cudnn/lib' else cuda_lib
        if entry not in result:
            result.append(entry)
    return result


def make_torch_wheel(sources: Path, staging: Path, cudnn_lib: str, cuda_lib: str) -> WheelInfo:
    """The real torch 2.1.2 wheel, repacked from its installed files (see the module docstring).

    Stored, not deflated: 1.4 GB compressed twice per test session would dominate its run time."""
    with open(SITE_PACKAGES / DIST_INFO / 'RECORD', newline='') as handle:
        names = [row[0] for row in csv.reader(handle) if row]
    skip = {f'{DIST_INFO}/{name}' for name in ('RECORD', 'INSTALLER', 'REQUESTED', 'direct_url.json')}
    names = [name for name in names if not name.startswith('../') and '__pycache__/' not in name
             and not name.endswith('.pyc') and name not in skip]
    staging.mkdir(parents=True)
    relinked: Dict[str, List[str]] = {}
    records: List[List[str]] = []
    target = sources / WHEEL
    with zipfile.ZipFile(target, 'w', compression=zipfile.ZIP_STORED) as wheel:
        for name in names:
            source = SITE_PACKAGES / name
            data_path = source
            if name == f'{DIST_INFO}/METADATA':
                text, dropped = _metadata(source.read_text(encoding='utf-8'))
                data_path = staging / 'METADATA'
                data_path.write_text(text, encoding='utf-8')
            elif '.so' in source.name:
                info = read_elf(source)
                if any(entry.startswith(NVIDIA_RPATH) for entry in info.rpath + info.runpath):
                    assert info.rpath and not info.runpath, (name, info)  # the wheel links with DT_RPATH
                    rpath = _new_rpath(info.rpath, cudnn_lib, cuda_lib)
                    data_path = staging / name.replace('/', '__')
                    shutil.copyfile(source, data_path)
                    subprocess.run([patchelf_binary(), '--force-rpath', '--set-rpath', ':'.join(rpath),
                                    str(data_path)], check=True)
                    relinked[name] = rpath
            wheel.write(data_path, name)
            records.append(_record_line(name, data_path))
            if data_path != source:
                data_path.unlink()
        out = io.StringIO()
        csv.writer(out, lineterminator='\n').writerows(records + [[f'{DIST_INFO}/RECORD', '', '']])
        wheel.writestr(f'{DIST_INFO}/RECORD', out.getvalue())
    return WheelInfo(target, relinked, dropped)


def make_test_python(root: Path) -> Path:
    """A venv of the harness Python that sees its packages but not torch's (see the module docstring)."""
    subprocess.run([str(HARNESS_VENV / 'bin' / 'python'), '-m', 'venv', '--without-pip', str(root)], check=True)
    view = root / 'harness-packages'
    view.mkdir()
    for entry in sorted(SITE_PACKAGES.iterdir()):
        top = entry.name.split('-')[0].split('.')[0].lower()
        if top in TORCH_OWN or top.startswith(('nvidia_', 'torch')) or entry.name == '__pycache__':
            continue
        (view / entry.name).symlink_to(entry)
    (root / 'lib' / 'python3.11' / 'site-packages' / 'harness-packages.pth').write_text(f'{view}\n')
    return root / 'bin' / 'python'
