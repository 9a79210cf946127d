"""The typed records of the results store and the Slurm queue spec, read back through their one reader each.

A store written by an earlier version (tests/data/store-82948c5: written by that commit's real test-suite run,
not by hand) must still resume; a record or a spec whose keys have the wrong types is named (file, line or
key) and set aside or refused in one line, never a traceback in `eb`, `test-suite` or a job.  The typed records
(results.records.StoreRecord, results.model.Suite) write the bytes the writers wrote before they were types: the
kept stores and results files are read through from_json and written back by the store's and the step's writers.
"""

import json
import os
import shutil
import sys

import pytest

from helpers import standin_test_tree

from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.testsuite.results.model import SUITE_PASSED, Counts, RunResult, Suite, SuiteStatus
from eb_pytorch_cuda.testsuite.results.records import OPTIONAL_TYPES, PieceLabel, StoreRecord
from eb_pytorch_cuda.testsuite.results.saved import load_saved
from eb_pytorch_cuda.testsuite.run.here import run_here
from eb_pytorch_cuda.testsuite.run.plan import RunRequest, build_plan
from eb_pytorch_cuda.testsuite.run.command import TestCommand as Command  # not a pytest test class
from eb_pytorch_cuda.testsuite.run.store import ResultStore, parse_record
from eb_pytorch_cuda.testsuite.spread import worker
from eb_pytorch_cuda.testsuite.spread.workqueue import DEFAULTS, RecordReader, SuiteQueue, spec_from_json

DATA = os.path.join(os.path.dirname(__file__), 'data')
OLD = os.path.join(DATA, 'store-82948c5')  # written before cuda_counts existed
KEPT = os.path.join(DATA, 'store-2fa24cb')  # written by the writers of the commit before the typed records
PASSED = {'name': 'test_a', 'status': 'passed', 'counts': {'passed': 2}}


def _record(suite: dict, **keys) -> StoreRecord:
    return StoreRecord.from_json(dict(keys, suite=suite))


def _write_line(store: ResultStore, line: dict) -> None:
    """A line as a crafted or an earlier writer could have left it (ResultStore.append writes only records)."""
    with open(store.path, 'a') as handle:
        handle.write(json.dumps(dict(line, fingerprint=store.fingerprint)) + '\n')


def _old_store(tmp_path):
    path = tmp_path / 'results' / 'results.jsonl'
    path.parent.mkdir()
    shutil.copy(os.path.join(OLD, 'results.jsonl'), path)
    with open(path) as handle:
        fingerprint = json.loads(handle.readline())['fingerprint']
    return ResultStore(str(path), fingerprint)


def test_a_store_of_the_earlier_version_resumes_running_nothing(tmp_path):
    store = _old_store(tmp_path)
    with open(os.path.join(OLD, 'pytorch-test-results.json')) as handle:
        reported = json.load(handle)
    suites = [suite['name'] for suite in reported['suites']]
    test_dir = standin_test_tree(tmp_path)
    command = Command(str(test_dir), {}, [sys.executable, 'run_test.py'])
    plan = build_plan(RunRequest(command, dict(os.environ), str(tmp_path / 'out'), sys.executable, {'': 120},
                                 units=suites))
    ran = run_here(plan, plan.units, store)
    result = store.result(plan.suites)
    assert ran == [] and store.set_aside == []  # every old record read as a record: nothing ran again
    assert not (tmp_path / 'out').exists() or os.listdir(tmp_path / 'out') == []
    assert {name: (suite.status, suite.counts) for name, suite in result.suites.items()} == \
        {suite['name']: (suite['status'], suite['counts']) for suite in reported['suites']}
    assert set(store.load()) == set(suites) and all(isinstance(record.suite.counts, Counts)
                                                    for record in store.load().values())


@pytest.mark.parametrize('key,value,problem', [
    ('exit_code', '1', "exit_code: must be an integer or null, got '1'"),
    ('exit_code', True, 'exit_code: must be an integer or null, got True'),
    ('seconds', 'slow', "seconds: must be an integer or a number or null, got 'slow'"),
    ('gpu', 0, 'gpu: must be a string or null, got 0'),
    ('output_tail', None, 'output_tail: must be a string, got None'),
    ('corrected', 'yes', "corrected: must be true or false, got 'yes'"),
    ('batch_exit_code', 1.5, 'batch_exit_code: must be an integer or null, got 1.5'),
])
def test_a_record_with_a_key_of_the_wrong_type_is_named_and_set_aside(tmp_path, key, value, problem):
    """What a reader would crash on later (max() over a string exit code when pieces merge, a sum of
    seconds): refused where the line is read, like any other bad record."""
    assert key in OPTIONAL_TYPES
    store = ResultStore(str(tmp_path / 'r' / 'results.jsonl'), 'fp-a')
    store.append(_record(PASSED))
    _write_line(store, {'suite': dict(PASSED, name='test_b'), key: value})
    notes: list = []
    store.notice = notes.append
    assert set(store.load()) == {'test_a'}
    assert notes == [f'{store.path}: line 2: not a record ({problem}); set aside (a suite with no valid record '
                     f'runs again)']


