"""run_test.py output and XML reports into one model; every failure form keeps its own status."""

import pytest

import pytorch_output as out
from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.testsuite.logparse import parse_log_file, parse_log_text
from eb_pytorch_cuda.testsuite.results import load_results
from eb_pytorch_cuda.testsuite.xmlparse import parse_report_dir


@pytest.fixture
def log_result():
    return parse_log_text(out.FULL_LOG)


def test_passing_unittest_suite_counts(log_result):
    suite = log_result.suites['test_autograd']
    assert suite.status == 'passed'
    assert (suite.counts['passed'], suite.counts['skipped'], suite.counts['xfailed']) == (110, 7, 3)


def test_unittest_failures_with_names_from_py311_and_older_formats(log_result):
    suite = log_result.suites['test_nn']
    assert suite.status == 'failed' and (suite.counts['failed'], suite.counts['errors']) == (1, 1)
    assert {(t.test_id, t.state) for t in suite.failed_tests} == {('TestNN.test_conv_tf32', 'failed'),
                                                                    ('TestNNDeviceTypeCUDA.test_lstm_cuda', 'error')}


def test_pytest_summary_with_xfailed_and_rerun(log_result):
    suite = log_result.suites['dynamo/test_dynamic_shapes']
    assert suite.summary() == '2 failed, 2065 passed, 14 skipped, 33 xfailed, 4 rerun'
    assert [t.test_id for t in suite.failed_tests] == [
        'DynamicShapesExportTests.test_predispatch_dynamic_shapes',
        'DynamicShapesMiscTests.test_torch_guards_stack_frame_register_inlining_dynamic_shapes']


def test_assertion_error_list_counts_and_names_failures(log_result):
    suite = log_result.suites['distributed/test_c10d_nccl']
    assert suite.status == 'failed' and suite.counts['failed'] == 2
    assert [t.test_id for t in suite.failed_tests] == ['ProcessGroupNCCLTest.test_nan_assert_float16',
                                                       'DistributedDataParallelTest.test_ddp_comm_hook']


def test_signal_crash_and_truncation_each_have_their_own_status(log_result):
    assert (log_result.suites['test_cuda_expandable_segments'].status,
            log_result.suites['test_cuda_expandable_segments'].signal) == ('terminated', 'SIGIOT')
    assert log_result.suites['test_import_stats'].status == 'failed without countable summary'
    assert log_result.suites['test_import_stats'].failing_count == 0  # never reported as "0 failures" passed
    assert log_result.suites['test_ops'].status == 'no summary'


def test_failed_line_without_running_line_is_still_a_failed_suite():
    result = parse_log_text('some output\ntest_jit_profiling failed! Received signal: SIGSEGV\n')
    assert result.suites['test_jit_profiling'].signal == 'SIGSEGV'


@pytest.mark.parametrize('content', [b'', b'hello world\n', b'\x00\x01binary'])
def test_unrecognizable_logs_are_refused_naming_the_file(tmp_path, content):
    path = tmp_path / 'run.log'
    path.write_bytes(content)
    with pytest.raises(PluginError, match=str(path)):
        parse_log_file(path)


def _write_reports(root, reports):
    for relative, xml in reports:
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(xml)
    return root


def test_xml_reports_states_reruns_and_variants(tmp_path):
    root = _write_reports(tmp_path / 'test-reports', [
        out.junit('dynamo.test_functions', [
            ('test.dynamo.test_functions.FunctionTests', 'test_a', ''),
            ('test.dynamo.test_functions.FunctionTests', 'test_b', '<failure message="x"/><rerun/><rerun/>'),
            ('test.dynamo.test_functions.FunctionTests', 'test_c', '<skipped type="pytest.xfail"/>'),
            ('test.dynamo.test_functions.FunctionTests', 'test_d', '<skipped/>')]),
        out.junit('distributed.test_c10d_gloo', [('ProcessGroupGlooTest', 'test_x', '<error/>')], runner='dist-gloo'),
        out.junit('distributed.test_c10d_gloo', [('ProcessGroupGlooTest', 'test_y', '')], runner='python-unittest'),
    ])
    result = parse_report_dir(root)
    functions = result.suites['dynamo/test_functions']
    assert functions.summary() == '1 failed, 1 passed, 1 skipped, 1 xfailed, 2 rerun'
    assert [(t.test_id, t.reruns) for t in functions.failed_tests] == [('FunctionTests.test_b', 2)]
    # a backend variant is a suite of its own: its error is not cancelled by the plain suite's pass
    gloo = result.suites['dist-gloo/distributed/test_c10d_gloo']
    assert gloo.status == 'failed' and gloo.counts['errors'] == 1 and gloo.counts['passed'] == 0
    plain = result.suites['distributed/test_c10d_gloo']
    assert plain.status == 'passed' and plain.counts['passed'] == 1


