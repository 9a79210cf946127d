"""CUDA_VISIBLE_DEVICES resolved against the GPUs nvidia-smi lists (run/gpus.resolve): which devices a CUDA process
sees.  Pure: the listings are given.  The rule's ground truth is the H200 node's driver (580.159.04): for 33 values,
what cuInit and cuDeviceGetCount gave a fresh process there, beside nvidia-smi's own list
(tests/data/h200-cuda-visible-devices-probe.json, by tools/probe_cuda_visible_devices.py), replayed first; the
listings of 0 and 2 GPUs and of MIG devices below are made up in nvidia-smi's form (no such node was lent)."""

import ast
import json
import os

import pytest

from eb_pytorch_cuda.testsuite.run.gpus import GpuView, ListedGpu, resolve, sees_none

PROBE = os.path.join(os.path.dirname(__file__), 'data', 'h200-cuda-visible-devices-probe.json')
H200_UUID = 'GPU-8d175d91-c8dd-50ef-3b16-d57680faa78c'  # the probe's nvidia-smi -L
H200 = ListedGpu('0', H200_UUID, values=('9.0',))
A100 = ListedGpu('1', 'GPU-5ad2c3e7-1b4f-4a43-9d0e-0c51f3a1b2c4', values=('8.0',))
A100_MIGS = ('MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f', 'MIG-cba663e8-9bed-5b25-b243-5985ef7c9beb')
A100_MIG = ListedGpu('1', A100.uuid, A100_MIGS, ('8.0',))
TWIN = ListedGpu('1', 'GPU-8d17e000-0000-4000-8000-000000000000', values=('9.0',))  # shares 'GPU-8d17'


def _probe():
    with open(PROBE) as handle:
        return json.load(handle)


def test_the_h200_drivers_answers_for_33_values_are_what_resolve_says():
    probe = _probe()
    listed = []
    for line in probe['q'][1].splitlines():  # the query run/gpus makes: index, uuid, compute_cap, memory.total
        index, uuid, capability, _ = (part.strip() for part in line.split(','))
        listed.append(ListedGpu(index, uuid, values=(capability,)))
    assert listed == [ListedGpu('0', H200_UUID, values=('9.0',))]
    assert probe['L'][1] == f'GPU 0: NVIDIA H200 (UUID: {H200_UUID})\n'
    assert probe['L7'] == probe['L'] and probe['q7'] == probe['q']  # nvidia-smi ignores CUDA_VISIBLE_DEVICES
    assert len(probe['cvd']) == 33
    for value, answer in probe['cvd'].items():
        status, devices = json.loads(answer)
        seen = resolve(ast.literal_eval(value), listed)
        assert [[device.gpu.uuid, device.gpu.values[0]] for device in seen] == devices, value
        assert (status == 0) is bool(devices), value  # 100: no device; 101: a device named twice


@pytest.mark.parametrize('value, gpus, names', [
    (None, [], []), ('0', [], []), ('', [H200], []), ('-1', [H200, A100], []),  # unset, no GPU, set empty, -1
    (None, [H200, A100], ['0', '1']), ('0', [H200], ['0']), ('1', [H200, A100], ['1']),
    ('1,0', [H200, A100], ['1', '0']),  # CUDA's order is the variable's
    ('7', [H200], []), ('2', [H200, A100], []), ('0,2,1', [H200, A100], ['0']),  # an index too high ends it
    ('1,-1,0', [H200, A100], ['1']), ('0,1,0', [H200, A100], []),  # named twice: none at all
    (A100.uuid, [H200, A100], ['1']), ('GPU-5ad2', [H200, A100], ['1']), ('gpu-5ad2', [H200, A100], []),
    (f'GPU-5AD2,{H200_UUID}', [H200, A100], ['1', '0']),
    ('GPU-8d17', [H200, TWIN], []), ('GPU-8d175', [H200, TWIN], ['0']),  # a prefix must name one GPU
    ('GPU-5ad2', [H200], []),  # another node's GPU
    (A100_MIGS[1], [H200, A100_MIG], [A100_MIGS[1]]), ('MIG-c6d4', [H200, A100_MIG], [A100_MIGS[0]]),
    (f'{A100_MIGS[0]},{A100_MIGS[1]}', [H200, A100_MIG], [A100_MIGS[0]]),  # one MIG device is enumerated
    (A100_MIGS[0], [H200], []), ('MIG-5ad2', [H200, A100_MIG], []),  # a GPU in MIG mode is not one device
])
def test_the_devices_a_value_leaves(value, gpus, names):
    assert [device.name for device in resolve(value, gpus)] == names


def test_a_mig_device_is_part_of_its_gpu_and_so_has_its_compute_capability():
    assert [device.gpu.values for device in resolve('MIG-cba6', [H200, A100_MIG])] == [('8.0',)]


@pytest.mark.parametrize('value, none', [(None, False), ('', True), ('-1', True), ('-1,0', True), (',0', True),
                                         ('x', True), ('0', False), ('7', False), (' 3', False),
                                         ('GPU-', False), ('MIG-x', False)])
def test_the_values_that_leave_no_device_on_any_node_need_no_nvidia_smi(value, none):
    assert sees_none(value) is none
    if none:
        assert resolve(value, [H200, A100]) == []


@pytest.mark.parametrize('view, said', [
    (GpuView(tuple(resolve('1,0', [H200, A100])), 2, '1,0'), '2 GPU(s) seen (1, 0)'),
    (GpuView((), 1, '7'), "no GPU seen: CUDA_VISIBLE_DEVICES='7' names none of the 1 GPU(s) nvidia-smi lists"),
    (GpuView((), None, ''), "no GPU seen: CUDA_VISIBLE_DEVICES='' (CUDA sees none)"),
    (GpuView((), None, '-1'), "no GPU seen: CUDA_VISIBLE_DEVICES='-1' (CUDA sees none)"),
    (GpuView((), None, None, 'no nvidia-smi on PATH'), 'no GPU seen: no nvidia-smi on PATH'),
    (GpuView((), None, '0', 'nvidia-smi exited 6 (No devices were found)'),
     "no GPU seen: nvidia-smi exited 6 (No devices were found) (CUDA_VISIBLE_DEVICES='0' names none)"),
    (GpuView((), 0, None), 'no GPU seen: nvidia-smi lists none')])
def test_what_the_step_says_it_sees(view, said):
    assert view.describe() == said
