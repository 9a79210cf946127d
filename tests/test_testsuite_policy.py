"""Scopes, known failures, budget, stale entries, unjudgeable suites, and the report command."""

import json

import pytest

import pytorch_output as out
from pytorch_output import KNOWN
from helpers import DATA, run_main
from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.testsuite.results.logparse import parse_log_text
from eb_pytorch_cuda.testsuite.policy.judging import Policy, excluded_tests, judge, known_failures
from eb_pytorch_cuda.testsuite.results.scopes import ScopeContext
from eb_pytorch_cuda.testsuite.policy.suggest import budget_left

HASWELL = ScopeContext('x86_64', 'x86_64/intel/haswell', ('8.0', '9.0'))
GRACE = ScopeContext('aarch64', 'aarch64/nvidia/grace', ('9.0',))


def test_scopes_family_target_glob_and_compute_capability():
    setting = {'': ['a'], 'x86_64': ['b'], 'x86_64/intel/haswell': ['c'], 'x86_64/amd/*': ['d'],
               'aarch64/nvidia/grace': ['e'], '9.0': ['f'], '7.0': ['g']}
    assert excluded_tests(setting, HASWELL) == ['a', 'b', 'c', 'f']
    assert excluded_tests(setting, GRACE) == ['a', 'e', 'f']


def test_upstream_style_excluded_tests_keep_working():
    assert excluded_tests({'': ['test_x'], 'POWER': ['test_y'], 'x86_64': ['test_z']}, HASWELL) == ['test_x', 'test_z']


def test_all_known_failures_pass_and_stale_entries_are_reported():
    result = parse_log_text(out.FULL_LOG.replace(out.TRUNCATED_TAIL, ''))
    verdict = judge(result, Policy(2, known_failures(KNOWN, HASWELL)))
    assert verdict.passed, verdict.reasons
    assert len(verdict.known) == 6 and verdict.unknown == []  # suite-level entries cover the 2 unjudgeable
    assert [e.pattern for e in verdict.stale] == ['test_autograd::TestAutograd.test_never_fails']
    assert {name: bool(entry) for name, _, _, entry in verdict.unjudgeable} == {
        'test_cuda_expandable_segments': True, 'test_import_stats': True}


def test_unknown_failure_over_budget_fails_naming_it():
    result = parse_log_text(out.FULL_LOG.replace(out.TRUNCATED_TAIL, ''))
    trimmed = {'': [entry for entry in KNOWN[''] if not entry[0].startswith('test_nn')]}
    verdict = judge(result, Policy(1, known_failures(trimmed, HASWELL)))
    assert not verdict.passed
    assert sorted(t for _, t in verdict.unknown) == ['TestNN.test_conv_tf32', 'TestNNDeviceTypeCUDA.test_lstm_cuda']
    assert verdict.reasons == ['2 unknown failure(s), budget 1']


def test_unlisted_signal_crash_and_truncation_fail_even_with_a_large_budget():
    verdict = judge(parse_log_text(out.SIGNAL + out.CRASH_NO_SUMMARY + out.TRUNCATED_TAIL), Policy(1000, []))
    assert not verdict.passed
    assert verdict.reasons == ['test_cuda_expandable_segments: killed by SIGIOT, and not a known failure',
                               'test_import_stats: failed without countable summary, and not a known failure',
                               'test_ops: no summary, and not a known failure']


def test_a_scope_that_does_not_apply_does_not_excuse():
    result = parse_log_text(out.TRUNCATED_TAIL)
    assert judge(result, Policy(0, known_failures(KNOWN, GRACE))).passed
    assert not judge(result, Policy(0, known_failures(KNOWN, HASWELL))).passed


def test_counted_but_unnamed_failures_are_unknown_unless_the_suite_is_listed():
    text = 'Running test_x 1/1 ... [t]\nRan 5 tests in 1s\n\nFAILED (failures=2)\ntest_x 1/1 failed!\n'
    assert judge(parse_log_text(text), Policy(0, [])).unknown == [('test_x', None), ('test_x', None)]
    assert judge(parse_log_text(text), Policy(0, known_failures({'': [('test_x', 'r')]}, HASWELL))).passed


