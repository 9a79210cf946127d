"""The H200's kept records of benchmarks/bench_gpu_node.py (docs/validation/, docs/benchmarks.md), replayed on a
CPU: each record's figures, its plain run_test.py log or its runs of ours read again by the benchmark's own readers.

The node: 16 cores, one H200, torch 2.11.0+cu130, Debian 2.6.0's run_test.py, the GPU hidden for the CPU cases.
- conv: nn/test_convolution's CUDA set without the two 64-bit-indexing tests, plain, ours serially and ours with
  the node's count: the same results each way, ours serial within 1.1x.
- cpu: 22 CPU suites in one plain call, 1413.0 s.  run_test.py runs the files of its serial list (test_show_pickle,
  test_sort_and_select, test_tensor_creation_ops) alone before anything else, 862 s there, and our runner runs them
  alone too (run/batches.plan_batches): no run of ours can take under 0.61x of this selection.  test_tensor_creation_ops
  alone took 843 s in 79 pytest sessions (1 + 3 for each of its 26 failing tests: 2.6's run_test_retries) while its
  tests' own times add up to 16 s; the 26 failures are scipy's (`get_window` refuses Nx=0).
- cpu-pool: the 19 of them off the serial list, plain 541.4 s (reused by every later run of ours).  Without a bound
  on each suite process's threads (torch takes one per core), ours took 0.48x and, with test_masked cut in two,
  0.80x; the same code on another machine 0.59x.  With run/plan's OMP_NUM_THREADS rule (1 there: 16 CPUs over 8
  calls of up to 3 suites) 0.36x to 0.46x on two machines, and test_masked about a tenth of its time.
"""

import gzip
import importlib.util
import json
import os
import re
import tarfile
from datetime import datetime

import pytest

from eb_pytorch_cuda.testsuite.run.plan import HERE_PIECE_SECONDS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VALIDATION = os.path.join(ROOT, 'docs', 'validation')
RUNNING = re.compile(r'^Running (\S+) 1/1 \.\.\. \[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+)\]$', re.M)
SERIAL_LIST = {'test_show_pickle', 'test_sort_and_select', 'test_tensor_creation_ops'}
POOL_FAILING = {'test_dlpack': 4, 'test_license': 1, 'test_type_promotion': 1, 'test_view_ops': 1}
OMP_LINE = ('== OMP_NUM_THREADS=1 for each suite process (16 CPUs over 8 run_test.py calls of up to 3 suites; '
            'set OMP_NUM_THREADS to choose)')
BATCHES = '== 8 batch(es) at a time (parallel_test_suites=auto: 16 CPUs, 125 GiB available; 2 CPUs, 4 GiB a batch)'

# record: (case, {run: (seconds, ratio to the plain call)}), as docs/benchmarks.md's tables give them
FIGURES = {
    'h200-2026-12-02-eb-complete': ('conv', {'plain': (80.3, 1.0), 'ours_serial': (81.4, 1.01),
                                             'ours_pieces': (76.7, 0.96)}),
    'h200-2026-12-02-bench-cpu': ('cpu', {'plain': (1413.0, 1.0)}),
    'h200-2026-12-02-bench-cpu-pool': ('cpu-pool', {'plain': (541.4, 1.0)}),
    'h200-2026-12-03-bench-cpu-pool-ours': ('cpu-pool', {'plain': (541.4, 1.0), 'ours_auto': (257.6, 0.48),
                                                         'ours_second': (433.5, 0.8)}),
    'h200-2026-12-03-bench-cpu-pool-ours-rerun': ('cpu-pool', {'plain': (541.4, 1.0), 'ours_auto': (319.2, 0.59)}),
    'h200-2026-12-03-bench-cpu-pool-threads': ('cpu-pool', {'plain': (541.4, 1.0), 'ours_auto': (233.2, 0.43),
                                                            'ours_second': (247.1, 0.46)}),
    'h200-2026-12-03-bench-cpu-pool-threads-rerun': ('cpu-pool', {'plain': (541.4, 1.0), 'ours_auto': (197.2, 0.36),
                                                                  'ours_second': (233.5, 0.43)}),
}
# record: (its plain log, kept gzipped, the harness's own closing figure)
PLAIN_LOGS = {'h200-2026-12-02-bench-cpu': ('cpu-plain.log', 1403.3),
              'h200-2026-12-02-bench-cpu-pool': ('cpu-pool-plain.log', 531.07)}
# record: (runs of ours kept in bench-runs.tar.gz, whether the thread rule was in the code it ran)
OUR_RUNS = {'h200-2026-12-03-bench-cpu-pool-ours': (('auto', 'second'), False),
            'h200-2026-12-03-bench-cpu-pool-ours-rerun': (('auto',), False),
            'h200-2026-12-03-bench-cpu-pool-threads': (('auto', 'second'), True),
            'h200-2026-12-03-bench-cpu-pool-threads-rerun': (('auto', 'second'), True)}


def _figures(record):
    """A record's bench-gpu-node.json, as the benchmark wrote it."""
    with open(os.path.join(VALIDATION, record, 'bench-gpu-node.json')) as handle:
        return json.load(handle)


def _case(record):
    return _figures(record)['cases'][FIGURES[record][0]]


def _bench():
    """benchmarks/bench_gpu_node.py, whose readers made the records' rows (a script, not a package)."""
    spec = importlib.util.spec_from_file_location('bench_gpu_node', os.path.join(ROOT, 'benchmarks',
                                                                                 'bench_gpu_node.py'))
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


