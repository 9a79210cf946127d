"""`report` judging a run with the policy of an easyconfig: exit codes, and a saved JSON judged again with
another policy.  The easyconfig is read by a child Python (eb/ecpolicy.read_easyconfig): a real process, so
these left test_testsuite_policy, whose tier starts none."""

import json

import pytest

import pytorch_output as out
from helpers import cli
from pytorch_output import KNOWN


@pytest.fixture
def easyconfig(tmp_path):
    path = tmp_path / 'PyTorch-x.eb'
    path.write_text(f"""easyblock = 'EB_PyTorch'
name = 'PyTorch'
version = '2.1.2'
homepage = 'https://pytorch.org'
description = 'x'
toolchain = SYSTEM
max_failed_tests = 2
known_test_failures = {KNOWN!r}
""")
    return path


def test_report_command_applies_easyconfig_policy_and_exit_codes(tmp_path, easyconfig):
    log = tmp_path / 'run.log'
    log.write_text(out.FULL_LOG.replace(out.TRUNCATED_TAIL, ''))
    done = cli('report', log, '--easyconfig', easyconfig, '--target', 'x86_64/intel/haswell', check_rc=0)
    assert 'dynamo/test_dynamic_shapes (2 failed, 2065 passed, 14 skipped, 33 xfailed, 4 rerun)' in done.stdout
    assert 'known: 6, unknown: 0 (budget 2)' in done.stdout
    assert 'test_cuda_expandable_segments (SIGIOT, known)' in done.stdout
    assert done.stdout.rstrip().endswith('verdict: PASS')
    failing = cli('report', log, '--max-failed-tests', '0', '--format', 'json', check_rc=1)
    data = json.loads(failing.stdout)
    assert data['verdict'] == 'fail' and data['failed_tests'] == 6
    assert {'name': 'test_cuda_expandable_segments', 'signal': 'SIGIOT'} in data['terminated_suites']
    assert {s['name'] for s in data['failed_suites']} >= {'test_nn', 'test_import_stats'}


def test_saved_json_is_rejudged_with_another_policy(tmp_path, easyconfig):
    log = tmp_path / 'run.log'
    log.write_text(out.FULL_LOG.replace(out.TRUNCATED_TAIL, ''))
    saved = tmp_path / 'results.json'
    saved.write_text(cli('report', log, '--format', 'json', check_rc=1).stdout)
    done = cli('report', saved, '--easyconfig', easyconfig, '--target', 'x86_64/intel/haswell', '--format',
               'markdown', check_rc=0)
    assert done.stdout.startswith('### PyTorch test suite: PASS')
    assert '`test_autograd::TestAutograd.test_never_fails`' in done.stdout  # stale entry listed
