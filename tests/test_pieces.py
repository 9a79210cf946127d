"""Pieces of a long suite (results/pieces.py): the identity the queue and the store use, and the plan."""

import json
import os

import pytest
from environment import HARNESS21_TREE, missing
from helpers import standin_test_tree

from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.testsuite.results.pieces import PIECE_SECONDS, Piece, expected_of, key_of, piece_count, split
from eb_pytorch_cuda.testsuite.results.pieces import with_merged
from eb_pytorch_cuda.testsuite.results.previous import History
from eb_pytorch_cuda.testsuite.results.records import PieceLabel, StoreRecord
from eb_pytorch_cuda.testsuite.results.testtimes import case_times, node_prefix, piece_times, pieces_for, shard_of


def test_a_plain_suite_name_is_the_whole_suite():
    piece = Piece.parse('distributed/test_c10d')
    assert piece == Piece('distributed/test_c10d', 1, 1)
    assert piece.whole and piece.key == 'distributed/test_c10d' and piece.shard_args() == []


def test_a_piece_key_round_trips_and_gives_the_harness_shard_options():
    piece = Piece('inductor/test_torchinductor_opinfo', 3, 8)
    assert piece.key == 'inductor/test_torchinductor_opinfo#shard3/8'
    assert Piece.parse(piece.key) == piece
    assert piece.shard_args() == ['--shard-id=3', '--num-shards=8']  # 2.2+: pytest_shard_custom, 1-based
    assert piece.shard_args(zero_based=True) == ['--shard-id=2', '--num-shards=8']  # 2.1: pytest-shard


@pytest.mark.parametrize('key', ['x#shard', 'x#shard3', 'x#shard0/2', 'x#shard3/2', 'x#shard-1/2', '#shard1/2'])
def test_a_malformed_key_is_a_one_line_error(key):
    with pytest.raises(PluginError) as caught:
        Piece.parse(key)
    assert '\n' not in str(caught.value)


def test_suites_over_the_threshold_become_pytorchs_number_of_pieces():
    # PyTorch's own rule (tools/testing/test_selections.py): ceil(duration / 600) shards above 600 s
    assert PIECE_SECONDS == 600
    assert [piece_count(s) for s in (None, 0, 599, 600, 601, 1800, 77584.492)] == [1, 1, 1, 1, 2, 3, 130]
    expected = {'long': 1500.0, 'short': 10.0}
    pieces = split(['short', 'long', 'unknown'], expected)
    assert [piece.key for piece in pieces] == ['short', 'long#shard1/3', 'long#shard2/3', 'long#shard3/3', 'unknown']
    assert expected_of(pieces, expected) == {'short': 10.0, 'long#shard1/3': 500.0, 'long#shard2/3': 500.0,
                                             'long#shard3/3': 500.0}


def _line(suite, index, count, status='passed', passed=1, failed=(), seconds=2.0, note=None):
    """A piece's record as its line in the store holds it."""
    counts = dict.fromkeys(('failed', 'errors', 'passed', 'skipped', 'xfailed', 'xpassed', 'rerun'), 0)
    counts.update(passed=passed, failed=len(failed))
    return {'suite': {'name': suite, 'status': status, 'counts': counts, 'sources': ['log'], 'signal': None,
                      'failed_tests': [{'test_id': test, 'state': 'failed', 'reruns': 0, 'rerun_outcome': None}
                                       for test in failed],
                      'rerun_outcome': None, 'seconds': seconds, 'note': note},
            'exit_code': 1 if failed else 0, 'seconds': seconds + 1, 'gpu': None, 'notes': [],
            'piece': {'suite': suite, 'index': index, 'count': count}}


def _record(suite, index, count, **outcome) -> StoreRecord:
    return StoreRecord.from_json(_line(suite, index, count, **outcome))


def test_records_are_keyed_by_piece_and_old_records_by_suite():
    assert key_of(_record('a', 2, 3)) == 'a#shard2/3'
    old = _line('a', 1, 1)
    del old['piece']
    assert key_of(StoreRecord.from_json(old)) == 'a'


