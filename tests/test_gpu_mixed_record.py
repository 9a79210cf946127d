"""The H200 record of tools/validate-gpu/mixed_cudnn.py (tests/data/h200-cudnn919-mixed), replayed on a CPU.

What the GPU run showed (docs/validation/gpu-mixed-cudnn.md): torch 2.11.0+cu130 over its pip cuDNN 9.19.0 in an
RPATH-only prefix (the catalog's NEEDED entries added), beside the image's system cuDNN 9.14.0 in ld.so.cache;
one sub-library moved out of the prefix at a time, so its dlopen() falls through to the system's copy; then cuDNN
with RUNPATH=$ORIGIN under a loader without ld.so.cache, where cuDNN's own dlopen() of libnvrtc.so.13 finds
nothing.  Each phase holds the real workloads' results, cuDNN's own version checks, the whole LD_DEBUG trace,
and doctor's prediction made on that machine from the same layout before the workloads ran.  These tests read
the real trace with eb_pytorch_cuda.loader.lddebug and hold the prediction to it.
"""

import gzip
import json
from pathlib import Path

import pytest

from eb_pytorch_cuda.loader.lddebug import compare_with_trace, failed_requests

RECORD = Path(__file__).resolve().parent / 'data' / 'h200-cudnn919-mixed'
MISMATCH, UNAVAILABLE, SUCCESS = 1002, 3009, 0  # cudnnStatus_t values cuDNN 9.19 returned (with their names)


@pytest.fixture(scope='module')
def record():
    with open(RECORD / 'results.json') as handle:
        return json.load(handle)


def trace(label):
    with gzip.open(RECORD / f'lddebug-{label}.txt.gz', 'rt') as handle:
        return handle.read().splitlines()


def test_the_record_is_the_layout_it_says(record):
    assert record['cudnn_version_of_prefix'] == '9.19.0'
    cache = record['ldconfig_cudnn_nvrtc']  # `ldconfig -p` on the H200: the system cuDNN 9.14
    assert any('libcudnn_ops.so.9 ' in line and '/lib/x86_64-linux-gnu/' in line for line in cache)
    baseline = record['phases']['baseline']
    assert baseline['torch'] == '2.11.0+cu130' and baseline['cudnn'] == 91900
    assert all(w['ok'] for w in baseline['workloads'].values()) and len(baseline['workloads']) == 5
    assert baseline['doctor']['exit_code'] == 0 and failed_requests(trace('baseline')) == {}


@pytest.mark.parametrize('soname, status, workloads_failing', [
    ('libcudnn_cnn.so.9', {'cudnnCnnVersionCheck': UNAVAILABLE}, set()),
    ('libcudnn_heuristic.so.9', {'cudnnOpsVersionCheck': UNAVAILABLE, 'cudnnCnnVersionCheck': UNAVAILABLE,
                                 'cudnnAdvVersionCheck': UNAVAILABLE},
     {'conv2d_fp32_fwd_bwd', 'conv3d_transpose', 'lstm_2_layers'}),
    ('libcudnn_ops.so.9', {'cudnnOpsVersionCheck': MISMATCH, 'cudnnCnnVersionCheck': MISMATCH,
                           'cudnnAdvVersionCheck': MISMATCH}, {'lstm_2_layers'}),
    ('libcudnn_adv.so.9', {'cudnnAdvVersionCheck': MISMATCH}, {'lstm_2_layers'}),
])
def test_a_sub_library_missing_beside_a_system_cudnn_of_another_version(record, soname, status, workloads_failing):
    """Real outcome: the system's 9.14 copy is found through ld.so.cache; cuDNN refuses it (version mismatch) or
    the loader does (undefined symbol of libcudnn_graph.so.9's version). doctor: a wrong-copy finding for exactly
    that sub-library, naming both versions, exit 1; and its comparison with the real trace agrees."""
    phase = record['phases'][f'without-{soname}']
    failing = {name for name, w in phase['workloads'].items() if not w['ok']}
    assert failing == workloads_failing
    for check, value in phase['version_checks'].items():
        assert value is None or value[0] == status.get(check, SUCCESS), (check, value)
    if MISMATCH in status.values():
        assert any('CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH' in phase['workloads'][n]['error'] for n in failing)
    findings = [f for f in phase['doctor']['findings'] if f['kind'] == 'sublibrary-elsewhere']
    assert phase['doctor']['exit_code'] == 1 and {f['details']['soname'] for f in findings} == {soname}
    refused_by_loader = any(v == UNAVAILABLE for v in status.values())
    for finding in findings:
        assert finding['severity'] == 'wrong-copy'
        # which of the two ways it fails, predicted from the files' versioned symbols before the run
        assert finding['details']['outcome'] == ('undefined-symbol' if refused_by_loader else 'version-mismatch')
        assert (finding['details']['version'], finding['details']['resolved_version']) == ('9.19.0', '9.14.0')
        assert finding['details']['resolved'].startswith('/lib/x86_64-linux-gnu/')
    lines = trace(f'without-{soname}')
    comparison = compare_with_trace(phase['doctor']['findings'], lines)
    assert comparison['agree'] and comparison['missed'] == [] and comparison['false'] == []
    unloaded = failed_requests(lines)
    if refused_by_loader:  # the loader refused the system copy: 'then unloaded'
        assert unloaded[soname]['outcome'] == f'found /lib/x86_64-linux-gnu/{soname}, then unloaded'
        assert any('undefined symbol' in line and f'/lib/x86_64-linux-gnu/{soname}' in line for line in lines)
    else:  # it loaded, and cuDNN's version check refused it
        assert soname not in unloaded


