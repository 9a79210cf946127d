"""The typed records of the results store and the Slurm queue spec, read back through their one reader each.

A store written by an earlier version (tests/data/store-82948c5: written by that commit's real test-suite run,
not by hand) must still resume; a record or a spec whose keys have the wrong types is named (file, line or
key) and set aside or refused in one line, never a traceback in `eb`, `test-suite` or a job.
"""

import json
import os
import shutil
import sys

import pytest

from eb_pytorch_cuda import standins
from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.testsuite.results.records import OPTIONAL_TYPES, StoreRecord
from eb_pytorch_cuda.testsuite.run.here import run_here
from eb_pytorch_cuda.testsuite.run.plan import RunRequest, build_plan
from eb_pytorch_cuda.testsuite.run.command import TestCommand as Command  # not a pytest test class
from eb_pytorch_cuda.testsuite.run.store import ResultStore
from eb_pytorch_cuda.testsuite.spread import worker
from eb_pytorch_cuda.testsuite.spread.workqueue import DEFAULTS, RecordReader, SuiteQueue, spec_from_json

OLD = os.path.join(os.path.dirname(__file__), 'data', 'store-82948c5')
PASSED = {'name': 'test_a', 'status': 'passed', 'counts': {'passed': 2}}


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
    test_dir = tmp_path / 'test'
    shutil.copytree(os.path.join(standins.TORCH_SOURCES, 'test'), test_dir)
    command = Command(str(test_dir), {}, [sys.executable, 'run_test.py'])
    plan = build_plan(RunRequest(command, dict(os.environ), str(tmp_path / 'out'), sys.executable, {'': 120},
                                 units=suites))
    ran = run_here(plan, plan.units, store)
    result = store.result(plan.suites)
    assert ran == [] and store.set_aside == []  # every old record read as a record: nothing ran again
    assert not (tmp_path / 'out').exists() or os.listdir(tmp_path / 'out') == []
    assert {name: (suite.status, suite.counts) for name, suite in result.suites.items()} == \
        {suite['name']: (suite['status'], suite['counts']) for suite in reported['suites']}
    assert set(store.load()) == set(suites) and all(set(record) <= set(StoreRecord.__annotations__)
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
    store.append({'suite': PASSED})
    store.append({'suite': dict(PASSED, name='test_b'), key: value})  # type: ignore[misc]
    notes: list = []
    store.notice = notes.append
    assert set(store.load()) == {'test_a'}
    assert notes == [f'{store.path}: line 2: not a record ({problem}); set aside (a suite with no valid record '
                     f'runs again)']


def test_the_controller_reader_sets_a_worker_line_that_is_no_record_aside_and_names_it(tmp_path):
    queue = SuiteQueue(str(tmp_path / 'q'))
    queue.create({'fingerprint': 'f'}, ['test_a', 'test_b'])
    store = queue.store('job1.host.1')
    store.append({'suite': PASSED})
    with open(store.path, 'ab') as handle:
        handle.write(b'[1, 2]\n')  # was: AttributeError in the controller's wait loop ('list' has no .get)
    store.append({'suite': dict(PASSED, name='test_b')})
    notes: list = []
    reader = RecordReader(queue, notes.append)
    assert [record['suite']['name'] for record in reader.new_records()] == ['test_a', 'test_b']
    assert notes == [f'{store.path}: line 2: not a record (a JSON list, not an object); set aside']
    store.append({'suite': dict(PASSED, name='test_c')})
    assert [record['suite']['name'] for record in reader.new_records()] == ['test_c'] and len(notes) == 1


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