def test_a_suite_is_the_merge_of_all_its_pieces_and_only_then():
    records = {'a#shard1/3': _record('a', 1, 3, passed=4), 'a#shard3/3': _record('a', 3, 3, passed=5)}
    assert 'a' not in with_merged(records)  # a piece missing: the suite has no outcome yet (it runs again)
    records['a#shard2/3'] = _record('a', 2, 3, status='failed', passed=1, failed=['T.test_x'])
    suite = with_merged(records)['a']
    assert suite.suite.status == 'failed'
    assert suite.suite.counts.passed == 10 and suite.suite.counts.failed == 1
    assert [test.test_id for test in suite.suite.failed_tests] == ['T.test_x']
    assert suite.suite.seconds == 6.0 and suite.seconds == 9.0 and suite.exit_code == 1
    assert [piece.index for piece in suite.pieces] == [1, 2, 3]


def test_a_piece_that_never_finished_keeps_the_suite_from_passing_and_says_which():
    records = {key_of(r): r for r in (_record('a', 1, 2), _record('a', 2, 2, status='timed out', note='slow'))}
    suite = with_merged(records)['a'].suite
    assert suite.status == 'timed out' and suite.note == 'piece 2/2: slow'


DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'data', 'pytorch26-pieces')


def _reports(name):
    directory = os.path.join(DATA, name)
    return [os.path.join(directory, file) for file in sorted(os.listdir(directory))]


def test_a_real_reports_test_ids_hash_to_the_piece_the_harness_ran_them_in():
    whole = case_times(_reports('python-pytest'))
    assert len(whole) == 11 and all(node.startswith('test_native_functions.py::TestNativeFunctions::test_')
                                    for node in whole)
    for index in (1, 2, 3):
        ran = case_times(_reports(f'python-pytest-shard{index}of3'))
        assert sorted(ran) == sorted(node for node in whole if shard_of(node, 3) == index) != []
    assert [len(case_times(_reports(f'python-pytest-shard{i}of3'))) for i in (1, 2, 3)] == [4, 2, 5]
    shares = piece_times(whole, 3)
    assert round(sum(shares), 3) == round(sum(whole.values()), 3)


def test_pieces_are_cut_by_the_tests_times_when_known():
    whole = case_times(_reports('python-pytest'))
    longest = max(whole.values())
    count = pieces_for(whole, longest * 1.01)
    assert max(piece_times(whole, count)) <= longest * 1.01 < max(piece_times(whole, count - 1))
    # a suite over the threshold with its tests' times: that many pieces, each expected at its tests' sum
    scaled = {node: seconds * 1000 for node, seconds in whole.items()}
    units = split(['test_native_functions'], {'test_native_functions': sum(scaled.values())}, 300, {
        'test_native_functions': scaled})
    assert len(units) == pieces_for(scaled, 300) > 1
    expected = expected_of(units, {}, {'test_native_functions': scaled})
    assert max(expected.values()) <= 300 and round(sum(expected.values())) == round(sum(scaled.values()))


def test_a_report_that_is_no_report_gives_no_times(tmp_path):
    (tmp_path / 'dtd.xml').write_text('<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "b">]><testsuites/>')
    (tmp_path / 'empty.xml').write_text('')
    assert case_times([str(tmp_path / 'dtd.xml'), str(tmp_path / 'empty.xml')]) == {}


@pytest.mark.parametrize('piece', [{'suite': 'a', 'index': 4, 'count': 3}, {'suite': 'b', 'index': 1, 'count': 2},
                                   {'suite': 'a', 'index': '1', 'count': 2}, ['a', 1, 2], {'suite': 'a'}])
def test_a_stored_record_with_a_crafted_piece_is_set_aside_in_one_note(tmp_path, piece):
    from eb_pytorch_cuda.testsuite.run.store import ResultStore
    store = ResultStore(str(tmp_path / 'r.jsonl'), 'f')
    store.append(_record('a', 1, 2))
    with open(store.path, 'a') as handle:  # a crafted line: ResultStore.append writes only records
        handle.write(json.dumps(dict(_line('a', 2, 2), piece=piece, fingerprint='f')) + '\n')
    assert list(store.load()) == ['a#shard1/2']
    assert len(store.set_aside) == 1 and 'line 2: not a record (piece: ' in store.set_aside[0]
    assert 'a' not in store.result(['a']).suites or store.result(['a']).suites['a'].status == 'missing'


REAL_TREES = {'2.6.0': os.path.join(os.path.dirname(DATA), '..', '..', '.venvs', 'pytorch-src', 'pytorch-v2.6.0'),
              '2.1 line': HARNESS21_TREE}
# each version as a parameter: the 2.1 line's reads the tree of ../shared (marker harness21: tests/conftest.py)
VERSIONS = [pytest.param(version, marks=[pytest.mark.harness21] if version == '2.1 line' else [])
            for version in sorted(REAL_TREES)]


