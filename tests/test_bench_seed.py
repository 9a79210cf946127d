"""benchmarks/bench_gpu_node.py --seed-from-plain with PyTorch's real harness (Debian's 2.6.0 run_test.py, torch
2.6.0): a plain run_test.py call with `--save-xml` leaves, through previous_of_plain, the times a run of ours
leaves in its results (the same suites, the same node ids: the ids the harness's sharding hashes), so that ours'
first run in a device round plans its pieces as a second build would.  The tree is test_slurm_pieces' (a real
suite and a stand-in file with a failing test).  And `--rerun`: ours with its isolated rerun against the plain call
with the harness's own retries, on the retry probe (a flaky and a consistently failing test)."""

import json
import os
import shutil
import subprocess
import sys

from environment import REAL_PYTHON
from helpers import real_tree
from test_gpu_bench_records import _bench
from test_slurm_pieces import SUITES, _tree

from eb_pytorch_cuda.testsuite import service
from eb_pytorch_cuda.testsuite.results import testtimes
from eb_pytorch_cuda.testsuite.results.previous import History
from eb_pytorch_cuda.testsuite.run.command import TestCommand as Command  # not a pytest test class
from eb_pytorch_cuda.testsuite.run.executor import execute
from eb_pytorch_cuda.testsuite.run.here import HereExecutor
from eb_pytorch_cuda.testsuite.run.plan import RunRequest
from eb_pytorch_cuda.testsuite.run.store import ResultStore

BENCH_SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'benchmarks',
                            'bench_gpu_node.py')


def test_a_plain_calls_reports_seed_the_times_a_run_of_ours_leaves(harness26, tmp_path, monkeypatch):
    for name in ('PYTHONPATH', 'CI'):
        monkeypatch.delenv(name, raising=False)
    bench = _bench()
    plain_dir = _tree(tmp_path / 'plain')
    _seconds, log = bench.plain(str(plain_dir.parent), REAL_PYTHON, SUITES, [], str(tmp_path / 'plain.log'), True,
                                save_xml=True)
    seed = bench.previous_of_plain(str(plain_dir.parent), SUITES, log, str(tmp_path / 'plain-reports'))
    assert not (plain_dir / 'test-reports').exists() and (tmp_path / 'plain-reports' / 'python-pytest').is_dir()
    (tmp_path / 'seed.json').write_text(json.dumps(seed))
    history = History.read(str(tmp_path / 'seed.json'))
    assert sorted(history.suite_seconds) == sorted(SUITES)
    assert {suite: len(tests) for suite, tests in history.test_seconds.items()} == \
        {'test_native_functions': 11, 'test_piece_standin': 17}
    assert all(seconds > 0 for seconds in history.suite_seconds.values())

    # ours on a tree of its own, keeping every suite's test times (a record keeps them from KEPT_FROM = 300 s on;
    # these real suites take seconds)
    monkeypatch.setattr(testtimes, 'KEPT_FROM', 0.0)
    ours_dir = _tree(tmp_path / 'ours')
    store = ResultStore(str(tmp_path / 'ours-results' / 'r.jsonl'), 'real')
    execute(HereExecutor(), RunRequest(Command(str(ours_dir), {}, [REAL_PYTHON, 'run_test.py']), dict(os.environ),
                                       str(tmp_path / 'ours-out'), REAL_PYTHON, {'': 900}, units=SUITES), store)
    ours = service.test_seconds(store)
    assert {suite: sorted(tests) for suite, tests in history.test_seconds.items()} == \
        {suite: sorted(tests) for suite, tests in ours.items()}
    assert 'test_piece_standin.py::TestPieces::test_zz_known_failure' in ours['test_piece_standin']