@pytest.fixture(scope='module')
def plain_logs(tmp_path_factory):
    """{record: (path, text)} of the plain logs, unpacked from their .gz (kept gzipped: up to 1 MB of text)."""
    logs = {}
    for record, (name, _cost) in PLAIN_LOGS.items():
        path = tmp_path_factory.mktemp('bench-log') / name
        with gzip.open(os.path.join(VALIDATION, record, f'{name}.gz'), 'rb') as packed:
            path.write_bytes(packed.read())
        logs[record] = (str(path), path.read_text(errors='replace'))
    return logs


def _unpacked_runs(record, where):
    """{run: (its step output, its results JSON path)} of a record's runs of ours, from its bench-runs.tar.gz."""
    with tarfile.open(os.path.join(VALIDATION, record, 'bench-runs.tar.gz')) as packed:
        packed.extractall(where, filter='data')
    found = {}
    for run in OUR_RUNS[record][0]:
        with open(where / f'cpu-pool-{run}' / 'bench-stdout.txt') as handle:
            found[run] = (handle.read(), str(where / f'cpu-pool-{run}' / 'pytorch-test-results.json'))
    return found


@pytest.mark.parametrize('record', sorted(FIGURES))
def test_record_figures_are_the_documented_ones_with_the_same_results(record):
    figures = _figures(record)
    case, expected = FIGURES[record]
    assert figures['cpus'] == 16 and sorted(figures['cases']) == [case]
    runs = figures['cases'][case]
    assert {run: (row['seconds'], row['ratio']) for run, row in runs.items()} == expected
    assert all(row['same_results'] for run, row in runs.items() if run != 'plain')


def test_conv_case_results_are_the_330_cuda_tests_each_way():
    conv = _case('h200-2026-12-02-eb-complete')
    assert all(run['same_results'] for run in conv.values())
    assert conv['plain']['results'] == {'nn/test_convolution': [330, 0, 229, []]}
    assert conv['ours_serial']['ratio'] <= 1.1


def test_cpu_case_plain_run_has_22_suites_five_failing():
    plain = _case('h200-2026-12-02-bench-cpu')['plain']
    assert len(plain['results']) == 22
    failing = {suite: len(row[3]) for suite, row in plain['results'].items() if row[1]}
    assert failing == {'test_tensor_creation_ops': 26, **POOL_FAILING}
    assert all(re.match(r'TestTensorCreationCPU\.test_(kaiser|signal_windows?_functions)', test)
               for test in plain['results']['test_tensor_creation_ops'][3])


def test_pool_case_is_the_cpu_case_less_the_serial_list_with_its_results():
    plain = _case('h200-2026-12-02-bench-cpu-pool')['plain']
    assert sorted(plain['results']) == sorted(set(_bench().CPU_SUITES) - SERIAL_LIST)
    cpu = _case('h200-2026-12-02-bench-cpu')['plain']['results']
    assert plain['results'] == {suite: cpu[suite] for suite in plain['results']}
    later = _case('h200-2026-12-03-bench-cpu-pool-ours')['plain']
    assert later['seconds'] == plain['seconds'] and later['reused_from'] == 'bench-gpu-node.json'
    assert {suite: len(row[3]) for suite, row in later['results'].items() if row[1]} == POOL_FAILING
    assert all(_case(record)['plain'] == later for record in OUR_RUNS)


@pytest.mark.parametrize('record', sorted(PLAIN_LOGS))
def test_plain_log_reads_as_the_benchmark_recorded_it(record, plain_logs):
    path, text = plain_logs[record]
    assert _bench().results_of_log(path) == _case(record)['plain']['results']
    assert f"Running test batch 'tests to run' cost {PLAIN_LOGS[record][1]} seconds" in text


def test_cpu_plain_log_runs_its_serial_list_alone_first_for_862_s(plain_logs):
    """The serial list bounds every run that honours it (0.61x); the restarts of failing tests fill it."""
    text = plain_logs['h200-2026-12-02-bench-cpu'][1]
    assert re.search(r'Serial tests \(3\):\n    test_show_pickle 1/1\n    test_sort_and_select 1/1\n'
                     r'    test_tensor_creation_ops 1/1\n  Parallel tests \(19\):', text)
    starts = [(suite, datetime.fromisoformat(stamp)) for suite, stamp in RUNNING.findall(text)]
    assert [suite for suite, _ in starts[:4]] == ['test_show_pickle', 'test_sort_and_select',
                                                  'test_tensor_creation_ops', 'test_complex']
    tensor_creation = (starts[3][1] - starts[2][1]).total_seconds()
    serial_list = (starts[3][1] - starts[0][1]).total_seconds()
    assert round(tensor_creation) == 843 and round(serial_list) == 862
    assert round(serial_list / 1413.0, 2) == 0.61
    segment = text[text.index('Running test_tensor_creation_ops 1/1'):text.index('Running test_complex 1/1')]
    assert segment.count('test session starts') == 79 == 1 + 3 * 26
    assert segment.count('Retrying single test...') == 2 * 26
    own = sum(float(seconds) for seconds in re.findall(
        r'^test_tensor_creation_ops\.py::\S+ (?:PASSED|FAILED|SKIPPED|RERUN)\S* \[(\d+\.\d+)s\]', segment, re.M))
    assert round(own) == 16
    assert 'ValueError: Parameter Nx=0 is not a positive integer' in segment


def test_pool_plain_log_spends_191_s_in_serial_sessions_then_test_masked(plain_logs):
    """Each file's `-m serial` session one at a time (191 s), then the pool of 3, in which test_masked's one
    session (240.1 s of tests) bounds any run that keeps it whole."""
    text = plain_logs['h200-2026-12-02-bench-cpu-pool'][1]
    assert 'Serial tests (0):\n  Parallel tests (19):' in text
    starts = [(suite, datetime.fromisoformat(stamp)) for suite, stamp in RUNNING.findall(text)]
    assert len(starts) == 38  # each file twice: its -m serial session, then its pool session
    assert round((starts[19][1] - starts[0][1]).total_seconds()) == 191
    assert '154 passed, 40 skipped in 240.10s (0:04:00)' in text


