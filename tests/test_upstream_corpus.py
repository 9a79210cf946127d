"""Our XML parsing against upstream easybuild-easyblocks' own corpus of PyTorch test reports.

Upstream (develop branch) keeps real and faulty reports in `test/pytorch_test_logs/` with the expected
result of each in `test_pytorch_test_log_parsing` (`test/easyblocks/easyblock_specific.py`).  The files
in `tests/data/pytorch_corpus/` are our own, written to reproduce each upstream case: the same layout,
directory and file names (hash parts changed), test names, states, reruns and <testsuite> counts; which
upstream file each mirrors is listed in `tests/data/pytorch_corpus/CASES.md`.  UPSTREAM_SUMMARIES and
UPSTREAM_FAILING are upstream's expected values, copied from that test.  One case is newer than the
develop tree we read (0214837, 2026-03-13): `distributed._composable.test_composability.test_pp_composability`
(a failure that passes on rerun under a different classname), from upstream commit 5cbe4a9, whose
`test_pytorch_test_log_parsing` expects 16 suites, that suite '0 failed, 2 passed, 0 skipped, 0 errors' and
both of its tests 'success'.

Where we deliberately differ, the test below says why and shows that no failure is lost and that no
suite which did not finish can pass:
- `run_test/run_test.xml` (a generic report): upstream infers the suite `dist/foo/bar` from class
  names; we name it by its directory, `run_test`.  Same counts.
- `backends/xeon/test_launch` has a comment-only report (a suite killed while writing it): upstream
  skips the file and judges the suite on the others; we keep the same counts but mark the suite
  'incomplete report', which fails the verdict unless a known failure names the suite.
- faulty `multi_file`, `different_file_name`, `file_attribute`: upstream refuses them because the
  file names and `file` attributes disagree with its suite naming; we name suites by directory, so the
  disagreement does not matter: their tests are counted.
- faulty `skip_and_failed` (pytest writes it when a skipped test's teardown fails): upstream refuses
  the file; we count the test case as failed, so the failure stays in the verdict.
"""

import os
import shutil

import pytest

import pytorch_output as out
from helpers import run_main
from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.testsuite.results import xmlparse
from eb_pytorch_cuda.testsuite.results.model import (SUITE_BAD_REPORT, SUITE_FAILED, SUITE_PASSED,
                                                     SUITE_REPORT_INCOMPLETE)
from eb_pytorch_cuda.testsuite.policy.judging import KnownFailure, Policy, judge
from eb_pytorch_cuda.testsuite.results.reportdirs import all_report_files as report_files
from eb_pytorch_cuda.testsuite.results.xmlparse import parse_report_dir, parse_report_files

CORPUS = os.path.join(os.path.dirname(__file__), 'data', 'pytorch_corpus')
REPORTS = os.path.join(CORPUS, 'test-reports')
FAULTY = os.path.join(CORPUS, 'faulty-reports')

# upstream's expected summaries, verbatim ('failed, passed, skipped, errors')
UPSTREAM_SUMMARIES = {
    'backends/xeon/test_launch': '2 failed, 2 passed, 3 skipped, 1 errors',
    'dist-gloo-init-env/distr/algorithms/quantization/test_quantization': '0 failed, 1 passed, 0 skipped, 0 errors',
    'dist-gloo-init-file/distr/algorithms/quantization/test_quantization': '0 failed, 1 passed, 0 skipped, 0 errors',
    'dist-nccl-init-env/distr/algorithms/quantization/test_quantization': '0 failed, 1 passed, 0 skipped, 0 errors',
    'dist-nccl-init-file/distr/algorithms/quantization/test_quantization': '0 failed, 1 passed, 0 skipped, 0 errors',
    'dist/foo/bar': '0 failed, 4 passed, 0 skipped, 0 errors',
    'distributed/_composable/test_composability/test_pp_composability': '0 failed, 2 passed, 0 skipped, 0 errors',
    'distributed/tensor/test_dtensor_ops': '0 failed, 2 passed, 2 skipped, 0 errors',
    'dynamo/test_dynamic_shapes': '3 failed, 14 passed, 0 skipped, 0 errors',
    'dynamo/test_misc': '1 failed, 9 passed, 0 skipped, 0 errors',
    'inductor/test_aot_inductor_arrayref': '2 failed, 0 passed, 0 skipped, 0 errors',
    'inductor/test_cudagraph_trees': '1 failed, 0 passed, 0 skipped, 0 errors',
    'jit/test_builtins': '0 failed, 1 passed, 0 skipped, 0 errors',
    'test_autoload': '0 failed, 1 passed, 1 skipped, 0 errors',
    'test_nestedtensor': '3 failed, 2 passed, 3 skipped, 1 errors',
    'test_quantization': '0 failed, 12 passed, 5 skipped, 0 errors',
}
# upstream's expected failure and error states (its list of every test, failing ones only), per suite
UPSTREAM_FAILING = {
    'backends/xeon/test_launch': {'TestTorchrun.test_bar': 'error', 'TestTorchrun.test_baz': 'failed',
                                  'TestTorchrun.test_reshape_cpu_float64': 'failed'},
    'dynamo/test_dynamic_shapes': {'DynamicShapesMiscTests.test_outside_linear_module_free_dynamic_shapes': 'failed',
                                   'DynamicShapesMiscTests.test_parameter_free_dynamic_shapes': 'failed',
                                   'DynamicShapesMiscTests.test_pytree_tree_leaves_dynamic_shapes': 'failed'},
    'dynamo/test_misc': {'MiscTests.test_parameter_free': 'failed'},
    'inductor/test_aot_inductor_arrayref': {
        'AOTInductorTestABICompatibleCpuWithStackAllocation.test_fail_and_skip': 'failed',
        'AOTInductorTestABICompatibleCpuWithStackAllocation.test_skip_and_fail': 'failed'},
    'inductor/test_cudagraph_trees': {'CudaGraphTreeTests.test_workspace_allocation_error': 'failed'},
    'test_nestedtensor': {'TestNestedTensor.test_bmm_cuda_gpu_float16': 'failed',
                          'TestNestedTensor.test_bmm_cuda_gpu_float32': 'failed',
                          'TestNestedTensor.test_bmm_cuda_gpu_float64': 'error',
                          'TestNestedTensor.test_reshape_cpu_float64': 'failed'},
}
OUR_NAME_FOR = {'dist/foo/bar': 'run_test'}  # deliberate naming difference (see the module docstring)


