"""The streaming log reader gives the whole-text reader's RunResult.

The streaming reader must read the same at every block size as it reads the whole text as one block, and that must
be what the reference whole-text reader reads (tests/logparse_whole_text.py) but where a log means more (a
--pipe-logs `X was successful` counts the tests its `Running N items in this shard` names: INTENDED) and where
logparse.judge_run marks a suite whose end the log does not show (_log_end_only; on the kept files: LOG_ENDS). The
corpus: every run_test.py log the tests keep (the real 2.1-line harness's in tests/data/pytorch21, the real 2.6.0
runs and the excerpts of tests/data/pytorch_corpus, the H200 EasyBuild logs of docs/validation, the field summaries,
the strings of tests/pytorch_output.py), each also with CRLF line ends and cut at several points, and a log written
by benchmarks/bench_big_log.py; read at block sizes from one character (every line its own block, so every
multi-line summary is cut) to the default.
"""

import glob
import importlib.util
import os

import pytest

import logparse_whole_text as reference
import pytorch_output
from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.testsuite.results import logparse

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILES = sorted(path for pattern in ('tests/data/**/*.log', 'tests/data/**/*.txt', 'docs/validation/**/*.log',
                                    'docs/validation/**/*.txt')
               for path in glob.glob(os.path.join(ROOT, pattern), recursive=True))
BLOCKS = (1, 2, 7, 64, 1000, logparse.BLOCK)
TEXTS = {name: value for name, value in vars(pytorch_output).items() if isinstance(value, str) and '\n' in value}
EDGES = {  # multi-line summaries and mentions placed where blocks cut them
    'ran-then-blank-lines': 'Running test_a 1/1 ... [\nRan 3 tests in 0.1s\n' + ' \n' * 50 + '\t\nOK\n',
    'ran-at-the-end': 'Running test_a 1/1 ... [\nRan 3 tests in 0.1s\n\n\n',
    'ran-then-marker': 'Running test_a 1/1 ... [\nRan 3 tests in 0.1s\n\nRunning test_b 1/1 ... [\nOK\n',
    'assertion-list': 'Running test_a 1/1 ... [\nAssertionError: 3 unit test(s) failed:\n\tA.t1\n  A.t2\n'
                      '  test/test_b.py::B::x\n  A.t4\nRunning test_b 1/1 ... [\n',
    'assertion-short': 'Running test_a 1/1 ... [\nAssertionError: 5 unit test(s) failed:\n  A.t1\n',
    'assertion-zero': 'Running test_a 1/1 ... [\nAssertionError: 0 unit test(s) failed:\n  A.t1\n',
    'mentions': 'Running test_a 1/1 ... [\nRunning dir/test_b 1/1 ... [\nx..py:: test_a.py::A::t PASSED\n'
                '.py:: dir/test_b.py::B::t FAILED\nnope.py::\n' + '=== 1 failed, 2 passed in 1.0s ===\n'
                'test/test_a.py::A::t PASSED\n=== 3 passed in 1.0s ===\nFAILED test_a.py::A::t - x\n'
                'The following tests failed consistently: [\'test/test_a.py::A::t\']\n',
    'later-announced': 'dir/test_b.py::B::t FAILED\n=== 1 failed in 1.0s ===\nRunning dir/test_b 1/1 ... [\n',
    'no-newline-at-end': 'Running test_a 1/1 ... [\nRan 3 tests in 0.1s\n\nOK',
    'two-on-a-line': 'RuntimeError: test_a failed! Received signal: SIGSEGV\ntest_a failed!\n',
    'invalid-utf8-later': 'Running test_a 1/1 ... [\n\udcff\nRan 1 test in 0.1s\nOK\n',
}


def _bench_log(tmp_path_factory):
    spec = importlib.util.spec_from_file_location('bench_big_log', os.path.join(ROOT, 'benchmarks',
                                                                                'bench_big_log.py'))
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    path = str(tmp_path_factory.mktemp('bench') / 'run.log')
    bench.generate(path, 1, 300)
    return path


