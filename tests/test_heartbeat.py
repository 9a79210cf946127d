"""A long step shows it is alive: `test-suite --heartbeat S` on the stand-in harness prints a line at least every S
seconds naming the running suite and how long it has run, then (with the previous results' times) an ETA; progress
lines carry the suite's time and the run's; the reports list the slowest suites.  PyTorch's own harness:
tests/test_heartbeat_real.py."""

import json
import re
import shutil
import subprocess
import sys

from helpers import module_env, one_line_error, run_main, standin_source, suite_command

# a stand-in suite (no real suite runs for a set time on demand): one test that sleeps 10 s
SLEEPS = '''"""A stand-in suite that sleeps 10 s: what the heartbeat is heard over."""
import time
import unittest

from common import run_tests


class TestSleeps(unittest.TestCase):
    def test_sleeps(self):
        time.sleep(10)


if __name__ == '__main__':
    run_tests(__file__)
'''
BEAT = re.compile(r'^== still running after (?P<run>\S+): (?P<running>.*); (?P<done>\d+)/(?P<all>\d+) suites done; '
                  r'(?P<eta>.*)$')


def _seconds(text):
    """'12s' or '1m02s' as seconds."""
    match = re.fullmatch(r'(?:(\d+)m)?(\d+)s', text)
    assert match, text
    return int(match.group(1) or 0) * 60 + int(match.group(2))


def _run(source, results, *extra):
    done = subprocess.run(suite_command(source, results, '--heartbeat', 2, '--format', 'json', *extra),
                          env=module_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return done


def test_a_2s_heartbeat_prints_three_lines_on_a_10s_suite_then_an_eta(tmp_path):
    source = standin_source(tmp_path / 'src')
    (source / 'test' / 'test_sleeps.py').write_text(SLEEPS)
    first = _run(source, tmp_path / 'first')
    beats = [BEAT.match(line) for line in first.stderr.splitlines() if line.startswith('== still running')]
    assert len(beats) >= 3 and all(beats), first.stderr
    named = [beat for beat in beats if beat['running'] != 'no suite announced yet']
    assert len(named) >= 3, first.stderr  # the harness announces it at once; the lines name it from then on
    times = [_seconds(re.fullmatch(r'test_sleeps \((\S+)\)', beat['running']).group(1)) for beat in named]
    assert times == sorted(times) and times[-1] >= 6, times  # its own time, growing
    assert all((beat['done'], beat['all']) == ('0', '1') and beat['eta'] == 'no ETA (no previous results)'
               for beat in beats)
    settled = [line for line in first.stderr.splitlines() if line.startswith('== suite 1/1: ')]
    assert re.fullmatch(r'== suite 1/1: test_sleeps passed in (1[0-9]|[2-9][0-9])s \(0 suite\(s\) failed so far; '
                        r'\S+ into the run\)', settled[0]), settled
    data = json.loads(first.stdout)
    assert [entry['name'] for entry in data['slowest_suites']] == ['test_sleeps']
    assert data['slowest_suites'][0]['seconds'] >= 10
    # the next run, with this one's results as the previous ones (test-suite reads DIR's results JSON): an ETA
    (tmp_path / 'second').mkdir()
    shutil.copy(tmp_path / 'first' / 'pytorch-test-results.json', tmp_path / 'second')
    second = _run(source, tmp_path / 'second')
    etas = [BEAT.match(line)['eta'] for line in second.stderr.splitlines() if line.startswith('== still running')]
    assert len(etas) >= 3, second.stderr
    left = [_seconds(re.fullmatch(r"ETA (\S+) \(previous results' times at this run's pace\)", eta).group(1))
            for eta in etas if eta.startswith('ETA ')]
    assert len(left) >= 3 and left == sorted(left, reverse=True) and left[0] <= 15, etas  # counts down


def test_a_heartbeat_of_0_is_refused_in_one_line_before_anything_runs(tmp_path):
    done = run_main('test-suite', tmp_path / 'src', '--python', '/bin/false', '--heartbeat', 0, '--results',
                    tmp_path / 'r')
    one_line_error(done, '--heartbeat', 'must be an integer >= 1, got 0')
    assert not (tmp_path / 'r').exists()


def test_an_easyconfigs_heartbeat_is_read_and_the_option_wins(tmp_path):
    """test_suite_heartbeat of an easyconfig (read by real EasyBuild's parser, eb/ecpolicy) sets the heartbeat;
    --heartbeat wins over it."""
    source = standin_source(tmp_path / 'src')
    (source / 'test' / 'test_sleeps.py').write_text(SLEEPS.replace('time.sleep(10)', 'time.sleep(5)'))
    easyconfig = tmp_path / 'PyTorch-2.1.2.eb'
    easyconfig.write_text("easyblock = 'PyTorch'\nname = 'PyTorch'\nversion = '2.1.2'\nhomepage = 'x'\n"
                          "description = 'x'\ntoolchain = SYSTEM\ntest_suite_heartbeat = 1\n")

    def beats(results, *extra):
        done = subprocess.run(suite_command(source, tmp_path / results, '--easyconfig', easyconfig, *extra),
                              env=module_env(), capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
        return sum(line.startswith('== still running') for line in done.stderr.splitlines())
    assert beats('r1') >= 3
    assert beats('r2', '--heartbeat', 600) == 0
    easyconfig.write_text(easyconfig.read_text().replace('test_suite_heartbeat = 1', "test_suite_heartbeat = '60'"))
    one_line_error(run_main('test-suite', source, '--python', sys.executable, '--easyconfig', easyconfig),
                   easyconfig, "test_suite_heartbeat must be an integer >= 1, got '60'")