@pytest.mark.parametrize('version', VERSIONS)
def test_the_times_file_goes_where_the_harness_reads_it_never_over_anothers(tmp_path, version):
    """The real run_test.py and test_selections.py of both harness lines (tools/setup.sh), copied."""
    import json
    import shutil
    from eb_pytorch_cuda.testsuite.run import piece_times
    from eb_pytorch_cuda.testsuite.run.harness import harness_of
    tree = REAL_TREES[version]
    if not os.path.isfile(os.path.join(tree, 'test', 'run_test.py')):
        missing(f'the {version} harness (.venvs/pytorch-src of tools/setup.sh)')
    (tmp_path / 'test').mkdir()
    (tmp_path / 'tools' / 'testing').mkdir(parents=True)
    shutil.copy(os.path.join(tree, 'test', 'run_test.py'), tmp_path / 'test')
    shutil.copy(os.path.join(tree, 'tools', 'testing', 'test_selections.py'), tmp_path / 'tools' / 'testing')
    harness = harness_of(str(tmp_path / 'test'))
    expected = {'2.6.0': '.additional_ci_files/test-times.json', '2.1 line': '.pytorch-test-times.json'}[version]
    assert harness.times_file == expected
    units = split(['test_long', 'test_short'], {'test_long': 1500, 'test_short': 5})
    assert piece_times.write_times(str(tmp_path / 'test'), harness, units) is None
    written = json.loads((tmp_path / expected).read_text())
    assert written['default']['default'] == {'test_long': 1799}  # ceil(1799 / 600) = 3 pytest shards
    (tmp_path / expected).write_text('{"default": {"default": {}}}')  # a user's own file
    why = piece_times.write_times(str(tmp_path / 'test'), harness, units)
    assert why.endswith('exists and was not written by this plugin: suites run whole')
    assert (tmp_path / expected).read_text() == '{"default": {"default": {}}}'


def test_a_real_run_writes_test_times_that_the_next_run_reads_back(
        tmp_path, monkeypatch, capsys):
    """`test-suite` on the stand-in harness (its XML has pytest's `file` and measured times), in this process so
    that KEPT_FROM (a size rule: only suites of 300 s and more keep their tests' times) can be 0 for its
    one-second suite; then `report` reads the JSON, and the spread's reader gets the times back."""
    import json
    import sys
    from eb_pytorch_cuda.cli import main
    from eb_pytorch_cuda.testsuite.results import testtimes
    tree = tmp_path / 'src'
    standin_test_tree(tree)
    monkeypatch.setattr(testtimes, 'KEPT_FROM', 0)
    results = tmp_path / 'results'
    assert main(['test-suite', str(tree), '--python', sys.executable, '--results', str(results), '--format', 'json',
                 '--runtest', 'cd test && %(python)s run_test.py --continue-through-error -i test_known_failure']) == 0
    written = json.loads(capsys.readouterr().out)
    assert written['verdict'] == 'pass' and written['failed_tests'] == 1  # the default budget holds it
    saved = results / 'pytorch-test-results.json'
    assert json.loads(saved.read_text()) == written
    times = written['test_seconds']
    assert sorted(times) == ['test_known_failure']
    assert sorted(times['test_known_failure']) == [  # every test case of its XML report, by pytest's node id
        f'test_known_failure.py::__main__.TestKnown::{name}'
        for name in ('test_always_fails', 'test_new_regression', 'test_passes')]
    assert all(0 <= seconds < 60 for seconds in times['test_known_failure'].values())
    assert History.read(str(saved)).test_seconds == times  # the next build's times source
    # a suite expected to take 10,000 s is cut by its tests' times (well under 600 s: whole), not into 17
    assert len(split(['test_known_failure'], {'test_known_failure': 10000.0})) == 17
    assert len(split(['test_known_failure'], {'test_known_failure': 10000.0}, PIECE_SECONDS, times)) == 1
    assert main(['report', str(saved), '--max-failed-tests', '0']) == 1  # `report` reads and re-judges it
    out = capsys.readouterr().out
    assert 'verdict: FAIL' in out and 'unknown failure: test_known_failure::' in out
    # a kept run re-judged (the easyblock's judge_kept, with the kept run's store) writes them again
    from eb_pytorch_cuda.testsuite import service
    from eb_pytorch_cuda.testsuite.policy.judging import Policy
    from eb_pytorch_cuda.testsuite.run.store import ResultStore
    with open(results / 'results.jsonl') as handle:
        store = ResultStore(str(results / 'results.jsonl'), json.loads(handle.readline())['fingerprint'])
    kept = service.judge_kept(store.result(['test_known_failure']), Policy(), service.scope_context((), False, {}),
                              store)
    assert json.loads(service.report_texts(kept)['pytorch-test-results.json'])['test_seconds'] == times


