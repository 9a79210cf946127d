"""run/batches driven by a launcher that starts no process (run/launcher's injection point): the
real output of one run_test.py batch (tests/data/pytorch26-plain/batch.log, Debian's 2.6.0 harness on 13
suites, recorded with its results JSON test-suite.json) is written by a canned call, whole or cut, so the
batch logic (which suite settles when, what a killed batch leaves to run alone, what the sink is given)
is checked without a harness, a torch or a process.  The plan is a RunPlan as build_plan makes it, with
the harness facts read_harness reads from that run_test.py (checked in tests/test_real_harness.py).
"""

import json
import os
from dataclasses import replace

from eb_pytorch_cuda.testsuite.run import batches
from eb_pytorch_cuda.testsuite.run.calls import XML_VARIABLE, batch_options
from eb_pytorch_cuda.testsuite.run.command import TestCommand as Command  # not a pytest test class
from eb_pytorch_cuda.testsuite.run.harness import Harness
from eb_pytorch_cuda.testsuite.run.launcher import TimeoutExpired
from eb_pytorch_cuda.testsuite.run.plan import RunPlan, RunRequest

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'data', 'pytorch26-plain')
with open(os.path.join(DATA, 'batch.log'), encoding='utf-8') as _handle:
    BATCH_LOG = _handle.read()
with open(os.path.join(DATA, 'test-suite.json'), encoding='utf-8') as _handle:
    RECORDED = {suite['name']: suite for suite in json.load(_handle)['suites']}
SUITES = list(RECORDED)  # the 13 suites of the batch, in the harness's order
SERIAL = {'test_cuda_primary_ctx', 'test_show_pickle'}  # the two its dry run listed as serial


class CannedCall:
    """A call that wrote its output at once; it ends with code, or (ends False) runs until stopped."""

    def __init__(self, code, ends):
        self.code, self.ends, self.stopped = code, ends, False

    def wait(self, timeout=None):
        if self.ends or self.stopped:
            return self.code
        raise TimeoutExpired('run_test.py', timeout)

    def stop(self):
        self.stopped = True
        return -15


class Canned:
    """A launcher whose calls write text (the real batch output, or a part of it)."""

    def __init__(self, text, code=1, ends=True):
        self.text, self.code, self.ends = text, code, ends
        self.calls = []

    def start(self, argv, cwd, env, output):
        output.write(self.text)
        output.flush()
        self.calls.append((list(argv), cwd, dict(env)))
        return CannedCall(self.code, self.ends)


class Sink:
    """A batch sink that keeps what it is given, in order."""

    def __init__(self):
        self.given = []

    def settled(self, suite, record):
        self.given.append(('settled', suite, record))

    def corrected(self, suite, record):
        self.given.append(('corrected', suite, record))


def _plan(tmp_path, timeout=600):
    harness = Harness(str(tmp_path / 'run_test.py'), serial=set(SERIAL), pipe_logs=True, forwards_unknown_args=True,
                      has_distributed_prefix_rule=True, replays_logs=True, serial_marked_pass=True,
                      pytest_by_default=True)
    (tmp_path / 'out').mkdir()
    command = Command(str(tmp_path), {}, ['python', 'run_test.py', '--continue-through-error'])
    request = RunRequest(command, {'HOME': '/x'}, str(tmp_path / 'out'), 'python', {'': timeout}, batch_size=50)
    return RunPlan(request, command, {'HOME': '/x'}, harness, tuple(SUITES), tuple(SUITES),
                   tuple(batch_options(harness)), {'': timeout}, {}, 1, ())


def test_a_whole_batch_gives_each_suite_its_recorded_status_and_counts(tmp_path):
    plan = _plan(tmp_path)
    launcher, sink = Canned(BATCH_LOG), Sink()
    output = str(tmp_path / 'out' / 'batch.log')
    batches.run_batch_to_the_end(plan, SUITES, sink, output_path=output, gpu='1', launcher=launcher)
    [(argv, cwd, env)] = launcher.calls  # one call, no suite run alone
    assert argv == ['python', 'run_test.py', '--continue-through-error', '--pipe-logs', '--save-xml', '-i', *SUITES]
    assert cwd == str(tmp_path) and env[XML_VARIABLE] == '1' and env['CUDA_VISIBLE_DEVICES'] == '1'
    assert [(kind, suite) for kind, suite, _ in sink.given] == [('settled', suite) for suite in SUITES]
    for _kind, suite, record in sink.given:
        assert record.suite.status == RECORDED[suite]['status'], suite
        assert record.batch_exit_code == 1 and record.gpu == '1' and record.output_file == output
    failed = {suite: record.exit_code for _kind, suite, record in sink.given if record.exit_code}
    assert failed == {'test_function_schema': 1, 'test_license': 1}
    # the harness replays a failed suite's log (--pipe-logs): its counts are the recorded run's, which had its XML
    # reports too; a passing suite's log is not replayed, so without its XML (none here) it has no counts
    for _kind, suite, record in sink.given:
        if suite in failed:
            assert record.suite.counts.to_json() == RECORDED[suite]['counts'], suite


