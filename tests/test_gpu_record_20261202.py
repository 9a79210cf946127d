"""The H200 run of 2026-12-02 (docs/validation/h200-2026-12-02-eb/) replayed on a CPU: PyTorch's own CUDA tests run
by our easyblock's own test command (no SANDCASTLE=0 on `runtest`: cuda_device_tests='auto' set it), through real
eb 5.4.1, Debian 2.6.0's run_test.py, torch 2.11.0+cu130 and cuDNN 9.19 in an RPATH-only module.

Unpatched (no hooks): 10 cuDNN convolutions fail with cuDNN 9's loader error, and the 4 cuDNN SDPA attention tests
crash (a segfault after `Unable to load any of {libcudnn_engines_runtime_compiled.so.9.19.0, ...}`) so that only
the harness's `The following tests failed consistently` list names them.  The step's report of that day left the
4 unnamed and counted 10 CUDA tests; read again now, all 14 are named and counted.

Patched (hooks): the run ended inside this phase when the session's device time was spent, so only the suites'
own pytest logs of the phase came back: the same 4 SDPA tests pass, and the convolution suite's CUDA set ran
(326 ran, 229 skipped by PyTorch's own decorators) with one failure that is numerical, not the loader's.
"""

import json
import os

from eb_pytorch_cuda.cli import main
from eb_pytorch_cuda.testsuite.results.cudatests import cuda_counts_in_log
from eb_pytorch_cuda.testsuite.results.logparse import parse_log_file
from eb_pytorch_cuda.testsuite.results.xmlparse import parse_report_files
from helpers import recorded_junit

RECORD = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'docs', 'validation',
                      'h200-2026-12-02-eb')
UNPATCHED = os.path.join(RECORD, 'unpatched')
PATCHED = os.path.join(RECORD, 'patched-partial')
LOADER_ERROR = 'CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED'
SDPA = ['TestSDPACudaOnlyCUDA.test_cudnn_attention_different_dk_dv_cuda',
        'TestSDPACudaOnlyCUDA.test_cudnn_attention_nonmodulo64seqlen_cuda',
        'TestSDPACudaOnlyCUDA.test_cudnn_attention_preserves_query_layout_cuda',
        'TestSDPACudaOnlyCUDA.test_cudnn_attention_trivial_output_transpose_cuda']


def _text(path):
    with open(path, errors='replace') as handle:
        return handle.read()


def test_the_step_ran_the_cuda_device_tests_without_sandcastle_on_its_command():
    with open(os.path.join(UNPATCHED, 'results.json')) as handle:
        phase = json.load(handle)['phases']['unpatched']
    assert phase['eb_exit'] == 1 and phase['verdict'] == ['== verdict: FAIL: 14 unknown failure(s), budget 0']
    assert 'SANDCASTLE' not in phase['test_command'][0]  # the easyconfig's runtest, as our easyblock runs it
    assert phase['cuda_device_tests']['environment'] == {'SANDCASTLE': '0'}
    assert phase['cuda_device_tests']['gpus'] == ['0']
    assert phase['tests_with_loader_error'] == 10  # counted in this phase's own build directory (JUnit XML)


def test_unpatched_every_failure_is_named_and_counted_as_a_cuda_test(capsys):
    log = os.path.join(UNPATCHED, 'output-unpatched.log')
    result = parse_log_file(log)
    sdpa = result.suites['test_transformers']
    assert sorted(test.test_id for test in sdpa.failed_tests) == SDPA  # only the harness's list names them
    assert sdpa.cuda_counts == {'ran': 4, 'failed': 4, 'skipped': 0}
    conv = result.suites['nn/test_convolution']
    assert conv.failing_count == 10 and conv.cuda_counts == {'ran': 10, 'failed': 10, 'skipped': 0}
    assert all(test.test_id.startswith('TestConvolutionNNDeviceTypeCUDA.test_conv_cudnn_')
               for test in conv.failed_tests)
    text = _text(log)
    assert text.count('Unable to load any of {libcudnn_engines_runtime_compiled.so.9.19.0') >= 4
    assert text.count(LOADER_ERROR) >= 10 and 'Fatal Python error: Segmentation fault' in text
    assert main(['report', log, '--max-failed-tests', '13']) == 1
    out = capsys.readouterr().out
    assert 'CUDA device tests: 14 ran, 14 failed, 0 skipped' in out and 'unnamed failure' not in out
    assert 'verdict: FAIL: 14 unknown failure(s), budget 13' in out
    # what the step itself wrote that day, before the list named crashed tests: 4 unnamed, 10 CUDA tests
    with open(os.path.join(UNPATCHED, 'pytorch-test-results-unpatched.json')) as handle:
        kept = json.load(handle)
    assert kept['cuda_tests'] == {'ran': 10, 'failed': 10, 'skipped': 0}


def test_unpatched_xml_reports_hold_the_convolution_failures_and_none_of_the_crashed_ones(tmp_path):
    test_dir, files = recorded_junit(os.path.join(UNPATCHED, 'reports-unpatched.tar.gz'), tmp_path)
    result = parse_report_files(str(test_dir / 'test-reports'), files)
    assert result.suites['nn/test_convolution'].cuda_counts == {'ran': 10, 'failed': 10, 'skipped': 0}
    assert result.suites['test_transformers'].cuda_counts == {'ran': 0, 'failed': 0, 'skipped': 0}


def test_patched_the_cudnn_attention_and_convolutions_run_and_no_test_meets_the_loader_error():
    counted = {}
    for name in sorted(os.listdir(PATCHED)):
        text = _text(os.path.join(PATCHED, name))
        assert LOADER_ERROR not in text and 'Unable to load' not in text, name
        for suite, counts in cuda_counts_in_log([text])[0].items():
            counted[suite] = counts
    assert counted['test_transformers'] == {'ran': 4, 'failed': 0, 'skipped': 0}
    assert counted['nn/test_convolution'] == {'ran': 326, 'failed': 1, 'skipped': 229}
    conv = _text(os.path.join(PATCHED, 'nn.test_convolution.log'))
    assert '= 1 failed, 331 passed, 302 skipped, 526 deselected, 1 xfailed, 2 rerun in 1078.30s' in conv
    # the one failure: a tolerance (0.00195 against 1e-3) of a 2-billion-element depthwise convolution
    assert 'FAILED [282.3135s] nn/test_convolution.py::TestConvolutionNNDeviceTypeCUDA::' \
           'test_depthwise_conv_64bit_indexing_cuda' in conv
    assert 'Greatest absolute difference: 0.001953125' in conv
    for name in ('test_cuda-session-a.log', 'test_cuda-session-b.log'):
        assert ' passed' in _text(os.path.join(PATCHED, name)) and 'failed' not in _text(os.path.join(PATCHED, name))
