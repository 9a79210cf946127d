"""Times that are not times (inf, nan, 1e999, -5, 401 digits), in every file a time is read from: an XML report, a
log's summary, a store record, the previous results JSON.  Each is set aside with a note by the one number
reader (testsuite/results/seconds); the run gives its verdict and a results JSON that reads back, and the rerun
on the same results (which reads that JSON as the previous one) does too.

The runs are `test-suite` on the stand-in harness with a suite that says it took 400 s (a suite of KEPT_FROM =
300 s or more keeps its tests' times from its XML report) and writes its report with the time under test.
"""

import json
import subprocess
import sys

import pytest

from helpers import module_env, standin_source, suite_command
from eb_pytorch_cuda.testsuite.results import previous
from eb_pytorch_cuda.testsuite.results.previous import History
from eb_pytorch_cuda.testsuite.policy.settings import DEFAULT_SUITE_TIMEOUT
from eb_pytorch_cuda.testsuite.results.saved import no_constants
from eb_pytorch_cuda.testsuite.results.seconds import NotSeconds, seconds_in_text, seconds_of
from eb_pytorch_cuda.testsuite.run.store import ResultStore
from eb_pytorch_cuda.testsuite import service

BAD = ['inf', 'nan', '1e999', '-5', '9' * 401]

# prints what unittest prints for two tests that took 400 s in all, and writes their XML report: test_bad with
# the time under test, test_good with 1.5 s
SUITE = '''
import os, sys, time
HERE = os.path.dirname(os.path.abspath(__file__))
print('test_bad (__main__.TestSlow.test_bad) ... ok')
print('test_good (__main__.TestSlow.test_good) ... ok')
print()
print('-' * 70)
print('Ran 2 tests in 400.000s')
print()
print('OK')
source = os.environ.get('TEST_REPORT_SOURCE_OVERRIDE') or 'python-unittest'
directory = os.path.join(HERE, 'test-reports', source, 'test_slow')
os.makedirs(directory, exist_ok=True)
with open(os.path.join(directory, 'TEST-test_slow-%d.xml' % time.time_ns()), 'w') as out:
    out.write('<?xml version="1.0" encoding="UTF-8"?><testsuite name="test_slow" tests="2">'
              '<testcase classname="__main__.TestSlow" name="test_bad" time="%s" file="test_slow.py"/>'
              '<testcase classname="__main__.TestSlow" name="test_good" time="1.5" file="test_slow.py"/>'
              '</testsuite>' % {time!r})
'''


@pytest.fixture
def tree(tmp_path):
    return standin_source(tmp_path / 'src')