def test_a_missing_needed_sub_library_takes_the_system_copy_import_fails(record):
    phase = record['phases']['without-libcudnn_engines_precompiled.so.9']
    assert 'undefined symbol' in phase['import_error'] and 'version libcudnn_graph.so.9' in phase['import_error']
    kinds = {(f['kind'], f['details'].get('soname')) for f in phase['doctor']['findings'] if f['severity'] != 'order'}
    assert ('sublibrary-elsewhere', 'libcudnn_engines_precompiled.so.9') in kinds
    assert ('soname-conflict', 'libcudnn_graph.so.9') in kinds  # 9.14's graph is loaded first, 9.19's needs lose
    symbol = phase['import_error'].split('undefined symbol: ')[1].split(',')[0]
    assert any(f['kind'] == 'undefined-symbol' and f['details']['symbol'] == symbol
               for f in phase['doctor']['findings'])


def test_cudnn_dlopens_libnvrtc_itself_and_fails_where_its_search_path_lacks_cuda(record):
    """RUNPATH=$ORIGIN cuDNN, no ld.so.cache: cuDNN's attention (runtime-compiled engines) fails for want of
    libnvrtc.so.13, which libcudnn_graph.so.9 dlopen()s; the convolutions and the LSTM do not need it."""
    assert record['nvrtc']['libtorch_cuda_needs_nvrtc'] == []  # torch 2.11 does not (2.14.1 does)
    phase = record['phases']['nvrtc-unreachable']
    failing = {name: w['error'] for name, w in phase['workloads'].items() if not w['ok']}
    assert list(failing) == ['sdpa_cudnn_bf16'] and 'Could not open libnvrtc' in failing['sdpa_cudnn_bf16']
    lines = trace('nvrtc-unreachable')
    assert failed_requests(lines) == {'libnvrtc.so.13': {'requested_by': '/tmp/mixed/cudnn/lib/libcudnn_graph.so.9',
                                                         'outcome': 'not found'}}
    assert phase['doctor']['exit_code'] == 1
    assert phase['doctor']['fix'] == ['eb-pytorch-cuda add-needed /tmp/mixed/site/torch/lib/libtorch_cuda.so '
                                      'libnvrtc.so.13']
    assert compare_with_trace(phase['doctor']['findings'], lines)['agree']


def test_ld_library_path_makes_it_work_and_doctor_still_says_rpath_stacks_fail(record):
    """NVIDIA's advice works; doctor judges the process an RPATH-linked stack runs (no LD_LIBRARY_PATH), so it
    still reports the failure: the one phase where its prediction and the traced process differ, by design."""
    phase = record['phases']['nvrtc-ld-library-path']
    assert all(w['ok'] for w in phase['workloads'].values()) and phase['env']['LD_LIBRARY_PATH']
    assert phase['doctor']['exit_code'] == 1
    comparison = compare_with_trace(phase['doctor']['findings'], trace('nvrtc-ld-library-path'))
    assert comparison['false'] == ['libnvrtc.so.13']


def test_the_plans_cuda_entry_fixes_it_without_ld_library_path(record):
    assert record['nvrtc']['plan']['cuda_add'] == ['libnvrtc.so.13']
    phase = record['phases']['nvrtc-hook-fix']
    assert all(w['ok'] for w in phase['workloads'].values()) and 'LD_LIBRARY_PATH' not in phase['env']
    assert phase['doctor']['exit_code'] == 0 and failed_requests(trace('nvrtc-hook-fix')) == {}
