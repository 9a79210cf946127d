"""The LD_DEBUG reader, on the real loader's traces: gcc stand-ins here, and a trace recorded on an H200."""

import os
import subprocess
from pathlib import Path

from conftest import CLEAN_ENV
from eb_pytorch_cuda.loader.lddebug import failed_requests, trace_outcomes
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
