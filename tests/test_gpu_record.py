"""The recorded GPU run (docs/validation/h200-2026-12-01-eb/, tools/validate-gpu/eb_gpu_run.py on the H200) replayed:
the real output of PyTorch 2.6.0's run_test.py running PyTorch's own nn/test_convolution.py (torch 2.11.0+cu130,
cuDNN 9.19 in an RPATH-only EasyBuild module) inside our test step, read again by our parser and policy here.

Unpatched (no NEEDED entries, no hooks), the ten cuDNN convolution tests selected fail with cuDNN 9's loader error
and the step fails; patched by our hooks, the same ten pass.  2.6's harness retries each failing test twice in
new processes (30 `1 failed` summaries for 10 tests): the count is the harness's own list of consistent failures.
"""

import json
import os
import re

from eb_pytorch_cuda.cli import main
from eb_pytorch_cuda.testsuite.results.logparse import parse_log_file
from eb_pytorch_cuda.testsuite.policy.judging import Policy, judge

RECORD = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'docs', 'validation',
                      'h200-2026-12-01-eb')
LOADER_ERROR = 'cudnn_status: CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED'
SUITE = 'nn/test_convolution'


def _phase(name):
    with open(os.path.join(RECORD, name, 'results.json')) as handle:
        return json.load(handle)


def _log(name):
    return os.path.join(RECORD, name, f'output-{name}.log')


def test_unpatched_the_cudnn_tests_fail_with_the_loader_error_and_the_step_fails(capsys):
    recorded = _phase('unpatched')['phases']['unpatched']
    assert recorded['eb_exit'] == 1 and recorded['tests_with_loader_error'] == 10  # from the run's JUnit XML
    suite = parse_log_file(_log('unpatched')).suites[SUITE]
    failed = sorted(test.test_id for test in suite.failed_tests)
    assert suite.status == 'failed' and suite.failing_count == 10 and len(failed) == 10
    assert all(test.startswith('TestConvolutionNNDeviceTypeCUDA.test_conv_cudnn_') for test in failed)
    with open(_log('unpatched'), errors='replace') as handle:
        text = handle.read()
    assert text.count(LOADER_ERROR) >= 10
    assert len(re.findall(r'^=+ 1 failed, \d+ deselected, 2 rerun in', text, re.M)) == 30  # 3 runs of each test
    assert main(['report', _log('unpatched'), '--max-failed-tests', '9']) == 1
    out = capsys.readouterr().out
    assert 'verdict: FAIL: 10 unknown failure(s), budget 9' in out
    assert ('unknown failure: nn/test_convolution::TestConvolutionNNDeviceTypeCUDA.test_conv_cudnn_nhwc_cuda_float32'
            in out)


def test_patched_the_tests_pass_and_the_module_runs_without_ld_library_path():
    recorded = _phase('patched')
    facts = recorded['phases']['patched']
    assert facts['eb_exit'] == 0 and facts['tests_with_loader_error'] == 0
    suite = parse_log_file(_log('patched')).suites[SUITE]  # `was successful`: the log itself stayed on the node
    assert suite.status == 'passed' and not suite.failed_tests
    assert judge(parse_log_file(_log('patched')), Policy(0, [])).passed
    with open(os.path.join(RECORD, 'patched', 'pytorch-test-results-patched.json')) as handle:
        report = json.load(handle)  # the step's report, which read that log and the XML there
    assert report['verdict'] == 'pass' and report['suites'][0]['counts']['passed'] == 10
    with open(_log('patched'), errors='replace') as handle:
        assert 'CUDNN_STATUS' not in handle.read()
    check = recorded['module_check']
    assert check['python_exit'] == 0 and not check['ld_library_path_set']
    assert 'cudnn 91900' in check['output'] and 'conv (8, 16, 30, 30)' in check['output']
    with open(os.path.join(RECORD, 'patched', 'eb-patched.log'), errors='replace') as handle:
        eb_output = handle.read().replace('\n', '')  # eb breaks its messages every 80 columns, in words too
    assert 'added NEEDED libcudnn_engines_precompiled.so.9' in eb_output
    assert 'added NEEDED libcudnn_engines_runtime_compiled.so.9' in eb_output
    assert re.search(r'sanity check: \S+/PyTorch/2\.11\.0-wheel/\S+/libtorch_cuda\.so has NEEDED '
                     r'libcudnn_engines_precompiled\.so\.9 -> \S+/cuDNN/9\.19\.0\.56-pip-wheel/lib/', eb_output)
