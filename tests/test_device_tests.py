"""The CUDA device tests' mode (run/devicetests, service.device_test_mode) and the CUDA test counts of the reports
(results/cudatests).  Pure Python: the GPUs are given to the decision (finding them runs nvidia-smi:
tests/test_nvidia_smi.py; CUDA_VISIBLE_DEVICES's rule: tests/test_cuda_visible_devices.py), or
CUDA_VISIBLE_DEVICES is set to what names no GPU anywhere, where nvidia-smi is not asked."""

import json
from dataclasses import replace

import pytest

from helpers import run_main
from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.testsuite import service
from eb_pytorch_cuda.testsuite.policy.judging import Policy, judge
from eb_pytorch_cuda.testsuite.results.scopes import detect_context
from eb_pytorch_cuda.testsuite.policy.report import to_text
from eb_pytorch_cuda.testsuite.policy.settings import DeviceTerms, JudgedTerms, TestSettings
from eb_pytorch_cuda.testsuite.results.cudatests import cuda_counts, is_cuda_test
from eb_pytorch_cuda.testsuite.results.model import RunResult, Suite
from eb_pytorch_cuda.testsuite.results.records import suite_record
from eb_pytorch_cuda.testsuite.run import devicetests
from eb_pytorch_cuda.testsuite.run.gpus import gpu_compute_capabilities


def _never():
    raise AssertionError('the build was asked about CUDA where nothing depends on it')


def test_an_empty_cuda_visible_devices_means_no_gpu_for_the_policy_and_the_mode():
    """CUDA_VISIBLE_DEVICES set empty: CUDA sees no GPU, so no compute capability scopes the policy, no CUDA mode."""
    env = {'CUDA_VISIBLE_DEVICES': ''}
    assert gpu_compute_capabilities(env) == ()
    mode = service.device_test_mode('auto', _never, env)
    assert not mode.enabled and mode.environment == {} and 'no GPU seen' in mode.reason
    with pytest.raises(PluginError, match='cuda_device_tests: is True, but the test step cannot run CUDA tests here'):
        service.device_test_mode(True, _never, env)
    for value in ('-1', '-1,0', 'none'):  # CUDA stops at the first entry: no device on any node
        assert service.device_test_mode('auto', _never, {'CUDA_VISIBLE_DEVICES': value}).reason == \
            f"no GPU seen: CUDA_VISIBLE_DEVICES='{value}' (CUDA sees none)"


def test_auto_with_a_gpu_and_a_cuda_build_runs_cuda_and_cpu_device_tests():
    """The decision once the GPUs are known (run/gpus finds them: tests/test_nvidia_smi.py, through a stand-in
    nvidia-smi, as service.device_test_mode does)."""
    mode = devicetests.decide('auto', True, ['0'])
    assert mode.enabled and mode.environment == {'SANDCASTLE': '0'} and mode.gpus == ('0',)
    assert mode.describe() == ("cuda_device_tests='auto': CUDA and CPU device tests: 1 GPU(s) seen (0), the build "
                               "has CUDA; sets SANDCASTLE=0")
    without_cuda = devicetests.decide('auto', False, ['0'])
    assert not without_cuda.enabled and without_cuda.environment == {}
    with pytest.raises(PluginError, match='the build has no CUDA'):
        devicetests.decide(True, False, ['0'])
    off = service.device_test_mode(False, _never, {'CUDA_VISIBLE_DEVICES': '0'})  # nothing probed
    assert not off.enabled and off.environment == {}


def test_true_without_a_gpu_stops_in_one_line_that_says_why_none_is_seen():
    seen = "no GPU seen: CUDA_VISIBLE_DEVICES='7' names none of the 1 GPU(s) nvidia-smi lists"
    with pytest.raises(PluginError) as raised:
        devicetests.decide(True, None, [], seen)
    assert str(raised.value) == f'cuda_device_tests: is True, but the test step cannot run CUDA tests here: {seen}'
    assert devicetests.decide('auto', None, [], seen).reason == seen