@pytest.mark.parametrize('crafted', [{'a': {'t': 'x', 'u': 1.5}}, {'a': [1]}, ['a'], {'a': {'t': -1, 'u': True}}])
def test_test_times_of_a_crafted_results_json_are_kept_only_where_well_formed(tmp_path, crafted):
    import json
    (tmp_path / 'r.json').write_text(json.dumps({'test_seconds': crafted}))
    found = History.read(str(tmp_path / 'r.json')).test_seconds
    assert found == ({'a': {'u': 1.5}} if crafted == {'a': {'t': 'x', 'u': 1.5}} else {})


DATA21 = os.path.join(os.path.dirname(DATA), 'pytorch21-pieces')


def _recorded21(name):
    with open(os.path.join(DATA21, f'{name}.log')) as handle:
        text = handle.read()
    directory = os.path.join(DATA21, f'{name}-xml', 'test_native_functions')
    return text, [os.path.join(directory, file) for file in sorted(os.listdir(directory))]


def _shard_listing(text):
    """The node ids pytest-shard says it runs (`Running N items in this shard: id, id, ...`, -v)."""
    import re
    return sorted(re.search(r'^Running \d+ items in this shard: (.*)$', text, re.M).group(1).split(', '))


def test_the_21_node_ids_carry_the_test_directory_and_hash_to_the_real_piece():
    """The 2.1-line tree's real outputs (tests/data/pytorch21-pieces, record.py): its pytest.ini makes the tree
    the rootdir, so pytest-shard hashes `test/test_native_functions.py::...` while the XML's file= is
    `test_native_functions.py`; node_prefix finds `test/` in the run's own `rootdir:` line."""
    import re
    text, reports = _recorded21('whole')
    rootdir = re.search(r'^rootdir: (.*)$', text, re.M).group(1)
    prefix = node_prefix(text, os.path.join(rootdir, 'test'))
    assert prefix == 'test/' and node_prefix(text, rootdir) == ''
    whole = case_times(reports, prefix)
    assert sorted(whole) == _shard_listing(text) and len(whole) == 11
    for index in (1, 2):
        piece_text, piece_reports = _recorded21(f'piece{index}of2')
        ran = case_times(piece_reports, node_prefix(piece_text, os.path.join(rootdir, 'test')))
        assert sorted(ran) == _shard_listing(piece_text) == sorted(n for n in whole if shard_of(n, 2) == index)
    assert [len(case_times(_recorded21(f'piece{i}of2')[1])) for i in (1, 2)] == [7, 4]
    # without the prefix the hash is of another string: 3 of the 11 tests predicted in the wrong piece
    unprefixed = case_times(reports)
    ran_in = {node[len(prefix):]: shard_of(node, 2) for node in whole}
    assert sum(shard_of(node, 2) != ran_in[node] for node in unprefixed) == 3