@pytest.mark.parametrize('content,problem', [
    ('<testsuites><testsuite><testcase name="a"', 'malformed XML'),
    ('<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa">]><testsuites>&a;</testsuites>', 'entity declarations'),
    ('<html></html>', 'root element is <html>'),
])
def test_bad_xml_is_refused_naming_the_file(tmp_path, content, problem):
    bad = tmp_path / 'test-reports' / 'python-pytest' / 'test_x' / 'test_x-1.xml'
    bad.parent.mkdir(parents=True)
    bad.write_text(content)
    with pytest.raises(PluginError, match=problem) as info:
        parse_report_dir(tmp_path / 'test-reports')
    assert str(bad) in str(info.value)


def test_empty_report_directory_is_refused(tmp_path):
    with pytest.raises(PluginError, match='holds no XML test reports'):
        parse_report_dir(tmp_path)


def test_log_and_xml_merge_keeps_xml_counts_and_log_signals(tmp_path):
    root = _write_reports(tmp_path / 'test-reports', [
        out.junit('test_nn', [('TestNN', 'test_conv_tf32', '<failure/>'), ('TestNN', 'test_ok', '')]),
        out.junit('test_cuda_expandable_segments', [('TestCudaExpandable', 'test_a', '')])])
    log = tmp_path / 'run.log'
    log.write_text(out.FULL_LOG)
    result = load_results([str(root), str(log)])
    assert result.suites['test_nn'].counts['failed'] == 1 and result.suites['test_nn'].counts['passed'] == 1
    assert result.suites['test_cuda_expandable_segments'].signal == 'SIGIOT'
    assert result.suites['test_import_stats'].status == 'failed without countable summary'
    assert set(result.suites['test_nn'].sources) == {'xml', 'log'}


def _random_reports(root, seed):
    import random
    rng = random.Random(seed)
    reports = []
    for index in range(12):
        cases = []
        for number in range(rng.randint(0, 40)):
            child = rng.choice(['', '', '', '<failure message="x &amp; y"/>', '<error/>', '<skipped/>',
                                '<skipped type="pytest.xfail"/>', '<rerun/><failure/>', '<rerun/>'])
            cases.append((f'test.area.test_{index}.Test&amp;{index % 3}', f'test_{number}', child))
        runner = 'dist-gloo' if index % 5 == 4 else 'python-pytest'
        reports.append(out.junit(f'area.test_{index % 9}', cases, runner=runner))
    return _write_reports(root, reports)


@pytest.mark.parametrize('seed', range(5))
def test_fast_scan_and_elementtree_agree(tmp_path, monkeypatch, seed):
    from eb_pytorch_cuda.testsuite import xmlparse
    root = _random_reports(tmp_path / f'r{seed}', seed)
    fast = parse_report_dir(root)
    monkeypatch.setattr(xmlparse, '_fast_cases', lambda data: None)
    slow = parse_report_dir(root)
    assert fast.to_dict() == slow.to_dict()


def test_a_pass_in_another_file_overrides_a_failure(tmp_path):
    root = _write_reports(tmp_path / 'test-reports', [
        out.junit('test_x', [('TestX', 'test_a', '<failure/>'), ('TestX', 'test_b', '<skipped/>')]),
        out.junit('test_x', [('TestX', 'test_a', ''), ('TestX', 'test_b', '')], runner='python-unittest')])
    suite = parse_report_dir(root).suites['test_x']
    assert suite.failed_tests == [] and suite.counts['passed'] == 2 and suite.counts['skipped'] == 0
