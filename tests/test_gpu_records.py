"""The H200's kept records of PyTorch's own CUDA tests run by real eb 5.4.1 with our easyblock's own test command,
replayed on a CPU by this checkout's parsers and policy.

Both records (docs/validation/, made by tools/validate-gpu/h200_round.sh): torch 2.11.0+cu130 and cuDNN 9.19 in an
RPATH-only module, Debian 2.6.0's run_test.py, no SANDCASTLE=0 on `runtest` (cuda_device_tests='auto' sets it).
- h200-2026-12-02-eb-complete/: both phases.  Unpatched (no hooks): eb exit 1, 10 cuDNN convolutions fail with
  cuDNN 9's loader error and the 4 cuDNN SDPA attention tests crash (a segfault after `Unable to load any of
  {libcudnn_engines_runtime_compiled.so.9.19.0, ...}`), so only the harness's `The following tests failed
  consistently` list names them.  Patched (hooks): eb exit 0, PASS, 334 CUDA tests ran (229 skipped themselves),
  none met the loader error, the NEEDED entries went in and the module loads with LD_LIBRARY_PATH unset.  A passing
  build's store is removed (service.finish), so the patched phase's per-suite facts are its installed report and
  its JUnit XML.
- h200-2026-12-02-eb/: the same unpatched phase's eb facts and JUnit, and the patched phase's own pytest logs of a
  run ended by the device time with the two 64-bit-indexing convolutions in: the same 4 SDPA tests pass, the
  convolution suite's CUDA set ran (326 ran, 229 skipped) with one numerical failure, not the loader's.
"""

import json
import os
import xml.etree.ElementTree as ElementTree

import pytest

from eb_pytorch_cuda.cli import main
from eb_pytorch_cuda.testsuite.results.cudatests import cuda_counts_in_log
from eb_pytorch_cuda.testsuite.results.logparse import parse_log_file
from eb_pytorch_cuda.testsuite.results.records import StoreRecord
from eb_pytorch_cuda.testsuite.results.xmlparse import parse_report_files
from helpers import recorded_junit

VALIDATION = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'docs', 'validation')
COMPLETE = os.path.join(VALIDATION, 'h200-2026-12-02-eb-complete')
PARTIAL = os.path.join(VALIDATION, 'h200-2026-12-02-eb')
# where each record keeps its unpatched phase: (results.json, JUnit tarball)
UNPATCHED = {
    'complete': (os.path.join(COMPLETE, 'results.json'), os.path.join(COMPLETE, 'reports-unpatched.tar.gz')),
    'partial': (os.path.join(PARTIAL, 'unpatched', 'results.json'),
                os.path.join(PARTIAL, 'unpatched', 'reports-unpatched.tar.gz')),
}
LOADER_ERROR = 'CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED'
SDPA = ['TestSDPACudaOnlyCUDA.test_cudnn_attention_different_dk_dv_cuda',
        'TestSDPACudaOnlyCUDA.test_cudnn_attention_nonmodulo64seqlen_cuda',
        'TestSDPACudaOnlyCUDA.test_cudnn_attention_preserves_query_layout_cuda',
        'TestSDPACudaOnlyCUDA.test_cudnn_attention_trivial_output_transpose_cuda']


def _json(path):
    with open(path) as handle:
        return json.load(handle)


def _text(path):
    with open(path, errors='replace') as handle:
        return handle.read()


def _xml_result(tarball, tmp_path):
    """(our parser's result, {test id: failure text}) of a phase's JUnit XML."""
    test_dir, files = recorded_junit(tarball, tmp_path)
    failures = {}
    for path in files:
        for case in ElementTree.parse(path).getroot().iter('testcase'):
            for child in case:
                if child.tag in ('failure', 'error'):
                    failures[f"{case.get('classname').rsplit('.', 1)[-1]}.{case.get('name')}"] = \
                        (child.get('message') or '') + (child.text or '')
    return parse_report_files(str(test_dir / 'test-reports'), files), failures


