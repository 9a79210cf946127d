"""Bad input: one-line error naming the file and the problem, non-zero exit, nothing modified."""

import json
import os
import subprocess

import pytest

from helpers import cli, console_script, standin_test_tree


def _assert_clean_failure(done, path, problem):
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert str(path) in lines[0] and problem in lines[0], lines[0]


def _snapshot(directory):
    return {name: open(os.path.join(directory, name), 'rb').read() for name in sorted(os.listdir(directory))
            if name.endswith('.so')}


@pytest.fixture
def bad_files(tmp_path, standin8):
    good = open(standin8.torch_lib, 'rb').read()
    tmp_path = tmp_path / 'bad'
    tmp_path.mkdir()
    files = {
        'text.so': b'just some text\n',
        'script.so': b'/* GNU ld script */\nINPUT(libfoo.so.1)\n',
        'group.so': b'GROUP ( /lib/libc.so.6 )\n',
        'empty.so': b'',
        'tiny.so': good[:30],
        'truncated.so': good[:len(good) // 3],
        'header_only.so': good[:64],
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    return tmp_path


@pytest.mark.parametrize('name,problem', [
    ('text.so', 'is not an ELF file'),
    ('script.so', 'is a linker script'),
    ('group.so', 'is a linker script'),
    ('empty.so', 'is not an ELF file'),
    ('tiny.so', 'is a truncated ELF file'),
    ('truncated.so', 'truncated'),
    ('header_only.so', 'truncated'),
])
@pytest.mark.parametrize('command', ['add-needed', 'check-needed'])
def test_bad_file_gives_one_line_error_and_is_untouched(bad_files, name, problem, command):
    before = _snapshot(bad_files)
    done = cli(command, bad_files / name, 'libcudnn_cnn_train.so.8')
    _assert_clean_failure(done, bad_files / name, problem)
    assert _snapshot(bad_files) == before


def test_missing_file_and_directory(tmp_path):
    _assert_clean_failure(cli('add-needed', tmp_path / 'nope.so', 'libx.so.1'), tmp_path / 'nope.so', 'no such file')
    _assert_clean_failure(cli('add-needed', tmp_path, 'libx.so.1'), tmp_path, 'is a directory')


def test_relocatable_object_is_rejected(tmp_path):
    source = tmp_path / 'a.c'
    source.write_text('int f(void) { return 1; }\n')
    import subprocess
    subprocess.run(['gcc', '-c', '-fPIC', '-o', str(tmp_path / 'a.o'), str(source)], check=True)
    _assert_clean_failure(cli('add-needed', tmp_path / 'a.o', 'libx.so.1'), tmp_path / 'a.o', 'ET_REL')


def test_foreign_architecture_is_read_but_not_loaded(standin8, tmp_path):
    # same file with e_machine set to AArch64: readable and patchable, but the host loader cannot map it
    foreign = tmp_path / 'foreign.so'
    data = bytearray(open(standin8.torch_lib, 'rb').read())
    data[18:20] = (183).to_bytes(2, 'little')
    foreign.write_bytes(bytes(data))
    done = cli('add-needed', foreign, 'libcudnn.so.8', check_rc=0)  # reading is architecture-independent
    assert 'already present' in done.stdout
    _assert_clean_failure(cli('check-needed', '--load', foreign, 'libcudnn.so.8'), foreign,
                          'cannot be loaded on this host: it is EM_AARCH64')


def test_read_only_directory_is_refused_before_anything_is_written(standin8):
    if os.geteuid() == 0:
        pytest.skip('root ignores directory permissions')  # pragma: no cover
    libdir = os.path.dirname(standin8.torch_lib)
    os.chmod(libdir, 0o555)
    try:
        _assert_clean_failure(cli('add-needed', standin8.torch_lib, 'libcudnn_cnn_train.so.8'),
                              standin8.torch_lib, 'is not writable')
    finally:
        os.chmod(libdir, 0o755)


@pytest.mark.parametrize('soname', ['', 'lib/x.so.1', 'lib x.so'])
def test_values_that_are_not_sonames_are_rejected(standin8, soname):
    before = open(standin8.torch_lib, 'rb').read()
    _assert_clean_failure(cli('add-needed', standin8.torch_lib, soname), standin8.torch_lib, 'is not a soname')
    assert open(standin8.torch_lib, 'rb').read() == before


def test_patchelf_failure_leaves_no_temporary_file(standin8, monkeypatch, tmp_path):
    # a patchelf that fails (real binary, given a bogus option) must not leave a half-written copy
    from eb_pytorch_cuda.elf import patchelf as writer
    from eb_pytorch_cuda.errors import PluginError
    fake = tmp_path / 'patchelf'
    fake.write_text('#!/bin/sh\necho "patchelf: cannot write" >&2\nexit 1\n')
    fake.chmod(0o755)
    monkeypatch.setattr(writer, 'patchelf_binary', lambda: str(fake))
    before = open(standin8.torch_lib, 'rb').read()
    with pytest.raises(PluginError, match='patchelf failed'):
        writer.write_needed(standin8.torch_lib, ['libcudnn_cnn_train.so.8'])
    assert open(standin8.torch_lib, 'rb').read() == before
    assert os.listdir(os.path.dirname(standin8.torch_lib)) == ['libtorch_cuda.so']


@pytest.mark.parametrize('command', ['add-needed', 'check-needed'])
def test_fifo_named_like_a_library_is_refused_without_blocking(tmp_path, command):
    fifo = tmp_path / 'libfifo.so'
    os.mkfifo(fifo)
    import subprocess
    try:
        done = cli(command, fifo, 'libm.so.6', timeout=30)
    except subprocess.TimeoutExpired:  # pragma: no cover
        pytest.fail(f'{command} blocked on a FIFO')
    _assert_clean_failure(done, fifo, 'is a FIFO (named pipe), not a regular file')
    assert os.listdir(tmp_path) == ['libfifo.so']


def test_missing_expect_dir_is_bad_input_not_a_failed_check(standin8, tmp_path):
    missing = tmp_path / 'nonexistent'
    _assert_clean_failure(cli('check-needed', standin8.torch_lib, 'libcudnn.so.8', '--expect-dir', missing),
                          missing, 'no such directory (given as --expect-dir)')
    _assert_clean_failure(cli('check-needed', standin8.torch_lib, 'libcudnn.so.8', '--expect-dir',
                              standin8.torch_lib), standin8.torch_lib, 'is not a directory')


def test_missing_preload_is_bad_input_not_a_failed_check(standin8, tmp_path):
    missing = tmp_path / 'nonexistent' / 'libcuda.so.1'
    _assert_clean_failure(cli('check-needed', '--load', standin8.torch_lib, 'libcudnn.so.8', '--preload', missing),
                          missing, 'no such file')


@pytest.mark.parametrize('offset,value,problem', [
    (4, 1, 'but a 32-bit little-endian header is 52 bytes'),  # EI_CLASS 64 -> 32
    (5, 2, 'but a 64-bit big-endian header is 64 bytes'),  # EI_DATA little -> big
])
def test_flipped_ident_byte_is_named_not_called_static(standin8, tmp_path, offset, value, problem):
    flipped = tmp_path / 'flipped.so'
    data = bytearray(open(standin8.torch_lib, 'rb').read())
    data[offset] = value
    flipped.write_bytes(bytes(data))
    for command in ('add-needed', 'check-needed'):
        done = cli(command, flipped, 'libcudnn.so.8')
        _assert_clean_failure(done, flipped, 'has an inconsistent ELF header')
        assert problem in done.stderr and 'EI_CLASS or EI_DATA byte corrupt' in done.stderr
        assert 'statically linked' not in done.stderr
    assert open(flipped, 'rb').read() == bytes(data)


# `report`: bad input of every class the issue lists gives one line and exit 2, and never hangs

def _saved(tmp_path, suites, name='saved.json', **extra):
    import json
    path = tmp_path / name
    path.write_text(json.dumps({'format': 'eb-pytorch-cuda-test-results', 'suites': suites, **extra}))
    return path


GOOD_SUITE = {'name': 'test_nn', 'status': 'failed', 'counts': {'failed': 1, 'passed': 10},
              'failed_tests': [{'test_id': 'TestNN.test_a', 'state': 'failed'}]}


@pytest.mark.parametrize('suites,problem', [
    ([{'status': 'passed'}], 'suites[0]: needs a name'),  # was a KeyError traceback
    ([dict(GOOD_SUITE, counts={'failed': '1'})], "suites[0].counts.failed: must be an integer from 0"),  # TypeError
    ([dict(GOOD_SUITE, counts={'failed': -3})], 'suites[0].counts.failed: must be an integer from 0'),
    ([dict(GOOD_SUITE, counts={'failed': True})], 'suites[0].counts.failed: must be an integer from 0'),
    ([dict(GOOD_SUITE, seconds=-1.0)], 'suites[0].seconds: must be a finite number of seconds'),
    ([dict(GOOD_SUITE, status='fine')], "suites[0].status: 'fine' is not one of"),
    ([dict(GOOD_SUITE, failed_tests=[{'test_id': 'x'}])], 'suites[0].failed_tests[0]: needs test_id and state'),
    ([dict(GOOD_SUITE, failed_tests=[{'test_id': 'x', 'state': 'failed', 'reruns': 1.5}])],
     'suites[0].failed_tests[0].reruns: must be an integer'),
    ([GOOD_SUITE, GOOD_SUITE], "suites[1].name: 'test_nn' appears twice"),
    ([dict(GOOD_SUITE, extra=1)], 'suites[0]: needs a name and no unknown key (unknown: extra)'),
    ([dict(GOOD_SUITE, note={'a': {'b': {'c': {'d': {'e': {'f': 1}}}}}})], 'document: nested deeper than 8 levels'),
    ('all', 'suites: must be a list'),
])
def test_a_saved_result_of_the_wrong_shape_is_refused_in_one_line(tmp_path, suites, problem):
    path = _saved(tmp_path, suites)
    _assert_clean_failure(cli('report', path), path, problem)


@pytest.mark.parametrize('text,problem', [
    ('{"format": "eb-pytorch-cuda-test-results", "suites": [{"name": "a", "seconds": NaN}]}', 'NaN is not a number'),
    ('{"format": "eb-pytorch-cuda-test-results", "suites": [{"name": "a", "seconds": 1e999}]}',
     'suites[0].seconds: must be a finite number'),
    ('{"format": "eb-pytorch-cuda-test-results", "suites": ' + '[' * 100000 + ']' * 100000 + '}', 'nested deeper'),
    ('{"format": "eb-pytorch-cuda-test-results", "suites": [], "x": ' + '[' * 20 + ']' * 20 + '}', 'nested deeper'),
    ('{"format": "other", "suites": []}', 'is not a saved eb-pytorch-cuda-test-results JSON file'),
], ids=['nan', 'inf', 'nested-100000', 'nested-20', 'other-format'])  # short ids: the test id is in every child's
# environment (PYTEST_CURRENT_TEST), and a 200 kB one is more than one variable may hold (E2BIG, seen under xdist)
def test_saved_json_with_non_finite_numbers_or_deep_nesting_is_refused(tmp_path, text, problem):
    path = tmp_path / 'saved.json'
    path.write_text(text)
    _assert_clean_failure(cli('report', path), path, problem)


def test_a_negative_budget_is_refused(tmp_path):
    path = _saved(tmp_path, [GOOD_SUITE])
    _assert_clean_failure(cli('report', path, '--max-failed-tests', '-1'), '--max-failed-tests',
                          'must be a non-negative integer')


def test_a_fifo_named_xml_in_a_report_directory_is_refused_not_waited_on(tmp_path):
    reports = tmp_path / 'test-reports' / 'python-pytest' / 'test_x'
    reports.mkdir(parents=True)
    os.mkfifo(reports / 'test_x-1.xml')
    done = cli('report', tmp_path / 'test-reports', timeout=120)  # a hang: TimeoutExpired, the test fails
    _assert_clean_failure(done, reports / 'test_x-1.xml', 'is a FIFO (named pipe), not a regular file')


@pytest.mark.parametrize('kind', ['fifo', 'device', 'socket'])
def test_a_log_that_is_not_a_regular_file_is_refused(tmp_path, kind):
    import socket
    path = tmp_path / 'run.log'
    if kind == 'fifo':
        os.mkfifo(path)
        problem = 'is a FIFO'
    elif kind == 'device':
        path = '/dev/zero'
        problem = 'is a character device'
    else:
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        problem = 'is a socket'
    _assert_clean_failure(cli('report', path), path, problem)


def test_an_expected_suite_without_outcome_fails_the_verdict(tmp_path):
    path = _saved(tmp_path, [dict(GOOD_SUITE, status='passed', counts={'passed': 10}, failed_tests=[])])
    expected = tmp_path / 'expected.txt'
    expected.write_text('Selected tests:\n test_nn\n test_torch\n')
    done = cli('report', path, '--expected-suites', expected)
    assert done.returncode == 1 and 'test_torch: missing, and not a known failure' in done.stdout
    # the saved result holds the missing suite: re-judging it applies the same rule
    saved = tmp_path / 'judged.json'
    saved.write_text(cli('report', path, '--expected-suites', expected, '--format', 'json', check_rc=1).stdout)
    done = cli('report', saved, '--max-failed-tests', '100')
    assert done.returncode == 1 and 'test_torch: missing, and not a known failure' in done.stdout
    assert cli('report', path).returncode == 0  # without the expectation, the same result passes


def test_symbol_reader_refuses_a_corrupt_ident_or_cut_header_in_one_line(tmp_path):
    # the header-only readers share one check of the ELF identification (elf.reader.decode_ident)
    from eb_pytorch_cuda.elf.reader import read_abi_key
    from eb_pytorch_cuda.elf.symbols import ElfSymbols
    from eb_pytorch_cuda.errors import PluginError
    library = tmp_path / 'libx.so'
    subprocess.run(['gcc', '-shared', '-fPIC', '-o', str(library), '-x', 'c', '-'], input='int x(void){return 1;}\n',
                   text=True, check=True)
    data = library.read_bytes()
    assert read_abi_key(library)[:2] == (64, True) and ElfSymbols(str(library)).is64
    corrupt, cut = tmp_path / 'libcorrupt.so', tmp_path / 'libcut.so'
    corrupt.write_bytes(data[:4] + b'\x07' + data[5:])  # EI_CLASS neither 1 nor 2
    cut.write_bytes(data[:40])
    with pytest.raises(PluginError, match=r'libcorrupt\.so.*not an ELF file \(bad magic, class or byte order\)'):
        ElfSymbols(str(corrupt))
    assert read_abi_key(corrupt) is None
    with pytest.raises(PluginError, match=r'libcut\.so.*truncated ELF file'):
        ElfSymbols(str(cut))
    small_entries = tmp_path / 'libentries.so'  # e_shentsize (offset 58) too small for a section header
    small_entries.write_bytes(data[:58] + (8).to_bytes(2, 'little') + data[60:])
    with pytest.raises(PluginError, match=r'libentries\.so.*corrupt ELF file \(section header entries of 8 bytes\)'):
        ElfSymbols(str(small_entries))


@pytest.mark.parametrize('command', ['add-needed', 'check-needed'])
def test_a_path_with_a_newline_is_named_escaped_in_one_line(tmp_path, command):
    path = tmp_path / 'lib\nx.so'  # (was: a two-line error, the second line printed as the file named it)
    path.write_bytes(b'just some text\n')
    done = cli(command, path, 'libx.so.1')
    _assert_clean_failure(done, str(path).replace('\n', '\\n'), 'is not an ELF file')
    assert path.read_bytes() == b'just some text\n'


# runs argv as its only child and writes that child's peak resident set (kB, getrusage) to the file argv[1]
_PEAK = ('import resource, subprocess, sys; code = subprocess.call(sys.argv[2:]); '
         'open(sys.argv[1], "w").write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)); sys.exit(code)')


def _report_peak(tmp_path, *paths):
    """(returncode, stdout, stderr, peak resident set in MB) of a real `report` process."""
    import sys
    peak = tmp_path / 'peak'
    done = subprocess.run([sys.executable, '-c', _PEAK, str(peak), console_script(), 'report', *map(str, paths)],
                          capture_output=True, text=True)
    return done.returncode, done.stdout, done.stderr, int(peak.read_text()) / 1024


def test_report_on_a_1gib_nul_file_reads_8kb_not_the_file(tmp_path):
    path = tmp_path / 'nul.log'
    with open(path, 'wb') as handle:
        handle.truncate(1 << 30)  # sparse: a gigabyte of NULs, no disk
    code, out, err, peak = _report_peak(tmp_path, path)
    assert code == 2 and out == '', err
    assert err.splitlines() == [f'eb-pytorch-cuda: error: {path}: is a binary file, not a test log'], err
    assert peak < 100, peak  # was: 1061 MB (the whole file read after the streamed parse refused it)


def test_report_on_a_large_log_without_run_test_output_streams_it_for_the_summary(tmp_path):
    path = tmp_path / 'easybuild.log'
    line = b'== 2024-01-01 12:00:00,000 build_log.py:267 INFO compiling one more file of the build (in pieces)\n'
    megabyte = line * ((1 << 20) // len(line))
    with open(path, 'wb') as handle:
        for _ in range(150):
            handle.write(megabyte)
        handle.write(b'WARNING: 1 test failures, 0 test errors (out of 10):\ntest_jit 1/1 (1 failed, 9 passed)\n')
    size_mb = os.path.getsize(path) / (1 << 20)
    code, out, err, peak = _report_peak(tmp_path, path, '--max-failed-tests', '0')
    assert code == 1 and 'test_jit' in out and err == '', (out, err)  # the summary at its end was found
    assert size_mb > 140 and peak < size_mb, (peak, size_mb)  # was: 2117 MB for 1 GiB (read whole, decoded)


def test_report_on_a_large_cr_only_log_shows_every_suite_in_bounded_memory(tmp_path):
    path = tmp_path / 'cr.log'
    line = b'test_a.py::A::test_padding PASSED\r'
    megabyte = line * ((1 << 20) // len(line))
    with open(path, 'wb') as handle:
        handle.write(b'Running test_a 1/1 ... [2024-01-01 12:00:00]\r')
        for _ in range(150):
            handle.write(megabyte)
        handle.write(b'=== 3 passed in 1.0s ===\rRunning test_b 1/1 ... [2024-01-01 12:10:00]\r'
                     b'Ran 4 tests in 0.1s\r\rFAILED (failures=1)\r')
    size_mb = os.path.getsize(path) / (1 << 20)
    code, out, err, peak = _report_peak(tmp_path, path, '--max-failed-tests', '0', '--format', 'json')
    assert code == 1 and err == '', (out, err)
    suites = {suite['name']: (suite['status'], suite['counts']['passed'], suite['counts']['failed'])
              for suite in json.loads(out)['suites']}
    assert suites == {'test_a': ('passed', 3, 0), 'test_b': ('failed', 3, 1)}, suites  # was: test_a only
    assert size_mb > 140 and peak < size_mb, (peak, size_mb)  # 97 MB, as with LF; was 783 MB (one 150 MB line)


LONG_TEST = '''import unittest

from common import run_tests


class TestLong(unittest.TestCase):
    def test_short(self):
        self.fail('an ordinary failure: rerun as usual')


setattr(TestLong, 'test_' + 'x' * 200000, lambda self: self.fail('a generated test with a 200,000-character name'))

if __name__ == '__main__':
    run_tests(__file__)
'''


def test_a_failed_test_id_too_long_to_rerun_is_skipped_with_a_verdict(tmp_path):
    import sys
    tree = tmp_path / 'src'
    standin_test_tree(tree, keep=())
    (tree / 'test' / 'test_long.py').write_text(LONG_TEST)
    results = tmp_path / 'results'
    done = cli('test-suite', tree, '--python', sys.executable, '--results', results, '--rerun', '1',
               '--format', 'json')
    assert done.returncode in (0, 1), done.stderr[-3000:]  # a verdict (the installed easyblocks' budget), never 2
    data = json.loads(done.stdout)
    assert data['verdict'] in ('pass', 'fail')
    suite = next(suite for suite in data['suites'] if suite['name'] == 'test_long')
    failed = {test['test_id']: test for test in suite['failed_tests']}
    assert failed['TestLong.test_short']['rerun_outcome'] == 'reproducible', failed.keys()
    assert failed['TestLong.test_' + 'x' * 200000]['rerun_outcome'] is None  # not rerun: judged as such
    note = [line for line in done.stderr.splitlines() if 'xxxx...' in line]
    assert len(note) == 1 and note[0].endswith("(200014 characters): skipped: its command line is too long for "
                                               "the kernel (Argument list too long)"), note
    assert 'Traceback' not in done.stderr


# --- writing errors name the file or stream; refusals create nothing ---

def _report_argv():
    log = os.path.join(os.path.dirname(__file__), 'data', 'pytorch_corpus', 'logs', 'run_test-2.6-plain.log')
    return [console_script(), 'report', log]


@pytest.mark.parametrize('extra', [[], ['--format', 'json'], ['--format', 'markdown']])
def test_report_into_a_closed_pipe_names_standard_output(extra):
    child = subprocess.Popen(_report_argv() + extra, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    child.stdout.close()  # `| head -0`: the reader is gone before the first write
    err = child.stderr.read().decode()
    assert child.wait(timeout=300) == 2, err
    assert err.splitlines() == ['eb-pytorch-cuda: error: standard output: cannot be written: Broken pipe'], err


def test_report_into_dev_full_names_standard_output():
    with open('/dev/full', 'w') as full:
        done = subprocess.run(_report_argv(), stdout=full, stderr=subprocess.PIPE, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        'eb-pytorch-cuda: error: standard output: cannot be written: No space left on device'], done.stderr


def _closing(*descriptors):
    """A preexec_fn closing descriptors in the child: `>&-`, `2>&-` without a shell."""
    return lambda: [os.close(descriptor) for descriptor in descriptors]


def test_report_with_standard_output_closed_exits_2_naming_it():
    """`report LOG >&-`: Python leaves sys.stdout None; before, an AttributeError traceback, exit 1."""
    done = subprocess.run(_report_argv(), stdout=None, stderr=subprocess.PIPE, text=True, timeout=300,
                          preexec_fn=_closing(1))
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == ['eb-pytorch-cuda: error: standard output: cannot be written: it is closed']


@pytest.mark.parametrize('stderr', ['closed', '/dev/full'])
def test_the_exit_status_is_the_documented_one_when_standard_error_cannot_be_written(tmp_path, stderr):
    """Bad input is exit 2 and a verdict 0 or 1 whether or not standard error takes the line; before, the failed
    write of the error line raised: `report missing.log 2>/dev/full` exited 1."""
    def run(*arguments):
        with open('/dev/full', 'w') as full:
            return subprocess.run([console_script(), 'report', *map(str, arguments)], stdout=subprocess.PIPE,
                                  stderr=full if stderr == '/dev/full' else None, text=True, timeout=300,
                                  preexec_fn=_closing(2) if stderr == 'closed' else None)
    missing = run(tmp_path / 'missing.log')
    assert missing.returncode == 2 and missing.stdout == ''
    verdict = run(_report_argv()[-1], '--max-failed-tests', '0')
    assert verdict.returncode == 1 and 'verdict: FAIL' in verdict.stdout, verdict.stdout
    assert run(_report_argv()[-1]).returncode == 0


def _suite_argv(results, *extra, python=None):
    import sys
    from eb_pytorch_cuda import standins
    return ['test-suite', standins.TORCH_SOURCES, '--python', python or sys.executable, '--results', results, *extra]


def _errors(done):
    """stderr of a test-suite run without its progress lines (`== ...`)."""
    return [line for line in done.stderr.splitlines() if not line.startswith('== ')]


def test_a_fifo_as_the_stores_lock_is_refused_without_blocking(tmp_path):
    results = tmp_path / 'results'
    results.mkdir()
    lock = results / 'results.jsonl.lock'
    os.mkfifo(lock)
    done = cli(*_suite_argv(results))  # before: "Illegal seek" naming no file
    assert done.returncode == 2 and _errors(done) == [
        f'eb-pytorch-cuda: error: {lock}: is a FIFO (named pipe), not a regular file (remove it)'], done.stderr
    assert sorted(os.listdir(results)) == ['results.jsonl.lock']


def test_a_results_path_that_is_a_device_is_named(tmp_path):
    done = cli(*_suite_argv('/dev/full'))  # before: "/dev/full: File exists"
    assert done.returncode == 2 and _errors(done) == [
        'eb-pytorch-cuda: error: /dev/full: is a character device, not a directory'], done.stderr


@pytest.mark.parametrize('case', ['python-false', 'python-true', 'python-missing', 'runtest', 'easyconfig',
                                  'rerun', 'timeout'])
def test_a_refused_test_suite_creates_nothing(tmp_path, case):
    (tmp_path / 'bad.eb').write_text('rerun_failed_tests = "x"\n')
    results = str(tmp_path / 'parent' / 'results')
    argv = {'python-false': _suite_argv(results, python='/bin/false'),
            'python-true': _suite_argv(results, python='/bin/true'),
            'python-missing': _suite_argv(results, python=str(tmp_path / 'nopython')),
            'runtest': _suite_argv(results, '--runtest', 'cd test && true'),
            'easyconfig': _suite_argv(results, '--easyconfig', tmp_path / 'bad.eb'),
            'rerun': _suite_argv(results, '--rerun', '11'),
            'timeout': _suite_argv(results, '--timeout', '0')}[case]
    done = cli(*argv)
    assert done.returncode == 2 and len(_errors(done)) == 1 and 'Traceback' not in done.stderr, done.stderr
    assert not os.path.lexists(tmp_path / 'parent'), os.listdir(tmp_path / 'parent')  # was: .lock, .children


_TEST_COMMAND_EC = ("easyblock = 'PyTorch'\nname = 'PyTorch'\nversion = '2.1.2'\nhomepage = 'x'\ndescription = 'x'\n"
                    "toolchain = SYSTEM\nruntest = 'cd test && %(python)s run_test.py -i test_a'\n")


@pytest.mark.parametrize('parameter, line', [
    ('pretestopts', "pretestopts = 'A=\\x00 '"),
    ('testopts', "testopts = '--x=\\x00'"),
    ('runtest', "runtest = 'cd test && %(python)s run_test.py -i test_\\x00a'"),
])
def test_a_nul_in_the_test_command_is_refused_naming_easyconfig_and_parameter(tmp_path, parameter, line):
    """A NUL byte cannot be in an argument or an environment value: before, the command was printed, then
    subprocess's `ValueError: embedded null byte` came as a 46-line traceback, rc 1."""
    easyconfig = tmp_path / 'nul.eb'
    easyconfig.write_text(_TEST_COMMAND_EC + line + '\n')
    results = tmp_path / 'results'
    done = cli(*_suite_argv(results, '--easyconfig', easyconfig), timeout=120)
    assert done.returncode == 2 and len(_errors(done)) == 1 and 'Traceback' not in done.stderr, done.stderr
    assert _errors(done)[0].startswith(f'eb-pytorch-cuda: error: {easyconfig}: {parameter} holds a NUL byte, which '
                                       f'no argument or environment value can hold: '), done.stderr
    assert not os.path.lexists(results)


def test_a_pretestopts_word_over_the_kernels_limit_is_refused_at_once(tmp_path):
    """One string of execve() holds at most 128 KiB (MAX_ARG_STRLEN): a 3 MB pretestopts word ran nothing within
    120 s before (shlex's splitting is quadratic in a word's length; 1 MB took 20.8 s, then `Argument list too
    long`); now it is refused in one line naming the easyconfig and pretestopts, within seconds."""
    easyconfig = tmp_path / 'huge.eb'
    easyconfig.write_text(_TEST_COMMAND_EC + "pretestopts = 'A=' + 'x' * 3000000 + ' '\n")
    results = tmp_path / 'results'
    done = cli(*_suite_argv(results, '--easyconfig', easyconfig), timeout=60)
    assert done.returncode == 2 and len(_errors(done)) == 1, done.stderr
    assert _errors(done)[0].startswith(f'eb-pytorch-cuda: error: {easyconfig}: pretestopts has a word of 3000002 '
                                       f'bytes'), done.stderr
    assert 'MAX_ARG_STRLEN' in done.stderr and len(done.stderr) < 400
    assert not os.path.lexists(results)


def test_a_fifo_as_the_previous_results_is_refused_without_blocking(tmp_path):
    """The results JSON a run leaves is the next run's previous results (its times: timeouts, pieces).  Before, a
    FIFO there made `test-suite` wait in open() for a writer, forever."""
    results = tmp_path / 'results'
    results.mkdir()
    previous = results / 'pytorch-test-results.json'
    os.mkfifo(previous)
    done = cli(*_suite_argv(results), timeout=120)  # a hang fails the test
    assert done.returncode == 2 and _errors(done) == [
        f'eb-pytorch-cuda: error: {previous}: is a FIFO (named pipe), not a regular file'], done.stderr
    assert os.listdir(results) == ['pytorch-test-results.json']  # refused before the lock or anything else


@pytest.mark.parametrize('name', ['output', 'results.jsonl.lock', 'results.jsonl.children'])
def test_a_dangling_link_in_the_results_directory_is_named(tmp_path, name):
    """Before: `<results>/output: File exists`; the lock was created where the link pointed, outside the results
    directory; the registry was "no such file"."""
    results = tmp_path / 'results'
    results.mkdir()
    (results / name).symlink_to(tmp_path / 'elsewhere')
    done = cli(*_suite_argv(results), timeout=300)
    assert done.returncode == 2 and len(_errors(done)) == 1, done.stderr
    assert _errors(done)[0].startswith(f'eb-pytorch-cuda: error: {results / name}: is a dangling symlink'), done.stderr
    assert not (tmp_path / 'elsewhere').exists()


def test_a_refusal_removes_every_directory_it_made_for_a_deep_results_path(tmp_path):
    """A harness whose dry run fails (its run_test.py exits at once) is refused after the results directory was
    made: every directory this call made goes again, and only those.  Before, `x` was removed and `deep/` and
    `deep/new/` stayed."""
    source = tmp_path / 'src'
    (source / 'test').mkdir(parents=True)
    (source / 'test' / 'run_test.py').write_text('import sys\nsys.exit("this harness cannot even list its suites")\n')
    (tmp_path / 'a').mkdir()
    results = tmp_path / 'a' / 'deep' / 'new' / 'x'
    import sys
    done = cli('test-suite', source, '--python', sys.executable, '--results', results, timeout=300)
    assert done.returncode == 2 and len(_errors(done)) == 1 and 'Traceback' not in done.stderr, done.stderr
    assert os.listdir(tmp_path / 'a') == []
    # a directory that was there stays, with what is in it
    (tmp_path / 'a' / 'deep').mkdir()
    (tmp_path / 'a' / 'deep' / 'kept').write_text('')
    done = cli('test-suite', source, '--python', sys.executable, '--results', results, timeout=300)
    assert done.returncode == 2 and len(_errors(done)) == 1, done.stderr
    assert os.listdir(tmp_path / 'a' / 'deep') == ['kept']