def _upstream_summary(suite):
    counts = suite.counts
    return (f"{counts['failed']} failed, {counts['passed']} passed, {counts['skipped'] + counts['xfailed']} skipped, "
            f"{counts['errors']} errors")


@pytest.fixture(params=['fast', 'elementtree'])
def corpus_result(request, monkeypatch):
    """The corpus parsed by our fast path (where it applies) and by ElementTree alone: both must agree."""
    if request.param == 'elementtree':
        monkeypatch.setattr(xmlparse, '_fast_cases', lambda data: xmlparse._check_testsuite_counts(
            data, xmlparse._case_count(data)) and None)
    return parse_report_dir(REPORTS)


def test_every_suite_has_upstreams_counts(corpus_result):
    ours = {name: _upstream_summary(suite) for name, suite in corpus_result.suites.items()}
    expected = {OUR_NAME_FOR.get(name, name): summary for name, summary in UPSTREAM_SUMMARIES.items()}
    assert ours == expected
    assert len(corpus_result.suites) == 16  # as upstream (5cbe4a9): python-unittest/-c is ignored


def test_every_failing_test_has_upstreams_state(corpus_result):
    ours = {name: {t.test_id: t.state for t in suite.failed_tests} for name, suite in corpus_result.suites.items()
            if suite.failed_tests}
    assert ours == UPSTREAM_FAILING


PP = 'distributed/_composable/test_composability/test_pp_composability'
PP_DIR = os.path.join(REPORTS, 'python-pytest', PP.replace('/', '.'))


def test_a_failure_passing_on_rerun_under_another_classname_passes(corpus_result):
    # upstream (5cbe4a9): 'ComposabilityTest.test_pass_on_rerun_different_classname: success' and
    # 'ComposabilityTest.test_pp_and_dcp: success'; the failure's class name is 'test.<module path>.ComposabilityTest'
    suite = corpus_result.suites[PP]
    assert suite.status == SUITE_PASSED and suite.failed_tests == []
    assert suite.counts == dict(suite.counts, failed=0, errors=0, passed=2, skipped=0)
    # the failing file alone: the long class name is the short one, so the rerun's pass above matched it
    failing = [os.path.join(PP_DIR, name) for name in os.listdir(PP_DIR) if name.endswith('-3c81f.xml')]
    alone = parse_report_files(REPORTS, failing).suites[PP]
    assert [(t.test_id, t.state) for t in alone.failed_tests] == [
        ('ComposabilityTest.test_pass_on_rerun_different_classname', 'failed')]
    assert alone.counts == dict(alone.counts, failed=1, passed=1)


def test_reruns_are_counted_once_per_rerun_element(corpus_result):
    assert corpus_result.suites['inductor/test_cudagraph_trees'].counts['rerun'] == 2
    assert corpus_result.suites['distributed/tensor/test_dtensor_ops'].counts['rerun'] == 2
    assert [t.reruns for t in corpus_result.suites['inductor/test_cudagraph_trees'].failed_tests] == [2]


def test_statuses_every_suite_but_the_one_with_a_comment_only_report(corpus_result):
    statuses = {name: suite.status for name, suite in corpus_result.suites.items()}
    incomplete = statuses.pop('backends/xeon/test_launch')
    assert incomplete == SUITE_REPORT_INCOMPLETE
    failing = {name for name, summary in UPSTREAM_SUMMARIES.items() if not summary.startswith('0 failed')
               or not summary.endswith(' 0 errors')}
    assert statuses == {OUR_NAME_FOR.get(name, name): SUITE_FAILED if name in failing else SUITE_PASSED
                        for name in UPSTREAM_SUMMARIES if name != 'backends/xeon/test_launch'}
    assert 'backends.xeon.test_launch-4.xml' in corpus_result.suites['backends/xeon/test_launch'].note


