"""Ours on issue 33's cpu-pool case on the H200 (docs/validation/h200-2026-12-03-bench-cpu-pool-ours/), replayed on
a CPU: the 19 CPU suites of Debian 2.6.0's harness off its serial list, the GPU hidden, against the plain
run_test.py call measured on the same kind of node the day before (541.4 s, reused: the device time of a session
holds ours' two runs, not all three).

What it shows: `test-suite` with the node's own batch count (8 calls at a time: 16 CPUs, 2 a call) took 257.6 s,
0.48x, with the plain call's results; the second run, cutting test_masked (194 s of the first run's 19-suite
total of 396 s, over a suite's share: the larger of 120 s and 396 s over 8 slots) into two pieces side by side,
took 433.5 s, 0.80x, because each piece took about twice the whole suite: 844.5 s of pytest time for the two.
Those runs left each suite process torch's default intra-op threads (one per core unless OMP_NUM_THREADS is set;
the count itself was not recorded there), in 8 calls of up to 3 suites each: oversubscription was the cause, the
reason run/plan now sets OMP_NUM_THREADS for a run of several calls (tests/test_suite_threads.py); the sixth
round's two records, replayed at the end of this file, measured the rule on the node.  Both runs' outputs and
results JSONs are kept verbatim (bench-runs.tar.gz).
"""

import importlib.util
import json
import os
import tarfile

import pytest

from eb_pytorch_cuda.testsuite.run.plan import HERE_PIECE_SECONDS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECORD = os.path.join(ROOT, 'docs', 'validation', 'h200-2026-12-03-bench-cpu-pool-ours')
FAILING = {'test_dlpack': 4, 'test_license': 1, 'test_type_promotion': 1, 'test_view_ops': 1}


def _cpu_pool_figures(record):
    """The cpu-pool case of a record's bench-gpu-node.json."""
    with open(os.path.join(record, 'bench-gpu-node.json')) as handle:
        return json.load(handle)['cases']['cpu-pool']


def _unpacked_runs(record, where, names=('auto', 'second')):
    """{run: (its step output, its results JSON path)} of a record's runs of ours, unpacked from its
    bench-runs.tar.gz into where."""
    with tarfile.open(os.path.join(record, 'bench-runs.tar.gz')) as packed:
        packed.extractall(where, filter='data')
    found = {}
    for run in names:
        with open(where / f'cpu-pool-{run}' / 'bench-stdout.txt') as handle:
            found[run] = (handle.read(), str(where / f'cpu-pool-{run}' / 'pytorch-test-results.json'))
    return found


@pytest.fixture(scope='module')
def figures():
    return _cpu_pool_figures(RECORD)


@pytest.fixture(scope='module')
def runs(tmp_path_factory):
    """The fifth round's two runs of ours (_unpacked_runs)."""
    return _unpacked_runs(RECORD, tmp_path_factory.mktemp('bench-runs'))


def _bench():
    spec = importlib.util.spec_from_file_location('bench_gpu_node', os.path.join(ROOT, 'benchmarks',
                                                                                 'bench_gpu_node.py'))
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def test_ours_took_048x_then_080x_of_the_plain_call_with_its_results(figures):
    assert figures['plain']['seconds'] == 541.4 and figures['plain']['reused_from'] == 'bench-gpu-node.json'
    assert (figures['ours_auto']['seconds'], figures['ours_auto']['ratio']) == (257.6, 0.48)
    assert (figures['ours_second']['seconds'], figures['ours_second']['ratio']) == (433.5, 0.8)
    assert figures['ours_auto']['same_results'] and figures['ours_second']['same_results']
    failing = {suite: len(row[3]) for suite, row in figures['plain']['results'].items() if row[1]}
    assert failing == FAILING


def test_the_results_rows_are_the_benchmarks_own_reading_of_each_runs_json(figures, runs):
    bench = _bench()
    for run in ('auto', 'second'):
        assert bench.results_of_json(runs[run][1]) == figures[f'ours_{run}']['results']
        with open(runs[run][1]) as handle:
            data = json.load(handle)
        assert data['verdict'] == 'pass' and data['failed_tests'] == 7 and data['cuda_tests']['ran'] == 0


def test_the_node_chose_8_calls_and_the_second_run_cut_test_masked_in_two_which_then_took_four_times_as_long(runs):
    auto, second = runs['auto'][0], runs['second'][0]
    batches = ('== 8 batch(es) at a time (parallel_test_suites=auto: 16 CPUs, 125 GiB available; 2 CPUs, 4 GiB '
               'a batch)')
    assert batches in auto and batches in second
    assert 'run as pieces' not in auto
    assert '== 1 long suite(s) run as pieces (2 in all): test_masked' in second
    assert 'test_masked#shard1/2 passed' in second and 'test_masked#shard2/2 passed' in second
    seconds = {run: json.load(open(runs[run][1]))['suite_seconds'] for run in runs}
    assert seconds['auto']['test_masked'] == 193.97 and seconds['second']['test_masked'] == 844.5
    # the first run's total over the 8 slots is the share a suite may take whole (run/plan.here_piece_rule)
    total = sum(seconds['auto'].values())
    assert round(total) == 396 and seconds['auto']['test_masked'] > max(HERE_PIECE_SECONDS, total / 8)
    # nothing bounded each suite process's threads then
    assert 'OMP_NUM_THREADS' not in auto and 'OMP_NUM_THREADS' not in second