def test_spread_over_slurm_nothing_is_probed_here_and_each_job_decides():
    for requested in (True, 'auto'):
        spread = service.device_test_mode(requested, _never, {}, on_this_node=False)
        assert not spread.enabled and spread.environment == {} and 'decided by each Slurm job' in spread.reason
    decision = service.job_decision('auto', True, {'SANDCASTLE': '1'})
    assert decision == devicetests.JobDecision('auto', True, ('SANDCASTLE',))  # the runtest line's own value stays
    assert devicetests.JobDecision.from_json(json.loads(json.dumps(decision.to_json()))) == decision
    assert service.job_decision(False, True, {}) is None and service.job_decision('auto', False, {}) is None
    with pytest.raises(PluginError):
        service.job_decision(True, False, {})  # True for a build without CUDA: refused before any job starts


def test_a_spread_cuda_build_whose_jobs_saw_no_gpu_is_warned_about():
    # gpus_per_job is 0 unless set: jobs on a partition that gives no GPU without --gres see none, and 'auto' runs
    # no CUDA test anywhere; the jobs' notes are what they decided (spread/workqueue.note_devices)
    mode = service.device_test_mode('auto', _never, {}, on_this_node=False)
    blind = {'enabled': False, 'gpus': [], 'reason': 'no GPU seen: nvidia-smi exited 6 (No devices were found)'}
    none_ran = {'ran': 0, 'failed': 0, 'skipped': 0}
    records = {f'test_{job}': replace(suite_record(Suite(f'test_{job}', cuda_counts=none_ran)), job=job)
               for job in ('7.node1.11', '8.node2.12')}
    merged, warnings, jobs = service.with_node_devices(mode, {'7.node1.11': blind, '8.node2.12': blind},
                                                       RunResult(), records)
    assert not merged.enabled and len(jobs) == 2
    assert warnings == ["none of the 2 Slurm job(s) saw a GPU, so the build's CUDA device tests did not run: ask the "
                        "jobs for GPUs (EB_PYTORCH_CUDA_SLURM_GPUS_PER_JOB, or the partition's own --gres in "
                        "EB_PYTORCH_CUDA_SLURM_EXTRA_OPTIONS)"]
    seen = dict(blind, enabled=True, gpus=['0'])
    _, warnings, _ = service.with_node_devices(mode, {'7.node1.11': seen, '8.node2.12': blind}, RunResult(), records)
    assert warnings == ['Slurm job 7 saw 1 GPU(s) and the build has CUDA, but 0 CUDA device tests ran in its 1 '
                        'suite(s)']


def test_the_runtest_lines_own_sandcastle_wins():
    mode = devicetests.decide('auto', True, ['0'])
    assert devicetests.suite_environment(mode, {'SANDCASTLE': '1'}) == {}
    assert devicetests.suite_environment(mode, {'OTHER': 'x'}) == {'SANDCASTLE': '0'}


@pytest.mark.parametrize('value', ['yes', 1, 0, 'True', None])
def test_the_parameter_takes_auto_true_or_false(value):
    if value is None:
        assert TestSettings.from_values({'cuda_device_tests': None}).cuda_device_tests == 'auto'
        return
    with pytest.raises(PluginError, match=r"cuda_device_tests must be 'auto', True or False"):
        TestSettings.from_values({'cuda_device_tests': value}, 'PyTorch.eb')


def test_the_dry_run_line_says_the_mode_and_what_decides_it():
    assert 'CUDA and CPU device tests, SANDCASTLE=0' in devicetests.planned('auto', True, ['8.0', '9.0'])
    assert 'cuda_compute_capabilities: 8.0, 9.0' in devicetests.planned('auto', True, ['8.0', '9.0'])
    assert 'stops before any suite runs' in devicetests.planned(True, True, [])
    assert 'the build has no CUDA' in devicetests.planned('auto', False, [])
    assert "upstream's SANDCASTLE=1" in devicetests.planned(False, True, [])


@pytest.mark.parametrize('classname, name, cuda', [
    ('nn.test_convolution.TestConvolutionNNDeviceTypeCUDA', 'test_conv_cudnn_nhwc_cuda_float32', True),
    ('test_ops.TestCommonCUDA', 'test_out_abs_cuda_float32', True),
    ('nn.test_convolution.TestConvolutionNNDeviceTypeCPU', 'test_conv_backend_cpu_float32', False),
    ('test_nn.TestNNDeviceTypeCUDA', 'test_LSTM_grad_and_gradgrad_cuda_float64', True),
    ('test_cuda_primary_ctx.TestCudaPrimaryCtx', 'test_cuda_primary_ctx', False),
    ('test_cuda.TestCuda', 'test_cuda_synchronize', False),  # test_cuda's own: not device-generic
    ('test_x.TestX', 'test_foo_cuda', True)])
