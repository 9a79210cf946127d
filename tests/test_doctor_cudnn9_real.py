"""doctor judged by the real glibc loader on real cuDNN 9 (the pip wheels of .venvs/torch), without a GPU.

What triggers cuDNN 9's sub-library loads on a CPU: libcudnn.so.9 exports cudnnGraphVersionCheck,
cudnnOpsVersionCheck, cudnnCnnVersionCheck and cudnnAdvVersionCheck, and each makes it dlopen() that
sub-library (libcudnn_graph/ops/cnn/adv.so.9).  A sub-library that does not load makes the call print
"Invalid handle. Cannot load symbol ..." and return an error; cuDNN does not try it again.  The engines
libraries (dlopen()ed by libcudnn_graph.so.9, engines_tensor_ir among them from 9.24) and libcudnn_heuristic
are not opened by any of these on a CPU: their loads were judged on a real GPU (docs/validation/gpu.md,
docs/validation/gpu-mixed-cudnn.md).  9.24's libcudnn_ext.so.9 is: libcudnn.so.9 dlopen()s it on
cudnnSubquadraticOpsVersionCheck (tested below, with the real loader's LD_DEBUG trace).

The layout is the RPATH-only one of an EasyBuild stack (as in test_doctor_cudnn8_real.py): cuDNN's files
without RUNPATH, torch's DT_RPATH as the wheel has it.  All 24 orders of the four checks run in a clean
process, unpatched and with the catalog's default NEEDED entries; doctor's order hazards must predict,
for every order, which of the four sub-libraries end up loaded.
"""

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import cli
from eb_pytorch_cuda.cudnn import DEFAULT_NEEDED, version_checks
from eb_pytorch_cuda.elf.patchelf import patchelf_binary
from eb_pytorch_cuda.elf.reader import read_elf
from eb_pytorch_cuda.loader.doctor import Process, SymbolCache, dlopen_requests
from eb_pytorch_cuda.loader.resolve import Resolver
from eb_pytorch_cuda.patch.plan import Settings, apply_plan, check_plan, plan_library
from test_doctor_cudnn8_real import DRIVER, _mirror, patched_layout, run_orders
from environment import missing
from scratch import scratch_dir

TORCH_VENV = Path(__file__).resolve().parent.parent / '.venvs' / 'torch'
CHECKS = {'libcudnn_graph.so.9': 'cudnnGraphVersionCheck', 'libcudnn_ops.so.9': 'cudnnOpsVersionCheck',
          'libcudnn_cnn.so.9': 'cudnnCnnVersionCheck', 'libcudnn_adv.so.9': 'cudnnAdvVersionCheck'}
ORDERS = [list(order) for order in itertools.permutations(sorted(CHECKS))]


@pytest.fixture(scope='module')
def layouts(tmp_path_factory):
    sites = sorted(TORCH_VENV.glob('lib/python3*/site-packages'))
    if not sites or not (sites[0] / 'nvidia' / 'cudnn' / 'lib' / 'libcudnn.so.9').exists():
        missing(f'no CUDA build of torch with the cuDNN 9 wheel in {TORCH_VENV}')
    with scratch_dir(tmp_path_factory, 'cudnn9') as base:
        source = base / 'source'
        for name in ('torch/lib', 'nvidia'):  # a view of only what libtorch_cuda.so loads
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            os.symlink(sites[0] / name, source / name)
        unpatched = base / 'unpatched'
        _mirror(source, unpatched, follow=True)
        library = unpatched / 'torch' / 'lib' / 'libtorch_cuda.so'
        assert read_elf(library).rpath and not read_elf(library).runpath
        yield {'unpatched': library, 'default': patched_layout(unpatched, base / 'default', DEFAULT_NEEDED[9])}


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


