"""The catalog's field orders (the order a real caller makes cuDNN open its sub-libraries) against the real
records they come from, and doctor's use of them: a hazard such an order hits fails, the others stay 'order'.

cuDNN 9: the order is read from the real loader's LD_DEBUG trace of PyTorch 2.11's workloads on an H200
(tests/data, recorded by tools/validate-gpu); in that run the sub-libraries of that order all loaded, and
doctor's recorded order hazards of the same layout are exactly ones this order does not hit.  cuDNN 8: the
real loader reproduces the field's message for the catalog's order (tests/test_doctor_cudnn8_real.py).
"""

import json
import re
from pathlib import Path

from eb_pytorch_cuda.cudnn import FIELD_ORDERS
from eb_pytorch_cuda.loader.doctor import first_failure
from helpers import h200_lddebug_trace

DATA = Path(__file__).parent / 'data'
DLOPENED = re.compile(r'file=(libcudnn_\w+\.so)[.\d]* \[0\];\s+dynamically loaded by \S+/libcudnn\.so\.9 ')
INIT = re.compile(r'calling init: \S+/(libcudnn_\w+\.so\.9)$')


def test_the_cudnn9_field_order_is_the_traced_order_and_every_load_worked():
    lines = h200_lddebug_trace('unpatched')
    opened = list(dict.fromkeys(f'{m.group(1)}.9' for m in map(DLOPENED.search, lines) if m))
    initialised = {m.group(1) for m in map(INIT.search, lines) if m}
    (order,) = [o for o in FIELD_ORDERS if o.opens[0].endswith('.so.9')]
    assert list(order.opens) == opened
    assert set(order.opens) <= initialised and order.failure == 'none'


def test_the_field_order_hits_no_recorded_cudnn9_hazard_so_they_stay_order():
    predictions = json.loads((DATA / 'h200-cudnn919-doctor-predictions.json').read_text())
    (order,) = [o for o in FIELD_ORDERS if o.opens[0].endswith('.so.9')]
    for phase in ('unpatched', 'patched'):
        hazards = {f['details']['soname']: f['details']['needs_first'] for f in predictions[phase]['findings']
                   if f['kind'] == 'order-hazard'}
        assert hazards  # ops needs graph; cnn and adv need ops (and graph)
        assert first_failure(order.opens, hazards) is None


def test_first_failure_names_the_first_library_opened_before_its_needed_entries():
    hazards = {'libcudnn_cnn_train.so.8': ['libcudnn_ops_infer.so.8', 'libcudnn_ops_train.so.8'],
               'libcudnn_ops_train.so.8': ['libcudnn_ops_infer.so.8']}
    assert first_failure(['libcudnn_ops_infer.so.8', 'libcudnn_cnn_train.so.8'], hazards) == (
        'libcudnn_cnn_train.so.8', 'libcudnn_ops_train.so.8')
    assert first_failure(['libcudnn_ops_infer.so.8', 'libcudnn_ops_train.so.8', 'libcudnn_cnn_train.so.8'],
                         hazards) is None
    assert first_failure(['libcudnn_ops_train.so.8', 'libcudnn_ops_infer.so.8'], hazards) == (
        'libcudnn_ops_train.so.8', 'libcudnn_ops_infer.so.8')