def test_flaky_failures_are_shown_and_consume_the_budget_only_when_asked():
    result = parse_log_text(out.FAILING_UNITTEST)
    for test in result.suites['test_nn'].failed_tests:
        test.rerun_outcome = 'flaky'
    assert judge(result, Policy(0, [])).passed
    assert len(judge(result, Policy(0, [])).flaky) == 2
    assert not judge(result, Policy(0, [], flaky_consumes_budget=True)).passed


def test_the_verdict_and_the_suggestion_count_the_budget_alike():
    """judging.budget_of is the one rule: the verdict's reason and the suggestion's "N left" read it (before,
    each counted unknown + flaky failures on its own)."""
    result = parse_log_text(out.FAILING_UNITTEST)
    result.suites['test_nn'].failed_tests[0].rerun_outcome = 'flaky'
    for flaky_counts, counted in ((False, 1), (True, 2)):
        for allowed in (1, 2, 3):
            policy = Policy(allowed, [], flaky_consumes_budget=flaky_counts)
            verdict = judge(result, policy)
            assert budget_left(result, policy) == (verdict.passed, counted, allowed)
            assert verdict.passed == (counted <= allowed)
            assert verdict.spent.left == max(allowed - counted, 0)
            assert (f'{counted} unknown failure(s), budget {allowed}' in verdict.reasons) == (counted > allowed)


@pytest.mark.parametrize('bad', [{'': ['no reason']}, {'': [('test_x', '')]}, {'': 'test_x'}])
def test_known_failures_without_reason_are_refused(bad):
    with pytest.raises(PluginError, match='known_test_failures'):
        known_failures(bad, HASWELL)


@pytest.mark.parametrize('content', ['{"not": "ours"}', '{broken'])
def test_report_refuses_unreadable_input_with_exit_2(tmp_path, content):
    bad = tmp_path / 'bad.json'
    bad.write_text(content)
    done = run_main('report', bad, check_rc=2)
    assert str(bad) in done.stderr and done.stderr.count('\n') == 1


def test_a_limit_on_a_known_entry_lets_a_further_failure_through():
    result = parse_log_text(out.FAILING_PYTEST)  # 2 failures in dynamo/test_dynamic_shapes
    two = known_failures({'': [('dynamo/test_dynamic_shapes', 'seen twice on every x86_64 target', 2)]}, HASWELL)
    one = known_failures({'': [{'test': 'dynamo/test_dynamic_shapes', 'reason': 'seen once', 'max': 1}]}, HASWELL)
    assert judge(result, Policy(0, two)).passed
    verdict = judge(result, Policy(0, one))
    assert not verdict.passed and len(verdict.known) == 1 and len(verdict.unknown) == 1


def test_a_bad_limit_is_refused():
    with pytest.raises(PluginError, match='max must be a positive integer'):
        known_failures({'': [('test_x', 'r', 0)]}, HASWELL)


OLD_RESULTS = DATA / 'store-2fa24cb' / 'pytorch-test-results.json'  # a real step's JSON, written before the terms
GOOD_TERMS = {'max_failed_tests': 0, 'flaky_failures_consume_budget': False, 'allow_missing_failures': 0,
              'known_test_failures': [{'test': 'test_crash', 'reason': 'r', 'scope': '', 'max': None}],
              'excluded_tests': None, 'rerun_failed_tests': None, 'cuda_device_tests': None}


def test_a_results_json_without_terms_is_judged_as_before_and_says_so():
    from eb_pytorch_cuda.eb.ecpolicy import upstream_default_max_failed_tests
    done = run_main('report', OLD_RESULTS, check_rc=1)
    default = upstream_default_max_failed_tests()
    first, *rest = done.stdout.splitlines()
    assert first == (f'terms: {OLD_RESULTS} carries none (written before results carried their terms); the defaults '
                     f'(budget {default}, no known failures)')
    assert any(line.startswith('known: 0, ') and f'(budget {default})' in line for line in rest)


