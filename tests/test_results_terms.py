"""A results JSON carries the terms it was judged by (policy/settings.JudgedTerms): `report` on it alone gives the
step's own verdict, and --max-failed-tests or --easyconfig replace them, saying so.

The step is `eb-pytorch-cuda test-suite` on the stand-in harness (the easyblock's test step writes the same JSON:
service.report_texts), judged by an easyconfig read by EasyBuild's own parser: budget 0, one known failure, one
entry of a scope that applies nowhere, a suite excluded, one rerun.  Twice: once with the known failure only
(PASS), once with an unknown one too (FAIL: judged by the default budget, 10 under EasyBuild 5, and without the
known failure, `report` on that JSON alone would say `known: 0, unknown: 2 (budget 10)`, PASS).
"""

import json

import pytest

from helpers import cli, module_env, standin_test_tree, suite_command

KNOWN = "('test_known_failure::TestKnown.test_always_fails', 'fails here on purpose')"
EASYCONFIG = f"""easyblock = 'EB_PyTorch'
name = 'PyTorch'
version = '2.1.2'
homepage = 'https://pytorch.org'
description = 'x'
toolchain = SYSTEM
max_failed_tests = 0
rerun_failed_tests = 1
excluded_tests = {{'': ['distributed/test_c10d_standin']}}
known_test_failures = {{'': [{KNOWN}], 'x86_64/none/nowhere': [('test_flaky', 'never in force')]}}
"""
TERMS_LINE = 'terms: as judged by the build (budget 0, 1 known failure)'


@pytest.fixture(scope='module')
def runs(tmp_path_factory):
    """{'pass': ..., 'fail': ...}: each a test-suite run (its stdout, exit status, results JSON) by EASYCONFIG."""
    import subprocess
    root = tmp_path_factory.mktemp('terms')
    easyconfig = root / 'PyTorch-x.eb'
    easyconfig.write_text(EASYCONFIG)
    found = {}
    for name, extra in (('pass', {}), ('fail', {'STANDIN_UNKNOWN_FAILURE': '1'})):
        tree = root / name / 'src'
        standin_test_tree(tree, keep=('test_known_failure', 'test_flaky'))
        results = root / name / 'results'
        done = subprocess.run(suite_command(tree, results, '--easyconfig', easyconfig),
                              env=dict(module_env(), **extra), capture_output=True, text=True, timeout=300)
        assert done.returncode in (0, 1) and 'Traceback' not in done.stderr, done.stderr
        found[name] = (done, results / 'pytorch-test-results.json')
    return found


def test_the_step_wrote_the_terms_it_judged_by(runs):
    done, path = runs['fail']
    assert done.returncode == 1
    assert 'known: 1, unknown: 1 (budget 0), flaky: 1' in done.stdout
    terms = json.loads(path.read_text())['terms']
    assert terms['max_failed_tests'] == 0 and terms['rerun_failed_tests'] == 1
    assert terms['known_test_failures'] == [{'test': 'test_known_failure::TestKnown.test_always_fails',
                                             'reason': 'fails here on purpose', 'scope': '', 'max': None}]
    assert terms['excluded_tests'] == ['distributed/test_c10d_standin']
    assert terms['flaky_failures_consume_budget'] is False and terms['allow_missing_failures'] == 0
    assert terms['cuda_device_tests']['requested'] == 'auto'


@pytest.mark.parametrize('name,status', [('pass', 0), ('fail', 1)])
def test_report_on_the_json_alone_gives_the_steps_own_judgement_byte_for_byte(runs, name, status):
    done, path = runs[name]
    assert done.returncode == status and 'note:' not in done.stdout
    report = cli('report', path, check_rc=status)
    assert report.stdout == f'{TERMS_LINE}\n{done.stdout}'  # the step's lines, after the one on the terms
    assert report.stderr == ''


def test_report_json_keeps_the_terms_and_the_verdict(runs):
    done, path = runs['fail']
    data = json.loads(cli('report', path, '--format', 'json', check_rc=1).stdout)
    saved = json.loads(path.read_text())
    assert data['terms'] == saved['terms'] and data['terms_note'] == TERMS_LINE
    for key in ('verdict', 'reasons', 'known_failures', 'unknown_failures', 'flaky_failures', 'budget'):
        assert data[key] == saved[key], key
    markdown = cli('report', path, '--format', 'markdown', check_rc=1).stdout
    assert markdown.split('\n')[:3] == ['### PyTorch test suite: FAIL', '', TERMS_LINE]


def test_max_failed_tests_overrides_the_budget_and_says_so(runs):
    _done, path = runs['fail']
    report = cli('report', path, '--max-failed-tests', '1', check_rc=0)
    lines = report.stdout.splitlines()
    assert lines[0] == 'terms: as judged by the build, budget from --max-failed-tests (budget 1, 1 known failure)'
    assert 'known: 1, unknown: 1 (budget 1), flaky: 1, terminated or uncounted: none' in lines
    assert lines[-1] == 'verdict: PASS'


def test_an_easyconfig_replaces_the_terms_and_says_so(runs, tmp_path):
    _done, path = runs['fail']
    easyconfig = tmp_path / 'PyTorch-y.eb'
    easyconfig.write_text(EASYCONFIG.replace('max_failed_tests = 0', 'max_failed_tests = 3')
                          .replace(KNOWN, '(\'test_known_failure\', \'the whole suite\')'))
    report = cli('report', path, '--easyconfig', easyconfig, check_rc=0)
    lines = report.stdout.splitlines()
    assert lines[0] == (f'terms: from {easyconfig} (budget 3, 1 known failure), not the ones the build judged by '
                        f'(budget 0, 1 known failure)')
    assert 'known: 2, unknown: 0 (budget 3), flaky: 1, terminated or uncounted: none' in lines
    both = cli('report', path, '--easyconfig', easyconfig, '--max-failed-tests', '0', check_rc=0)
    assert both.stdout.splitlines()[0].startswith(f'terms: from {easyconfig} and --max-failed-tests (budget 0, ')


def test_results_judged_by_different_terms_are_not_merged_silently(runs):
    passing, failing = runs['pass'][1], runs['fail'][1]
    assert cli('report', passing, passing, check_rc=0).stdout.startswith(TERMS_LINE + '\n')  # the same terms
    changed = failing.parent / 'other-terms.json'
    data = json.loads(failing.read_text())
    data['terms']['max_failed_tests'] = 5
    changed.write_text(json.dumps(data))
    done = cli('report', passing, changed, check_rc=2)
    assert done.stdout == '' and len(done.stderr.splitlines()) == 1
    assert str(changed) in done.stderr and str(passing) in done.stderr and '--easyconfig' in done.stderr
    judged = cli('report', passing, changed, '--easyconfig', failing.parent.parent.parent / 'PyTorch-x.eb')
    assert judged.returncode in (0, 1) and judged.stdout.startswith('terms: from ')  # one policy for both