def _traced_calls(library, calls, tmp_path):
    """The driver's result for one list of entry points, run by the real loader with LD_DEBUG=files; and the trace."""
    orders_file = tmp_path / 'calls.json'
    orders_file.write_text(json.dumps([calls]))
    debug = tmp_path / 'lddebug'
    done = subprocess.run([sys.executable, '-I', str(DRIVER), str(library), 'libcudnn.so.9', str(orders_file)],
                          env={'LD_DEBUG': 'files', 'LD_DEBUG_OUTPUT': str(debug)}, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr
    lines = [line for path in sorted(tmp_path.glob('lddebug.*')) for line in path.read_text().splitlines()]
    return json.loads(done.stdout)[0], lines


def test_cudnnSubquadraticOpsVersionCheck_makes_libcudnn_dlopen_libcudnn_ext_and_doctor_models_it(layouts, tmp_path):
    """cuDNN 9.24's libcudnn_ext.so.9: libcudnn.so.9 dlopen()s it (probing .so.9.24.0, .so.9.24, .so.9) on that
    entry point, found through the RPATH chain libcudnn.so.9 inherits from libtorch_cuda.so; doctor's simulated
    process loads it the same way (the catalog's edge) and reports nothing about it."""
    library = layouts['unpatched']
    assert version_checks(9)['libcudnn_ext.so.9'] == 'cudnnSubquadraticOpsVersionCheck'
    result, lines = _traced_calls(library, ['cudnnSubquadraticOpsVersionCheck'], tmp_path)
    assert result['ok'] and result['statuses'] == [0]
    assert 'libcudnn_ext.so.9' in result['loaded'] and not set(result['loaded']) & set(CHECKS)
    opened = [line for line in lines if 'dynamically loaded by' in line and 'libcudnn_ext' in line]
    assert [line.split('file=')[1].split()[0] for line in opened] == \
        ['libcudnn_ext.so.9.24.0', 'libcudnn_ext.so.9.24', 'libcudnn_ext.so.9']
    assert all(line.rstrip().endswith('/libcudnn.so.9 [0]') for line in opened)
    process = Process(read_elf(library), Resolver(), SymbolCache(), audited=[library.parent.parent.parent])
    process.simulate_dlopens()
    ext = process.by_soname['libcudnn_ext.so.9']
    assert ext.how == f"dlopen() by {library.parent.parent.parent / 'nvidia' / 'cudnn' / 'lib' / 'libcudnn.so.9'}"
    assert os.path.realpath(ext.path) == os.path.realpath(library.parent.parent.parent / 'nvidia' / 'cudnn' / 'lib' /
                                                          'libcudnn_ext.so.9')
    assert not [f for f in process.findings if f.details.get('soname') == 'libcudnn_ext.so.9']


def test_no_entry_point_loads_tensor_ir_on_a_cpu_doctor_takes_it_from_graph(layouts, tmp_path):
    """Every version check of 9.24 called: libcudnn_engines_tensor_ir.so.9 is never mapped on a CPU (its loads
    are libcudnn_graph.so.9's, on a GPU); doctor's dlopen() targets of graph include it, from graph's .rodata and
    the catalog, and those of cuDNN's CUDA edges carry the CUDA major of the process (libnvrtc.so.13)."""
    library = layouts['unpatched']
    result, _ = _traced_calls(library, sorted(version_checks(9).values()), tmp_path)
    assert result['ok'] and 'libcudnn_engines_tensor_ir.so.9' not in result['loaded']
    assert 'libcudnn_graph.so.9' in result['loaded']
    cudnn_dir = library.parent.parent.parent / 'nvidia' / 'cudnn' / 'lib'
    cache = SymbolCache()
    graph = dict(dlopen_requests(read_elf(cudnn_dir / 'libcudnn_graph.so.9'), cache.names, cache.notes, 13))
    assert 'libcudnn_engines_tensor_ir.so.9' in graph and graph['libnvrtc.so.13'] == ['libnvrtc.so.13']
    precompiled = dict(dlopen_requests(read_elf(cudnn_dir / 'libcudnn_engines_precompiled.so.9'), cache.names,
                                       cache.notes, 13))
    assert {'libnvrtc.so.13', 'libcublasLt.so.13'} <= set(precompiled)
    assert 'libnvrtc.so.9' not in graph  # not the cuDNN major: the trace of 9.19 asks for libnvrtc.so.13


def test_the_plan_adds_libnvrtc_only_where_missing_and_found_by_the_rpath(layouts, tmp_path):
    """torch 2.14.1's libtorch_cuda.so needs libnvrtc.so.13 itself: nothing to add.  A copy without that entry
    (a stand-in for torch 2.11's, which has none: tests/data/h200-cudnn919-mixed) gets it from the plan, and a
    real load in a clean process maps it from the directory its RPATH names; with that directory gone from the
    RPATH, nothing is added (a NEEDED entry that does not resolve breaks `import torch`)."""
    library = layouts['unpatched']
    assert 'libnvrtc.so.13' in read_elf(library).needed
    assert plan_library(str(library), Settings(environ={})).cuda_add == ()
    root = tmp_path / 'no-nvrtc'
    stand_in = patched_layout(library.parent.parent.parent, root, DEFAULT_NEEDED[9])  # the layout as shipped
    subprocess.run([patchelf_binary(), '--remove-needed', 'libnvrtc.so.13', str(stand_in)], check=True)
    plan = plan_library(str(stand_in), Settings(environ={}))
    assert plan.cuda_add == ('libnvrtc.so.13',) and plan.add == DEFAULT_NEEDED[9]
    apply_plan(plan)
    checks, problems = check_plan(plan, load=True)
    assert problems == []
    nvrtc = next(c for c in checks if c.soname == 'libnvrtc.so.13')
    assert nvrtc.mapped and nvrtc.resolution.path == str(root / 'nvidia' / 'cu13' / 'lib' / 'libnvrtc.so.13')
    rpath = [entry for entry in read_elf(stand_in).rpath if 'cu13' not in entry]
    subprocess.run([patchelf_binary(), '--remove-needed', 'libnvrtc.so.13', '--force-rpath', '--set-rpath',
                    ':'.join(rpath), str(stand_in)], check=True)
    assert plan_library(str(stand_in), Settings(environ={}), Resolver(ld_so_cache={})).cuda_add == ()