# (kept file, suite): where the reference reader and logparse differ on purpose (`X was successful` and its
# `Running N items in this shard` count N passed; the reference counts 0)
INTENDED = {
    ('docs/validation/h200-2026-12-01-eb/patched/output-patched.log', 'nn/test_convolution'),
    ('tests/data/pytorch_corpus/logs/real-run_test-2.6.0-pipe-logs.log', 'test_show_pickle'),
    ('tests/data/pytorch_corpus/logs/run_test-2.6-pipe-logs.log', 'test_autograd'),
    ('tests/data/pytorch_corpus/real-2.6.0-ci/run_test.log', 'test_show_pickle'),
    # test_cuda: `was successful` again; test_transformers: the harness's `The following tests failed
    # consistently` list names the tests whose process crashed (cuDNN attention)
    ('docs/validation/h200-2026-12-02-eb-complete/output-unpatched.log', 'test_cuda'),
    ('docs/validation/h200-2026-12-02-eb-complete/output-unpatched.log', 'test_transformers'),
    ('docs/validation/h200-2026-12-02-eb-complete/output-patched.log', 'nn/test_convolution'),
    ('docs/validation/h200-2026-12-02-eb-complete/output-patched.log', 'test_cuda'),
    ('docs/validation/h200-2026-12-02-eb-complete/output-patched.log', 'test_transformers'),
    # a pytest summary after another pool worker's unfinished test line, credited to the session it fits
    ('tests/data/pytorch26-interleaved-summary/plain.log', 'test_native_functions'),
}
# plain 2.6 pool logs: the reference gives their summaries to the wrong pool worker and sums their retries
PLAIN_POOL_LOGS = ('tests/data/pytorch26-plain/', 'tests/data/pytorch26-start-after-test/',
                   'tests/data/pytorch26-interleaved-headers/')
CHANGED = {path for path, _suite in INTENDED} | {
    'tests/data/pytorch26-plain/plain.log', 'tests/data/pytorch26-plain/batch.log',
    # plain pool runs of the same selection: they differ where plain.log does (a 0-test pass's note, sessions)
    'tests/data/pytorch26-start-after-test/plain-run6.log', 'tests/data/pytorch26-start-after-test/plain-run21.log',
    'tests/data/pytorch26-interleaved-headers/plain-run5.log',
    'tests/data/pytorch26-interleaved-headers/plain-run11.log',
    # cut before its `The following tests failed consistently` list, each failing test of its isolated reruns
    # counts once (the reference: once per rerun's `1 failed`); the whole file reads as the reference
    'docs/validation/h200-2026-12-01-eb/unpatched/output-unpatched.log'}


def _one_block(text, source='log'):
    """The streaming reader reading text as one block: what it must read at every block size (and, but where
    _as_it_was allows, what the reference reader reads)."""
    return logparse.parse_log_text(text, source, block=len(text) + 1)


def _log_end_only(old, new):
    """Whether suite new differs from old (the reference reader) only as logparse.judge_run changes a suite: its log
    does not show it ending, so it is SUITE_INCOMPLETE with a note saying where the log ends (or SUITE_MISSING: listed
    by the harness, never ran, where the reference had no such suite); counts and failed tests unchanged."""
    if new['status'] == 'missing':
        return old is None
    return old is not None and new['status'] == 'no summary' and new['note'] and \
        (old['status'], old['note']) != (new['status'], new['note']) and \
        (old['status'] != new['status'] or old['note'] is None) and \
        (old['counts'], old['failed_tests']) == (new['counts'], new['failed_tests'])


def _as_it_was(path, text, source='log'):
    """Assert the streaming reader reads text as the reference reader does, but where logparse.judge_run marks a suite
    whose end the log does not show (_log_end_only); return the suites where it does."""
    if path is not None and os.path.relpath(path, ROOT) in CHANGED:
        return set()
    old, new = _outcome(reference.parse_log_text, text, source), _outcome(_one_block, text, source)
    if isinstance(old, str) or isinstance(new, str):
        assert new == old or 'no suite ran: the log ends at' in new
        return set()
    old_suites = {suite['name']: suite for suite in old[1]['suites']}
    differing = set()
    for suite in new[1]['suites']:
        if old_suites.get(suite['name']) != suite:
            assert _log_end_only(old_suites.get(suite['name']), suite), (suite, old_suites.get(suite['name']))
            differing.add(suite['name'])
    assert set(old_suites) <= {suite['name'] for suite in new[1]['suites']}
    return differing


def _outcome(parse, *args, **kwargs):
    """(suite order, the result as a dict) or the error's message."""
    try:
        result = parse(*args, **kwargs)
    except PluginError as err:
        return str(err)
    data = result.to_dict()
    for suite in data['suites']:
        suite.pop('cuda_counts', None)  # CUDA counts, newer than the reference: test_device_tests pins them
    return list(result.suites), data