@pytest.mark.parametrize('record', sorted(UNPATCHED))
def test_unpatched_phase_ran_cuda_device_tests_and_failed_14(record):
    """The easyconfig's runtest as our easyblock runs it: SANDCASTLE comes from cuda_device_tests='auto'."""
    phase = _json(UNPATCHED[record][0])['phases']['unpatched']
    assert phase['eb_exit'] == 1 and phase['verdict'] == ['== verdict: FAIL: 14 unknown failure(s), budget 0']
    assert 'SANDCASTLE' not in phase['test_command'][0]
    assert phase['cuda_device_tests'] == {'requested': 'auto', 'enabled': True, 'gpus': ['0'],
                                          'reason': '1 GPU(s) seen (0), the build has CUDA',
                                          'environment': {'SANDCASTLE': '0'}}
    assert phase['tests_with_loader_error'] == 10  # counted in this phase's own build directory (JUnit XML)
    assert '--hooks=' not in ' '.join(phase['command'])


@pytest.mark.parametrize('record', sorted(UNPATCHED))
def test_unpatched_junit_holds_the_ten_loader_errors_not_the_crashes(record, tmp_path):
    result, failures = _xml_result(UNPATCHED[record][1], tmp_path)
    conv = result.suites['nn/test_convolution']
    assert conv.cuda_counts == {'ran': 10, 'failed': 10, 'skipped': 0}
    assert sorted(test.test_id for test in conv.failed_tests) == sorted(
        test_id for test_id, text in failures.items() if LOADER_ERROR in text)
    assert result.suites['test_transformers'].cuda_counts == {'ran': 0, 'failed': 0, 'skipped': 0}


def test_complete_record_both_phases_on_8_batches_patched_passes():
    phases = _json(os.path.join(COMPLETE, 'results.json'))['phases']
    for phase in phases.values():
        assert 'SANDCASTLE' not in phase['test_command'][0]
        assert phase['cuda_device_tests']['environment'] == {'SANDCASTLE': '0'}
        assert '8 batch(es) at a time' in phase['test_command'][0]  # the node's own count: 16 CPUs // 2
    unpatched, patched = phases['unpatched'], phases['patched']
    assert unpatched['cuda_tests'] == {'ran': 14, 'failed': 14, 'skipped': 0}
    assert patched['eb_exit'] == 0 and patched['verdict'] == ['== verdict: PASS']
    assert patched['cuda_tests'] == {'ran': 334, 'failed': 0, 'skipped': 229}
    assert patched['tests_with_loader_error'] == 0 and patched['loader_error_lines'] == 0
    assert any(arg.startswith('--hooks=') for arg in patched['command'])
    for soname in ('libcudnn_engines_precompiled.so.9', 'libcudnn_engines_runtime_compiled.so.9', 'libnvrtc.so.13'):
        assert f'libtorch_cuda.so: added NEEDED {soname}' in patched['needed_added']
    assert 'libtorch_cuda.so has NEEDED libcudnn_engines_runtime_compiled.so.9' in patched['sanity_load']
    check = _json(os.path.join(COMPLETE, 'results.json'))['module_check']
    assert check['lmod_load_exit'] == 0 and check['python_exit'] == 0 and not check['ld_library_path_set']
    assert check['output'].startswith('cudnn 91900\nconv (8, 16, 30, 30)')


def test_unpatched_log_names_and_counts_every_failure_as_cuda(capsys):
    """The 4 crashed SDPA tests have no FAILED line and no XML case: the harness's list names them, and the
    CUDA counts include every named CUDA failure."""
    log = os.path.join(COMPLETE, 'output-unpatched.log')
    result = parse_log_file(log)
    sdpa = result.suites['test_transformers']
    assert sorted(test.test_id for test in sdpa.failed_tests) == SDPA
    assert sdpa.cuda_counts == {'ran': 4, 'failed': 4, 'skipped': 0}
    conv = result.suites['nn/test_convolution']
    assert conv.failing_count == 10 and conv.cuda_counts == {'ran': 10, 'failed': 10, 'skipped': 0}
    assert all(test.test_id.startswith('TestConvolutionNNDeviceTypeCUDA.test_conv_cudnn_')
               for test in conv.failed_tests)
    text = _text(log)
    assert text.count('Unable to load any of {libcudnn_engines_runtime_compiled.so.9.19.0') >= 4
    assert text.count(LOADER_ERROR) >= 10 and 'Fatal Python error: Segmentation fault' in text
    assert main(['report', log]) == 1
    out = capsys.readouterr().out
    assert 'CUDA device tests: 14 ran, 14 failed, 0 skipped' in out and 'unnamed failure' not in out
    assert main(['report', log, '--max-failed-tests', '13']) == 1
    assert 'verdict: FAIL: 14 unknown failure(s), budget 13' in capsys.readouterr().out
    assert _json(os.path.join(COMPLETE, 'pytorch-test-results-unpatched.json'))['cuda_tests'] == {
        'ran': 14, 'failed': 14, 'skipped': 0}
    # the partial record's report was written on the H200 by a reader that left the 4 crashed tests unnamed
    assert _json(os.path.join(PARTIAL, 'unpatched', 'pytorch-test-results-unpatched.json'))['cuda_tests'] == {
        'ran': 10, 'failed': 10, 'skipped': 0}