@pytest.mark.parametrize('record', sorted(OUR_RUNS))
def test_our_runs_read_as_recorded_on_8_batches_with_the_plain_results(record, tmp_path):
    case = _case(record)
    rule = OUR_RUNS[record][1]
    bench = _bench()
    for run, (output, results) in _unpacked_runs(record, tmp_path).items():
        assert BATCHES in output
        assert (OMP_LINE in output) if rule else ('OMP_NUM_THREADS' not in output)
        assert bench.results_of_json(results) == case[f'ours_{run}']['results'] == case['plain']['results']
        with open(results) as handle:
            data = json.load(handle)
        assert data['verdict'] == 'pass' and data['failed_tests'] == 7 and data['cuda_tests']['ran'] == 0
        if rule:  # test_masked about a tenth of its time without the rule: under a piece's floor, never cut
            assert 'run as pieces' not in output
            assert 22 < data['suite_seconds']['test_masked'] < 27 < HERE_PIECE_SECONDS
            assert sum(data['suite_seconds'].values()) < 101


def test_without_the_thread_rule_the_second_run_cut_test_masked_into_slower_pieces(tmp_path):
    """Over a suite's share (the larger of 120 s and 396 s over 8 slots), test_masked ran as two shards side by
    side, which took 844.5 s of pytest time together against 194 s whole."""
    runs = _unpacked_runs('h200-2026-12-03-bench-cpu-pool-ours', tmp_path)
    auto, second = runs['auto'][0], runs['second'][0]
    assert 'run as pieces' not in auto
    assert '== 1 long suite(s) run as pieces (2 in all): test_masked' in second
    assert 'test_masked#shard1/2 passed' in second and 'test_masked#shard2/2 passed' in second
    seconds = {}
    for run in runs:
        with open(runs[run][1]) as handle:
            seconds[run] = json.load(handle)['suite_seconds']
    assert seconds['auto']['test_masked'] == 193.97 and seconds['second']['test_masked'] == 844.5
    total = sum(seconds['auto'].values())
    assert round(total) == 396 and seconds['auto']['test_masked'] > max(HERE_PIECE_SECONDS, total / 8)


def test_suite_threads_benchmark_here_four_processes_on_two_cores():
    """benchmarks/bench_suite_threads.py on a 2-core VM: test_masked's mask_layout tests, one process 9.1 s (8.9 s
    with one thread); four side by side 139.3 s with torch's default threads, 19.3 s with OMP_NUM_THREADS=1."""
    with open(os.path.join(ROOT, 'benchmarks', 'data', 'suite-threads-2cpu-2026-12-03.json')) as handle:
        measured = json.load(handle)
    runs = measured['runs']
    assert measured['cpus'] == 2 and measured['same_summaries']
    assert runs['4 side by side, default threads']['seconds'] == 139.3 and runs['4 side by side, the rule'] == {
        'seconds': 19.3, 'threads': 1, 'summaries': ['104 passed, 58 skipped, 50 deselected'] * 4}
    assert runs['alone, default threads']['seconds'] == 9.1 and runs['alone, the rule']['seconds'] == 8.9


def _probe_cuda():
    """tools/validate-gpu/probe_cuda.py, whose choose() picks the gpu case's selection on the node."""
    spec = importlib.util.spec_from_file_location('probe_cuda', os.path.join(ROOT, 'tools', 'validate-gpu',
                                                                             'probe_cuda.py'))
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)
    return probe


def test_the_h200_cuda_probe_record_replayed_chooses_no_suite_that_outlasts_the_session():
    """The H200's probe of 12 CUDA candidate suites (2026-12-05, 75.4 s, `-k '(cuda) and not 64bit_indexing'`):
    test_binary_ufuncs, test_unary_ufuncs and test_foreach are estimated at 1067 to 3820 s, test_transformers at
    429 s, the rest at 13 to 294 s; test_dlpack's sample failed, test_linalg selected no test.  The rule the record
    ran under let test_binary_ufuncs in (an estimated 1962 s plain call, past the device session); choose() replayed
    on the same probes leaves out every suite over half the target and says the 1000 s target is not reached: the
    pool of 3 runs test_transformers alone in one process, so the estimate is the convolution set's 80.3 s plus its
    428.9 s whatever else joins, and no 10-minute target is reachable from these candidates."""
    with open(os.path.join(VALIDATION, 'h200-2026-12-05-probe-cuda', 'gpu-selection.json')) as handle:
        record = json.load(handle)
    assert record['suites'] == ['nn/test_convolution', 'test_transformers', 'test_binary_ufuncs']
    assert record['estimate']['plain'] == 1962.0 and record['target'] == 1000.0
    probe = _probe_cuda()
    probes = {suite: {**found, 'tests': record['sample_tests'][suite]} for suite, found in record['probes'].items()}
    assert probe.failed(probes['test_dlpack']) and probes['test_linalg']['selected'] == 0
    long_ones = {suite for suite in probes if (probe.estimate(probes[suite], probe.EXCLUDE_TIERS[0]) or 0) > 1000}
    assert long_ones == {'test_binary_ufuncs', 'test_unary_ufuncs', 'test_foreach'}
    suites, tier, figures, reached = probe.choose(probes, probe.FIXED, 1000.0)
    assert not reached and tier == 0
    assert suites[:3] == ['nn/test_convolution', 'test_transformers', 'test_sparse']
    assert not long_ones & set(suites) and {'test_dlpack', 'test_linalg'}.isdisjoint(suites)
    assert all(figures['suites'][suite] <= 500 for suite in suites)
    assert figures['plain'] == round(80.3 + figures['suites']['test_transformers'], 1)  # the pool's longest process
    # no plain call of 10 minutes or more is within these candidates' reach under the rule: 509 s at best
    for target in (600.0, 860.0, 1200.0):
        _, _, figures, reached = probe.choose(probes, probe.FIXED, target)
        assert not reached and figures['plain'] <= 509.2


