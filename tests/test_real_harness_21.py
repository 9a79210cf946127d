"""The test step against the main job's own harness line: the 2.1-line run_test.py and suites of
../shared/pytorch-2.1-harness (see its PROVENANCE.md; tools/setup.sh copies it to .venvs/pytorch-2.1-harness)
run with torch 2.1.2 from PyPI (.venvs/harness-2.1, the plugins of upstream's 2.1.2 easyconfigs).

Two kinds of test: the real outputs recorded from that harness (tests/data/pytorch21, each with the command
that made it, re-recorded by its record.py) read by `report` and the parsers; and the harness run live here:
discovery asked of its own selection, `test-suite` end to end (batches, serial list, XML, resume, re-judge),
an exact rerun.  The two suites of tests/data/pytorch21/suites (an abort and a long failure) are stand-ins:
no suite of this tree crashes on a CPU.
"""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest
from environment import HARNESS21_TREE, need_harness21
from helpers import H200, cli, stand_in_nvidia_smi, stored_records

from eb_pytorch_cuda.cli import main
from eb_pytorch_cuda.testsuite.run import discovery
from eb_pytorch_cuda.testsuite.run import reruns
from eb_pytorch_cuda.testsuite.results.splitting import split_batch_output
from eb_pytorch_cuda.testsuite.run.command import TestCommand as Command  # not a pytest test class
from eb_pytorch_cuda.testsuite.run.command import harness_environment
from eb_pytorch_cuda.testsuite.run.harness import read_harness
from eb_pytorch_cuda.testsuite.run.plan import RunRequest, build_plan
from eb_pytorch_cuda.testsuite.results.logparse import parse_log_file
from eb_pytorch_cuda.testsuite.results.saved import load_results

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TREE = HARNESS21_TREE
PYTHON = os.path.join(REPO, '.venvs', 'harness-2.1', 'bin', 'python')
DATA = os.path.join(REPO, 'tests', 'data', 'pytorch21')
REAL = ['test_cuda_primary_ctx', 'test_license', 'test_per_overload_api', 'test_set_default_mobile_cpu_allocator',
        'test_show_pickle', 'test_type_info']
PASSED = {'test_per_overload_api': 3, 'test_set_default_mobile_cpu_allocator': 2, 'test_show_pickle': 1,
          'test_type_info': 3, 'test_cuda_primary_ctx': 0}
FAILURE = 'TestLicense.test_distinfo_license'  # the wheel's LICENSE says "Pytorch", the test wants "PyTorch"
# the live runs add two suites of Debian's pytorch 2.6.0 source that run unchanged under torch 2.1.2 (tools/setup.sh)
LIVE = REAL + ['test_function_schema', 'test_native_functions']
LIVE_PASSED = dict(PASSED, test_function_schema=15, test_native_functions=11)


def _recorded(name):
    with open(os.path.join(DATA, f'{name}.json')) as handle:
        return json.load(handle)


# ---- the recorded real outputs --------------------------------------------------------------------------


def test_report_passes_the_plain_run_with_its_one_real_failure_in_the_budget(capsys):
    assert _recorded('plain')['exit_code'] == 1
    log = os.path.join(DATA, 'plain.log')
    assert main(['report', log, '--max-failed-tests', '1']) == 0
    out = capsys.readouterr().out
    assert 'verdict: PASS' in out and f'unknown failure: test_license::{FAILURE}' in out
    assert main(['report', log, '--max-failed-tests', '0']) == 1
    assert 'verdict: FAIL' in capsys.readouterr().out


def test_the_plain_run_counts_each_suite_and_the_0_test_suite_passes_noted():
    result = parse_log_file(os.path.join(DATA, 'plain.log'))
    assert sorted(result.suites) == sorted(REAL)  # `Running 2 items in this shard` is no suite
    for suite, passed in PASSED.items():
        assert result.suites[suite].status == 'passed', suite
        assert result.suites[suite].counts['passed'] == passed, suite
    license_suite = result.suites['test_license']
    assert license_suite.status == 'failed' and license_suite.counts['failed'] == 1
    assert license_suite.counts['skipped'] == 1 and [t.test_id for t in license_suite.failed_tests] == [FAILURE]
    assert result.suites['test_cuda_primary_ctx'].note == 'exit 0 without a countable summary: passed with 0 tests'