def test_the_controller_reader_sets_aside_and_names_a_non_record_line(tmp_path):
    queue = SuiteQueue(str(tmp_path / 'q'))
    queue.create({'fingerprint': 'f'}, ['test_a', 'test_b'])
    store = queue.store('job1.host.1')
    store.append(_record(PASSED))
    with open(store.path, 'ab') as handle:
        handle.write(b'[1, 2]\n')  # was: AttributeError in the controller's wait loop ('list' has no .get)
    store.append(_record(dict(PASSED, name='test_b')))
    notes: list = []
    reader = RecordReader(queue, notes.append)
    assert [record.suite.name for record in reader.new_records()] == ['test_a', 'test_b']
    assert notes == [f'{store.path}: line 2: not a record (a JSON list, not an object); set aside']
    store.append(_record(dict(PASSED, name='test_c')))
    assert [record.suite.name for record in reader.new_records()] == ['test_c'] and len(notes) == 1


def test_a_spec_reads_back_with_the_defaults_an_earlier_version_left_out(tmp_path):
    queue = SuiteQueue(str(tmp_path / 'q'))
    written = {'cwd': '/t', 'argv': ['python', 'run_test.py'], 'env': {'A': '1'}, 'timeouts': {'': 60},
               'output_dir': '/o', 'fingerprint': 'f', 'slots': 2, 'expected_seconds': None}
    queue.create(written, ['test_a'])
    spec = spec_from_json(queue.path('spec.json'))
    assert spec == dict(DEFAULTS, **dict(written, expected_seconds={}), suites=['test_a'])
    assert queue.job_spec == spec


