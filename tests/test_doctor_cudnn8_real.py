"""doctor judged by the real glibc loader on the real cuDNN 8.9.2 and PyTorch 2.1.2 (the main job's versions).

The libraries come from the pip wheels (tools/setup.sh unpacks them into .venvs/cudnn8-torch212).  Each test
builds the RPATH-only layout an EasyBuild stack has, on copies: cuDNN's files with their RPATH/RUNPATH
removed (NVIDIA's cuDNN 8 tarball has none), torch's libraries with the DT_RPATH they already carry
($ORIGIN/../../nvidia/<pkg>/lib for every CUDA package, as EasyBuild's RPATH wrapper gives), everything
else hardlinked.  Then a clean process (`env -i`, no LD_LIBRARY_PATH) loads libtorch_cuda.so and calls
the version checks of libcudnn.so.8 in all 720 orders of the six sub-libraries (each call makes cuDNN
dlopen() one; tests/cudnn_order_driver.py).  doctor's prediction, read from `--format json`, must give
exactly the real outcome of every order: which orders abort, on which library, for want of which NEEDED
entry; and the fix it names must make every order succeed.  The order PyTorch's convolutions use (the
catalog's field order) must give the real loader's message the field saw, and doctor must call that
hazard a failure (exit 1) and the others, which no known caller hits, 'order'.
"""

import itertools
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import cli
from eb_pytorch_cuda.cudnn import FIELD_ORDERS, version_checks
from eb_pytorch_cuda.elf.patchelf import patchelf_binary
from eb_pytorch_cuda.elf.reader import read_elf
from eb_pytorch_cuda.patch.needed import add_needed
from environment import missing
from scratch import scratch_dir

LIBS = Path(__file__).resolve().parent.parent / '.venvs' / 'cudnn8-torch212'
DRIVER = Path(__file__).resolve().parent / 'cudnn_order_driver.py'
CHECKS = version_checks(8)  # {sub-library soname: the libcudnn.so.8 entry point that dlopen()s it}
ORDERS = [list(order) for order in itertools.permutations(sorted(CHECKS))]
FAILURE = re.compile(r'Could not load library (\S+)\. Error: (\S+): cannot open shared object file')


def _mirror(source, destination, patched=(), follow=False):
    """destination: hardlinks of every file under source (copies where a link is impossible), except the
    cuDNN files, which are copies with their search path removed (follow: walk into symlinked folders)."""
    for directory, _, files in os.walk(source, followlinks=follow):
        target_dir = destination / os.path.relpath(directory, source)
        target_dir.mkdir(parents=True, exist_ok=True)
        for name in files:
            if '.so' not in name:
                continue  # headers, Python files, metadata: only libraries make the layout
            src, dst = os.path.join(directory, name), target_dir / name
            if os.path.islink(src) and follow:
                src = os.path.realpath(src)
            if name.startswith('libcudnn') and '.so' in name and name not in patched:
                shutil.copyfile(src, dst)
                subprocess.run([patchelf_binary(), '--remove-rpath', str(dst)], check=True)
                continue
            try:
                os.link(src, dst)
            except OSError:
                shutil.copy2(src, dst)


@pytest.fixture(scope='module')
def layouts(tmp_path_factory):
    """{'unpatched' | 'default' (cnn_train added, the catalog default) | 'full' (cnn_train and adv_train):
    path of libtorch_cuda.so in that layout}.  One copy of cuDNN, one patched copy of libtorch_cuda.so each."""
    if not (LIBS / 'torch' / 'lib' / 'libtorch_cuda.so').exists():
        missing(f'no cuDNN 8.9.2 / PyTorch 2.1.2 libraries in {LIBS}')
    with scratch_dir(tmp_path_factory, 'cudnn8-torch212') as base:
        unpatched = base / 'unpatched'
        _mirror(LIBS, unpatched)
        library = unpatched / 'torch' / 'lib' / 'libtorch_cuda.so'
        info = read_elf(library)
        assert info.rpath and not info.runpath and '$ORIGIN/../../nvidia/cudnn/lib' in info.rpath  # DT_RPATH
        assert not read_elf(unpatched / 'nvidia' / 'cudnn' / 'lib' / 'libcudnn_cnn_train.so.8').runpath
        result = {'unpatched': library}
        for label, sonames in (('default', ['libcudnn_cnn_train.so.8']),
                               ('full', ['libcudnn_cnn_train.so.8', 'libcudnn_adv_train.so.8'])):
            result[label] = patched_layout(unpatched, base / label, sonames)
        yield result


def patched_layout(unpatched, root, sonames):
    """A copy of the layout at unpatched under root (hard links; libtorch_cuda.so copied) whose
    libtorch_cuda.so gets sonames NEEDED; its path.  Shared with the cuDNN 9 test."""
    for directory, _, files in os.walk(unpatched):
        (root / os.path.relpath(directory, unpatched)).mkdir(parents=True, exist_ok=True)
        for name in files:
            src = os.path.join(directory, name)
            dst = root / os.path.relpath(src, unpatched)
            if name == 'libtorch_cuda.so':
                shutil.copyfile(src, dst)
            else:
                os.link(src, dst)
    library = root / 'torch' / 'lib' / 'libtorch_cuda.so'
    add_needed(str(library), list(sonames))
    return library