@pytest.mark.harness21
def test_the_plain_run_cut_by_suite_settles_each_suite_once():
    with open(os.path.join(DATA, 'plain.log')) as handle:
        text = handle.read()
    harness = read_harness(os.path.join(TREE, 'test', 'run_test.py'))
    outputs = split_batch_output(text, REAL, os.path.join(TREE, 'test'), False, harness.runs_of,
                                 harness.full_log_means_passed)
    assert all(outputs[suite].settled and outputs[suite].finished for suite in REAL)
    assert [suite for suite in REAL if outputs[suite].failed] == ['test_license']
    assert '1 failed, 1 skipped, 2 rerun' in outputs['test_license'].text  # the short log, without a start marker
    assert 'test_per_overload_api.py' not in outputs['test_license'].text


def test_the_two_shards_are_disjoint_and_together_the_whole_selection():
    first = parse_log_file(os.path.join(DATA, 'shard-1-of-2.log'))
    second = parse_log_file(os.path.join(DATA, 'shard-2-of-2.log'))
    assert not set(first.suites) & set(second.suites)
    assert sorted(set(first.suites) | set(second.suites)) == sorted(REAL)
    assert all(suite.status in ('passed', 'failed') for suite in [*first.suites.values(), *second.suites.values()])


def test_an_excluded_suite_is_silently_left_out():
    result = parse_log_file(os.path.join(DATA, 'exclude.log'))
    assert sorted(result.suites) == sorted(set(REAL) - {'test_license', 'test_show_pickle'})
    assert _recorded('exclude')['exit_code'] == 0


def test_save_xml_works_only_after_the_double_dash_and_the_xml_agrees_with_the_log():
    assert _recorded('xml-before-dashes')['xml_reports'] == []  # accepted, and dropped
    reports = _recorded('xml-after-dashes')['xml_reports']
    assert sorted({path.split('/')[2] for path in reports}) == sorted(set(REAL) - {'test_cuda_primary_ctx'})
    assert all(path.startswith('test-reports/python-pytest/') for path in reports)
    result = load_results([os.path.join(DATA, 'xml-after-dashes.log'),
                           os.path.join(DATA, 'xml-after-dashes-xml', 'test-reports')])
    for suite, passed in PASSED.items():
        assert result.suites[suite].counts['passed'] == passed, suite
    assert [t.test_id for t in result.suites['test_license'].failed_tests] == [FAILURE]
    assert result.suites['test_license'].counts['failed'] == 1


def test_an_aborted_suite_is_terminated_by_sigiot_and_a_long_failure_is_counted():
    log = os.path.join(DATA, 'killed-and-long-failure.log')
    with open(log) as handle:
        text = handle.read()
    assert 'test_abort_standin 1/1 failed! Received signal: SIGIOT' in text
    assert 'PRINTING BEGINNING OF LOG FILE of test_long_failure_standin 1/1' in text
    result = parse_log_file(log)
    assert result.suites['test_abort_standin'].status == 'terminated'
    assert result.suites['test_abort_standin'].signal == 'SIGIOT'
    long_failure = result.suites['test_long_failure_standin']
    assert long_failure.status == 'failed' and long_failure.counts['failed'] == 1
    assert [t.test_id for t in long_failure.failed_tests] == ['TestLongFailureStandin.test_fails_after_long_output']
    assert result.suites['test_type_info'].status == 'passed'


def test_unittest_mode_runs_nothing_in_this_harness_and_nothing_passes(capsys):
    # PYTORCH_TEST_DO_NOT_USE_PYTEST=1: the pool's suites are announced and never run, the serial one stops
    # run_test.py with an AttributeError; a call that ran nothing must not pass, whatever the budget
    log = os.path.join(DATA, 'unittest-mode.log')
    with open(log) as handle:
        assert "AttributeError: 'Namespace' object has no attribute 'pytest'" in handle.read()
    result = parse_log_file(log)
    assert {name: suite.status for name, suite in result.suites.items()} == \
        dict.fromkeys(['test_type_info', 'test_per_overload_api', 'test_show_pickle'], 'no summary')
    assert main(['report', log, '--max-failed-tests', '100']) == 1
    assert 'test_type_info: no summary, and not a known failure' in capsys.readouterr().out