def test_a_comment_only_report_is_never_a_pass():
    # its suite cannot be judged: the verdict fails whatever the budget, unless a known failure names it
    root_result = parse_report_dir(REPORTS)
    verdict = judge(root_result, Policy(10 ** 6, []))
    assert not verdict.passed
    assert any('backends/xeon/test_launch: incomplete report' in reason for reason in verdict.reasons)
    known = KnownFailure('backends/xeon/test_launch', 'killed while writing its report on this node')
    assert judge(root_result, Policy(10 ** 6, [known])).passed


def test_a_suite_with_only_an_empty_report_is_incomplete_not_passed(tmp_path):
    report = tmp_path / 'test-reports' / 'python-pytest' / 'test_nn' / 'test_nn-0a1b2.xml'
    report.parent.mkdir(parents=True)
    report.write_text('')
    suite = parse_report_dir(tmp_path / 'test-reports').suites['test_nn']
    assert suite.status == SUITE_REPORT_INCOMPLETE and suite.failing_count == 0


@pytest.mark.parametrize('case,problem', [
    ('root', 'root element is <testcase>, not <testsuites> or <testsuite>'),
    ('invalid_xml', 'malformed XML (mismatched tag'),
    ('no_tests', '<testsuite> reports 1 test(s) but holds no test case'),
    ('consistency', 'invalid test count: tests=2 but failures=1, errors=2, skipped=1'),
    ('duplicate', 'duplicate test case TestName.test2'),
])
def test_faulty_reports_upstream_refuses_are_refused(case, problem):
    with pytest.raises(PluginError) as info:
        parse_report_dir(os.path.join(FAULTY, case))
    message = str(info.value)
    assert problem in message and '\n' not in message
    assert message.startswith(os.path.join(FAULTY, case, 'test_name'))


@pytest.mark.parametrize('case', ['root', 'invalid_xml', 'no_tests', 'consistency', 'duplicate'])
def test_in_the_test_step_a_faulty_report_marks_its_suite_not_the_whole_step(case):
    files = report_files(os.path.join(FAULTY, case)) + report_files(os.path.join(REPORTS, 'python-pytest'))
    result = parse_report_files(os.path.join(FAULTY, case), files)
    assert result.suites['test_name'].status == SUITE_BAD_REPORT and FAULTY in result.suites['test_name'].note
    assert not judge(result, Policy(10 ** 6, [])).passed


@pytest.mark.parametrize('case,suite,passed', [
    ('multi_file', 'test_name', 2),
    ('different_file_name', 'sync/skip/test_name', 1),
    ('file_attribute', 'test_name', 1),
])
def test_reports_upstream_refuses_only_for_its_naming_are_counted(case, suite, passed):
    result = parse_report_dir(os.path.join(FAULTY, case))
    assert list(result.suites) == [suite]
    assert result.suites[suite].status == SUITE_PASSED and result.suites[suite].counts['passed'] == passed


def test_skipped_and_failed_at_once_is_a_failure_never_a_negative_pass_count(corpus_result):
    suite = parse_report_dir(os.path.join(FAULTY, 'skip_and_failed')).suites['test_name']
    assert suite.counts == dict(suite.counts, failed=1, passed=0, skipped=0)
    assert [(t.test_id, t.state) for t in suite.failed_tests] == [('TestName.test2', 'failed')]


def test_python_c_subprocess_reports_are_ignored(tmp_path):
    root = tmp_path / 'test-reports'
    for suite in ('-c', 'test_autoload'):
        shutil.copytree(os.path.join(REPORTS, 'python-unittest', suite), root / 'python-unittest' / suite)
    assert list(parse_report_dir(root).suites) == ['test_autoload']


def test_a_failure_under_one_backend_survives_a_pass_under_another(tmp_path):
    root = tmp_path / 'test-reports'
    failing, passing = [('CommTest', 'test_x', '<failure message="x"/>')], [('CommTest', 'test_x', '')]
    for relative, xml in [out.junit('distributed.test_c10d_common', failing, runner='dist-gloo'),
                          out.junit('distributed.test_c10d_common', passing, runner='dist-nccl')]:
        (root / relative).parent.mkdir(parents=True)
        (root / relative).write_text(xml)
    verdict = judge(parse_report_dir(root), Policy(0, []))
    assert not verdict.passed and verdict.unknown == [('dist-gloo/distributed/test_c10d_common', 'CommTest.test_x')]


def test_report_command_on_the_corpus_fails_on_the_unfinished_suite_and_exits_1():
    done = run_main('report', REPORTS, '--max-failed-tests', '1000')
    assert done.returncode == 1, done.stderr
    assert 'backends/xeon/test_launch (incomplete report' in done.stdout
    assert 'verdict: FAIL: backends/xeon/test_launch: incomplete report, and not a known failure' in done.stdout


def test_report_command_refuses_a_faulty_report_in_one_line():
    done = run_main('report', os.path.join(FAULTY, 'no_tests'))
    assert done.returncode == 2 and done.stdout == ''
    assert len(done.stderr.splitlines()) == 1 and 'holds no test case' in done.stderr