def test_earlier_probes_are_taken_as_probed_and_new_ones_replace_them(tmp_path):
    """probe_cuda.py --probes-from: the kept H200 probe's suites count as probed (so a session probes only new
    candidates, then has the time to run the case it chose); a suite probed again is the new probe's, and a file
    that holds no probe record is refused in one line naming it."""
    probe = _probe_cuda()
    kept = os.path.join(VALIDATION, 'h200-2026-12-05-probe-cuda', 'gpu-selection.json')
    with open(kept) as handle:
        record = json.load(handle)
    earlier = probe.recorded_probes([kept], {'test_complex'})
    assert list(earlier) == [suite for suite in record['probes'] if suite != 'test_complex']
    for suite, found in earlier.items():
        assert found['tests'] == record['sample_tests'][suite] and 'failed' not in found
        assert probe.estimate(found, probe.EXCLUDE_TIERS[0]) == record['estimate']['suites'][suite]
    assert probe.failed(earlier['test_dlpack'])
    bad = tmp_path / 'gpu-selection.json'
    bad.write_text('{"suites": []}')
    with pytest.raises(SystemExit) as refused:
        probe.recorded_probes([str(bad)], set())
    assert str(refused.value) == f"probe_cuda: {bad}: no probe record (KeyError: 'probes')"


def test_the_h100_cuda_probe_record_replayed_and_the_selection_kept_from_it():
    """The H100's probe of the ten suites the H200's had not probed (2026-12-05, 75.4 s): test_sparse_csr,
    test_ops_gradients, test_modules and test_decomp are estimated at 810 to 18738 s, five select no test or fail to
    import.  choose() replayed under its half-target rule (a suite a first run of ours cannot cut) reaches 443 s of
    the 740 s target, as the record says.  The kept selection (validation/gpu-selection-2026-12-05/) is for a round
    whose run of ours plans with the plain call's times (bench_gpu_node.py --seed-from-plain): every suite the probe
    estimated under 900 s with tests selected, an estimated plain call of 890.6 s (the convolution set, then the
    pool of 3's longest process), past the issue's 10 minutes."""
    with open(os.path.join(VALIDATION, 'h100-2026-12-05-probe-cuda', 'gpu-selection.json')) as handle:
        record = json.load(handle)
    probe = _probe_cuda()
    probes = {suite: {**found, 'tests': record['sample_tests'][suite]} for suite, found in record['probes'].items()}
    suites, tier, figures, reached = probe.choose(probes, probe.FIXED, record['target'])
    assert suites == record['suites'] == ['nn/test_convolution', 'test_sparse', 'test_masked']
    assert figures['plain'] == record['estimate']['plain'] == 443.0 and tier == 0 and not reached
    times = {suite: probe.estimate(found, probe.EXCLUDE_TIERS[0]) for suite, found in probes.items()}
    assert {suite for suite, found in probes.items() if not found['selected']} == \
        {'test_nestedtensor', 'test_autograd', 'test_expanded_weights', 'test_optim', 'test_meta'}
    with open(os.path.join(VALIDATION, 'gpu-selection-2026-12-05', 'gpu-selection.json')) as handle:
        kept = json.load(handle)
    usable = [suite for suite, found in probes.items() if found['selected'] and not probe.failed(found)
              and times[suite] < 900]
    assert kept['suites'] == list(probe.FIXED) + usable and kept['expr'] == record['expr']
    assert kept['estimate']['suites'] == {suite: ({**probe.FIXED, **times})[suite] for suite in kept['suites']}
    assert probe.plain_estimate(list(probe.FIXED.values()), [times[suite] for suite in usable]) == 890.6


H100_ROUND = 'h100-2026-12-06-bench-gpu'  # plain and ours side by side, one device round
H100_THREADS = 'h100-2026-12-06-bench-gpu-threads'  # ours again, after the alone-suite thread fix, a later machine
TRANSFORMERS_FAILING = ['TestSDPACudaOnlyCUDA.test_cudnn_attention_fail_d128_cuda',
                        'TestSDPACudaOnlyCUDA.test_fused_sdp_choice_type_dense_cuda']


def _gpu_runs(record, where):
    """{name: text} of a gpu-case record's bench-runs.tar.gz: the plain log and each run of ours' step output."""
    with tarfile.open(os.path.join(VALIDATION, record, 'bench-runs.tar.gz')) as packed:
        packed.extractall(where, filter='data')
    return where


def _plain_call(record, kept_selection, plain_results, where):
    """A gpu-case record's plain call, checked: its gpu-selection.json is the one kept in kept_selection (a
    directory of docs/validation), and its log reads as plain_results; (the record's runs extracted under where,
    the plain log's text, the selection)."""
    with open(os.path.join(VALIDATION, record, 'gpu-selection.json')) as handle:
        selection = json.load(handle)
    with open(os.path.join(VALIDATION, kept_selection, 'gpu-selection.json')) as handle:
        assert json.load(handle) == selection
    runs = _gpu_runs(record, where)
    assert _bench().results_of_log(str(runs / 'gpu-plain.log')) == plain_results
    return runs, (runs / 'gpu-plain.log').read_text(errors='replace'), selection