# ---- the harness run live ------------------------------------------------------------------------------


def _tree_copy(copy):
    """copy: a private copy of the 2.1-line tree (the harness writes test/test-reports into it)."""
    need_harness21()  # its marker has skipped the test already; a fixture that copies the tree says so too
    shutil.copytree(TREE, copy, ignore=shutil.ignore_patterns('test-reports'))
    return copy


@pytest.fixture(scope='module')
def tree(tmp_path_factory):
    return _tree_copy(tmp_path_factory.mktemp('real21') / 'pytorch')


@pytest.mark.harness21
def test_discovery_asks_the_harness_which_prints_nothing_and_gets_its_shard(tree):
    command = Command(str(tree / 'test'), {}, [PYTHON, 'run_test.py', '--continue-through-error', '-i', *REAL])
    suites, serial = discovery.discover(command, dict(os.environ))
    assert sorted(suites) == sorted(REAL)
    assert serial == {'test_cuda_primary_ctx', 'test_show_pickle'}  # its must_serial(): handler, blocklist
    recorded = parse_log_file(os.path.join(DATA, 'shard-1-of-2.log'))
    shard, _ = discovery.discover(Command(command.cwd, {}, command.argv + ['--shard', '1', '2']), dict(os.environ))
    assert sorted(shard) == sorted(recorded.suites)  # what the real `--shard 1 2` run ran


@pytest.mark.harness21
def test_an_excluded_name_the_tree_has_no_file_of_is_left_out_and_said_not_an_error(tree):
    """The harness's own -x stops on such a name (`invalid choice`, exit 2): the names of its TESTS only.  An
    upstream easyconfig's exclusion of a file that this tree lacks is said in one line and left out of every
    call; the names it has are still excluded."""
    alone = subprocess.run([PYTHON, 'run_test.py', '-x', 'test_no_such_suite', '--dry-run'], cwd=tree / 'test',
                           capture_output=True, text=True, timeout=300)
    assert alone.returncode == 2 and "invalid choice: 'test_no_such_suite'" in alone.stderr
    argv = [PYTHON, 'run_test.py', '--continue-through-error', '-i', *REAL, '-x', 'test_no_such_suite',
            'test_license', 'test_ñ', '--verbose']
    selection = discovery.select(Command(str(tree / 'test'), {}, argv), dict(os.environ))
    assert sorted(selection.suites) == sorted(set(REAL) - {'test_license'})
    assert selection.unknown_excluded == ['test_no_such_suite', 'test_ñ']
    assert selection.command.argv == [PYTHON, 'run_test.py', '--continue-through-error', '-i', *REAL,
                                      '-x', 'test_license', '--verbose']
    said = []
    plan = build_plan(RunRequest(Command(str(tree / 'test'), {}, argv), dict(os.environ), str(tree / 'out'),
                                 PYTHON), said.append)
    assert said[0] == ("excluded_tests: 'test_no_such_suite', 'test_ñ': no such test file in this tree (its "
                       "run_test.py's TESTS), so nothing to exclude; left out of -x")
    assert plan.command.argv == selection.command.argv and 'test_license' not in plan.suites


@pytest.fixture(scope='module')
def suite_run(tree, tmp_path_factory):
    results = tmp_path_factory.mktemp('results21')
    easyconfig = results.parent / 'budget1.eb'
    easyconfig.write_text("easyblock = 'PyTorch'\nname = 'PyTorch'\nversion = '2.1.2'\nhomepage = 'x'\n"
                          "description = 'x'\ntoolchain = SYSTEM\nmax_failed_tests = 1\n")
    argv = ['test-suite', str(tree), '--python', PYTHON, '--runtest',
            'cd test && %(python)s run_test.py --continue-through-error -i ' + ' '.join(LIVE),
            '--easyconfig', str(easyconfig), '--results', str(results), '--format', 'json']
    done = cli(*argv, timeout=1500, env=dict(os.environ, CI='true'))
    return done, stored_records(results), results, argv