def test_a_killed_batch_keeps_finished_suites_and_leaves_the_others_to_rerun(tmp_path):
    """Cut after the two serial suites and the first `-m serial` passes: a 2.6 pool suite runs twice in one
    call (harness.serial_marked_pass), so only the serial ones have ended; the call never ends and is killed
    at the sum of the suites' timeouts."""
    plan = _plan(tmp_path, timeout=0.01)
    cut = BATCH_LOG[:BATCH_LOG.index('Running test_function_schema 1/1 ... [2026-12-02 03:18:19')]
    launcher = Canned(cut, ends=False)
    records, killed = batches.run_batch(plan, SUITES, str(tmp_path / 'out' / 'batch.log'), launcher=launcher)
    assert killed
    assert sorted(suite for suite, record in records.items() if record is not None) == sorted(SERIAL)
    assert all(records[suite].suite.status == 'passed' for suite in SERIAL)
    assert all(records[suite] is None for suite in SUITES if suite not in SERIAL)  # to be run alone


def test_a_plans_timeout_is_a_pieces_own_else_its_suites_else_the_default(tmp_path):
    plan = _plan(tmp_path)
    timed = RunPlan(**{**plan.__dict__, 'timeouts': {'': 100, 'test_license': 50, 'test_license#shard1/2': 20}})
    assert [timed.timeout_for(key) for key in ('test_license#shard1/2', 'test_license#shard2/2', 'test_license',
                                               'test_itt')] == [20, 50, 50, 100]


def test_here_long_suites_are_cut_only_with_slots_to_spare_and_previous_times(tmp_path):
    from eb_pytorch_cuda.testsuite.run.plan import HERE_PIECE_SECONDS, here_piece_rule
    from eb_pytorch_cuda.testsuite.results.previous import History
    from eb_pytorch_cuda.testsuite.run.here import HereExecutor
    previous = {'nn/test_convolution': 540.0, 'test_transformers': 10.0, 'test_cuda': 22.0}
    assert here_piece_rule(previous, {}, 1) is None and here_piece_rule({}, {}, 8) is None
    rule = here_piece_rule(previous, {}, 8)  # the share of 8 slots is 71.5 s: the floor holds
    assert rule.piece_seconds == HERE_PIECE_SECONDS == 120.0 and dict(rule.previous_seconds) == previous
    assert here_piece_rule(previous, {}, 2).piece_seconds == 286.0  # (540 + 10 + 22) / 2
    results = tmp_path / 'pytorch-test-results.json'  # what a previous build's step wrote (its suite_seconds)
    results.write_text(json.dumps({'suite_seconds': previous}))
    here = HereExecutor()
    assert here.piece_rule(History.read(str(results)), 8) == rule and here.piece_rule(History.read(str(results)), 1) \
        is None
    assert here.piece_rule(History.read(None), 8) is None
    assert here.piece_rule(History.read(str(tmp_path / 'none.json')), 8) is None


def test_a_job_here_gets_the_gpu_running_the_fewest_jobs_now():
    from eb_pytorch_cuda.testsuite.run.here import _GpuShare
    share = _GpuShare(['0', '1'])
    with share.one() as first:  # a long piece holds GPU 0
        with share.one() as second:
            assert (first, second) == ('0', '1')
        with share.one() as third:  # the second ended: its GPU, not the next one by start order
            assert third == '1'
    with _GpuShare([]).one() as none:
        assert none is None