def test_which_tests_are_device_generic_cuda_tests(classname, name, cuda):
    assert is_cuda_test(classname, name) is cuda


REPORT = b'''<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" tests="6">
<testcase classname="nn.test_convolution.TestConvolutionNNDeviceTypeCUDA" name="test_a_cuda_float32" time="0.1"/>
<testcase classname="nn.test_convolution.TestConvolutionNNDeviceTypeCUDA" name="test_b_cuda" time="0.1">
<failure message="RuntimeError: cuDNN error: CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED">x</failure></testcase>
<testcase classname="nn.test_convolution.TestConvolutionNNDeviceTypeCUDA" name="test_c_cuda" time="0">
<skipped type="pytest.skip" message="cudnn too old">s</skipped></testcase>
<testcase classname="nn.test_convolution.TestConvolutionNNDeviceTypeCPU" name="test_a_cpu_float32" time="0.1"/>
<testcase classname="nn.test_convolution.TestConvolutionNNDeviceTypeCPU" name="test_b_cpu" time="0.1"/>
<testcase name="test_d_cuda" classname="nn.test_convolution.TestConvolutionNNDeviceTypeCUDA" time="0.1"/>
</testsuite></testsuites>'''


def test_cuda_counts_of_a_suites_reports_and_their_way_into_the_reports():
    assert cuda_counts([REPORT]) == {'ran': 3, 'failed': 1, 'skipped': 1}
    rerun = REPORT.replace(b'<failure message="RuntimeError: cuDNN error: CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED">x'
                           b'</failure>', b'')
    assert cuda_counts([REPORT, rerun]) == {'ran': 3, 'failed': 0, 'skipped': 1}  # a pass on the rerun wins
    assert cuda_counts([]) is None
    counts = {'ran': 0, 'failed': 0, 'skipped': 2}
    result = RunResult({'nn/test_convolution': Suite('nn/test_convolution', cuda_counts=counts)})
    verdict = judge(result, Policy(0, []))
    mode = devicetests.decide('auto', True, ['0'])
    warnings, failing = service.cuda_test_warnings(result, mode)
    assert len(warnings) == 1 and '0 CUDA device tests ran (2 skipped)' in warnings[0] and failing is None
    assert service.cuda_test_warnings(result, devicetests.decide(True, True, ['0']))[1] == warnings[0]
    outcome = service.StepOutcome(result, verdict, detect_context(()), device_tests=mode, warnings=warnings)
    texts = service.report_texts(outcome)
    data = json.loads(texts['pytorch-test-results.json'])
    assert data['cuda_tests'] == {'ran': 0, 'failed': 0, 'skipped': 2}
    assert data['cuda_device_tests']['enabled'] is True and data['warnings'] == warnings
    assert data['suites'][0]['cuda_counts'] == {'ran': 0, 'failed': 0, 'skipped': 2}
    markdown = texts['pytorch-test-summary.md']
    assert 'CUDA device tests: 0 ran, 0 failed, 2 skipped' in markdown and '**WARNING**' in markdown
    from eb_pytorch_cuda.testsuite.results.saved import validate_saved
    validate_saved('pytorch-test-results.json', data)  # report reads it back


def test_cuda_counts_from_a_plain_log_of_the_real_h200_run_and_the_2_6_cpu_run():
    """Without XML (`report LOG`), the pytest -v lines count: the recorded H200 run (docs/validation/
    h200-2026-12-01-eb, unpatched: 10 cuDNN convolution tests on CUDA, all failing with the loader error) and
    Debian 2.6.0's plain CPU run (tests/data/pytorch26-plain: suites with -v lines, none on CUDA: 0, not unknown)."""
    import os
    from eb_pytorch_cuda.testsuite.results.logparse import parse_log_file
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    h200 = parse_log_file(os.path.join(repo, 'docs', 'validation', 'h200-2026-12-01-eb', 'unpatched',
                                       'output-unpatched.log'))
    assert h200.suites['nn/test_convolution'].cuda_counts == {'ran': 10, 'failed': 10, 'skipped': 0}
    cpu = parse_log_file(os.path.join(repo, 'tests', 'data', 'pytorch26-plain', 'plain.log'))
    assert cpu.suites['test_type_info'].cuda_counts == {'ran': 0, 'failed': 0, 'skipped': 0}
    assert cpu.suites['test_cuda_primary_ctx'].cuda_counts is None  # 0 tests collected: no -v line at all