def test_the_h100_gpu_round_ran_the_kept_selection_plain_and_ours_with_the_same_results(tmp_path):
    """The H100 (16 cores, torch 2.11.0+cu130, Debian 2.6.0's run_test.py), 2026-12-06: the four CUDA suites of
    validation/gpu-selection-2026-12-06/ (gradgrad tests out), plain 552.2 s, ours planned with the plain call's
    JUnit times 499.3 s (0.9x), the same per-suite results (10357 CUDA tests ran, two of test_transformers' fail on
    this card each way).  The plain call is under the issue's 10 minutes (its estimate was 775 s)."""
    figures = _figures(H100_ROUND)
    gpu = figures['cases']['gpu']
    assert figures['cpus'] == 16 and sorted(figures['cases']) == ['gpu']
    assert {run: (row['seconds'], row['ratio']) for run, row in gpu.items()} == {'plain': (552.2, 1.0),
                                                                                 'ours_auto': (499.3, 0.9)}
    assert gpu['ours_auto']['same_results'] and gpu['ours_auto']['previous_from'] == 'gpu-plain-results.json'
    assert gpu['plain']['results']['test_transformers'][3] == TRANSFORMERS_FAILING
    assert gpu['plain']['seconds'] < 600
    runs, plain_log, selection = _plain_call(H100_ROUND, 'gpu-selection-2026-12-06', gpu['plain']['results'],
                                             tmp_path)
    assert sorted(gpu['plain']['results']) == sorted(selection['suites'])
    bench = _bench()
    assert "Running test batch 'tests to run' cost 537.97 seconds" in plain_log
    # the serial list's nn/test_convolution first and alone, at torch's own thread count: 55 s of tests
    assert '330 passed, 261 skipped, 576 deselected in 55.06s' in plain_log
    assert bench.results_of_json(str(runs / 'gpu-auto' / 'pytorch-test-results.json')) == gpu['plain']['results']


def _ours_step(where):
    output = (where / 'gpu-auto' / 'bench-stdout.txt').read_text()
    with open(where / 'gpu-auto' / 'pytorch-test-results.json') as handle:
        return output, json.load(handle)


def test_a_suite_run_alone_at_one_thread_took_188_s_and_at_torchs_own_count_41_s(tmp_path):
    """What the records show of the thread rule on a GPU node.  In the round, every suite process of ours got
    OMP_NUM_THREADS=1 (16 CPUs over 6 calls of up to 3), nn/test_convolution too, which run_test.py's serial list
    makes run alone after the others: 188.5 s, against 55 s of tests in the plain call (its CUDA tests compare with
    references computed on the CPU).  Ours again on the next H100 machine, with a suite run alone at torch's own
    count and a piece or a one-suite call at CPUs // calls (2): the convolution set 41 s, the run 319.4 s, 0.58x of
    the round's plain call with the same per-suite results.  Not side by side in one round: the next session's
    round, on a selection whose plain call passes 10 minutes (docs/benchmarks.md)."""
    round_ = _gpu_runs(H100_ROUND, tmp_path / 'round')
    again = _gpu_runs(H100_THREADS, tmp_path / 'threads')
    before, before_results = _ours_step(round_)
    after, after_results = _ours_step(again)
    assert '== OMP_NUM_THREADS=1 for each suite process (16 CPUs over 6 run_test.py calls of up to 3 suites' in before
    assert ('== OMP_NUM_THREADS for each suite process: 2 in a piece or a call of one suite, 1 in a call of 3 or more '
            "(16 CPUs over 6 run_test.py calls); torch's own count for the suites run alone") in after
    for output in (before, after):  # the convolution set last, alone, once the 8 other units had ended
        assert re.search(r'still running after 5m00s: nn/test_convolution \(\d+s\); 8/9 suites done', output)
        assert '== 2 long suite(s) run as pieces (7 in all): test_ops_gradients, test_transformers' in output
    assert before_results['suite_seconds']['nn/test_convolution'] == 188.53
    assert after_results['suite_seconds']['nn/test_convolution'] < 60
    plain = _figures(H100_ROUND)['cases']['gpu']['plain']
    ours = _figures(H100_THREADS)['cases']['gpu']['ours_auto']
    assert ours['seconds'] == 319.4 and round(ours['seconds'] / plain['seconds'], 2) == 0.58
    assert ours['results'] == plain['results'] and ours['previous_from'] == 'gpu-plain-results.json'
    assert _bench().results_of_json(str(again / 'gpu-auto' / 'pytorch-test-results.json')) == plain['results']
    for results in (before_results, after_results):
        assert results['verdict'] == 'pass' and results['cuda_tests'] == {'ran': 10357, 'failed': 2, 'skipped': 4966}


GRADGRAD_ROUND = 'h100-2026-12-06-bench-gpu-gradgrad'  # plain and ours side by side, one device round
OOM_TEST = 'TestBwdGradientsCUDA.test_fn_grad_acos_cuda_float64'


