"""run/heartbeat's record and line, read with a clock the test steps (the line's times are its only input that a
real run cannot set); the setting's default and its refusals (policy/settings); results/seconds.shown.  A real
run's heartbeat is in tests/test_heartbeat.py (stand-in harness) and tests/test_heartbeat_real.py (PyTorch's)."""

import json

import pytest

from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.testsuite.policy import settings
from eb_pytorch_cuda.testsuite.results.previous import History
from eb_pytorch_cuda.testsuite.results.seconds import shown
from eb_pytorch_cuda.testsuite.run.heartbeat import (Estimate, Heartbeat, HeartbeatSettings, estimate, running_text,
                                                     settings_of)
from eb_pytorch_cuda.testsuite.run.plan import RunPlan, RunRequest


class Clock:
    """Seconds the test sets (time.monotonic's role)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_default_heartbeat_stays_5_minutes_everywhere():
    assert settings.DEFAULT_HEARTBEAT == 300
    assert settings.DEFAULTS['test_suite_heartbeat'] == 300
    assert settings.TestSettings().test_suite_heartbeat == 300
    assert settings.TestSettings.from_values({}).test_suite_heartbeat == 300
    assert settings.TestSettings.from_values({'test_suite_heartbeat': None}).test_suite_heartbeat == 300
    assert HeartbeatSettings().seconds == 300 and settings_of(None, History()).seconds == 300
    assert RunRequest.__dataclass_fields__['heartbeat'].default.seconds == 300
    assert isinstance(RunPlan.heartbeat, property)  # the request's
    assert 'test_suite_heartbeat' in settings.JUDGING  # how the step runs, not what is built: not in the fingerprint


@pytest.mark.parametrize('value', [0, -5, '60', True, 2.5])
def test_a_heartbeat_not_whole_seconds_is_refused_naming_the_parameter(value):
    with pytest.raises(PluginError) as err:
        settings.TestSettings.from_values({'test_suite_heartbeat': value}, 'my.eb')
    assert str(err.value).startswith('my.eb: test_suite_heartbeat must be an integer >= 1, got ')


def test_settings_of_reads_the_previous_results_times(tmp_path):
    previous = tmp_path / 'pytorch-test-results.json'
    previous.write_text(json.dumps({'suite_seconds': {'test_nn': 600.0, 'test_bad': -1},
                                    'suites': [{'name': 'test_torch', 'seconds': 120}]}))
    found = settings_of(2, History.read(str(previous)))
    assert found == HeartbeatSettings(2, {'test_nn': 600.0, 'test_torch': 120.0})  # -1 is no time: left out
    assert settings_of(2, History.read(str(tmp_path / 'missing.json'))).previous_seconds == {}


def test_shown_reads_as_a_person_reads_a_time():
    assert [shown(s) for s in (0, 0.4, 42, 59.6, 60, 725, 3599, 3600, 7830, 36000)] == \
        ['0s', '0s', '42s', '1m00s', '1m00s', '12m05s', '59m59s', '1h00m', '2h11m', '10h00m']


def test_the_estimate_runs_at_this_runs_own_pace():
    expected = {'a': 100.0, 'b': 300.0, 'c': 50.0}
    # twice as slow as the previous run: 100 previous seconds got through in 200 s of wall time
    found = estimate(['b', 'c', 'x'], {'b': 40.0}, expected, finished=100.0, wall=240.0)
    # got through: a's 100 (finished) + b's 40 so far = 140 in 240 s; left: b 260 + c 50 = 310 -> 310 * 240 / 140
    assert found == Estimate(310 * 240 / 140, 2, 3)
    assert estimate(['x'], {}, expected, 100.0, 240.0) is None  # nothing left has a previous time
    assert estimate(['c'], {}, expected, 0.0, 240.0) is None  # nothing with a previous time has run yet
    assert estimate(['b'], {'b': 500.0}, expected, 0.0, 500.0).seconds == 0.0  # past its previous time


def test_running_text_names_the_longest_running_first_and_counts_the_rest():
    elapsed = {f'test_{n}': float(n) for n in range(8)}
    assert running_text(elapsed) == ('test_7 (7s), test_6 (6s), test_5 (5s), test_4 (4s), test_3 (3s) '
                                     'and 3 more')
    assert running_text({}) == 'no suite announced yet'


def test_the_line_says_what_runs_since_when_what_is_done_and_the_eta():
    clock, said = Clock(), []
    units = ['test_a', 'test_b', 'test_c', 'test_old']
    beat = Heartbeat(HeartbeatSettings(300, {'test_a': 60.0, 'test_b': 600.0}), units, said.append, done=['test_old'],
                     clock=clock)
    beat.started('test_a')
    clock.now += 30
    beat.started('test_b')
    beat.started('test_a')  # said again while it runs: its start stays
    clock.now += 30
    beat.ended('test_a')
    beat.started('test_c')
    clock.now += 240
    beat.beat()
    # test_a's 60 s and test_b's 270 s so far, in 300 s: pace 1.1; left: test_b's 330 s -> 300 s
    assert said == ['still running after 5m00s: test_b (4m30s), test_c (4m00s); 2/4 suites done; ETA 5m00s '
                    "(previous results' times at this run's pace; 1 of the 2 suites left have no previous time)"]
    beat.beat()
    clock.now += 299
    beat.beat()
    assert len(said) == 1  # not due yet: one line every 300 s
    clock.now += 1
    beat.beat()
    assert len(said) == 2 and said[1].startswith('still running after 10m00s: ')


def test_without_previous_results_the_line_says_there_is_no_eta():
    clock, said = Clock(), []
    beat = Heartbeat(HeartbeatSettings(2), ['test_a'], said.append, clock=clock)
    clock.now += 2
    beat.beat()
    assert said == ['still running after 2s: no suite announced yet; 0/1 suites done; no ETA (no previous results)']


def test_a_queues_view_starts_and_ends_what_it_sees():
    clock, said = Clock(), []
    beat = Heartbeat(HeartbeatSettings(10, {'test_a': 100.0}), ['test_a', 'test_b#shard1/2'], said.append,
                     expected={'test_b#shard1/2': 50.0}, clock=clock)
    beat.running_now({'test_a': 'job-1', 'test_b#shard1/2': 'job-2'}, {})
    clock.now += 20
    beat.running_now(['test_b#shard1/2'], {'test_a': object()})
    clock.now += 5
    line = beat.line()
    assert 'test_b#shard1/2 (25s); 1/2 suites done; ETA ' in line, line
    assert beat.running.keys() == {'test_b#shard1/2'} and beat.finished == 100.0


def test_without_progress_nothing_is_said_and_nothing_ticks():
    beat = Heartbeat(HeartbeatSettings(0.05), ['test_a'])
    with beat.ticking():
        beat.beat()
    assert beat.line().startswith('still running after ')


def test_a_suite_between_two_harness_runs_is_timed_from_its_own_start():
    """2.6 runs a suite's `-m serial` session, then (after every other suite's) its main one: the line times the
    run in progress, as the timeout does (run/batches._overdue)."""
    clock, said = Clock(), []
    beat = Heartbeat(HeartbeatSettings(10), ['test_a'], said.append, clock=clock)
    beat.runs('test_a', True)
    clock.now += 50
    beat.runs('test_a', False)
    assert beat.line().endswith(': no suite announced yet; 0/1 suites done; no ETA (no previous results)')
    clock.now += 50
    beat.runs('test_a', True)
    clock.now += 7
    assert 'test_a (7s)' in beat.line()
    beat.ended('test_a')
    assert ': every suite has ended, run_test.py is finishing; 1/1 suites done;' in beat.line()