def _test_suite(tmp_path, source):
    done = subprocess.run(suite_command(source, tmp_path / 'results', '--format', 'json'), env=module_env(),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
    assert 'Traceback' not in done.stderr, done.stderr
    return done


def _strict(text):
    """The JSON as `report` reads it: NaN and Infinity are no numbers."""
    return json.loads(text, parse_constant=no_constants)


@pytest.mark.parametrize('time', BAD, ids=['inf', 'nan', '1e999', '-5', '401-digits'])
def test_a_bad_xml_time_is_set_aside_and_run_and_rerun_give_a_verdict(tmp_path, tree, time):
    (tree / 'test' / 'test_slow.py').write_text(SUITE.format(time=time))
    for run in (1, 2):  # the second run's previous results are the first's JSON; its store holds the record
        done = _test_suite(tmp_path, tree)
        assert done.returncode == 0, done.stderr
        written = _strict(done.stdout)
        assert written['verdict'] == 'pass'
        saved = (tmp_path / 'results' / 'pytorch-test-results.json').read_text()
        assert _strict(saved) == written  # what we write is what we read back
        assert written['suite_seconds'] == {'test_slow': 400.0}
        assert written['test_seconds'] == {'test_slow': {'test/test_slow.py::__main__.TestSlow::test_good': 1.5}}
        note, = written['notes']['test_slow']
        assert ('test test/test_slow.py::__main__.TestSlow::test_bad: must be a finite number of seconds from 0 to '
                '1e+09, got ') in note
        assert note.endswith("its time set aside (the next build's split does without it)")
        assert main_report(tmp_path) == 0  # `report` reads it back


def main_report(tmp_path):
    env = module_env()
    return subprocess.run([sys.executable, '-m', 'eb_pytorch_cuda', 'report',
                           str(tmp_path / 'results' / 'pytorch-test-results.json')], env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120).returncode


@pytest.mark.parametrize('number', ['1e999', '9' * 401, '-5', 'NaN', '"12"'])
def test_previous_results_with_times_that_are_no_times_plan_without_them(tmp_path, tree, number):
    """suite_timeouts, the spread's suite and test times: no OverflowError, a note naming the file, the good
    entries kept; and a whole `test-suite` run reading that file as its previous results."""
    (tree / 'test' / 'test_slow.py').write_text(SUITE.format(time='2.5'))
    (tmp_path / 'results').mkdir()
    path = tmp_path / 'results' / 'pytorch-test-results.json'
    path.write_text('{"suite_seconds": {"test_slow": %s, "test_ok": 100},'
                    ' "suites": [{"name": "test_x", "seconds": %s}],'
                    ' "test_seconds": {"test_slow": {"a::b": %s, "a::c": 2}}}' % (number, number, number))
    notes = []
    history = History.read(str(path), notes.append)  # read once, each bad time said once
    assert service.suite_timeouts(None, history) == {'': DEFAULT_SUITE_TIMEOUT, 'test_ok': 600}
    assert history.suite_seconds == {'test_ok': 100.0}
    assert history.test_seconds == {'test_slow': {'a::c': 2.0}}
    assert len(notes) == 3 and all(note.startswith(f'{path}: ') and note.endswith('; set aside') for note in notes)
    assert "suite_seconds: 'test_slow': must be a finite" in notes[0]
    assert "suites[].seconds: 'test_x': must be a finite" in notes[1]
    done = _test_suite(tmp_path, tree)
    assert done.returncode == 0 and _strict(done.stdout)['verdict'] == 'pass'
    assert f"== {path}: suite_seconds: 'test_slow': must be a finite number" in done.stderr


@pytest.mark.parametrize('record', [
    {'test_seconds': {'t': '1e999'}}, {'seconds': '-5'}, {'batch_seconds': '1e999'}, {'seconds': '9' * 401},
    {'suite': {'seconds': '1e999'}}, {'suite': {'seconds': '9' * 401}}])
def test_a_store_record_with_a_bad_time_is_set_aside_and_its_suite_reruns(tmp_path, record):
    """Written as a crafted line (json.dumps cannot write 1e999: the numbers go in as text)."""
    base = {'name': 'test_a', 'status': 'passed', 'counts': {'passed': 1}, 'failed_tests': [], 'sources': ['log']}
    suite = dict(base, **{key: f'@{value}@' for key, value in record.get('suite', {}).items()})
    line = dict({key: f'@{value}@' for key, value in record.items() if key != 'suite'}, suite=suite,
                fingerprint='f')
    if 'test_seconds' in record:
        line['test_seconds'] = {'t': f"@{record['test_seconds']['t']}@"}
    text = json.dumps(line).replace('"@', '').replace('@"', '')
    good = json.dumps({'suite': dict(base, name='test_b'), 'seconds': 1.5, 'fingerprint': 'f'})
    (tmp_path / 'r.jsonl').write_text(text + '\n' + good + '\n')
    notes = []
    store = ResultStore(str(tmp_path / 'r.jsonl'), 'f', notes.append)
    assert list(store.load()) == ['test_b']
    note, = notes
    assert note.startswith(f'{tmp_path / "r.jsonl"}: line 1: not a record (') and 'seconds' in note
    assert 'must be a finite number of seconds from 0 to 1e+09' in note and note.endswith('runs again)')


@pytest.mark.parametrize('value', [True, None, '12', 10 ** 401, float('inf'), float('nan'), -5, 1e9 + 1, [1]])
def test_the_one_number_reader_refuses_what_is_no_time(value):
    with pytest.raises(NotSeconds, match='must be a finite number of seconds from 0 to 1e[+]09'):
        seconds_of(value)


@pytest.mark.parametrize('text', BAD + ['1_0', ' 1', '+1', 'infinity', '1.2.3', '', '1e9999', '2e9'])
def test_the_one_number_reader_refuses_text_that_is_no_time(text):
    with pytest.raises(NotSeconds, match='must be a finite number of seconds from 0 to 1e[+]09'):
        seconds_in_text(text)


@pytest.mark.parametrize('value, expected', [(7, 7.0), (2.25, 2.25), (-0.0, 0.0), (10 ** 9, 1e9), (0, 0.0)])
def test_the_one_number_reader_takes_times_and_they_write_and_read_back(value, expected):
    assert seconds_of(value) == expected
    assert json.loads(json.dumps(seconds_of(value), allow_nan=False)) == expected


@pytest.mark.parametrize('text, expected', [('0', 0.0), ('1.5', 1.5), ('.5', 0.5), ('3.', 3.0), ('1e3', 1000.0),
                                            ('400.000', 400.0)])
def test_the_one_number_reader_takes_times_written_as_text(text, expected):
    assert seconds_in_text(text) == expected


def test_a_previous_results_file_that_is_no_json_object_gives_no_times(tmp_path):
    (tmp_path / 'r.json').write_text('[1e999]')
    assert previous.load(str(tmp_path / 'r.json')) == {}
    assert previous.load(str(tmp_path / 'none.json')) == {}