def test_the_gradgrad_round_passes_10_minutes_plain_and_ours_took_058x_with_one_more_failure(tmp_path):
    """The H100 (16 cores, torch 2.11.0+cu130, Debian 2.6.0's run_test.py), 2026-12-06, plain and ours in one
    device round on validation/gpu-selection-2026-12-06-with-gradgrad/: plain 659.7 s (the issue's 10 minutes
    passed), ours planned with the plain call's JUnit times 383.1 s (0.58x).  Not the same results: one test more
    failed in ours, test_ops_gradients' acos gradcheck, out of GPU memory (the next test)."""
    figures = _figures(GRADGRAD_ROUND)
    gpu = figures['cases']['gpu']
    assert figures['cpus'] == 16 and sorted(figures['cases']) == ['gpu']
    assert {run: (row['seconds'], row['ratio']) for run, row in gpu.items()} == {'plain': (659.7, 1.0),
                                                                                 'ours_auto': (383.1, 0.58)}
    assert gpu['plain']['seconds'] >= 600 and not gpu['ours_auto']['same_results']
    plain, ours = gpu['plain']['results'], gpu['ours_auto']['results']
    assert {suite for suite in plain if plain[suite] != ours[suite]} == {'test_ops_gradients'}
    assert plain['test_ops_gradients'] == [1176, 0, 1390, []]
    assert ours['test_ops_gradients'] == [1175, 1, 1390, [OOM_TEST]]
    assert plain['test_transformers'][3] == TRANSFORMERS_FAILING
    runs, plain_log, _ = _plain_call(GRADGRAD_ROUND, 'gpu-selection-2026-12-06-with-gradgrad', plain, tmp_path)
    bench = _bench()
    assert "Running test batch 'tests to run' cost 649.59 seconds" in plain_log
    assert f"test_ops_gradients.py::{OOM_TEST.replace('.', '::')} PASSED" in plain_log
    output, results = _ours_step(runs)
    assert bench.results_of_json(str(runs / 'gpu-auto' / 'pytorch-test-results.json')) == ours
    assert ('== 6 batch(es) at a time (parallel_test_suites=auto: 16 CPUs, 125 GiB available, 1 GPU(s) of 80 GiB; '
            '2 CPUs, 4 GiB, 12 GiB of GPU a batch)') in output
    assert '== 2 long suite(s) run as pieces (9 in all): test_ops_gradients, test_transformers' in output
    assert results['unknown_failures'][0] == {'suite': 'test_ops_gradients', 'test': OOM_TEST}


def test_in_the_gradgrad_round_ours_oversubscribed_the_gpu_and_the_harness_did_not_retry(tmp_path):
    """Why ours differed: 6 calls at a time on one 80 GiB GPU by the node rule's 12 GiB a batch, while two of the
    suite processes then held 37.34 and 34.95 GiB: the acos gradcheck of piece 4/7 of test_ops_gradients found
    27.75 MiB free (torch.OutOfMemoryError).  No process had a cap: run_test.py sets NUM_PARALLEL_PROCS, from
    which common_utils caps a process, after it spawned its pool, so a call's first 3 suites never see it
    (tests/test_gpu_share.py); each suite process of a call beside others is now capped at the share of one call
    (run/gpu_share).  The retry bound held on the GPU node: 2.6's two 'Retrying single test...' sessions each ended
    before collecting (the no-retries plugin), and the piece went on through the rest of its tests."""
    with tarfile.open(os.path.join(VALIDATION, GRADGRAD_ROUND, 'ours-ops-gradients-pieces.tar.gz')) as packed:
        packed.extractall(tmp_path, filter='data')
    output = tmp_path / 'bench' / 'gpu-auto' / 'output'
    logs = {path.name: path.read_text(errors='replace') for path in output.glob('test_ops_gradients#shard*.7.log')}
    assert len(logs) == 7
    assert [name for name, text in logs.items() if 'OutOfMemoryError' in text] == ['test_ops_gradients#shard4.7.log']
    piece = logs['test_ops_gradients#shard4.7.log']
    assert ('torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 32.00 MiB. GPU 0 has a total capacity of '
            '79.18 GiB of which 27.75 MiB is free.') in piece
    assert 'Process 2287 has 37.34 GiB memory in use. Process 2375 has 34.95 GiB memory in use.' in piece
    assert f"FAILED [0.0405s] test_ops_gradients.py::{OOM_TEST.replace('.', '::')}" in piece
    retries = piece.split('Retrying single test...')[1:]
    assert len(retries) == 2
    assert all('no tests ran in' in part.split('Got exit code')[0] and
               'the failed test is not run again here; rerun_failed_tests reruns it' in part for part in retries)
    assert 'Test failed consistently, continuing with the rest of the tests' in piece


SECOND_PLAIN = 'h100-2026-12-06-bench-gpu-plain-second-machine'  # the same plain call on another H100, later


def test_the_same_plain_call_on_another_h100_took_a_third_longer_with_the_same_results(tmp_path):
    """The gradgrad selection's plain run_test.py call again, on the H100 a later session got (2026-12-06, the
    same kit, torch and selection): the same per-suite results, 871.7 s against 659.7 s (harness: 856.56 s against
    649.59 s), every suite slower (nn/test_convolution 52.3 s against 42.7 s, test_ops_gradients' pool process 726.8 s
    against 539.8 s).  Why a ratio is only read within one device round.  Ours did not run to its end there: the
    session's device time ran out (its gpu-auto/pytorch-test-results.json is the plan's seed, the plain call's JUnit
    times, not a result)."""
    with open(os.path.join(VALIDATION, SECOND_PLAIN, 'bench-gpu-node.json')) as handle:
        second = json.load(handle)['cases']['gpu']
    with open(os.path.join(VALIDATION, GRADGRAD_ROUND, 'bench-gpu-node.json')) as handle:
        first = json.load(handle)['cases']['gpu']
    assert set(second) == {'plain'}
    assert second['plain']['results'] == first['plain']['results']
    assert (second['plain']['seconds'], first['plain']['seconds']) == (871.7, 659.7)
    runs, plain_log, _ = _plain_call(SECOND_PLAIN, GRADGRAD_ROUND, second['plain']['results'], tmp_path)
    assert "Running test batch 'tests to run' cost 856.56 seconds" in plain_log
    assert '330 passed, 261 skipped, 576 deselected in 52.28s' in plain_log
    assert '1176 passed, 1390 skipped, 8192 deselected, 29 xfailed in 726.83s' in plain_log
    with open(runs / 'gpu-auto' / 'pytorch-test-results.json') as handle:
        assert set(json.load(handle)) == {'suite_seconds', 'test_seconds', 'seeded_from'}


