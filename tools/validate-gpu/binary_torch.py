"""Sources for an EasyBuild install of a binary PyTorch (an installed torch wheel) in an RPATH-only layout.

A real source build of PyTorch is out of reach in a test or on a lent GPU machine, so these make what an
`eb` run of our EB_PyTorch can install instead, from a Python environment that has torch and its nvidia-*
wheels installed (generalised from tests/real_torch21.py, which does the same for torch 2.1.2):

- cuDNN as NVIDIA's tarball has it: the pip wheel's lib/ and include/ in a tarball, every library with its
  RPATH/RUNPATH removed (the wheel gives them `$ORIGIN:...`; NVIDIA's tarball none, and EasyBuild's Tarball
  easyblock never relinks them);
- the test harness (test/, tools/ and whatever else is named) of a PyTorch source tree in a tarball, as a
  PyTorch source tarball carries them;
- the installed torch repacked as a wheel (from its RECORD): every ELF file's search path as EasyBuild's
  RPATH wrapper would have linked a source build (DT_RPATH, never RUNPATH), with the cuDNN module's lib/ in
  place of the wheel's nvidia/cudnn/lib and the other nvidia/*/lib directories as they are installed (they
  stand in for a CUDA module); METADATA without the nvidia-* and triton requirements;
- the test Python: a venv of the environment's interpreter that sees every package of the environment except
  torch's own and the pip cuDNN (torch's start-up would otherwise preload cuDNN from there: nvidia/cudnn), so
  `import torch` works only through the installation under test.

How this differs from a source build: nothing is compiled; the libraries are NVIDIA's and PyTorch's own
binaries, relinked only in their search paths.
"""

import base64
import csv
import hashlib
import io
import os
import shutil
import subprocess
import tarfile
import zipfile
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional

from eb_pytorch_cuda.elf.patchelf import patchelf_binary
from eb_pytorch_cuda.elf.reader import read_elf

TORCH_OWN = ('torch', 'torchgen', 'functorch', 'nvfuser', 'triton')  # hidden from the test Python


class WheelInfo(NamedTuple):
    """The repacked wheel and what was changed in it."""
    path: Path
    relinked: Dict[str, List[str]]  # path in the wheel -> its new DT_RPATH entries
    requirements_dropped: List[str]


def dist_info(site: Path, name: str = 'torch') -> Path:
    """The installed distribution's .dist-info directory (e.g. torch-2.11.0+cu130.dist-info)."""
    found = sorted(site.glob(f'{name}-*.dist-info'))
    if len(found) != 1:
        raise SystemExit(f'binary_torch: {site}: expected one {name}-*.dist-info, found {len(found)}')
    return found[0]


def _tar_filter(info):
    parts = info.name.split('/')
    return None if '__pycache__' in parts or 'test-reports' in parts or info.name.endswith('.pyc') else info


def make_harness_tarball(tree: Path, parts, top: str, target: Path) -> Path:
    """tree's parts (test, tools, ...) under top/ in an uncompressed tarball."""
    with tarfile.open(target, 'w') as tar:
        for part in parts:
            if (tree / part).exists():
                tar.add(tree / part, arcname=f'{top}/{part}', filter=_tar_filter)
    return target


def make_cudnn_tarball(cudnn_wheel_root: Path, top: str, target: Path, staging: Path) -> Path:
    """The pip cuDNN (nvidia/cudnn) laid out as NVIDIA's tarball: lib/ (no RPATH/RUNPATH), include/.
    Uncompressed: gzip of a gigabyte would cost minutes of CPU for nothing under test."""
    root = staging / top
    for part in ('lib', 'include'):
        (root / part).mkdir(parents=True)
        if not (cudnn_wheel_root / part).is_dir():
            continue
        for source in sorted((cudnn_wheel_root / part).iterdir()):
            if source.name.startswith('libcudnn') or source.suffix == '.h':
                shutil.copyfile(source, root / part / source.name)  # follows links: a file per name
    for library in sorted((root / 'lib').iterdir()):
        os.chmod(library, 0o755)
        subprocess.run([patchelf_binary(), '--remove-rpath', str(library)], check=True)
    with tarfile.open(target, 'w') as tar:
        tar.add(root, arcname=root.name)
    shutil.rmtree(root)
    return target