@pytest.mark.harness21
def test_test_suite_runs_the_real_suites_and_passes_with_the_budget(suite_run):
    done, records, _results, _argv = suite_run
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)['verdict'] == 'pass'
    assert set(records) == set(LIVE)
    for suite, passed in LIVE_PASSED.items():
        assert records[suite]['suite']['status'] == 'passed', (suite, records[suite]['output_tail'][-2000:])
        assert records[suite]['suite']['counts']['passed'] == passed, suite
    assert [t['test_id'] for t in records['test_license']['suite']['failed_tests']] == [FAILURE]
    assert records['test_cuda_primary_ctx']['notes'] == ['exit 0 without a countable summary: passed with 0 tests']


@pytest.mark.harness21
def test_xml_reports_are_written_after_the_double_dash_and_agree_with_the_log(suite_run, tree):
    _done, records, _results, _argv = suite_run
    for suite in set(LIVE) - {'test_cuda_primary_ctx'}:
        assert 'xml' in records[suite]['suite']['sources'], suite
        assert not [note for note in records[suite]['notes'] if 'differ' in note or 'only in' in note], suite
        assert os.listdir(tree / 'test' / 'test-reports' / 'python-pytest' / suite)


@pytest.mark.harness21
def test_the_harness_serial_suites_run_after_the_others_in_one_call(suite_run):
    _done, records, _results, _argv = suite_run
    with open(records['test_license']['output_file']) as handle:
        text = handle.read()
    running = re.findall(r'^Running (\S+) 1/1 \.\.\. \[', text, re.M)
    assert set(running) == set(LIVE)
    assert set(running[-2:]) == {'test_cuda_primary_ctx', 'test_show_pickle'}  # must_serial: after the pool