def test_a_plain_run_read_back_needs_runs_to_name_plain(tmp_path):
    """--plain-from is read only as the plain run (the ratios are against it): with --runs ours_auto alone it was
    silently unused (2026-12-06 on the H100: the record's ratio came out null).  Refused before anything runs."""
    work = tmp_path / 'work'
    done = subprocess.run([sys.executable, BENCH_SCRIPT, '--harness', str(tmp_path), '--python', sys.executable,
                           '--workdir', str(work), '--out', str(tmp_path / 'out'), '--case', 'gpu',
                           '--plain-from', str(tmp_path / 'bench-gpu-node.json'), '--runs', 'ours_auto'],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 2 and not work.exists()
    assert done.stderr.strip().splitlines()[-1] == ('bench_gpu_node.py: error: --plain-from is the plain run read '
                                                    'back: --runs must name plain')


def test_runs_go_in_the_order_named_and_ours_first_gets_its_ratio_when_plain_ends(harness26, tmp_path, monkeypatch):
    """`--runs ours_auto plain` (a device session short of time keeps ours whole where the plain call after it is
    cut): ours runs first, planned with --previous-from's times, the plain call after it on the same tree, and the
    record gives ours its ratio and its same-results verdict against plain once plain has ended."""
    for name in ('PYTHONPATH', 'CI'):
        monkeypatch.delenv(name, raising=False)
    tree = _tree(tmp_path / 'tree').parent
    seed = {'suite_seconds': {'test_native_functions': 1.0, 'test_piece_standin': 1.0}, 'test_seconds': {}}
    (tmp_path / 'seed.json').write_text(json.dumps(seed))
    out = tmp_path / 'out'
    done = subprocess.run([sys.executable, BENCH_SCRIPT, '--harness', str(tree), '--python', REAL_PYTHON,
                           '--workdir', str(tmp_path / 'work'), '--out', str(out), '--case', 'cpu',
                           '--cpu-suites', *SUITES, '--previous-from', str(tmp_path / 'seed.json'),
                           '--runs', 'ours_auto', 'plain'], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [line.split()[1] for line in done.stdout.splitlines() if line.startswith('cpu ')]
    assert rows == ['ours_auto', 'ours_auto', 'plain'], done.stdout  # ours alone, then both once plain ended
    runs = json.loads((out / 'bench-gpu-node.json').read_text())['cases']['cpu']
    assert list(runs) == ['ours_auto', 'plain']
    assert runs['ours_auto']['ratio'] == round(runs['ours_auto']['seconds'] / runs['plain']['seconds'], 2)
    assert runs['ours_auto']['same_results'] is True and runs['ours_auto']['previous_from'] == 'seed.json'
    passed, failed, skipped, failing = runs['plain']['results']['test_piece_standin']
    assert (passed, failed, skipped) == (16, 1, 0) and [test.rsplit('::', 1)[-1] for test in failing] == \
        ['TestPieces.test_zz_known_failure']
    # the plain call's log ran after ours' run ended: ours' output file is older
    plain_log = tmp_path / 'work' / 'cpu-plain.log'
    ours_output = tmp_path / 'work' / 'cpu-auto' / 'bench-stdout.txt'
    assert ours_output.stat().st_mtime <= plain_log.stat().st_mtime


def test_a_seeded_run_of_ours_needs_plain_named_first(tmp_path):
    """--seed-from-plain plans ours with the plain call's times: --runs naming ours before plain is refused before
    anything runs, as are a run named twice and ours_second before ours_auto (it plans with ours_auto's times)."""
    for runs, seeded, said in ((['ours_auto', 'plain'], True, "--seed-from-plain: ours plans with the plain call's "
                                'times, so --runs must name plain first'),
                               (['plain', 'plain'], False, '--runs names a run twice'),
                               (['ours_second', 'ours_auto'], False, '--runs: ours_second plans with the times of '
                                'ours_auto, so it comes after it')):
        work = tmp_path / 'work'
        done = subprocess.run([sys.executable, BENCH_SCRIPT, '--harness', str(tmp_path), '--python', sys.executable,
                               '--workdir', str(work), '--out', str(tmp_path / 'out'), '--case', 'gpu', '--runs',
                               *runs, *(['--seed-from-plain'] if seeded else [])],
                              capture_output=True, text=True, check=False)
        assert done.returncode == 2 and not work.exists()
        assert done.stderr.strip().splitlines()[-1] == f'bench_gpu_node.py: error: {said}'


PROBE = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'data', 'retry_probe', 'test_eb_retry_probe.py')
PYTEST_INI = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'data', 'pytorch26-plain', 'pytest.ini')


def test_ours_with_its_rerun_and_plain_with_the_harness_retries_give_the_same_results(harness26, tmp_path,
                                                                                      monkeypatch):
    """`--rerun 1` on the retry probe: ours first, with PyTorch's retries off, reruns test_c (failing on the
    probe's first run only) alone once, and it passes; the record counts it passed, as the plain call after it
    counts it (there it passes at once: the probe's count goes on), the same results (test_b failing in each),
    and ours' results JSON keeps it as a flaky failure (what the verdict reads)."""
    for name in ('PYTHONPATH', 'CI'):
        monkeypatch.delenv(name, raising=False)
    counts = tmp_path / 'counts'
    counts.mkdir()
    monkeypatch.setenv('EB_RETRY_PROBE_DIR', str(counts))
    monkeypatch.setenv('EB_RETRY_PROBE_SECONDS', '0')
    test_dir = real_tree(tmp_path / 'tree')
    shutil.copy(PYTEST_INI, tmp_path / 'tree' / 'pytest.ini')
    os.symlink(PROBE, test_dir / os.path.basename(PROBE))
    out = tmp_path / 'out'
    (tmp_path / 'seed.json').write_text(json.dumps({'suite_seconds': {'test_eb_retry_probe': 1.0},
                                                    'test_seconds': {}}))
    done = subprocess.run([sys.executable, BENCH_SCRIPT, '--harness', str(tmp_path / 'tree'), '--python',
                           REAL_PYTHON, '--workdir', str(tmp_path / 'work'), '--out', str(out), '--case', 'cpu',
                           '--cpu-suites', 'test_eb_retry_probe', '--runs', 'ours_auto', 'plain', '--rerun', '1',
                           '--previous-from', str(tmp_path / 'seed.json')], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    runs = json.loads((out / 'bench-gpu-node.json').read_text())['cases']['cpu']
    plain, ours = runs['plain']['results']['test_eb_retry_probe'], runs['ours_auto']['results']['test_eb_retry_probe']
    assert plain == ours == [3, 1, 0, ['TestRetryProbe.test_b_always_fails']]
    assert runs['ours_auto']['same_results'] is True
    with open(tmp_path / 'work' / 'cpu-auto' / 'pytorch-test-results.json') as handle:
        suite, = json.load(handle)['suites']
    assert {test['test_id']: test['rerun_outcome'] for test in suite['failed_tests']} == {
        'TestRetryProbe.test_b_always_fails': 'reproducible', 'TestRetryProbe.test_c_fails_once': 'flaky'}
    assert (counts / 'once').read_text().count('run') == 3  # ours' run and rerun, the plain call's one run