@pytest.mark.parametrize('text,problem', [
    ('[1, 2]', 'not a suite queue (a JSON list, not an object)'),
    ('{"suites": []}', 'not a suite queue (no fingerprint)'),
    ('{"fingerprint": "f", "suites": "test_a"}', "not a suite queue (suites: must be a list of strings, got 'test_a')"),
    ('{"fingerprint": "f", "suites": [], "timeouts": {"test_a": 5}}',
     "not a suite queue (timeouts: must be an object of seconds with a '' entry, got {'test_a': 5})"),
    ('{"fingerprint": "f", "suites": [], "slots": "2"}', "not a suite queue (slots: must be an integer, got '2')"),
    ('{"fingerprint": "f", "suites": [], "env": {"A": 1}}',
     "not a suite queue (env: must be an object of strings, got {'A': 1})"),
    ('{"fingerprint": "f", "suites": []}', 'not a suite queue for jobs (no cwd, argv, env, timeouts, output_dir)'),
])
def test_a_job_given_a_bad_spec_exits_2_with_one_line_naming_it(tmp_path, capsys, text, problem):
    (tmp_path / 'spec.json').write_text(text)
    assert worker.main([str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert captured.err == f'eb_pytorch_cuda.testsuite.spread.worker: {tmp_path / "spec.json"}: {problem}\n'
    assert captured.out == ''


def test_a_spec_that_cannot_be_read_is_refused_naming_the_file(tmp_path):
    (tmp_path / 'spec.json').write_bytes(b'{"fingerprint": "f", "suites": [\xff]}')
    with pytest.raises(PluginError) as raised:
        spec_from_json(str(tmp_path / 'spec.json'))
    assert str(raised.value).startswith(f'{tmp_path / "spec.json"}: not a suite queue (')


def _lines(path: str) -> list:
    with open(path, 'rb') as handle:
        return handle.read().splitlines(keepends=True)


def _copied_by_the_store(tmp_path, kept: str, records: list) -> bytes:
    """The file the store writes when it appends records (the one writer of a line: ResultStore.append)."""
    fingerprints = {record.fingerprint for record in records}
    assert len(fingerprints) == 1
    store = ResultStore(str(tmp_path / os.path.basename(kept) / 'results.jsonl'), fingerprints.pop())
    for record in records:
        store.append(record)
    with open(store.path, 'rb') as handle:
        return handle.read()


def test_each_kept_store_line_reads_typed_and_writes_back_byte_for_byte(tmp_path):
    """The records of a batch, of a suite alone and of a piece whose jobs all died, as the writers of 2fa24cb
    wrote them (tests/data/store-2fa24cb): from_json, then ResultStore.append, gives the same file."""
    lines = _lines(os.path.join(KEPT, 'results.jsonl'))
    records = []
    for number, line in enumerate(lines, 1):
        record, problem = parse_record(line.rstrip(b'\n'), f'line {number}')
        assert problem is None and record is not None
        records.append(record)
    assert all(isinstance(r.suite.status, SuiteStatus) and isinstance(r.suite.counts, Counts) for r in records)
    assert [r.batch_seconds is not None for r in records] == [True, True, True, False, False]  # a batch's, then
    assert records[3].notes == () and records[4].notes is None  # a suite alone, a piece never finished (no notes)
    assert records[4].piece == PieceLabel('test_flaky', 2, 3) and records[4].suite.status == 'no summary'
    assert _copied_by_the_store(tmp_path, KEPT, records) == b''.join(lines)


def test_an_earlier_versions_line_is_written_back_with_the_key_added_since(tmp_path):
    """A record of 82948c5 has no cuda_counts in its suite (added later; today's writer always writes it, null
    when unknown): written back, every other key is there, in its order, with its value."""
    lines = _lines(os.path.join(OLD, 'results.jsonl'))
    records = [parse_record(line)[0] for line in lines]
    written = _copied_by_the_store(tmp_path, OLD, records).splitlines(keepends=True)
    assert len(written) == len(lines) == 3
    for old, new in zip(lines, written):
        old_data, new_data = json.loads(old), json.loads(new)
        assert list(new_data) == list(old_data) and list(new_data['suite']) == list(old_data['suite']) + ['cuda_counts']
        assert new_data == dict(old_data, suite=dict(old_data['suite'], cuda_counts=None))


def test_the_queue_reader_gives_the_same_typed_records_as_the_store(tmp_path):
    """A worker's results file is a store (spread/workqueue): the controller's reader gives records the store
    writes back byte for byte."""
    lines = _lines(os.path.join(KEPT, 'results.jsonl'))
    queue = SuiteQueue(str(tmp_path / 'q'))
    queue.create({'fingerprint': json.loads(lines[0])['fingerprint']}, ['test_crash'])
    with open(queue.path('results', 'job1.host.1.jsonl'), 'wb') as handle:
        handle.write(b''.join(lines))
    records = RecordReader(queue).new_records()
    assert records == [parse_record(line)[0] for line in lines]
    assert _copied_by_the_store(tmp_path, KEPT, records) == b''.join(lines)


@pytest.mark.parametrize('path,current', [('store-2fa24cb/pytorch-test-results.json', True),
                                          ('store-82948c5/pytorch-test-results.json', False),
                                          ('pytorch26-plain/test-suite.json', False)])
def test_the_suites_of_a_kept_results_file_are_written_back_as_they_were(path, current):
    """A results JSON (service: json.dumps(indent=1) plus a newline): its suites through Suite.from_json and
    to_json give the same file, byte for byte where it was written with cuda_counts (current), else with
    only that key added."""
    with open(os.path.join(DATA, path)) as handle:
        text = handle.read()
    data = json.loads(text)
    suites = load_saved(os.path.join(DATA, path)).to_dict()['suites']
    assert all(isinstance(suite.status, SuiteStatus) for suite in RunResult.from_dict(data).suites.values())
    if current:
        assert json.dumps(dict(data, suites=suites), indent=1, allow_nan=False) + '\n' == text
    else:
        assert suites == [dict(suite, cuda_counts=None) for suite in data['suites']]


def test_a_status_and_counts_are_typed_and_write_as_the_plain_values():
    suite = Suite('test_a', counts=Counts(failed=1, passed=3))
    suite.counts['rerun'] += 2
    assert suite.status is SUITE_PASSED and f'{suite.status}' == str(suite.status) == 'passed'
    assert suite.counts == {'failed': 1, 'errors': 0, 'passed': 3, 'skipped': 0, 'xfailed': 0, 'xpassed': 0, 'rerun': 2}
    assert json.dumps(suite.to_json()['status']) == json.dumps(suite.status) == '"passed"'
    assert Suite.from_json(suite.to_json()) == suite
    with pytest.raises(KeyError):
        suite.counts['deselected'] = 1  # no count the model does not know