@pytest.mark.harness21
def test_the_same_command_again_runs_nothing_and_report_rejudges_the_saved_json(suite_run, capsys):
    _done, _records, results, argv = suite_run
    done = cli(*argv[:-2], '--format', 'text', timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f'resuming: {len(LIVE)} suite(s) already measured for this build, 0 to run' in done.stderr
    saved = results / 'pytorch-test-results.json'
    assert main(['report', str(saved), '--max-failed-tests', '1']) == 0
    assert 'verdict: PASS' in capsys.readouterr().out
    assert main(['report', str(saved), '--max-failed-tests', '0']) == 1


@pytest.mark.harness21
def test_a_rerun_runs_exactly_the_failed_test_the_pytest_summary_named(tree):
    harness = read_harness(str(tree / 'test' / 'run_test.py'))
    command = Command(str(tree / 'test'), {}, [PYTHON, 'run_test.py', '--continue-through-error'])
    env = harness_environment(dict(os.environ), command)  # as the step reruns: without CI's switch
    passed, output = reruns.rerun_isolated(command, PYTHON, 'test_license', FAILURE, harness, env, timeout=600)
    assert not passed and re.search(r'^Ran 1 test in', output, re.M), output
    assert 'test_license_for_wheel' not in output


@pytest.mark.harness21
def test_a_suite_run_as_two_pieces_merges_to_the_whole_suites_result(tmp_path):
    """test_native_functions whole and as 2 pieces on this harness, each through the step's own
    solo.run_suite (what a spread job's worker runs for a piece): the harness's `--shard i 2` over the times file
    run/piece_times writes becomes pytest-shard's 0-based `--shard-id=i-1 --num-shards=2`; the pieces' records,
    merged by the store, give the whole run's status, counts and test ids, and their kept per-test times carry
    the node ids pytest-shard hashed (`test/...`: this tree's pytest.ini makes its top the rootdir)."""
    from eb_pytorch_cuda.testsuite.results.pieces import Piece
    from eb_pytorch_cuda.testsuite.results.testtimes import shard_of
    from eb_pytorch_cuda.testsuite.run import piece_times, solo
    from eb_pytorch_cuda.testsuite.run.harness import harness_of
    from eb_pytorch_cuda.testsuite.run.plan import RunRequest, build_plan
    from eb_pytorch_cuda.testsuite.run.store import ResultStore
    test_dir = str(_tree_copy(tmp_path / 'pytorch') / 'test')
    command = Command(test_dir, {}, [PYTHON, 'run_test.py', '--continue-through-error'])
    env = harness_environment({k: v for k, v in os.environ.items() if k not in ('PYTHONPATH', 'CI')}, command)
    suite = 'test_native_functions'
    whole = ResultStore(str(tmp_path / 'whole' / 'r.jsonl'), 'f')
    plan = build_plan(RunRequest(command, env, str(tmp_path), PYTHON, {'': 900}, units=[suite]))
    whole.append(solo.run_suite(plan, suite))
    pieces = [Piece(suite, index, 2) for index in (1, 2)]
    assert piece_times.write_times(test_dir, harness_of(test_dir), pieces) is None
    split = ResultStore(str(tmp_path / 'split' / 'r.jsonl'), 'f')
    records = [solo.run_suite(plan, piece.key) for piece in pieces]
    for piece, record in zip(pieces, records):
        assert record.output_file is not None
        with open(record.output_file) as handle:
            text = handle.read()
        assert f'Running {suite} {piece.index}/2 ' in text and f'--shard-id={piece.index - 1}' in text, text[-3000:]
        assert record.test_seconds and all(node.startswith('test/test_native_functions.py::TestNativeFunctions::')
                                           and shard_of(node, 2) == piece.index for node in record.test_seconds)
        split.append(record)
    merged, unsplit = split.result([suite]).suites[suite], whole.result([suite]).suites[suite]
    assert (merged.status, merged.counts, merged.failed_tests) == (unsplit.status, unsplit.counts, unsplit.failed_tests)
    assert merged.status == 'passed' and merged.counts['passed'] == LIVE_PASSED[suite] == 11
    assert [record.suite.counts.passed for record in records] == [7, 4]
    assert sum(len(record.test_seconds or {}) for record in records) == 11


@pytest.mark.harness21
def test_test_suite_runs_an_easyconfigs_runtest_pretestopts_and_testopts(tree, tmp_path):
    """`test-suite --easyconfig EC` runs EC's test command as the test step does (its `-i`, its
    %(excluded_tests)s, pretestopts' assignments, testopts appended) and says which command it runs, not the
    default command (every suite the harness knows: 24 here)."""
    easyconfig = tmp_path / 'own-runtest.eb'
    easyconfig.write_text(
        "easyblock = 'PyTorch'\nname = 'PyTorch'\nversion = '2.1.2'\nhomepage = 'x'\ndescription = 'x'\n"
        "toolchain = SYSTEM\nmax_failed_tests = 0\n"
        "runtest = 'cd test && PYTHONUNBUFFERED=1 %(python)s run_test.py --continue-through-error --verbose "
        "-i test_type_info test_license test_show_pickle %(excluded_tests)s'\n"
        "excluded_tests = {'': ['test_license']}\n"
        "pretestopts = 'export EB_TEST_FROM_PRETESTOPTS=yes && '\ntestopts = '--shard 1 1'\n")
    results = tmp_path / 'results'
    done = cli('test-suite', tree, '--python', PYTHON, '--easyconfig', easyconfig, '--results', results,
               '--format', 'json', timeout=900)
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stderr.splitlines() if 'test command (' in line]
    assert len(said) == 1, done.stderr
    assert f"{easyconfig}'s runtest, pretestopts, testopts" in said[0]
    assert 'EB_TEST_FROM_PRETESTOPTS=yes PYTHONUNBUFFERED=1 ' in said[0]
    assert said[0].endswith(f"run_test.py --continue-through-error --verbose -i test_type_info test_license "
                            f"test_show_pickle -x test_license --shard 1 1  [in {tree / 'test'}]"), said[0]
    data = json.loads(done.stdout)
    assert data['verdict'] == 'pass'
    suites = {suite['name']: suite for suite in data['suites']}
    assert sorted(suites) == ['test_show_pickle', 'test_type_info']  # -i, less the excluded one
    assert suites['test_type_info']['counts']['passed'] == PASSED['test_type_info']
    default = cli('test-suite', tree, '--python', PYTHON, '--easyconfig', easyconfig,
                  '--runtest', 'cd test && %(python)s run_test.py -i test_type_info',
                  '--results', tmp_path / 'given', '--format', 'json', timeout=900)
    assert default.returncode == 0, default.stderr
    assert "test command (--runtest, no shell)" in default.stderr  # --runtest wins over the easyconfig's
    assert [suite['name'] for suite in json.loads(default.stdout)['suites']] == ['test_type_info']