def test_a_pieces_timeout_is_its_share_of_its_suites_with_its_floor():
    from eb_pytorch_cuda.testsuite.policy.settings import LEAST_TIMEOUT, piece_timeouts, rule_timeout
    from eb_pytorch_cuda.testsuite.policy.settings import timeout_of
    previous = {'long': 6000.0, 'middling': 1500.0, 'short': 10.0}
    timeouts = {'': 10800, **{suite: rule_timeout(seconds) for suite, seconds in previous.items()}}
    units = split(['long', 'middling', 'short', 'new'], previous)
    assert sum(not unit.whole for unit in units) == 10 + 3
    # equal shares: the rule applied to the piece's expected time (4 x 600 s; 4 x 500 s); whole suites: none
    assert piece_timeouts(timeouts, expected_of(units, previous), units) == {
        **{f'long#shard{i}/10': 2400 for i in range(1, 11)}, **{f'middling#shard{i}/3': 2000 for i in (1, 2, 3)}}
    assert (rule_timeout(600), rule_timeout(500), rule_timeout(100)) == (2400, 2000, LEAST_TIMEOUT)
    # shares by the tests' times (results.pieces.expected_of): a piece with more of them gets more, a tiny one
    # the floor
    three = [Piece('long', i, 3) for i in (1, 2, 3)]
    by_tests = {piece.key: seconds for piece, seconds in zip(three, [5000.0, 900.0, 100.0])}
    assert piece_timeouts(timeouts, by_tests, three) == {
        'long#shard1/3': 20000, 'long#shard2/3': 3600, 'long#shard3/3': LEAST_TIMEOUT}
    # an explicit test_suite_timeout is shared the same way, with the floor, never above itself
    equal = expected_of(three, previous)
    assert piece_timeouts({'': 7200}, equal, three) == dict.fromkeys(by_tests, 2400)
    assert piece_timeouts({'': 1000}, equal, three) == dict.fromkeys(by_tests, LEAST_TIMEOUT)
    assert piece_timeouts({'': 500}, equal, three) == dict.fromkeys(by_tests, 500)
    # what a job's worker runs a key with: the piece's own timeout, else its suite's, else the default
    spec = {'timeouts': {'': 10800, 'long': 24000, 'long#shard2/3': 3600}}
    assert [timeout_of(spec['timeouts'])(key) for key in ('long#shard2/3', 'long#shard1/3', 'long', 'other')] == [
        3600, 24000, 24000, 10800]


def test_a_jobs_worker_kills_a_hung_piece_at_the_pieces_own_timeout_not_its_suites(tmp_path):
    """The stand-in harness's test_hang (it sleeps for ever) run as a spread job's worker runs a piece: the
    spec's timeouts give the suite 600 s and the piece 2 s (what piece_timeouts writes there, scaled down)."""
    import sys
    import time
    from eb_pytorch_cuda.testsuite.spread.worker import plan_of_spec, run_one
    from eb_pytorch_cuda.testsuite.spread.workqueue import DEFAULTS
    standin_test_tree(tmp_path)
    (tmp_path / 'out').mkdir()
    spec = {**DEFAULTS, 'cwd': str(tmp_path / 'test'), 'argv': [sys.executable, 'run_test.py'],
            'output_dir': str(tmp_path / 'out'), 'timeouts': {'': 10800, 'test_hang': 600, 'test_hang#shard1/2': 2},
            'env': {}, 'slots': 1, 'suites': ['test_hang#shard1/2'], 'serial': []}
    started = time.time()
    record = run_one(plan_of_spec(spec, dict(os.environ)), 'test_hang#shard1/2', None)
    assert time.time() - started < 60
    assert record.suite.status == 'timed out' and record.suite.signal == 'timeout after 2s'
    assert record.piece == PieceLabel('test_hang', 1, 2)


@pytest.mark.parametrize('version', VERSIONS)
def test_without_a_rootdir_line_the_prefix_follows_pytests_rootdir_rules(tmp_path, version):
    """The 2.6 harness prints a passing suite's pytest header nowhere (measured: its `-i test_native_functions`
    output has no `rootdir:` line), so the rootdir comes from the tree: a pytest.ini above test/ (the 2.1-line
    tree), an ini file with a pytest section, a setup.py; else test/ itself (the Debian 2.6.0 copy the tests use)."""
    import shutil
    tree = REAL_TREES[version]  # its top-level files, in a place without a config above it
    if not os.path.isdir(os.path.join(tree, 'test')):
        missing(f'the {version} harness (tools/setup.sh)')
    copy = tmp_path / version.replace(' ', '-')
    (copy / 'test').mkdir(parents=True)
    for name in os.listdir(tree):
        if os.path.isfile(os.path.join(tree, name)):
            shutil.copy(os.path.join(tree, name), copy)
    assert node_prefix('no header', str(copy / 'test')) == {'2.1 line': 'test/', '2.6.0': ''}[version]


def test_the_prefix_follows_the_config_files_of_a_made_tree(tmp_path):
    tmp_path = tmp_path / 'made'
    (tmp_path / 'test').mkdir(parents=True)
    assert node_prefix('', str(tmp_path / 'test')) == ''
    (tmp_path / 'setup.cfg').write_text('[metadata]\nname = x\n')  # no pytest section: not a config
    (tmp_path / 'setup.py').write_text('')
    assert node_prefix('', str(tmp_path / 'test')) == 'test/'
    (tmp_path / 'test' / 'tox.ini').write_text('[pytest]\n')
    assert node_prefix('', str(tmp_path / 'test')) == ''
