"""Issue 33's complete H200 record (docs/validation/h200-2026-12-02-eb-complete/) replayed on a CPU: both phases
through real eb 5.4.1 with our easyblock's own test command (no SANDCASTLE=0 on `runtest`: cuda_device_tests='auto'
set it), Debian 2.6.0's run_test.py, torch 2.11.0+cu130 and cuDNN 9.19 in an RPATH-only module, and the benchmark
of the same round.

Unpatched (no hooks): eb exit 1, 10 cuDNN convolutions fail with cuDNN 9's loader error and the 4 cuDNN SDPA
attention tests crash.  Patched (hooks): eb exit 0, PASS, 334 CUDA tests ran (229 skipped themselves), none met the
loader error, the NEEDED entries went in and the module loads with LD_LIBRARY_PATH unset.  The store of a passing
build is removed by design (service.finish), so the patched phase's per-suite facts are its installed report and
its JUnit XML, read again here by our parsers.
"""

import json
import os
import xml.etree.ElementTree as ElementTree

from eb_pytorch_cuda.cli import main
from eb_pytorch_cuda.testsuite.results.logparse import parse_log_file
from eb_pytorch_cuda.testsuite.results.records import StoreRecord
from eb_pytorch_cuda.testsuite.results.xmlparse import parse_report_files
from helpers import recorded_junit

RECORD = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'docs', 'validation',
                      'h200-2026-12-02-eb-complete')
LOADER_ERROR = 'CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED'
SDPA = ['TestSDPACudaOnlyCUDA.test_cudnn_attention_different_dk_dv_cuda',
        'TestSDPACudaOnlyCUDA.test_cudnn_attention_nonmodulo64seqlen_cuda',
        'TestSDPACudaOnlyCUDA.test_cudnn_attention_preserves_query_layout_cuda',
        'TestSDPACudaOnlyCUDA.test_cudnn_attention_trivial_output_transpose_cuda']


def _json(name):
    with open(os.path.join(RECORD, name)) as handle:
        return json.load(handle)


def _text(name):
    with open(os.path.join(RECORD, name), errors='replace') as handle:
        return handle.read()


def _xml_result(phase, tmp_path):
    """(our parser's result, {test id: failure text}) of the phase's JUnit XML."""
    test_dir, files = recorded_junit(os.path.join(RECORD, f'reports-{phase}.tar.gz'), tmp_path)
    failures = {}
    for path in files:
        for case in ElementTree.parse(path).getroot().iter('testcase'):
            for child in case:
                if child.tag in ('failure', 'error'):
                    failures[f"{case.get('classname').rsplit('.', 1)[-1]}.{case.get('name')}"] = \
                        (child.get('message') or '') + (child.text or '')
    return parse_report_files(str(test_dir / 'test-reports'), files), failures


def test_both_phases_ran_the_easyblocks_own_command_with_cuda_device_tests_on():
    phases = _json('results.json')['phases']
    for phase in phases.values():
        assert 'SANDCASTLE' not in phase['test_command'][0]  # the easyconfig's runtest, as our easyblock runs it
        assert phase['cuda_device_tests'] == {'requested': 'auto', 'enabled': True, 'gpus': ['0'],
                                              'reason': '1 GPU(s) seen (0), the build has CUDA',
                                              'environment': {'SANDCASTLE': '0'}}
        assert '8 batch(es) at a time' in phase['test_command'][0]  # the node's own count: 16 CPUs // 2
    unpatched, patched = phases['unpatched'], phases['patched']
    assert unpatched['eb_exit'] == 1 and unpatched['verdict'] == ['== verdict: FAIL: 14 unknown failure(s), budget 0']
    assert unpatched['cuda_tests'] == {'ran': 14, 'failed': 14, 'skipped': 0}
    assert unpatched['tests_with_loader_error'] == 10  # counted in this phase's own build directory
    assert patched['eb_exit'] == 0 and patched['verdict'] == ['== verdict: PASS']
    assert patched['cuda_tests'] == {'ran': 334, 'failed': 0, 'skipped': 229}
    assert patched['tests_with_loader_error'] == 0 and patched['loader_error_lines'] == 0
    assert '--hooks=' not in ' '.join(unpatched['command']) and any(
        arg.startswith('--hooks=') for arg in patched['command'])
    for soname in ('libcudnn_engines_precompiled.so.9', 'libcudnn_engines_runtime_compiled.so.9', 'libnvrtc.so.13'):
        assert f'libtorch_cuda.so: added NEEDED {soname}' in patched['needed_added']
    assert 'libtorch_cuda.so has NEEDED libcudnn_engines_runtime_compiled.so.9' in patched['sanity_load']
    check = _json('results.json')['module_check']
    assert check['lmod_load_exit'] == 0 and check['python_exit'] == 0 and not check['ld_library_path_set']
    assert check['output'].startswith('cudnn 91900\nconv (8, 16, 30, 30)')


