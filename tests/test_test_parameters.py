"""Bad easyconfig test parameters and test-suite options: refused in one line naming the parameter, before
anything runs, never a wrong verdict; an easyconfig that exits or raises is bad input (exit 2), never a verdict.

The easyconfigs are read by real EasyBuild (easybuild-framework's EasyConfigParser, as `eb` reads them).
"""

import json
import shutil

import pytest

from helpers import cli, one_line_error, standin_test_tree
from test_settings import BAD_VALUES

HEADER = ("easyblock = 'PyTorch'\nname = 'PyTorch'\nversion = '2.1.2'\nhomepage = 'x'\ndescription = 'x'\n"
          "toolchain = SYSTEM\n")


def _easyconfig(directory, line):
    path = directory / 'PyTorch-2.1.2.eb'
    path.write_text(HEADER + line + '\n')
    return path


def _saved_pass(directory):
    path = directory / 'saved.json'
    path.write_text(json.dumps({'format': 'eb-pytorch-cuda-test-results',
                                'suites': [{'name': 'test_nn', 'status': 'passed', 'counts': {'passed': 3}}]}))
    return path


@pytest.mark.parametrize('line,problem', BAD_VALUES)
def test_report_with_a_bad_easyconfig_value_is_bad_input_not_a_verdict(tmp_path, line, problem):
    easyconfig = _easyconfig(tmp_path, line)
    done = cli('report', _saved_pass(tmp_path), '--easyconfig', easyconfig)
    one_line_error(done, easyconfig, problem)


@pytest.mark.parametrize('body,problem', [
    ('import sys\nsys.exit(0)', 'it called sys.exit(0)'),  # was: exit 0, no output (a PASS to a script)
    ('import sys\nsys.exit("bye\\nnow")', "it called sys.exit('bye\\nnow')"),
    ('raise SystemExit(1)', 'it called sys.exit(1)'),
    ('raise RuntimeError("from the\\neasyconfig")', 'from the'),  # (EasyBuild 4 shows it as a repr)
    ('class Odd(BaseException):\n    pass\nraise Odd()', 'Odd'),
    ('raise KeyboardInterrupt', 'it raised KeyboardInterrupt'),  # was: "interrupted (SIGINT)", exit 130
    # no handler sees these: each ended the reading process itself (was: exit 0 and nothing printed, a PASS)
    ('import os\nos._exit(0)', 'the process reading it ended with exit status 0 before it was read whole'),
    ('import os\nos._exit(1)', 'the process reading it ended with exit status 1 before it was read whole'),
    ('import os, signal\nos.kill(os.getpid(), signal.SIGKILL)', 'the process reading it was killed by SIGKILL'),
    ('import os, signal\nos.kill(os.getpid(), signal.SIGINT)', 'the process reading it was killed by SIGINT'),
    ('print("max_failed_tests = 0")\nimport sys\nsys.stdout.flush()\nimport os\nos._exit(0)', 'exit status 0'),
])
def test_an_easyconfig_that_exits_or_raises_is_bad_input(tmp_path, body, problem):
    easyconfig = _easyconfig(tmp_path, body)
    done = cli('report', _saved_pass(tmp_path), '--easyconfig', easyconfig)
    one_line_error(done, easyconfig, 'is not a readable easyconfig', problem)


def test_values_read_in_the_child_arrive_as_written(tmp_path):
    """ecread sends repr()s: int keys, tuples and nested dicts come back exactly (the judging reads them)."""
    from eb_pytorch_cuda.eb.ecpolicy import read_easyconfig
    easyconfig = _easyconfig(tmp_path, "known_test_failures = {'8.0': [('test_b', 'why\\n', 2)]}\n"
                                       "excluded_tests = {'': ('test_a',)}\nrerun_failed_tests = 10\n"
                                       "print('noise')")
    assert read_easyconfig(str(easyconfig)) == {'known_test_failures': {'8.0': [('test_b', 'why\n', 2)]},
                                                'excluded_tests': {'': ('test_a',)}, 'rerun_failed_tests': 10}


# an easyconfig that starts a daemon: a child that calls setsid() (its own session and group) and sleeps, holding
# the reading process's result pipe; then the easyconfig goes on (its values are read) or hangs itself
DAEMON = '''import os, time
pid = os.fork()
if pid == 0:
    os.setsid()
    time.sleep(600)
    os._exit(0)
fd = os.open({pidfile!r}, os.O_WRONLY | os.O_CREAT)  # (an open file object is no value EasyBuild can copy)
os.write(fd, str(pid).encode())
os.close(fd)
{rest}
'''


