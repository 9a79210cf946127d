"""Text in the forms PyTorch 2.x's run_test.py prints, for the parser and policy tests."""

PASSING_UNITTEST = """Running test_autograd 1/1 ... [2024-01-10 10:00:00.000000]
Executing ['/usr/bin/python', '-bb', 'test_autograd.py', '-v'] ... [2024-01-10 10:00:00.000000]
test_a (__main__.TestAutograd.test_a) ... ok
----------------------------------------------------------------------
Ran 120 tests in 12.5s

OK (skipped=7, expected failures=3)
"""

FAILING_UNITTEST = """Running test_nn 1/1 ... [2024-01-10 10:01:00.000000]
======================================================================
FAIL: test_conv_tf32 (__main__.TestNN.test_conv_tf32)
----------------------------------------------------------------------
Traceback (most recent call last):
AssertionError: Tensor-likes are not close!
======================================================================
ERROR: test_lstm_cuda (__main__.TestNNDeviceTypeCUDA)
----------------------------------------------------------------------
RuntimeError: cuDNN error
----------------------------------------------------------------------
Ran 3000 tests in 900.1s

FAILED (failures=1, errors=1, skipped=50, expected failures=9)
test_nn 1/1 failed!
"""

FAILING_PYTEST = """Running dynamo/test_dynamic_shapes 1/1 ... [2024-01-10 11:00:00.000000]
FAILED [0.0623s] dynamo/test_dynamic_shapes.py::DynamicShapesExportTests::test_predispatch_dynamic_shapes - AssertionError
FAILED dynamo/test_dynamic_shapes.py::DynamicShapesMiscTests::test_torch_guards_stack_frame_register_inlining_dynamic_shapes - RuntimeError
========== 2 failed, 2065 passed, 14 skipped, 33 xfailed, 4 rerun, 12 warnings in 301.12s (0:05:01) ==========
dynamo/test_dynamic_shapes 1/1 failed!
"""

ASSERTION_LIST = """Running distributed/test_c10d_nccl 1/1 ... [2024-01-10 12:00:00.000000]
AssertionError: 2 unit test(s) failed:
\tProcessGroupNCCLTest.test_nan_assert_float16
\tDistributedDataParallelTest.test_ddp_comm_hook

FINISHED PRINTING LOG FILE of distributed/test_c10d_nccl (/tmp/test_c10d_nccl_xyz.log)

distributed/test_c10d_nccl 1/1 failed!
"""

SIGNAL = """Running test_cuda_expandable_segments 1/1 ... [2024-01-10 13:00:00.000000]
test_a (__main__.TestCudaExpandable.test_a) ... ok
test_cuda_expandable_segments 1/1 failed! Received signal: SIGIOT
"""

CRASH_NO_SUMMARY = """Running test_import_stats 1/1 ... [2024-01-10 13:10:00.000000]
Traceback (most recent call last):
ImportError: cannot import name 'foo'
test_import_stats 1/1 failed!
"""

TRUNCATED_TAIL = """Running test_ops 1/1 ... [2024-01-10 14:00:00.000000]
test_a (__main__.TestOps.test_a) ... ok
"""

FULL_LOG = (PASSING_UNITTEST + FAILING_UNITTEST + FAILING_PYTEST + ASSERTION_LIST + SIGNAL + CRASH_NO_SUMMARY
            + TRUNCATED_TAIL)

# known_test_failures for FULL_LOG's suites, as an easyconfig writes them: scopes by family, target glob and
# compute capability, an entry no run fails (stale), one that never applies (the policy and report tests)
KNOWN = {
    '': [('test_nn::TestNN.test_conv_tf32', 'TF32 tolerance on A100'),
         ('test_nn::*test_lstm_cuda', 'cuDNN RNN flaky in VMs'),
         ('dynamo/test_dynamic_shapes::test_predispatch*', 'upstream issue 112345'),
         ('dynamo/test_dynamic_shapes::DynamicShapesMiscTests.test_torch_guards*', 'upstream issue 112346'),
         ('distributed/test_c10d_nccl', 'NCCL in vGPU'),
         ('test_cuda_expandable_segments', 'SIGIOT on vGPU'),
         ('test_import_stats', 'missing optional dependency')],
    'x86_64/intel/*': [('test_autograd::TestAutograd.test_never_fails', 'was flaky on haswell')],
    'aarch64': [('test_ops', 'timeouts on grace')],
    '7.0': [('test_nn', 'never applies here')],
}


def junit(suite_dir, cases, runner='python-pytest'):
    """(relative path, XML text) of one report; cases are (classname, name, child XML or '')."""
    body = ''.join(f'<testcase classname="{c}" name="{n}" time="0.1">{child}</testcase>' for c, n, child in cases)
    xml = (f'<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" tests="{len(cases)}">'
           f'{body}</testsuite></testsuites>')
    return f'{runner}/{suite_dir}/{suite_dir}-0123abcd.xml', xml
