"""The cpu case of issue 33's node benchmark on the H200 (docs/validation/h200-2026-12-02-bench-cpu/), replayed on
a CPU: one plain run_test.py call of Debian 2.6.0's harness over 22 CPU suites (the machine's torch, 2.11.0+cu130
in the same day's eb record; the GPU hidden; its own pool of 3) took 1413.0 s there, and its verbatim log is kept.

What the log shows, and why the issue's target of 0.4x cannot be met for this selection while the harness's
serial list is honoured: run_test.py runs the files of its serial list (test_show_pickle, test_sort_and_select,
test_tensor_creation_ops) alone, before anything else, and test_tensor_creation_ops alone took 843 s, in 79
pytest sessions (1 + 3 for each of its 26 failing tests: run_test_retries starts two 'Retrying single test...'
sessions and one for the rest after each failure) while its tests' own times add up to 16 s.  Our test step
runs the same files alone too (run/batches.plan_batches), so no run of ours can take less than those 862 s:
0.61x of the plain run.  The 26 failures are scipy's (`get_window` refuses Nx=0), not the node's.
"""

import gzip
import importlib.util
import json
import os
import re
from datetime import datetime

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECORD = os.path.join(ROOT, 'docs', 'validation', 'h200-2026-12-02-bench-cpu')
RUNNING = re.compile(r'^Running (\S+) 1/1 \.\.\. \[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+)\]$', re.M)
FAILING = {'test_dlpack': 4, 'test_license': 1, 'test_tensor_creation_ops': 26, 'test_type_promotion': 1,
           'test_view_ops': 1}


def _record_figures(record):
    """A record's bench-gpu-node.json, as the benchmark wrote it."""
    with open(os.path.join(record, 'bench-gpu-node.json')) as handle:
        return json.load(handle)


def _unpacked_log(tmp_path_factory, record, name):
    """(path, text) of a record's plain log NAME as the H200 wrote it, unpacked from NAME.gz (kept gzipped: up
    to 1 MB of text), for results_of_log, which reads a path."""
    path = tmp_path_factory.mktemp('bench-log') / name
    with gzip.open(os.path.join(record, f'{name}.gz'), 'rb') as packed:
        path.write_bytes(packed.read())
    return str(path), path.read_text(errors='replace')


@pytest.fixture(scope='module')
def figures():
    return _record_figures(RECORD)


@pytest.fixture(scope='module')
def plain_log(tmp_path_factory):
    """(path, text) of the cpu case's plain log."""
    return _unpacked_log(tmp_path_factory, RECORD, 'cpu-plain.log')


def _bench():
    """benchmarks/bench_gpu_node.py, whose results_of_log made the record's rows (a script, not a package)."""
    spec = importlib.util.spec_from_file_location('bench_gpu_node', os.path.join(ROOT, 'benchmarks',
                                                                                 'bench_gpu_node.py'))
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def test_the_plain_run_took_1413_s_on_the_16_cores_over_22_suites_five_of_them_failing(figures):
    plain = figures['cases']['cpu']['plain']
    assert figures['cpus'] == 16 and plain['seconds'] == 1413.0 and len(plain['results']) == 22
    failing = {suite: len(row[3]) for suite, row in plain['results'].items() if row[1]}
    assert failing == FAILING
    assert all(re.match(r'TestTensorCreationCPU\.test_(kaiser|signal_windows?_functions)', test)
               for test in plain['results']['test_tensor_creation_ops'][3])
    # the other runs of the case did not fit the session's device time; the next one reuses this figure
    assert sorted(figures['cases']['cpu']) == ['plain']


def test_our_parser_reads_the_plain_log_as_the_benchmark_recorded_it(figures, plain_log):
    path, text = plain_log
    assert _bench().results_of_log(path) == figures['cases']['cpu']['plain']['results']
    assert 'Running test batch \'tests to run\' cost 1403.3 seconds' in text