RERUN = os.path.join(ROOT, 'docs', 'validation', 'h200-2026-12-03-bench-cpu-pool-ours-rerun')


def test_the_same_code_on_a_fresh_machine_took_319_s_so_one_run_is_not_a_figure(figures, tmp_path):
    """A later round of the same day ran the same package (the kit's wheel, built before run/plan set
    OMP_NUM_THREADS: its output has no such line) on another machine of the kind: ours auto 319.2 s, 0.59x, with
    the same results, against 257.6 s before: run-to-run spread of 24 %.  Its second run did not finish within
    the session's device time."""
    rerun = _cpu_pool_figures(RERUN)
    assert sorted(rerun) == ['ours_auto', 'plain'] and rerun['plain'] == figures['plain']
    assert (rerun['ours_auto']['seconds'], rerun['ours_auto']['ratio']) == (319.2, 0.59)
    assert rerun['ours_auto']['results'] == figures['ours_auto']['results'] and rerun['ours_auto']['same_results']
    output = _unpacked_runs(RERUN, tmp_path, names=('auto',))['auto'][0]
    assert '== 8 batch(es) at a time' in output and 'OMP_NUM_THREADS' not in output
    assert round(319.2 / 257.6 - 1, 2) == 0.24


def test_the_thread_rule_measured_here_four_processes_of_test_masked_on_two_cores():
    """benchmarks/bench_suite_threads.py on this project's 2-core VM (benchmarks/data/suite-threads-2cpu-*.json):
    test_masked's mask_layout tests, one process alone 9.1 s (8.9 s with one thread); four side by side 139.3 s
    with torch's default threads, 19.3 s with OMP_NUM_THREADS=1 (the rule's count there), each process passing
    the same tests."""
    with open(os.path.join(ROOT, 'benchmarks', 'data', 'suite-threads-2cpu-2026-12-03.json')) as handle:
        measured = json.load(handle)
    runs = measured['runs']
    assert measured['cpus'] == 2 and measured['same_summaries']
    assert runs['4 side by side, default threads']['seconds'] == 139.3 and runs['4 side by side, the rule'] == {
        'seconds': 19.3, 'threads': 1, 'summaries': ['104 passed, 58 skipped, 50 deselected'] * 4}
    assert runs['alone, default threads']['seconds'] == 9.1 and runs['alone, the rule']['seconds'] == 8.9


THREADS = {'threads': (233.2, 0.43, 247.1, 0.46), 'threads-rerun': (197.2, 0.36, 233.5, 0.43)}


@pytest.mark.parametrize('record', sorted(THREADS))
def test_with_the_thread_rule_ours_took_036x_to_046x_and_test_masked_a_tenth_of_its_time(record, figures, tmp_path):
    """Two rounds of the evening, each on a fresh machine, with a kit made after run/plan set OMP_NUM_THREADS
    (its src digest checked by h200_round.sh): every run printed OMP_NUM_THREADS=1 (16 CPUs over 8 calls of up to
    3 suites), had the plain call's results, and test_masked took 22 to 26 s of pytest time against 194 s
    without the rule; so its second run found nothing over a piece's floor and cut nothing.  The ≤ 0.4x target
    (216.6 s) was met by one of the two auto runs (197.2 s) and missed by the other (233.2 s)."""
    where = os.path.join(ROOT, 'docs', 'validation', f'h200-2026-12-03-bench-cpu-pool-{record}')
    measured = _cpu_pool_figures(where)
    auto_s, auto_x, second_s, second_x = THREADS[record]
    assert measured['plain'] == figures['plain']
    assert (measured['ours_auto']['seconds'], measured['ours_auto']['ratio']) == (auto_s, auto_x)
    assert (measured['ours_second']['seconds'], measured['ours_second']['ratio']) == (second_s, second_x)
    bench = _bench()
    for run, (output, results) in _unpacked_runs(where, tmp_path).items():
        assert ('== OMP_NUM_THREADS=1 for each suite process (16 CPUs over 8 run_test.py calls of up to 3 suites; '
                'set OMP_NUM_THREADS to choose)') in output
        assert '== 8 batch(es) at a time' in output and 'run as pieces' not in output
        assert bench.results_of_json(results) == measured[f'ours_{run}']['results'] == figures['plain']['results']
        with open(results) as handle:
            data = json.load(handle)
        assert data['verdict'] == 'pass' and data['failed_tests'] == 7
        assert 22 < data['suite_seconds']['test_masked'] < 27 < HERE_PIECE_SECONDS
        assert sum(data['suite_seconds'].values()) < 101  # 396 s without the rule