def test_the_log_counts_do_not_depend_on_where_the_blocks_are_cut():
    import os
    from eb_pytorch_cuda.testsuite.results.logparse import parse_log_file
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'docs', 'validation',
                        'h200-2026-12-01-eb', 'unpatched', 'output-unpatched.log')
    for block in (64, 1000, 4096, 1 << 20):
        assert parse_log_file(path, block=block).suites['nn/test_convolution'].cuda_counts == \
            {'ran': 10, 'failed': 10, 'skipped': 0}, block


@pytest.mark.parametrize('cpus, gib, gpus, slots', [
    (2, 22.0, (), 1),  # the project's VM: what it always ran
    (16, 120.0, (), 8),  # the H200 node's CPUs and memory
    (16, 120.0, (139.8,), 8),  # and its one GPU: 11 batches fit its memory, the CPUs allow 8
    (64, 500.0, (16.0, 16.0), 2),  # small GPUs bound it
    (128, 2000.0, (), 16),  # at most MAX_SLOTS
    (1, None, (), 1), (16, 3.0, (), 1)])
def test_auto_batches_come_from_the_node(cpus, gib, gpus, slots):
    from eb_pytorch_cuda.testsuite.run.node import NodeSize
    size = NodeSize(cpus, gib, gpus)
    assert size.slots() == slots
    assert size.describe().startswith(f'{slots} batch(es) at a time (parallel_test_suites=auto: {cpus} CPUs')


def test_auto_is_the_default_and_a_count_stays_a_count(tmp_path):
    from eb_pytorch_cuda.testsuite.run.node import available_gib
    assert TestSettings().parallel_test_suites == 'auto'
    assert TestSettings.from_values({'parallel_test_suites': 'auto'}).parallel_test_suites == 'auto'
    with pytest.raises(PluginError, match='parallel_test_suites must be an integer >= 1'):
        TestSettings.from_values({'parallel_test_suites': 'many'})
    said = []
    assert service.batch_slots(3, {}, said.append) == 3 and said == []
    assert service.batch_slots('auto', {'CUDA_VISIBLE_DEVICES': ''}, said.append) >= 1 and len(said) == 1
    meminfo = tmp_path / 'meminfo'
    meminfo.write_text('MemTotal:       24000000 kB\nMemAvailable:   12582912 kB\n')
    assert available_gib(str(meminfo)) == 12.0
    assert available_gib(str(tmp_path / 'none')) is None


def test_a_required_device_mode_in_the_results_fails_the_report_as_the_step(tmp_path):
    """cuda_device_tests=True, a GPU seen and 0 CUDA tests run: the step's verdict is FAIL for that alone; the
    results JSON carries the mode in its terms, so `report` on it alone fails it with the same reason."""
    result = RunResult({'nn/test_convolution': Suite('nn/test_convolution',
                                                     cuda_counts={'ran': 0, 'failed': 0, 'skipped': 2})})
    mode = devicetests.decide(True, True, ['0'])
    verdict, warnings = service.judged(result, Policy(0, []), mode)
    assert not verdict.passed and verdict.reasons[0].startswith('cuda_device_tests=True: the test step saw 1 GPU')
    terms = JudgedTerms.of(Policy(0, []), (), 0, DeviceTerms(mode.requested, mode.enabled, mode.gpus, mode.reason))
    outcome = service.StepOutcome(result, verdict, detect_context(()), device_tests=mode, warnings=warnings,
                                  terms=terms)
    path = tmp_path / 'pytorch-test-results.json'
    path.write_text(service.report_texts(outcome)['pytorch-test-results.json'])
    done = run_main('report', path, check_rc=1)
    assert done.stdout == f'terms: as judged by the build (budget 0, no known failures)\n{to_text(result, verdict)}\n'
    again = run_main('report', path, '--max-failed-tests', '5', check_rc=1)  # another budget: still required
    assert again.stdout.rstrip().endswith(f'verdict: FAIL: {verdict.reasons[0]}')
