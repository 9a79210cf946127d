"""The LD_DEBUG reader, on the real loader's traces: gcc stand-ins here, and a trace recorded on an H200."""

import json
import os
import subprocess
from pathlib import Path

from helpers import CLEAN_ENV, h200_lddebug_trace
from eb_pytorch_cuda.loader.lddebug import compare_with_trace, failed_requests, trace_outcomes
from eb_pytorch_cuda.patch.needed import add_needed

DATA = Path(__file__).parent / 'data'


def _trace(standin, tmp_path):
    env = dict(CLEAN_ENV, LD_DEBUG='libs,files', LD_DEBUG_OUTPUT=str(tmp_path / 'trace'))
    subprocess.run([standin.loadcheck, standin.torch_lib], env=env, capture_output=True)
    lines = []
    for path in tmp_path.glob('trace.*'):
        lines += path.read_text().splitlines()
        path.unlink()
    return lines


def test_unpatched_trace_names_the_leaf_and_who_dlopened_it(standin, tmp_path):
    failures = failed_requests(_trace(standin, tmp_path))
    sub = {8: 'libcudnn_cnn_infer.so.8', 9: 'libcudnn_graph.so.9'}[standin.major]
    assert failures == {standin.leaves[0]: {'requested_by': os.path.join(standin.cudnn_lib, sub),
                                            'outcome': 'not found'}}


def test_patched_trace_has_no_failure_and_maps_the_leaf_from_the_cudnn_dir(standin, tmp_path):
    add_needed(standin.torch_lib, standin.leaves)
    lines = _trace(standin, tmp_path)
    assert failed_requests(lines) == {}
    outcome = trace_outcomes(lines)[standin.leaves[0]]
    assert outcome['stayed'] and outcome['path'] == os.path.join(standin.cudnn_lib, standin.leaves[0])


def test_h200_trace_shows_system_cudnn_found_then_unloaded_before_the_fix():
    # recorded by tools/validate-gpu on an H200 (cuDNN 9.19 moved out of the wheel, RPATH-only torch):
    # the engines libraries were found in the image's system cuDNN and unloaded again
    unpatched = failed_requests((DATA / 'h200-cudnn919-lddebug-unpatched.txt').read_text().splitlines())
    for leaf in ('libcudnn_engines_precompiled.so.9', 'libcudnn_engines_runtime_compiled.so.9'):
        assert unpatched[leaf] == {'requested_by': '/tmp/vgpu/cudnn/lib/libcudnn_graph.so.9',
                                   'outcome': f'found /lib/x86_64-linux-gnu/{leaf}, then unloaded'}
    patched = failed_requests((DATA / 'h200-cudnn919-lddebug-patched.txt').read_text().splitlines())
    assert not [name for name in patched if 'engines' in name]


def _recorded(phase):
    lines = h200_lddebug_trace(phase)
    predictions = json.loads((DATA / 'h200-cudnn919-doctor-predictions.json').read_text())
    return lines, predictions[phase]


def test_h200_unpatched_doctor_names_exactly_what_the_loader_failed():
    # real workloads (conv2d, conv3d-transpose, LSTM) on an H200 with a system cuDNN 9.14 in ld.so.cache
    lines, prediction = _recorded('unpatched')
    comparison = compare_with_trace(prediction['findings'], lines)
    engines = ['libcudnn_engines_precompiled.so.9', 'libcudnn_engines_runtime_compiled.so.9']
    assert comparison['observed'] == engines and comparison['predicted'] == engines
    assert comparison['agree'] and not comparison['missed'] and not comparison['false']
    assert prediction['exit_code'] == 1
    assert {f['severity'] for f in prediction['findings']} == {'wrong-copy', 'order'}


def test_recorded_h200_patched_doctor_reports_nothing_the_real_process_did_not_show():
    lines, prediction = _recorded('patched')
    comparison = compare_with_trace(prediction['findings'], lines)
    assert comparison['observed'] == [] and comparison['predicted'] == [] and comparison['agree']
    assert prediction['exit_code'] == 0
    assert all(f['severity'] == 'order' for f in prediction['findings'])  # see test_doctor_cudnn9_real.py


def test_a_library_closed_after_its_init_ran_was_loaded():
    # libnvrtc.so.13: dlopen()ed by libcudnn_graph.so.9, initialised, later dlclose()d (link map destroyed)
    lines, _ = _recorded('patched')
    outcome = trace_outcomes(lines)['libnvrtc.so.13']
    assert outcome['stayed'] and outcome['path'].endswith('/libnvrtc.so.13')
    assert 'libnvrtc.so.13' not in failed_requests(lines)