def test_the_harness_ran_its_serial_list_alone_first_and_the_failures_restarts_dominate_it(plain_log):
    _path, text = plain_log
    assert re.search(r'Serial tests \(3\):\n    test_show_pickle 1/1\n    test_sort_and_select 1/1\n'
                     r'    test_tensor_creation_ops 1/1\n  Parallel tests \(19\):', text)
    starts = [(suite, datetime.fromisoformat(stamp)) for suite, stamp in RUNNING.findall(text)]
    assert [suite for suite, _ in starts[:4]] == ['test_show_pickle', 'test_sort_and_select',
                                                  'test_tensor_creation_ops', 'test_complex']
    tensor_creation = (starts[3][1] - starts[2][1]).total_seconds()
    serial_list = (starts[3][1] - starts[0][1]).total_seconds()
    assert round(tensor_creation) == 843 and round(serial_list) == 862
    assert round(serial_list / 1413.0, 2) == 0.61  # no run that honours the serial list does better
    # its own part of the log: 79 sessions for 26 failing tests, its tests' own times 16 s
    segment = text[text.index('Running test_tensor_creation_ops 1/1'):text.index('Running test_complex 1/1')]
    assert segment.count('test session starts') == 79 == 1 + 3 * 26
    assert segment.count('Retrying single test...') == 2 * 26
    own = sum(float(seconds) for seconds in re.findall(
        r'^test_tensor_creation_ops\.py::\S+ (?:PASSED|FAILED|SKIPPED|RERUN)\S* \[(\d+\.\d+)s\]', segment, re.M))
    assert round(own) == 16
    assert 'ValueError: Parameter Nx=0 is not a positive integer' in segment  # scipy's, not the node's


POOL_RECORD = os.path.join(ROOT, 'docs', 'validation', 'h200-2026-12-02-bench-cpu-pool')


@pytest.fixture(scope='module')
def pool_figures():
    return _record_figures(POOL_RECORD)


@pytest.fixture(scope='module')
def pool_log(tmp_path_factory):
    """(path, text) of the cpu-pool case's plain log (a later session of the same day)."""
    return _unpacked_log(tmp_path_factory, POOL_RECORD, 'cpu-pool-plain.log')


def test_the_pool_case_is_the_19_suites_off_the_serial_list_and_gives_the_same_results_there(figures, pool_figures):
    """The cpu-pool case's plain run (541.4 s, a fresh machine of the same kind) reads the same per-suite results
    for its 19 suites as the cpu case's run did: the record compares like with like."""
    pool = pool_figures
    plain = pool['cases']['cpu-pool']['plain']
    assert pool['cpus'] == 16 and plain['seconds'] == 541.4 and sorted(pool['cases']['cpu-pool']) == ['plain']
    serial_list = {'test_show_pickle', 'test_sort_and_select', 'test_tensor_creation_ops'}
    assert sorted(plain['results']) == sorted(set(_bench().CPU_SUITES) - serial_list)
    cpu = figures['cases']['cpu']['plain']['results']
    assert plain['results'] == {suite: cpu[suite] for suite in plain['results']}


def test_the_pool_log_reads_as_recorded_and_shows_where_its_time_went(pool_figures, pool_log):
    """Debian 2.6.0's run_test.py on the 19: first each file's `-m serial` session, one at a time (191 s), then
    the pool of 3, in which test_masked's one session (240.1 s of tests) bounds any run that keeps it whole."""
    path, text = pool_log
    assert _bench().results_of_log(path) == pool_figures['cases']['cpu-pool']['plain']['results']
    assert 'Serial tests (0):\n  Parallel tests (19):' in text
    assert "Running test batch 'tests to run' cost 531.07 seconds" in text
    starts = [(suite, datetime.fromisoformat(stamp)) for suite, stamp in RUNNING.findall(text)]
    assert len(starts) == 38  # each file twice: its -m serial session, then its pool session
    serial_sessions = (starts[19][1] - starts[0][1]).total_seconds()
    assert round(serial_sessions) == 191
    assert '154 passed, 40 skipped in 240.10s (0:04:00)' in text