def _prefixes(text):
    """Every line prefix of text, and each plus half of its next line (a write cut mid-line)."""
    lines = text.splitlines(keepends=True)
    at = 0
    for line in lines:
        yield text[:at]
        yield text[:at + len(line) // 2]
        at += len(line)


def test_a_killed_batch_passes_no_unended_suite_at_any_cut_of_the_real_log(tmp_path):
    """The real 2.6.0 batch output cut at every line (and mid-line), the call ended by SIGTERM, SIGKILL or SIGINT
    from outside (Popen's status -N): a suite whose sessions had all ended keeps its recorded outcome; one started
    and not ended is terminated with the signal, marked interrupted (a rerun runs it again); one never started is
    left to run alone; none passes with 0 tests."""
    plan = _plan(tmp_path)
    checked = 0
    for signum, name in ((15, 'SIGTERM'), (9, 'SIGKILL'), (2, 'SIGINT')):
        for cut in list(_prefixes(BATCH_LOG))[::7 if signum != 15 else 1]:
            records, killed = batches.run_batch(plan, SUITES, str(tmp_path / 'out' / 'batch.log'),
                                                launcher=Canned(cut, code=-signum))
            assert not killed
            whole_lines = cut[:cut.rfind('\n') + 1]  # a line cut mid-way says nothing yet
            ended = {suite for suite in SUITES if whole_lines.count(f'{suite} 1/1 was successful') + whole_lines.count(
                f'{suite} 1/1 failed!') >= (1 if suite in SERIAL else 2)}
            for suite, record in records.items():
                if suite in ended:
                    assert record is not None and record.interrupted is None, (suite, len(cut))
                    continue
                if f'Running {suite} 1/1 ...' not in cut:
                    assert record is None, (suite, len(cut))
                    continue
                if record is None:  # its Running line cut before its end: not known to have started
                    assert f'Running {suite} 1/1 ...' not in whole_lines, (suite, len(cut))
                    continue
                assert record.suite.status == 'terminated', (suite, len(cut))
                assert record.suite.signal == name and record.interrupted == name
                assert record.exit_code is None and any(name in note for note in record.notes)
            checked += 1
    assert checked > 1000


def test_a_batch_exiting_mid_run_passes_no_suite_with_only_its_serial_session(tmp_path):
    """run_test.py exiting 1 by itself (not by a signal) right after its first named failure, as it does without
    --continue-through-error (the real log cut after that line): a pool suite with only its `-m serial` session
    ended, or with its main session still running, has no summary (not `passed with 0 tests`)."""
    plan = _plan(tmp_path)
    first_failure = 'test_function_schema 1/1 failed!\n'
    cut = BATCH_LOG[:BATCH_LOG.index(first_failure) + len(first_failure)]
    records, killed = batches.run_batch(plan, SUITES, str(tmp_path / 'out' / 'batch.log'), launcher=Canned(cut, code=1))
    assert not killed
    ended = {suite for suite in SUITES if cut.count(f'{suite} 1/1 was successful') + cut.count(f'{suite} 1/1 failed!')
             >= (1 if suite in SERIAL else 2)}
    assert ended and ended != set(SUITES)
    for suite in ended:
        assert records[suite].suite.status == ('failed' if suite == 'test_function_schema' else 'passed'), suite
    for suite in set(SUITES) - ended:
        record = records[suite]
        assert record.suite.status == 'no summary' and record.exit_code is None, suite
        assert any('run_test.py exited 1 after 1 of the suite' in note for note in record.notes), suite


def test_a_call_beside_others_on_a_gpu_gets_the_gpu_share_and_one_alone_does_not(tmp_path):
    """6 slots pinned to one GPU, the harness's pool of 3: every call beside the others gets the plugin and the
    count 3, the share of one call of the harness (run/gpu_share), whatever its own suites; a call alone (the
    serial list) is left to the harness; slots not pinned (no GPU seen) get nothing."""
    from eb_pytorch_cuda.testsuite.run import gpu_share
    plan = _plan(tmp_path)
    pinned = RunPlan(**{**plan.__dict__, 'parallel': 6, 'gpus': ('0',),
                        'harness': replace(plan.harness, pool_size=3)})
    for processes in (1, 3):
        env = pinned.call_env(processes)
        assert env[gpu_share.VARIABLE] == '3'
        assert env['PYTEST_PLUGINS'].split(',') == [gpu_share.PLUGIN]
    assert pinned.call_env(1, alone=True) == pinned.env
    unpinned = RunPlan(**{**plan.__dict__, 'parallel': 6})
    assert gpu_share.VARIABLE not in unpinned.call_env(3) and 'PYTEST_PLUGINS' not in unpinned.call_env(3)