def test_unpatched_the_loader_error_fails_the_convolutions_and_the_crashed_attention_tests_are_named(capsys):
    result = parse_log_file(os.path.join(RECORD, 'output-unpatched.log'))
    assert sorted(test.test_id for test in result.suites['test_transformers'].failed_tests) == SDPA
    conv = result.suites['nn/test_convolution']
    assert conv.failing_count == 10 and conv.cuda_counts == {'ran': 10, 'failed': 10, 'skipped': 0}
    assert all(test.test_id.startswith('TestConvolutionNNDeviceTypeCUDA.test_conv_cudnn_')
               for test in conv.failed_tests)
    assert _text('output-unpatched.log').count(LOADER_ERROR) >= 10
    assert main(['report', os.path.join(RECORD, 'output-unpatched.log')]) == 1
    out = capsys.readouterr().out
    assert 'CUDA device tests: 14 ran, 14 failed, 0 skipped' in out and 'unnamed failure' not in out
    assert _json('pytorch-test-results-unpatched.json')['cuda_tests'] == {'ran': 14, 'failed': 14, 'skipped': 0}
    with open(os.path.join(RECORD, 'store-unpatched.jsonl')) as handle:
        stored = {record.suite.name: record for record in map(StoreRecord.from_json, map(json.loads, handle))}
    assert sorted(stored) == ['nn/test_convolution', 'test_cuda', 'test_transformers']
    assert stored['nn/test_convolution'].suite.status == 'failed' and stored['test_cuda'].suite.status == 'passed'


def test_unpatched_junit_holds_the_ten_loader_errors(tmp_path):
    result, failures = _xml_result('unpatched', tmp_path)
    conv = result.suites['nn/test_convolution']
    assert conv.cuda_counts == {'ran': 10, 'failed': 10, 'skipped': 0}
    assert sorted(test.test_id for test in conv.failed_tests) == sorted(
        test_id for test_id, text in failures.items() if LOADER_ERROR in text)


def test_patched_the_step_passed_on_the_gpu_and_its_junit_says_the_same(tmp_path):
    report = _json('pytorch-test-results-patched.json')
    assert report['verdict'] == 'pass' and report['failed_tests'] == 0 and report['cuda_tests'] == {
        'ran': 334, 'failed': 0, 'skipped': 229}
    suites = {suite['name']: suite for suite in report['suites']}
    assert suites['nn/test_convolution']['counts']['passed'] == 336
    assert suites['nn/test_convolution']['counts']['skipped'] == 302
    assert suites['nn/test_convolution']['cuda_counts'] == {'ran': 330, 'failed': 0, 'skipped': 229}
    assert suites['test_transformers']['cuda_counts'] == {'ran': 4, 'failed': 0, 'skipped': 0}
    result, failures = _xml_result('patched', tmp_path)  # read again by this checkout's parser: the same counts
    assert result.suites['nn/test_convolution'].cuda_counts == suites['nn/test_convolution']['cuda_counts']
    assert result.suites['test_transformers'].cuda_counts == suites['test_transformers']['cuda_counts']
    assert not failures and not any(suite.failed_tests for suite in result.suites.values())
    assert LOADER_ERROR not in _text('output-patched.log') and 'Unable to load' not in _text('output-patched.log')


def test_the_benchmark_gave_the_same_results_each_way():
    conv = _json('bench-gpu-node.json')['cases']['conv']
    assert sorted(conv) == ['ours_pieces', 'ours_serial', 'plain']
    assert all(run['same_results'] for run in conv.values())
    assert conv['plain']['results'] == {'nn/test_convolution': [330, 0, 229, []]}
    assert conv['ours_serial']['ratio'] <= 1.1
