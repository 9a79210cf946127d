"""Per-suite runs: discovery, the results store surviving a torn write, timeouts killing the process group."""

import json
import os
import shutil
import sys
import time

import pytest

from eb_pytorch_cuda import standins
from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.testsuite import suiterun
from eb_pytorch_cuda.testsuite.command import TestCommand as Command  # not a pytest test class


@pytest.fixture
def tree(tmp_path):
    test_dir = tmp_path / 'test'
    shutil.copytree(os.path.join(standins.TORCH_SOURCES, 'test'), test_dir)
    (test_dir / 'test_spawns_and_hangs.py').write_text(
        'import subprocess, sys, time\n'
        'child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])\n'
        'open("child.pid", "w").write(str(child.pid))\n'
        'time.sleep(600)\n')
    return test_dir


def _command(test_dir):
    return Command(str(test_dir), {}, [sys.executable, 'run_test.py', '-x', 'test_crash', 'test_hang',
                                           'test_cudnn'])


def test_discovery_lists_the_selected_suites(tree):
    suites = suiterun.discover_suites(_command(tree), dict(os.environ))
    assert 'test_flaky' in suites and 'test_cudnn' not in suites and 'distributed/test_c10d_standin' in suites


def test_discovery_without_a_list_is_an_error(tmp_path):
    command = Command(str(tmp_path), {}, [sys.executable, '-c', 'print("nothing")'])
    with pytest.raises(PluginError, match='--dry-run.* listed no tests'):
        suiterun.discover_suites(command, dict(os.environ))


def test_a_timed_out_suite_takes_its_children_down_and_keeps_its_partial_output(tree, tmp_path):
    (tmp_path / 'out').mkdir()
    start = time.time()
    record = suiterun.run_suite(_command(tree), 'test_spawns_and_hangs', 2, str(tmp_path / 'out'), dict(os.environ))
    assert time.time() - start < 30
    assert record['suite']['status'] == 'timed out' and record['suite']['signal'] == 'timeout after 2s'
    assert 'Running test_spawns_and_hangs 1/1' in record['output_tail']
    child = int((tree / 'child.pid').read_text())
    time.sleep(0.5)
    assert not os.path.exists(f'/proc/{child}') or 'Z' in open(f'/proc/{child}/stat').read().split()[2]


def test_the_store_keeps_finished_suites_of_this_build_only_and_ignores_a_torn_line(tmp_path):
    store = suiterun.ResultStore(str(tmp_path / 'r' / 'results.jsonl'), 'fingerprint-a')
    store.append({'suite': {'name': 'test_a', 'status': 'passed'}})
    suiterun.ResultStore(store.path, 'fingerprint-b').append({'suite': {'name': 'test_b', 'status': 'passed'}})
    with open(store.path, 'a') as handle:
        handle.write(json.dumps({'suite': {'name': 'test_c'}, 'fingerprint': 'fingerprint-a'})[:20])
    assert set(store.load()) == {'test_a'}


def test_the_fingerprint_ignores_the_policy_but_not_the_build():
    from eb_pytorch_cuda.testsuite.step import build_fingerprint
    base = {'name': 'PyTorch', 'sources': ['pytorch-v2.1.2.tar.gz'], 'max_failed_tests': 2,
            'known_test_failures': {'': [('test_x', 'r')]}}
    env = {'CFLAGS': '-O2 -march=haswell'}
    same = build_fingerprint(dict(base, max_failed_tests=5, known_test_failures={}, test_suite_timeout=60), env)
    assert same == build_fingerprint(base, env)
    assert build_fingerprint(dict(base, sources=['pytorch-v2.1.3.tar.gz']), env) != build_fingerprint(base, env)
    assert build_fingerprint(base, {'CFLAGS': '-O2 -march=znver3'}) != build_fingerprint(base, env)


def test_timeouts_come_from_the_previous_results_or_a_default(tmp_path):
    from eb_pytorch_cuda.testsuite.step import suite_timeouts
    previous = tmp_path / 'results.json'
    previous.write_text(json.dumps({'suite_seconds': {'test_nn': 1000.0, 'test_fast': 1.0}}))
    assert suite_timeouts(None, previous) == {'': suiterun.DEFAULT_TIMEOUT, 'test_nn': 4000, 'test_fast': 600}
    assert suite_timeouts(120, previous) == {'': 120}
    assert suite_timeouts(None, tmp_path / 'missing.json') == {'': suiterun.DEFAULT_TIMEOUT}


def test_one_list_of_parameters_feeds_the_reader_the_fingerprint_and_the_settings(tmp_path):
    from eb_pytorch_cuda.eb import ecpolicy
    from eb_pytorch_cuda.testsuite import settings, step
    assert step.POLICY_PARAMETERS == settings.JUDGING and ecpolicy.POLICY_PARAMETERS == settings.NAMES
    easyconfig = tmp_path / 'PyTorch-2.1.2.eb'
    easyconfig.write_text("easyblock = 'PyTorch'\nname = 'PyTorch'\nversion = '2.1.2'\nhomepage = 'x'\n"
                          "description = 'x'\ntoolchain = SYSTEM\nmax_failed_tests = 3\nrerun_failed_tests = 2\n"
                          "parallel_test_suites = 2\ntest_suite_timeout = 900\nexcluded_tests = {'': ['test_x']}\n"
                          "known_test_failures = {'': [('test_y', 'why')]}\n")
    read = ecpolicy.read_settings(str(easyconfig))
    assert (read.max_failed_tests, read.rerun_failed_tests, read.parallel_test_suites, read.test_suite_timeout) == \
        (3, 2, 2, 900)
    from eb_pytorch_cuda.testsuite.policy import detect_context
    context = detect_context((), cpu_family='x86_64', target='x86_64/generic')
    assert read.excluded(context) == ['test_x'] and read.policy(context).max_failed_tests == 3
    assert settings.TestSettings.from_values({}).policy(context, default_budget=10).max_failed_tests == 10