@pytest.mark.harness21
def test_a_gpu_and_cuda_torch_run_cuda_mode_and_zero_cuda_tests_fail_required(tree, tmp_path):
    """The main job's pair (torch 2.1.2, a CUDA build): where the step sees a GPU, the suites run with
    SANDCASTLE=0, the reports count the CUDA tests, and 0 CUDA tests run is a warning (--cuda-device-tests true:
    the verdict fails).  The GPU is the one stand-in here: an `nvidia-smi` on PATH that lists one, as the real one
    does (helpers.stand_in_nvidia_smi: the H200 node's answers); this machine has none, so torch sees no CUDA
    device and instantiates no CUDA test: exactly the blind step the warning is for."""
    fake = tmp_path / 'bin'
    stand_in_nvidia_smi(fake, [H200])
    env = dict(os.environ, PATH=f"{fake}{os.pathsep}{os.environ['PATH']}")
    env.pop('CUDA_VISIBLE_DEVICES', None)
    runs = {}
    for mode in ('auto', 'true'):
        done = cli('test-suite', tree, '--python', PYTHON, '--runtest',
                   'cd test && %(python)s run_test.py --continue-through-error -i test_type_info',
                   '--cuda-device-tests', mode, '--results', tmp_path / mode, '--format', 'json', timeout=900, env=env)
        runs[mode] = done
    auto, true = runs['auto'], runs['true']
    assert auto.returncode == 0, auto.stderr
    assert ("cuda_device_tests='auto': CUDA and CPU device tests: 1 GPU(s) seen (0), the build has CUDA; sets "
            "SANDCASTLE=0") in auto.stderr
    assert 'WARNING: the test step saw 1 GPU(s) and the build has CUDA, but 0 CUDA device tests ran' in auto.stderr
    data = json.loads(auto.stdout)
    assert data['verdict'] == 'pass' and data['cuda_tests'] == {'ran': 0, 'failed': 0, 'skipped': 0}
    assert data['cuda_device_tests']['environment'] == {'SANDCASTLE': '0'} and len(data['warnings']) == 1
    assert true.returncode == 1, true.stderr
    assert any('cuda_device_tests=True: the test step saw 1 GPU(s)' in reason
               for reason in json.loads(true.stdout)['reasons'])
    hidden = cli('test-suite', tree, '--python', PYTHON, '--runtest',
                 'cd test && %(python)s run_test.py -i test_type_info', '--cuda-device-tests', 'true',
                 '--results', tmp_path / 'hidden', timeout=300, env=dict(env, CUDA_VISIBLE_DEVICES=''))
    assert hidden.returncode == 2 and not (tmp_path / 'hidden' / 'results.jsonl').exists(), hidden.stderr
    assert 'cuda_device_tests: is True, but the test step cannot run CUDA tests here: no GPU seen' in hidden.stderr


@pytest.mark.harness21
def test_a_python_without_an_importable_torch_is_refused_leaving_nothing(tree, tmp_path):
    """The harness's own dry run fails (EasyBuild's venv has no torch): exit 2 in one line naming the
    command, and the results directory this call would have made is not left behind with a lock in it."""
    results = tmp_path / 'results'
    done = cli('test-suite', tree, '--python', sys.executable, '--runtest',
               'cd test && %(python)s run_test.py -i test_type_info', '--results', results, timeout=300)
    assert done.returncode == 2, (done.stdout, done.stderr)
    errors = [line for line in done.stderr.splitlines() if line.startswith('eb-pytorch-cuda: error:')]
    assert len(errors) == 1 and 'run_test.py' in errors[0] and 'Traceback' not in done.stderr, done.stderr
    assert not results.exists()