SHARE_ROUND = 'h100-2026-12-07-bench-gpu-share-3gib'  # ours with each suite process capped at 3.57 GiB
SOURCE_26 = os.path.join(ROOT, '.venvs', 'pytorch-src', 'pytorch-v2.6.0', 'test', 'test_transformers.py')


def test_capped_at_3_gib_a_process_test_transformers_failed_22_tests_and_timed_out(tmp_path):
    """The H100 (16 cores, torch 2.11.0+cu130, Debian 2.6.0's run_test.py), 2026-12-07, ours first on the gradgrad
    selection with every suite process of the 6 calls capped at 3.57 GiB (the split cap of run/gpu_share then):
    test_ops_gradients ran as in the plain calls (its out-of-memory test passed), but 22 of test_transformers'
    attention tests failed and both its pieces were killed at their 600 s timeout, about 1,750 of its 8,870 tests
    run in 49.2 s of the tests' own time: ours 835.3 s.  The plain call that followed on the same machine was cut
    by the session's end (its partial log is kept): nn/test_convolution took 44.23 s there (42.7 s in the 659.7 s
    round), and 20 of the 21 attention tests that failed in ours (the 22nd fails in every plain call) passed
    there, the other skipped itself."""
    figures = _figures(SHARE_ROUND)
    ours = figures['cases']['gpu']['ours_auto']
    assert figures['cpus'] == 16 and sorted(figures['cases']['gpu']) == ['ours_auto']
    assert (ours['seconds'], ours['ratio'], ours['same_results']) == (835.3, None, None)
    with open(os.path.join(VALIDATION, GRADGRAD_ROUND, 'bench-gpu-node.json')) as handle:
        plain = json.load(handle)['cases']['gpu']['plain']['results']
    assert {suite: ours['results'][suite] == plain[suite] for suite in plain} == {
        'nn/test_convolution': True, 'test_masked': True, 'test_ops_gradients': True, 'test_transformers': False}
    assert ours['results']['test_transformers'][:3] == [1729, 22, 1192] and plain['test_transformers'][:3] == [
        8870, 2, 3501]
    runs, plain_log, _ = _plain_call(SHARE_ROUND, 'gpu-selection-2026-12-06-with-gradgrad',
                                     _bench().results_of_log(str(_gpu_runs(SHARE_ROUND, tmp_path) / 'gpu-plain.log')),
                                     tmp_path)
    output, results = _ours_step(runs)
    assert ('== 6 batch(es) at a time (parallel_test_suites=auto: 16 CPUs, 125 GiB available, 1 GPU(s) of 80 GiB; '
            '2 CPUs, 4 GiB a batch, 3 GiB of GPU a suite process)') in output
    assert ('== GPU memory: up to 18 suite processes on each GPU, each capped at its share when CUDA starts in it: '
            '3.57 GiB of 80 GiB (run/gpu_share)') in output
    assert results['terminated_suites'] == [{'name': 'test_transformers',
                                             'signal': 'piece 1/2: timeout after 600s; piece 2/2: timeout after 600s'}]
    assert round(sum(results['test_seconds']['test_transformers'].values()), 1) == 49.2  # of the pieces' 1200 s
    failed = [entry['test'].split('.', 1)[1] for entry in results['unknown_failures']]
    assert len(failed) == 22 and all(entry['suite'] == 'test_transformers' for entry in results['unknown_failures'])
    # the same machine's plain call, cut at the session's end, before test_transformers' summary
    assert '330 passed, 261 skipped, 576 deselected in 44.23s' in plain_log
    assert "Running test batch 'tests to run' cost" not in plain_log
    in_plain = {name: re.findall(re.escape(name) + r' (PASSED|FAILED|SKIPPED) ', plain_log) for name in failed}
    assert set(in_plain.pop('test_cudnn_attention_fail_d128_cuda')) == {'FAILED', 'PASSED'}  # a plain failure
    assert all(len(found) == 1 for found in in_plain.values()), in_plain
    long_keys = {name for name in in_plain if 'seq_len_k_2048' in name}  # 20: run on a 40 GiB GPU or larger only
    assert sorted(in_plain[name][0] for name in long_keys) == ['PASSED'] * 19 + ['SKIPPED']
    assert {name: found[0] for name, found in in_plain.items() if name not in long_keys} == {
        'test_cudnn_attention_different_dk_dv_cuda': 'PASSED'}
    # in the plain call, test_transformers' two pieces ran after the pool's first three suites: under the harness's
    # own cap of a call of 3 (run_test.py sets NUM_PARALLEL_PROCS once its pool started)
    # (each suite's `-m serial` session first, in the main process; the pool's sessions are the second of a name)
    seen: set = set()
    pool = [name for name in re.findall(r"^Running (\S+ \d+/\d+) \.\.\. \[", plain_log, re.M)
            if name in seen or seen.add(name)]
    assert pool[:3] == ['test_masked 1/1', 'test_ops_gradients 1/7', 'test_ops_gradients 2/7']
    assert pool.index('test_transformers 1/2') > 2 and pool.index('test_transformers 2/2') > 2
    if os.path.isfile(SOURCE_26):
        with open(SOURCE_26) as handle:
            source = handle.read().splitlines()
        assert ("if max(seq_len_q, seq_len_k) >= 2048 and torch.cuda.get_device_properties('cuda').total_memory < 40 "
                "* 2**30:") in source[3325]
        assert 'def test_flash_attention_vs_math_ref_grads(self, device' in source[3316]