def test_terms_read_back_as_written():
    from eb_pytorch_cuda.testsuite.policy.judging import KnownFailure
    from eb_pytorch_cuda.testsuite.policy.settings import DeviceTerms, JudgedTerms, terms_of
    terms = JudgedTerms(2, (KnownFailure('a::t', 'why', 'x86_64', 3),), True, None, ('test_x',), 1,
                        DeviceTerms(True, True, ('GPU 0',), 'seen'))
    assert terms_of('f.json', json.loads(json.dumps({'terms': terms.to_dict()}))) == terms
    assert terms.describe() == ('budget 2, 1 known failure, flaky failures consume the budget, '
                                'allow_missing_failures True')
    assert terms_of('f.json', {}) is None


@pytest.mark.parametrize('key,value', [
    ('max_failed_tests', '0'), ('max_failed_tests', -1), ('max_failed_tests', True),
    ('known_test_failures', {'': []}), ('known_test_failures[0]', {'test': 'x'}), ('known_test_failures[0].reason', ''),
    ('known_test_failures[0].max', 0), ('flaky_failures_consume_budget', 'no'), ('allow_missing_failures', False),
    ('excluded_tests', 'test_x'), ('rerun_failed_tests', 1.5), ('cuda_device_tests', 'auto'),
    ('cuda_device_tests.requested', 1), ('surprise', 1)])
def test_bad_terms_in_a_results_json_are_refused_naming_the_file_and_the_key(tmp_path, key, value):
    terms = json.loads(json.dumps(GOOD_TERMS))
    if key.startswith('known_test_failures[0]'):
        entry = terms['known_test_failures'][0]
        if '.' in key:
            entry[key.rsplit('.', 1)[1]] = value
        else:
            terms['known_test_failures'][0] = value
    elif key.startswith('cuda_device_tests.'):
        terms['cuda_device_tests'] = {'requested': value, 'enabled': False, 'gpus': [], 'reason': ''}
    else:
        terms[key] = value
    data = json.loads(OLD_RESULTS.read_text())
    data['terms'] = terms
    bad = tmp_path / 'bad.json'
    bad.write_text(json.dumps(data))
    before = bad.read_bytes()
    done = run_main('report', bad, check_rc=2)
    assert done.stdout == '' and done.stderr.count('\n') == 1
    assert f'{bad}: terms.{key}' in done.stderr, done.stderr
    assert bad.read_bytes() == before
    good = tmp_path / 'good.json'
    good.write_text(json.dumps(dict(data, terms=GOOD_TERMS)))
    assert run_main('report', good).stdout.startswith('terms: as judged by the build (budget 0, 1 known failure)\n')


def test_the_text_report_gives_the_suite_total_the_markdown_one_gives():
    from eb_pytorch_cuda.testsuite.policy.report import to_markdown, to_text
    result = parse_log_text(out.FULL_LOG.replace(out.TRUNCATED_TAIL, ''))
    verdict = judge(result, Policy(2, known_failures(KNOWN, HASWELL)))
    total = f'{len(result.suites)} suites, {sum(s.failing_count for s in result.suites.values())} failed tests'
    assert len(result.suites) > 1 and total in to_markdown(result, verdict)
    assert total in to_text(result, verdict).splitlines()


def test_markdown_shown_on_a_terminal_carries_no_markdown_escapes():
    from eb_pytorch_cuda.escape import markdown_code, markdown_for_terminal, markdown_text
    line = "cuda_device_tests='auto': a <GPU> & *x* [y] ~z~ | a\\b"
    assert markdown_text(line) != line
    assert markdown_for_terminal(f'CUDA device tests: {markdown_text(line)}') == f'CUDA device tests: {line}'
    # a code span's content is shown as it is: a backslash there is the test id's own
    assert markdown_for_terminal(f"| {markdown_code('a|b', in_table=True)} | {markdown_code('t_x[1]')} |") == \
        '| `a|b` | `t_x[1]` |'
    assert markdown_for_terminal(markdown_code('``a\\_b`')) == markdown_code('``a\\_b`') == '``` ``a\\_b` ```'
    assert markdown_for_terminal('x \\x1b y') == 'x \\x1b y'  # printable()'s escapes stay