def cudnn_version(cudnn_wheel_root: Path) -> str:
    """The pip cuDNN's version, from its dist-info next to the nvidia/ package (nvidia_cudnn_cu1X-V.dist-info)."""
    site = cudnn_wheel_root.parent.parent
    found = sorted(site.glob('nvidia_cudnn_cu*-*.dist-info'))
    if not found:
        raise SystemExit(f'binary_torch: {site}: no nvidia_cudnn_cu*-*.dist-info')
    return found[-1].name[:-len('.dist-info')].split('-')[1]


def _new_rpath(entries, origin: Path, site: Path, cudnn_lib: str) -> List[str]:
    """entries ($ORIGIN-relative or absolute) as an RPATH-linked build has them: the pip cuDNN's directory
    replaced by the cuDNN module's, the other nvidia/*/lib as installed, $ORIGIN kept for torch's own."""
    result: List[str] = []
    nvidia = (site / 'nvidia').resolve()
    for entry in entries:
        resolved = Path(os.path.normpath(entry.replace('$ORIGIN', str(origin)).replace('${ORIGIN}', str(origin))))
        if resolved == nvidia / 'cudnn' / 'lib':
            entry = cudnn_lib
        elif nvidia in resolved.parents:
            entry = str(resolved)
        if entry not in result:
            result.append(entry)
    return result


def _record_line(name: str, data_path: Path) -> List[str]:
    digest = hashlib.sha256()
    with open(data_path, 'rb') as handle:
        for block in iter(lambda: handle.read(1 << 20), b''):
            digest.update(block)
    encoded = base64.urlsafe_b64encode(digest.digest()).rstrip(b'=').decode()
    return [name, f'sha256={encoded}', str(data_path.stat().st_size)]


def _metadata(text: str):
    """METADATA without the nvidia-* and triton requirements; the dropped lines."""
    kept, dropped = [], []
    for line in text.splitlines(keepends=True):
        requirement = line[len('Requires-Dist: '):] if line.startswith('Requires-Dist: ') else ''
        if requirement.startswith(('nvidia-', 'triton', 'cuda-')):
            dropped.append(line.strip())
        else:
            kept.append(line)
    return ''.join(kept), dropped


def make_torch_wheel(site: Path, target: Path, staging: Path, cudnn_lib: str) -> WheelInfo:
    """The installed torch of site repacked as the wheel target (see the module docstring); stored, not
    deflated (gigabytes compressed for one install)."""
    info_dir = dist_info(site)
    with open(info_dir / 'RECORD', newline='') as handle:
        names = [row[0] for row in csv.reader(handle) if row]
    skip = {f'{info_dir.name}/{name}' for name in ('RECORD', 'INSTALLER', 'REQUESTED', 'direct_url.json')}
    names = [name for name in names if not name.startswith('../') and '__pycache__/' not in name
             and not name.endswith('.pyc') and name not in skip and (site / name).is_file()]
    staging.mkdir(parents=True, exist_ok=True)
    relinked: Dict[str, List[str]] = {}
    records: List[List[str]] = []
    dropped: List[str] = []
    with zipfile.ZipFile(target, 'w', compression=zipfile.ZIP_STORED) as wheel:
        for name in names:
            source = site / name
            data_path = source
            if name == f'{info_dir.name}/METADATA':
                text, dropped = _metadata(source.read_text(encoding='utf-8'))
                data_path = staging / 'METADATA'
                data_path.write_text(text, encoding='utf-8')
            elif '.so' in source.name:
                rpath = _relinked_rpath(source, site, cudnn_lib)
                if rpath is not None:
                    data_path = staging / name.replace('/', '__')
                    shutil.copyfile(source, data_path)
                    subprocess.run([patchelf_binary(), '--remove-rpath', str(data_path)], check=True)
                    subprocess.run([patchelf_binary(), '--force-rpath', '--set-rpath', ':'.join(rpath),
                                    str(data_path)], check=True)
                    relinked[name] = rpath
            wheel.write(data_path, name)
            records.append(_record_line(name, data_path))
            if data_path != source:
                data_path.unlink()
        out = io.StringIO()
        csv.writer(out, lineterminator='\n').writerows(records + [[f'{info_dir.name}/RECORD', '', '']])
        wheel.writestr(f'{info_dir.name}/RECORD', out.getvalue())
    return WheelInfo(target, relinked, dropped)