HARNESS_SHARE_ROUND = 'h100-2026-12-07-bench-gpu-share-harness'  # ours, each process capped at a call of 3's share


def test_capped_at_the_harness_share_ours_gave_the_plain_results_in_0_63x_of_an_earlier_plain_call(tmp_path):
    """The H100 (16 cores, torch 2.11.0+cu130, Debian 2.6.0's run_test.py), 2026-12-07, ours alone on the gradgrad
    selection (the session's device time left no room for a plain call beside it) with each suite process of a call
    beside others capped at the share PyTorch's harness gives a process of one call of 3 (25.54 GiB of 79.2 GiB) and
    each failed test rerun alone once (rerun_failed_tests = 1): 416.7 s, the per-suite results of the gradgrad
    round's plain call, no test out of memory; 0.63x of that call's 659.7 s, measured on another H100 in another
    session: not the one-round ratio the issue asks for.  The two machines ran ours' plan alike (the suites' own
    times add up to 1808.3 s here, 1794.8 s there), the suites ended at 6m16s (6m11s there), and the two failures
    every plain call has were rerun alone and stayed failed.  The longest piece, test_ops_gradients 6/7 (5m13s),
    held one of the two cumprod complex128 gradgrad tests (187.4 s and 185.6 s, pieces 6 and 5): 2.6 deals a file's
    tests to its shards by a hash of their ids (pytest_shard_custom.py), not by time."""
    figures = _figures(HARNESS_SHARE_ROUND)
    gpu = figures['cases']['gpu']
    assert figures['cpus'] == 16 and sorted(figures['cases']) == ['gpu']
    ours, plain = gpu['ours_auto'], gpu['plain']
    assert (ours['seconds'], ours['ratio'], ours['same_results']) == (416.7, 0.63, True)
    assert ours['previous_from'] == 'gpu-plain-results.json' and plain['reused_from'] == 'bench-gpu-node.json'
    gradgrad = _figures(GRADGRAD_ROUND)['cases']['gpu']['plain']
    assert (plain['seconds'], plain['results']) == (gradgrad['seconds'], gradgrad['results'])
    assert (plain['seconds'], plain['results']) == (659.7, ours['results'])
    runs = _gpu_runs(HARNESS_SHARE_ROUND, tmp_path / 'share')
    output, results = _ours_step(runs)
    assert _bench().results_of_json(str(runs / 'gpu-auto' / 'pytorch-test-results.json')) == ours['results']
    assert ('== GPU memory: up to 18 suite processes on each GPU, each capped at PyTorch\'s own share of a call of 3 '
            'when CUDA starts in it (about 25.7 GiB of 80 GiB); the caps bound each process, not their sum; a test '
            'out of memory beside the others is rerun alone after the suites (run/gpu_share)') in output
    assert '== 2 long suite(s) run as pieces (9 in all): test_ops_gradients, test_transformers' in output
    assert '== suite 11/11: nn/test_convolution passed in 36s (2 suite(s) failed so far; 6m16s into the run)' in output
    assert '== suite 9/11: test_ops_gradients#shard6/7 passed in 5m13s' in output
    assert [line for line in output.splitlines() if line.startswith('== rerun of ')] == [
        f'== rerun of test_transformers::{test}: reproducible: failed 1 run in its suite and 1 alone'
        for test in TRANSFORMERS_FAILING]
    assert results['cuda_tests'] == {'ran': 10480, 'failed': 2, 'skipped': 5207} and not results['terminated_suites']
    gradgrad_ours = _ours_step(_gpu_runs(GRADGRAD_ROUND, tmp_path / 'gradgrad'))[1]
    assert (round(sum(results['suite_seconds'].values()), 1),
            round(sum(gradgrad_ours['suite_seconds'].values()), 1)) == (1808.3, 1794.8)
    slowest = sorted(results['test_seconds']['test_ops_gradients'].items(), key=lambda item: -item[1])[:2]
    assert [(test.rsplit('::', 1)[1], seconds) for test, seconds in slowest] == [
        ('test_fn_gradgrad_cumprod_cuda_complex128', 187.413),
        ('test_inplace_gradgrad_cumprod_cuda_complex128', 185.63)]
    # the pytest sessions' own logs: each process beside others says its cap, none ran out of GPU memory
    with tarfile.open(os.path.join(VALIDATION, HARNESS_SHARE_ROUND, 'bench-suite-logs.tar.gz')) as packed:
        packed.extractall(tmp_path / 'logs', filter='data')
    logs = {path.name: path.read_text(errors='replace')
            for path in (tmp_path / 'logs' / 'bench-tree' / 'test' / 'test-reports').glob('*.log')}
    assert len(logs) == 21 and not [name for name, text in logs.items() if 'OutOfMemoryError' in text]
    capped = [name for name, text in logs.items() if 'eb-pytorch-cuda GPU share: this process capped at the share of '
              'a call of 3 (CUDA had started)' in text]
    assert sorted(set(logs) - set(capped)) == ['nn.test_convolution_1.1_89841f8a32de530b_.log']  # run alone
    assert all('25.54 GiB (the share of a call of 3' in logs[name] for name in capped)
    heavy = {name for name, text in logs.items() if 'gradgrad_cumprod_cuda_complex128 PASSED' in text}
    assert sorted(name[:21] for name in heavy) == ['test_ops_gradients_5.', 'test_ops_gradients_6.']
    source = os.path.join(ROOT, '.venvs', 'pytorch-src', 'pytorch-v2.6.0', 'test', 'pytest_shard_custom.py')
    if os.path.isfile(source):
        with open(source) as handle:
            assert 'if self.sha256hash(item.nodeid) % num_shards == shard_id - 1' in handle.read()