def run_orders(library, libcudnn, calls, tmp_path):
    """The driver's JSON results for each list of entry points in calls, run with the real loader in a clean
    environment after loading library (shared with the cuDNN 9 test)."""
    orders_file = tmp_path / 'orders.json'
    orders_file.write_text(json.dumps(calls))
    done = subprocess.run([sys.executable, '-I', str(DRIVER), str(library), libcudnn, str(orders_file)],
                          env={}, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def real_outcomes(library, tmp_path):
    """{tuple(order): None (every load worked) or (library that failed, NEEDED it could not open)}."""
    results = run_orders(library, 'libcudnn.so.8', [[CHECKS[lib] for lib in order] for order in ORDERS], tmp_path)
    outcomes = {}
    for order, result in zip(ORDERS, results):
        if result['ok']:
            outcomes[tuple(order)] = None
        else:
            match = FAILURE.search(result['message'])
            assert match, result  # any other way of failing is not the hazard under test
            outcomes[tuple(order)] = match.groups()
    return outcomes


def doctor_prediction(library):
    """doctor's JSON for the layout, and the outcome it predicts for each order.

    An order-hazard finding says: library X cannot find its NEEDED N... itself and loads only after they were
    opened; so an order fails at the first X opened before one of its N (glibc names the first missing N
    in NEEDED order), and opening X also brings N in."""
    root = library.parent.parent.parent
    done = cli('doctor', '--from', library, root, '--format', 'json')
    data = json.loads(done.stdout)
    hazards = {f['details']['soname']: f['details']['needs_first'] for f in data['findings']
               if f['kind'] == 'order-hazard'}

    def outcome(order):
        opened = set()
        for lib in order:
            missing = [n for n in hazards.get(lib, ()) if n not in opened]
            if lib not in opened and missing:
                return (lib, missing[0])
            opened |= {lib, *hazards.get(lib, ())}
        return None
    return done, data, {tuple(order): outcome(order) for order in ORDERS}


def test_unpatched_every_order_is_predicted_and_the_fix_is_named(layouts, tmp_path):
    real = real_outcomes(layouts['unpatched'], tmp_path)
    done, data, predicted = doctor_prediction(layouts['unpatched'])
    assert predicted == real
    failing = [order for order, outcome in real.items() if outcome]
    assert failing and len(failing) < len(ORDERS)  # the failure depends on the order, as the issue says
    assert ('libcudnn_cnn_train.so.8', 'libcudnn_ops_train.so.8') in set(real.values())  # the 2.1.2 bug
    # the hazard PyTorch's own order hits fails (exit 1); the ones no known caller hits stay 'order'
    severities = {f['details']['soname']: f['severity'] for f in data['findings']}
    assert severities == {'libcudnn_cnn_train.so.8': 'fails', 'libcudnn_ops_train.so.8': 'order',
                          'libcudnn_cnn_infer.so.8': 'order', 'libcudnn_adv_infer.so.8': 'order',
                          'libcudnn_adv_train.so.8': 'order'}
    field = next(f for f in data['findings'] if f['severity'] == 'fails')['details']['field_order']
    assert field['missing'] == 'libcudnn_ops_train.so.8' and 'PyTorch' in field['caller'] and field['evidence']
    assert done.returncode == 1 and data['blocking']
    assert data['fix'] == [f"eb-pytorch-cuda add-needed {layouts['unpatched']} libcudnn_cnn_train.so.8"]
    assert data['fix_order_only'] == [f"eb-pytorch-cuda add-needed {layouts['unpatched']} libcudnn_adv_train.so.8"]
    text = cli('doctor', '--from', layouts['unpatched'], layouts['unpatched'].parent.parent.parent, check_rc=1).stdout
    assert f"fix:\n  eb-pytorch-cuda add-needed {layouts['unpatched']} libcudnn_cnn_train.so.8\n" in text


def test_the_field_order_gives_the_field_failure_and_works_patched(layouts, tmp_path):
    orders = [order for order in FIELD_ORDERS if order.opens[0].endswith('.so.8')]
    assert orders
    calls = [[CHECKS[lib] for lib in order.opens] for order in orders]
    for order, result in zip(orders, run_orders(layouts['unpatched'], 'libcudnn.so.8', calls, tmp_path)):
        assert not result['ok'] and order.failure in result['message'], (order, result)
    assert all(result['ok'] for result in run_orders(layouts['default'], 'libcudnn.so.8', calls, tmp_path))


def test_the_catalog_default_leaves_only_adv_train_before_adv_infer(layouts, tmp_path):
    real = real_outcomes(layouts['default'], tmp_path)
    _, data, predicted = doctor_prediction(layouts['default'])
    assert predicted == real
    assert set(real.values()) == {None, ('libcudnn_adv_train.so.8', 'libcudnn_adv_infer.so.8')}
    for order, outcome in real.items():  # exactly the orders that check adv_train before adv_infer fail
        assert (outcome is not None) == (order.index('libcudnn_adv_train.so.8')
                                         < order.index('libcudnn_adv_infer.so.8'))
    assert [f['details']['soname'] for f in data['findings']] == ['libcudnn_adv_train.so.8']
    assert data['findings'][0]['severity'] == 'order' and not data['blocking']  # no known caller hits it
    assert cli('doctor', '--from', layouts['default'], layouts['default'].parent.parent.parent).returncode == 0


def test_with_the_fix_doctor_names_every_order_succeeds_and_doctor_is_silent(layouts, tmp_path):
    real = real_outcomes(layouts['full'], tmp_path)
    assert set(real.values()) == {None}
    done = cli('doctor', '--from', layouts['full'], layouts['full'].parent.parent.parent, check_rc=0)
    assert 'nothing found' in done.stdout and 'fix:' not in done.stdout