@pytest.mark.parametrize('rest', ['max_failed_tests = 3', 'time.sleep(600)'])
def test_an_easyconfig_daemon_is_stopped_with_the_reading_process(tmp_path, rest):
    """Before, the daemon left the reader's group, so stopping the group at the bound left it running under PID 1
    (and its hold on the result pipe made even an easyconfig that ends wait for the bound).  The supervisor is now
    its subreaper and stops every descendant: the values are read, or the bound is reached, and the daemon is gone
    either way.  The bound is set to 15 s here (READ_SECONDS: 300)."""
    import os
    import signal
    from eb_pytorch_cuda.eb.ecpolicy import read_easyconfig
    from eb_pytorch_cuda.errors import PluginError
    from procs import none_left, running
    pidfile = tmp_path / 'daemon.pid'
    easyconfig = _easyconfig(tmp_path, DAEMON.format(pidfile=str(pidfile), rest=rest))
    try:
        if rest.startswith('time.sleep'):
            with pytest.raises(PluginError, match=r'is not a readable easyconfig \(still not read after 15 s\)'):
                read_easyconfig(str(easyconfig), timeout=15)
        else:
            assert read_easyconfig(str(easyconfig), timeout=15) == {'max_failed_tests': 3}
        daemon = int(pidfile.read_text())
        assert none_left([daemon], 5), f'the daemon {daemon} still runs'
    finally:
        if pidfile.exists() and running(int(pidfile.read_text())):
            os.kill(int(pidfile.read_text()), signal.SIGKILL)


def test_test_suite_with_an_easyconfig_that_exits_runs_nothing(tmp_path, source):
    results = tmp_path / 'results'
    easyconfig = _easyconfig(tmp_path, 'import os\nos._exit(0)')
    done = cli('test-suite', source, '--python', shutil.which('python3'), '--results', results,
               '--easyconfig', easyconfig)
    one_line_error(done, easyconfig, 'exit status 0 before it was read whole')
    assert not results.exists()


@pytest.fixture
def source(tmp_path):
    # one quick suite: a refused option must not run any, a bug would
    return standin_test_tree(tmp_path / 'src', keep=('test_known_failure',)).parent


@pytest.mark.parametrize('option,value,minimum', [('--timeout', '-1', 1), ('--timeout', '0', 1),
                                                  ('--parallel', '0', 1), ('--rerun', '-2', 0), ('--jobs', '-1', 1),
                                                  ('--rerun', '100000', 0), ('--rerun', '11', 0)])
def test_test_suite_refuses_an_option_out_of_range_before_running_anything(tmp_path, source, option, value,
                                                                           minimum):
    results = tmp_path / 'results'
    done = cli('test-suite', source, '--python', shutil.which('python3'), '--results', results, option, value)
    upper = ' and <= 10' if option == '--rerun' else ''  # (settings.MAX_RERUNS)
    one_line_error(done, option, f'must be an integer >= {minimum}{upper}, got {value}')
    assert not results.exists()  # nothing ran, nothing was written


@pytest.mark.parametrize('line,problem', [BAD_VALUES[3], BAD_VALUES[9], BAD_VALUES[12]])
def test_test_suite_refuses_a_bad_easyconfig_value_before_running_anything(tmp_path, source, line, problem):
    results = tmp_path / 'results'
    easyconfig = _easyconfig(tmp_path, line)
    done = cli('test-suite', source, '--python', shutil.which('python3'), '--results', results,
               '--easyconfig', easyconfig)
    one_line_error(done, easyconfig, problem)
    assert not results.exists()


def test_a_missing_easyconfig_is_no_such_file_for_report_and_test_suite(tmp_path, source):
    missing = tmp_path / 'PyTorch-missing.eb'  # EasyBuild's parser says "Failed to determine get function"
    one_line_error(cli('report', _saved_pass(tmp_path), '--easyconfig', missing), missing, 'no such file')
    results = tmp_path / 'results'
    done = cli('test-suite', source, '--python', shutil.which('python3'), '--results', results, '--easyconfig',
               missing)
    one_line_error(done, missing, 'no such file')
    assert not results.exists()