def _variants(text):
    """(text, the text the whole-text reader must read as the same): text itself, with CRLF line ends (read as
    LF), with CR line ends only (read as LF), and cut at a quarter, a half
    and three quarters."""
    yield text, text
    yield text.replace('\n', '\r\n'), text.replace('\r\n', '\n')
    yield text.replace('\r\n', '\n').replace('\n', '\r'), text.replace('\r\n', '\n')  # CR-only
    for part in (4, 2, 4 / 3):
        yield text[:int(len(text) / part)], text[:int(len(text) / part)].replace('\r\n', '\n')


def test_the_corpus_is_there():
    names = {os.path.relpath(path, ROOT) for path in FILES}
    assert {'tests/data/pytorch21/plain.log', 'tests/data/pytorch_corpus/logs/real-run_test-2.6.0-plain.log',
            'tests/data/pytorch_corpus/real-2.6.0-ci/run_test.log',
            'docs/validation/h200-2026-12-01-eb/unpatched/output-unpatched.log'} <= names
    assert len(FILES) >= 30 and len(TEXTS) >= 7


@pytest.mark.parametrize('path', FILES, ids=lambda path: os.path.relpath(path, ROOT))
def test_every_kept_log_file_reads_the_same(path, tmp_path):
    with open(path, 'rb') as handle:
        data = handle.read()
    lf = data.replace(b'\r\n', b'\n') if b'\0' not in data[:8192] else None
    expected = _outcome(reference.parse_log_file, path) if lf is None else \
        _outcome(_one_block, lf.decode('utf-8', 'replace'), source=path)
    if lf is not None:
        _as_it_was(path, lf.decode('utf-8', 'replace'), path)
    for block in BLOCKS:
        assert _outcome(logparse.parse_log_file, path, block=block) == expected, block
    if lf is not None:  # the same file with CR line ends only, and with CR and CRLF mixed, cut at every line end
        half = lf.replace(b'\n', b'\r', lf.count(b'\n') // 2)
        for name, data in (('cr', lf.replace(b'\n', b'\r')), ('mixed', half.replace(b'\n', b'\r\n'))):
            variant = tmp_path / name
            variant.write_bytes(data)
            for block in BLOCKS:
                outcome = _outcome(logparse.parse_log_file, str(variant), block=block)
                assert outcome == expected if isinstance(expected, tuple) else \
                    outcome == expected.replace(path, str(variant)), (name, block)
    with open(path, 'rb') as handle:
        text = handle.read().decode('utf-8', 'replace')
    for variant, same in _variants(text):
        expected = _outcome(_one_block, same)
        _as_it_was(path, same)
        for block in BLOCKS[1:]:
            assert _outcome(logparse.parse_log_text, variant, block=block) == expected, block


# (kept file, suite): where logparse says the log does not show the suite ending (logparse.judge_run): a run
# announced and never summarised, with a note saying the log ends inside it
LOG_ENDS = {
    ('tests/data/pytorch21/unittest-mode.log', 'test_per_overload_api'),
    ('tests/data/pytorch21/unittest-mode.log', 'test_show_pickle'),
    ('tests/data/pytorch21/unittest-mode.log', 'test_type_info'),
    ('tests/data/pytorch_corpus/logs/run_test-2.6-pipe-logs.log', 'test_binary_ufuncs'),
}


def test_the_reader_as_it_was_differs_only_where_issue_32_meant():
    differing, log_ends = set(), set()
    for path in FILES:
        try:
            before, now = reference.parse_log_file(path), logparse.parse_log_file(path)
        except PluginError:
            continue
        for name in set(before.suites) | set(now.suites):
            old, new = before.suites.get(name), now.suites.get(name)
            if old is None or new is None or (old.status, old.counts, old.failed_tests, old.note) != \
                    (new.status, new.counts, new.failed_tests, new.note):
                where = (os.path.relpath(path, ROOT), name)
                ends = new is not None and _log_end_only(old and old.to_json(), new.to_json())
                (log_ends if ends else differing).add(where)
    assert log_ends == LOG_ENDS
    kept = {(path, name) for path, name in differing if not path.startswith(PLAIN_POOL_LOGS)}
    assert kept == INTENDED
    # the plain 2.6 log read by the reference: summaries given to the wrong pool worker, retries summed
    assert {name for path, name in differing if path == 'tests/data/pytorch26-plain/plain.log'} >= {
        'test_function_schema', 'test_license', 'test_import_stats', 'test_itt', 'test_logging'}


@pytest.mark.parametrize('name', sorted(TEXTS) + sorted(EDGES))
def test_every_kept_log_text_reads_the_same(name):
    for variant, same in _variants(TEXTS.get(name) or EDGES[name]):
        expected = _outcome(_one_block, same)
        _as_it_was(None, same)
        for block in BLOCKS:
            assert _outcome(logparse.parse_log_text, variant, block=block) == expected, (block, variant)


def test_a_benchmark_log_reads_the_same(tmp_path_factory):
    path = _bench_log(tmp_path_factory)
    expected = _outcome(reference.parse_log_file, path)
    assert isinstance(expected, tuple) and len(expected[0]) > 10
    for block in (100, 4096, logparse.BLOCK):
        assert _outcome(logparse.parse_log_file, path, block=block) == expected


def test_a_crlf_log_of_a_passing_run_passes(tmp_path):
    from eb_pytorch_cuda.testsuite.results.model import SUITE_PASSED
    path = tmp_path / 'crlf.log'
    path.write_bytes(pytorch_output.PASSING_UNITTEST.replace('\n', '\r\n').encode())
    result = logparse.parse_log_file(str(path))
    assert [suite.status for suite in result.suites.values()] == [SUITE_PASSED]
    assert reference.parse_log_file(str(path)).suites['test_autograd'].status != SUITE_PASSED  # was: no summary


REAL_LOG = os.path.join(ROOT, 'tests', 'data', 'pytorch_corpus', 'logs', 'real-run_test-2.6.0-plain.log')


def _real_head(size=16 << 10):
    """The first size bytes of a kept real run_test.py 2.6.0 log, cut after a line end."""
    with open(REAL_LOG, 'rb') as handle:
        data = handle.read(size)
    return data[:data.rfind(b'\n') + 1]


@pytest.mark.parametrize('where', ['past-8k', 'later-block'])
def test_nul_bytes_past_the_first_8_kb_refuse_the_log_as_binary(tmp_path, where):
    """16 KB of a real log, then NULs (a log whose tail was never written, a core file): before, only the first
    8 KB were looked at, the NULs read as one line (5,154 MB peak for 1 GiB of them,
    benchmarks/bench_log_worst_inputs.py) and the suite judged `no summary`; now the file is refused as binary,
    naming where the first NUL is, also when it is in a later block than the first."""
    head = _real_head()
    path = tmp_path / 'nul-tail.log'
    path.write_bytes(head + b'\0' * 4096)
    block = 1000 if where == 'later-block' else logparse.BLOCK
    with pytest.raises(PluginError) as raised:
        logparse.parse_log_file(str(path), block=block)
    assert str(raised.value) == f'{path}: is a binary file (a NUL byte at byte {len(head)}), not a test log'
    from eb_pytorch_cuda.eb.ebsummary import load  # what `report` reads with: no summary is looked for in it either
    with pytest.raises(PluginError) as raised:
        load([str(path)])
    assert 'is a binary file' in str(raised.value)


def test_a_line_longer_than_the_limit_is_read_in_bounded_pieces(tmp_path):
    """A real log, then one 20 MiB line without a line end: the blocks stay under LINE_LIMIT + BLOCK (before, the
    line was one block: one 1 GiB line took 3,107 MB, benchmarks/bench_log_worst_inputs.py), and the log reads as
    it does without the line."""
    with open(REAL_LOG, 'rb') as handle:
        log = handle.read()
    plain, long = tmp_path / 'plain.log', tmp_path / 'long.log'
    plain.write_bytes(log)
    long.write_bytes(log + 'é'.encode() * (10 << 20))  # two bytes a character: pieces must not cut one
    blocks = list(logparse._file_blocks(str(long), logparse.BLOCK)())
    assert max(len(block.encode()) for block in blocks) <= 2 * logparse.BLOCK  # LINE_LIMIT (a block) + a read
    assert logparse.LINE_LIMIT == logparse.BLOCK
    assert len(blocks) >= 3 and '\ufffd' not in ''.join(blocks)
    assert _outcome(logparse.parse_log_file, str(long)) == _outcome(logparse.parse_log_file, str(plain))
