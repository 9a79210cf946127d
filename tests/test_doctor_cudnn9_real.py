"""doctor judged by the real glibc loader on real cuDNN 9 (the pip wheels of .venvs/torch), without a GPU.

What triggers cuDNN 9's sub-library loads on a CPU: libcudnn.so.9 exports cudnnGraphVersionCheck,
cudnnOpsVersionCheck, cudnnCnnVersionCheck and cudnnAdvVersionCheck, and each makes it dlopen() that
sub-library (libcudnn_graph/ops/cnn/adv.so.9).  A sub-library that does not load makes the call print
"Invalid handle. Cannot load symbol ..." and return an error; cuDNN does not try it again.  The engines
libraries (dlopen()ed by libcudnn_graph.so.9), libcudnn_heuristic and libcudnn_ext are not opened by
any of these on a CPU: their loads were judged on a real GPU (docs/validation/gpu.md).

The layout is the RPATH-only one of an EasyBuild stack (as in test_doctor_cudnn8_real.py): cuDNN's files
without RUNPATH, torch's DT_RPATH as the wheel has it.  All 24 orders of the four checks run in a clean
process, unpatched and with the catalog's default NEEDED entries; doctor's order hazards must predict,
for every order, which of the four sub-libraries end up loaded.
"""

import itertools
import json
import os
from pathlib import Path

import pytest

from conftest import cli
from eb_pytorch_cuda.cudnn import DEFAULT_NEEDED
from eb_pytorch_cuda.elf.reader import read_elf
from test_doctor_cudnn8_real import _mirror, patched_layout, run_orders

TORCH_VENV = Path(__file__).resolve().parent.parent / '.venvs' / 'torch'
CHECKS = {'libcudnn_graph.so.9': 'cudnnGraphVersionCheck', 'libcudnn_ops.so.9': 'cudnnOpsVersionCheck',
          'libcudnn_cnn.so.9': 'cudnnCnnVersionCheck', 'libcudnn_adv.so.9': 'cudnnAdvVersionCheck'}
ORDERS = [list(order) for order in itertools.permutations(sorted(CHECKS))]


@pytest.fixture(scope='module')
def layouts(tmp_path_factory):
    sites = sorted(TORCH_VENV.glob('lib/python3*/site-packages'))
    if not sites or not (sites[0] / 'nvidia' / 'cudnn' / 'lib' / 'libcudnn.so.9').exists():
        pytest.fail(f'no CUDA build of torch with the cuDNN 9 wheel in {TORCH_VENV}: run bash tools/setup.sh')
    source = tmp_path_factory.mktemp('cudnn9-source')
    for name in ('torch/lib', 'nvidia'):  # a view of only what libtorch_cuda.so loads
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(sites[0] / name, source / name)
    unpatched = tmp_path_factory.mktemp('cudnn9') / 'unpatched'
    _mirror(source, unpatched, follow=True)
    library = unpatched / 'torch' / 'lib' / 'libtorch_cuda.so'
    assert read_elf(library).rpath and not read_elf(library).runpath
    return {'unpatched': library,
            'default': patched_layout(unpatched, unpatched.parent / 'default', DEFAULT_NEEDED[9])}


def real_outcomes(library, tmp_path):
    """{order: sorted sub-libraries of the four that are mapped after the calls}."""
    results = run_orders(library, 'libcudnn.so.9', [[CHECKS[lib] for lib in order] for order in ORDERS], tmp_path)
    outcomes = {}
    for order, result in zip(ORDERS, results):
        assert result['ok'], result  # cuDNN 9 reports a failed sub-library load, it does not abort
        loaded = sorted(set(result['loaded']) & set(CHECKS))
        failed = {lib for lib, status in zip(order, result['statuses']) if status != 0}
        assert failed == set(CHECKS) - set(loaded), result  # an error status is exactly a sub-library not loaded
        outcomes[tuple(order)] = loaded
    return outcomes


def predicted_outcomes(library):
    data = json.loads(cli('doctor', '--from', library, library.parent.parent.parent, '--format', 'json').stdout)
    hazards = {f['details']['soname']: f['details']['needs_first'] for f in data['findings']
               if f['kind'] == 'order-hazard'}

    def outcome(order):
        opened, failed = set(), set()
        for lib in order:
            if lib in opened or lib in failed:
                continue  # loaded already, or failed once: cuDNN does not try again
            if all(n in opened for n in hazards.get(lib, ())):
                opened |= {lib, *hazards.get(lib, ())}
            else:
                failed.add(lib)
        return sorted(opened & set(CHECKS))
    return data, {tuple(order): outcome(order) for order in ORDERS}


@pytest.mark.parametrize('label', ['unpatched', 'default'])
def test_every_order_of_cudnn9_sub_library_loads_is_predicted(layouts, tmp_path, label):
    real = real_outcomes(layouts[label], tmp_path)
    data, predicted = predicted_outcomes(layouts[label])
    assert predicted == real
    assert any(len(loaded) < len(CHECKS) for loaded in real.values())  # some orders do fail, in both layouts
    assert {f['severity'] for f in data['findings'] if f['kind'] == 'order-hazard'} == {'order'}