def _relinked_rpath(source: Path, site: Path, cudnn_lib: str) -> Optional[List[str]]:
    """The DT_RPATH source gets in the repacked wheel, None to keep it as it is (no search path at all)."""
    try:
        info = read_elf(source)
    except Exception:  # noqa: BLE001 - not every *.so* file of a wheel is an ELF object
        return None
    entries = info.runpath or info.rpath
    needs_cudnn = any(name.startswith('libcudnn') for name in info.needed)
    if not entries and not needs_cudnn:
        return None
    rpath = _new_rpath(entries, source.parent, site, cudnn_lib)
    if needs_cudnn and cudnn_lib not in rpath:
        rpath.insert(0, cudnn_lib)
    return rpath


def _pytest_plugins(site: Path):
    """Top-level names of site's pytest plugins (dist-infos with a [pytest11] entry point) and their modules."""
    hidden = set()
    for info in site.glob('*.dist-info'):
        entry_points = info / 'entry_points.txt'
        if not entry_points.is_file() or '[pytest11]' not in entry_points.read_text(errors='replace'):
            continue
        hidden.add(info.name)
        section = entry_points.read_text(errors='replace').split('[pytest11]', 1)[1].split('[', 1)[0]
        hidden |= {line.split('=', 1)[1].strip().split('.')[0].split(':')[0] for line in section.splitlines()
                   if '=' in line}
    return hidden


def _top(name: str) -> str:
    return name.split('-')[0].split('.')[0].lower()


def make_test_python(base_python: str, site: Path, root: Path, first: Optional[Path] = None,
                     keep_torch: bool = False) -> Path:
    """A venv of base_python that sees site's packages but not torch's own nor the pip cuDNN (keep_torch: those
    too, for a benchmark of the machine's own torch, benchmarks/bench_gpu_node.py); first (e.g. the carried test
    plugins) comes before them, and then none of site's pytest plugins is seen (another pytest's plugins break the
    carried one: pytest-timeout 2.x's float ini option stops pytest 7.3)."""
    subprocess.run([base_python, '-m', 'venv', '--without-pip', str(root)], check=True)
    view = root / 'environment-packages'
    view.mkdir()
    hidden = set()
    if first is not None and first.is_dir():
        hidden = _pytest_plugins(site) | {_top(entry.name) for entry in first.iterdir()}
    for entry in sorted(site.iterdir()):
        top = _top(entry.name)
        if entry.name == '__pycache__' or (entry.name == 'nvidia' and not keep_torch):
            continue
        if not keep_torch and (top in TORCH_OWN or top.startswith(('torch', 'nvidia_cudnn'))):
            continue
        if entry.name in hidden or top in hidden or entry.name.split('.')[0] in hidden:
            continue
        (view / entry.name).symlink_to(entry)
    if (site / 'nvidia').is_dir() and not keep_torch:
        (view / 'nvidia').mkdir()
        for entry in sorted((site / 'nvidia').iterdir()):
            if entry.name != 'cudnn':
                (view / 'nvidia' / entry.name).symlink_to(entry)
    query = 'import sysconfig; print(sysconfig.get_path("purelib"))'
    purelib = subprocess.run([str(root / 'bin' / 'python'), '-c', query],
                             check=True, capture_output=True, text=True).stdout.strip()
    lines = ([str(first)] if first else []) + [str(view)]
    Path(purelib, 'environment-packages.pth').write_text('\n'.join(lines) + '\n')
    return root / 'bin' / 'python'