def test_unpatched_store_holds_typed_records_of_the_three_suites():
    with open(os.path.join(COMPLETE, 'store-unpatched.jsonl')) as handle:
        stored = {record.suite.name: record for record in map(StoreRecord.from_json, map(json.loads, handle))}
    assert sorted(stored) == ['nn/test_convolution', 'test_cuda', 'test_transformers']
    assert stored['nn/test_convolution'].suite.status == 'failed' and stored['test_cuda'].suite.status == 'passed'


def test_patched_step_passed_on_the_gpu_and_its_junit_agrees(tmp_path):
    report = _json(os.path.join(COMPLETE, 'pytorch-test-results-patched.json'))
    assert report['verdict'] == 'pass' and report['failed_tests'] == 0 and report['cuda_tests'] == {
        'ran': 334, 'failed': 0, 'skipped': 229}
    suites = {suite['name']: suite for suite in report['suites']}
    assert suites['nn/test_convolution']['counts']['passed'] == 336
    assert suites['nn/test_convolution']['counts']['skipped'] == 302
    assert suites['nn/test_convolution']['cuda_counts'] == {'ran': 330, 'failed': 0, 'skipped': 229}
    assert suites['test_transformers']['cuda_counts'] == {'ran': 4, 'failed': 0, 'skipped': 0}
    result, failures = _xml_result(os.path.join(COMPLETE, 'reports-patched.tar.gz'), tmp_path)
    assert result.suites['nn/test_convolution'].cuda_counts == suites['nn/test_convolution']['cuda_counts']
    assert result.suites['test_transformers'].cuda_counts == suites['test_transformers']['cuda_counts']
    assert not failures and not any(suite.failed_tests for suite in result.suites.values())
    text = _text(os.path.join(COMPLETE, 'output-patched.log'))
    assert LOADER_ERROR not in text and 'Unable to load' not in text


def test_patched_partial_logs_meet_no_loader_error_one_numerical_failure():
    """The run with the two 64-bit-indexing convolutions in: the depthwise one fails on a tolerance (0.00195
    against 1e-3 over 2 billion elements), the only failure."""
    patched = os.path.join(PARTIAL, 'patched-partial')
    counted = {}
    for name in sorted(os.listdir(patched)):
        text = _text(os.path.join(patched, name))
        assert LOADER_ERROR not in text and 'Unable to load' not in text, name
        for suite, counts in cuda_counts_in_log([text])[0].items():
            counted[suite] = counts
    assert counted['test_transformers'] == {'ran': 4, 'failed': 0, 'skipped': 0}
    assert counted['nn/test_convolution'] == {'ran': 326, 'failed': 1, 'skipped': 229}
    conv = _text(os.path.join(patched, 'nn.test_convolution.log'))
    assert '= 1 failed, 331 passed, 302 skipped, 526 deselected, 1 xfailed, 2 rerun in 1078.30s' in conv
    assert 'FAILED [282.3135s] nn/test_convolution.py::TestConvolutionNNDeviceTypeCUDA::' \
           'test_depthwise_conv_64bit_indexing_cuda' in conv
    assert 'Greatest absolute difference: 0.001953125' in conv
    for name in ('test_cuda-session-a.log', 'test_cuda-session-b.log'):
        assert ' passed' in _text(os.path.join(patched, name)) and 'failed' not in _text(os.path.join(patched, name))
