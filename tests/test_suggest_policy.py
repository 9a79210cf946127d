"""From a failed run to reviewed known_test_failures entries: suggestion, merge over targets, the main easyconfig.

The runs are shaped like the public field data (tests/field_results.py: counts and the names the posted
logs give) in the form run_test.py prints; the easyconfig is read with EasyBuild's own parser.
"""

import ast
import json
import subprocess
from pathlib import Path

import pytest

import pytorch_output as out
from helpers import cli
from environment import missing
from eb_runner import REPO, TEST_EASYCONFIGS
from eb_pytorch_cuda.eb.ecpolicy import policy_from_values, read_easyconfig
from eb_pytorch_cuda.testsuite.results.logparse import parse_log_text
from eb_pytorch_cuda.testsuite.policy.judging import Policy, judge, known_failures
from eb_pytorch_cuda.testsuite.results.scopes import ScopeContext
from eb_pytorch_cuda.testsuite.policy.suggest import PLACEHOLDER, Entry, Run, render, suggest, suggest_runs
from field_results import A100, FIELD, GPU, run_log, suite_log

MAIN_EC = Path(__file__).resolve().parent.parent / 'easyconfigs' / 'p' / 'PyTorch' / \
    'PyTorch-2.1.2-foss-2023a-CUDA-12.1.1.eb'


def field_runs(policy_for=lambda context: Policy(0)):
    """One Run per target of the field data, the A100 run of PR 20156 (a CUDA build for cc 8.0 on an icelake
    node) and the GPU runs of issue 20222 (CPU not given: x86_64/generic)."""
    runs = []
    for target, suites in FIELD.items():
        context = ScopeContext(target.split('/')[0], target)
        runs.append(Run(target, target, context, parse_log_text(run_log(suites)), policy_for(context)))
    context = ScopeContext('x86_64', 'x86_64/intel/icelake', (A100[0],))
    runs.append(Run('A100', A100[0], context, parse_log_text(run_log(A100[1])), policy_for(context)))
    for label, (capability, suites) in GPU.items():
        context = ScopeContext('x86_64', 'x86_64/generic', (capability,))
        runs.append(Run(label, capability, context, parse_log_text(run_log(suites)), policy_for(context)))
    return runs


def run_suites(run):
    """The field suites of a run made by field_runs."""
    return A100[1] if run.label == 'A100' else GPU[run.label][1] if run.label in GPU else FIELD[run.label]


def resolved(setting, context):
    """Sorted (suite pattern, max) of the known_test_failures entries in force in context."""
    return sorted((entry.pattern, entry.limit) for entry in known_failures(setting, context))


def test_one_run_gets_one_entry_per_named_test_and_a_count_for_the_unnamed():
    suites = FIELD['aarch64/neoverse_v1']
    entries = suggest(parse_log_text(run_log(suites)), Policy(0))
    assert entries == [
        Entry('inductor/test_torchinductor', 1), Entry('test_linalg', 2), Entry('test_model_dump', 2),
        Entry('test_ops', 2), Entry('test_scatter_gather_ops', 1)]


def test_field_runs_merge_into_the_per_target_policy_of_the_main_easyconfig():
    runs = field_runs()
    merged, outcome = suggest_runs(runs)
    assert list(merged) == ['aarch64', 'aarch64/neoverse_v1', 'x86_64/intel/*', 'x86_64/intel/sapphirerapids',
                            '7.0', '8.0', '8.6']
    # Intel-only runs widen to the vendor, not to x86_64; three aarch64 targets widen to the family
    assert {e.pattern for e in merged['x86_64/intel/*']} == {'dynamo/test_functions', 'dynamo/test_dynamic_shapes'}
    # every run passes with the merged entries and keeps its whole budget
    assert outcome == [(True, 0, 0)] * len(runs)
    # and in each run's context the easyconfig resolves to exactly these entries (with real reasons instead
    # of the placeholder); the easyconfig names the targets the data covers instead of widening to a family
    # or vendor (aarch64/a64fx and grace, haswell and skylake_avx512 have no public data)
    values = read_easyconfig(MAIN_EC)
    suggestion = {scope: [e.as_tuple() for e in entries] for scope, entries in merged.items()}
    for run in runs:
        assert resolved(values['known_test_failures'], run.context) == resolved(suggestion, run.context), run.label
    assert values['max_failed_tests'] == 0


def test_a_failure_in_every_run_of_two_families_gets_the_empty_scope():
    runs = [Run(t, t, ScopeContext(t.split('/')[0], t), parse_log_text(run_log(FIELD.get(t, []), [('test_x', 1, [])])),
                Policy(0)) for t in ('aarch64/generic', 'x86_64/intel/icelake', 'x86_64/amd/zen3')]
    merged, _ = suggest_runs(runs)
    assert Entry('test_x', 1) in merged[''] and Entry('test_x', 1) not in sum(
        (v for k, v in merged.items() if k), [])
    # dynamo failed on icelake only here: it stays with that target (zen3 did not show it)
    assert Entry('dynamo/test_functions', 1) in merged['x86_64/intel/icelake']


def test_different_counts_do_not_merge():
    runs = [Run(t, t, ScopeContext('aarch64', t), parse_log_text(suite_log('test_ops', n, [])), Policy(0))
            for t, n in (('aarch64/generic', 1), ('aarch64/neoverse_n1', 2))]
    merged, outcome = suggest_runs(runs)
    assert merged == {'aarch64/generic': [Entry('test_ops', 1)], 'aarch64/neoverse_n1': [Entry('test_ops', 2)]}
    assert outcome == [(True, 0, 0), (True, 0, 0)]


@pytest.mark.parametrize('run', field_runs(), ids=lambda run: run.label)
def test_main_easyconfig_passes_each_target_and_fails_on_one_more_failure(run):
    values = read_easyconfig(MAIN_EC)
    policy = policy_from_values(values, run.context, str(MAIN_EC))
    verdict = judge(run.result, policy)
    assert verdict.passed and verdict.unknown == [], verdict.reasons
    # one new failure elsewhere
    suites = run_suites(run)
    worse = parse_log_text(run_log(suites, [('test_autograd', 1, ['TestAutograd.test_new_regression'])]))
    verdict = judge(worse, policy)
    assert not verdict.passed and verdict.unknown == [('test_autograd', 'TestAutograd.test_new_regression')]
    # one more failure in a suite whose known failures are counted
    first = next((s, n, names) for s, n, names in suites if n > len(names))
    more = [(s, n + 1, names) if s == first[0] else (s, n, names) for s, n, names in suites]
    verdict = judge(parse_log_text(run_log(more)), policy)
    assert not verdict.passed and verdict.unknown == [(first[0], None)]
    # the suggestion for that run is that one entry, in the run's own scope
    assert suggest(worse, policy) == [Entry('test_autograd::TestAutograd.test_new_regression')]


def test_crashed_timed_out_and_unfinished_suites_are_suggested_only_with_a_warning():
    result = parse_log_text(out.SIGNAL + out.CRASH_NO_SUMMARY + out.TRUNCATED_TAIL + out.FAILING_UNITTEST)
    context = ScopeContext('x86_64', 'x86_64/intel/haswell')
    run = Run('crash.log', context.target, context, result, Policy(0))
    merged, outcome = suggest_runs([run])
    crashed = {e.pattern: e.unjudgeable for e in merged[context.target] if e.unjudgeable}
    assert crashed == {'test_cuda_expandable_segments': 'killed by SIGIOT',
                       'test_import_stats': 'failed without countable summary', 'test_ops': 'no summary'}
    text = render([run], merged, outcome)
    assert text.count('NOT A COUNTED FAILURE') == 3
    assert 'WARNING: suites that crashed, timed out or never finished' in text
    assert outcome == [(True, 0, 0)]


def test_suggestion_is_valid_policy_text_that_makes_the_run_pass():
    context = ScopeContext('aarch64', 'aarch64/neoverse_v1')
    result = parse_log_text(run_log(FIELD['aarch64/neoverse_v1']))
    run = Run('v1.log', context.target, context, result, Policy(0))
    merged, outcome = suggest_runs([run])
    text = render([run], merged, outcome)
    setting = ast.literal_eval(text.split('known_test_failures = ', 1)[1].split('\n}\n', 1)[0] + '\n}')
    assert all(entry[1] == PLACEHOLDER for entries in setting.values() for entry in entries)
    assert judge(result, Policy(0, known_failures(setting, context))).passed
    assert ('[aarch64/neoverse_v1]: FAIL now; with these entries: PASS, 0 unknown failure(s) against '
            'max_failed_tests = 0') in text


def _write_minimal_easyconfig(path, known, budget):
    path.write_text("easyblock = 'EB_PyTorch'\nname = 'PyTorch'\nversion = '2.1.2'\nhomepage = 'h'\n"
                    "description = 'd'\ntoolchain = SYSTEM\n"
                    f'{known}\nmax_failed_tests = {budget}\n')


def test_cli_from_failed_bot_jobs_to_entries_that_pass(tmp_path):
    # two bot jobs' saved results, each recording its own target (what the easyblock writes)
    saved = []
    for target in ('aarch64/neoverse_n1', 'aarch64/neoverse_v1'):
        log = tmp_path / f"{target.replace('/', '_')}.log"
        log.write_text(run_log(FIELD[target]))
        done = cli('report', log, '--target', target, '--format', 'json', '--max-failed-tests', '0', check_rc=1)
        saved.append(tmp_path / f'{log.stem}.json')
        saved[-1].write_text(done.stdout)
    done = cli('report', *saved, '--suggest-policy', '--max-failed-tests', '0')
    text = done.stdout.split('# Suggested known_test_failures', 1)[1]
    assert "    'aarch64': [" in text and "    'aarch64/neoverse_v1': [" in text
    assert text.count('with these entries: PASS') == 2
    known = 'known_test_failures = ' + text.split('known_test_failures = ', 1)[1].split('\n}\n', 1)[0] + '\n}'
    ec = tmp_path / 'policy.eb'
    _write_minimal_easyconfig(ec, known, 0)
    for path, target in zip(saved, ('aarch64/neoverse_n1', 'aarch64/neoverse_v1')):
        judged = cli('report', path, '--easyconfig', ec, '--target', target, check_rc=0)
        assert 'verdict: PASS' in judged.stdout
    # several runs: the exit status is theirs, each judged for its own target
    again = cli('report', *saved, '--suggest-policy', '--easyconfig', ec, check_rc=0).stdout
    assert again.count(': PASS now; with these entries: PASS') == 2 and '# Nothing to add' in again
    data = json.loads(cli('report', *saved, '--suggest-policy', '--format', 'json', '--max-failed-tests', '0')
                      .stdout)['suggested_policy']
    assert [run['budget_left'] for run in data['runs']] == [0, 0] and 'aarch64' in data['known_test_failures']


def test_cli_suggestion_is_scoped_to_the_given_target_and_budget_left_is_shown(tmp_path):
    log = tmp_path / 'sapphirerapids.log'
    log.write_text(run_log(FIELD['x86_64/intel/sapphirerapids']))
    done = cli('report', log, '--target', 'x86_64/intel/sapphirerapids', '--suggest-policy', '--max-failed-tests', '3',
               check_rc=1)
    assert "    'x86_64/intel/sapphirerapids': [" in done.stdout
    assert "('dynamo/test_dynamic_shapes', 'TODO" in done.stdout
    assert ('FAIL now; with these entries: PASS, 0 unknown failure(s) against max_failed_tests = 3 (3 left)'
            in done.stdout)
    forced = cli('report', log, '--target', 'x86_64/intel/sapphirerapids', '--suggest-scope', 'x86_64',
                 '--max-failed-tests', '0', check_rc=1)
    assert "    'x86_64': [" in forced.stdout
    # a CUDA build for one GPU generation: its entries go to that compute capability
    gpu = tmp_path / 'a100.log'
    gpu.write_text(run_log(A100[1]))
    done = cli('report', gpu, '--target', 'x86_64/intel/icelake', '--cuda-compute-capabilities', '8.0',
               '--suggest-policy', '--max-failed-tests', '0', check_rc=1)
    assert "    '8.0': [\n        ('distributed/fsdp/test_fsdp_core', 'TODO" in done.stdout
    assert ": PASS now" not in done.stdout and 'with these entries: PASS' in done.stdout


def test_markdown_report_ends_with_the_collapsed_suggestion_only_on_fail(tmp_path):
    log = tmp_path / 'run.log'
    log.write_text(run_log(FIELD['x86_64/intel/icelake']))
    failed = cli('report', log, '--target', 'x86_64/intel/icelake', '--format', 'markdown', '--max-failed-tests', '0',
                 check_rc=1).stdout.rstrip()
    block = failed[failed.rindex('<details><summary>Suggested known_test_failures'):]
    assert block.endswith('</details>') and "'x86_64/intel/icelake': [" in block
    assert "('dynamo/test_functions', 'TODO" in block
    passed = cli('report', log, '--target', 'x86_64/intel/icelake', '--format', 'markdown', '--easyconfig', MAIN_EC,
                 check_rc=0).stdout
    assert 'Suggested known_test_failures' not in passed


def test_a_scope_that_can_never_apply_is_refused(tmp_path):
    log = tmp_path / 'run.log'
    log.write_text(run_log(FIELD['x86_64/intel/icelake']))
    done = cli('report', log, '--suggest-scope', 'haswell', check_rc=2)
    assert done.stdout == '' and done.stderr.count('\n') == 1
    assert "--suggest-scope: scope 'haswell' is not ''" in done.stderr


REAL_SUITE = '''
import torch
from torch.testing._internal.common_device_type import dtypes, instantiate_device_type_tests
from torch.testing._internal.common_utils import TestCase, run_tests


class TestReductions(TestCase):
    def test_sum(self):
        self.assertEqual(torch.ones(4).sum(), torch.tensor(4.0))

    def test_min_max_reduction_nan(self):
        self.assertEqual(torch.tensor([float('nan'), 1.0]).max(), torch.tensor(1.0))


class TestScatterGather(TestCase):
    @dtypes(torch.complex128)
    def test_scatter_reduce_prod(self, device, dtype):
        x = torch.ones(3, device=device, dtype=dtype)
        self.assertEqual(x.scatter_reduce(0, torch.tensor([0, 0, 1]), x * 2, 'prod'), x)


instantiate_device_type_tests(TestScatterGather, globals(), only_for='cpu')

if __name__ == '__main__':
    run_tests()
'''


def test_real_pytorch_harness_failures_become_entries_that_make_the_run_pass(tmp_path):
    """Failures reported by PyTorch's own harness (torch.testing._internal: TestCase, run_tests, device-type
    instantiation) of the CUDA torch in .venvs/torch; only run_test.py's two wrapper lines are ours."""
    python = Path(__file__).resolve().parent.parent / '.venvs' / 'torch-harness' / 'bin' / 'python'
    if not python.exists():
        missing(f'no {python.parent.parent}')
    (tmp_path / 'test_real.py').write_text(REAL_SUITE)
    done = subprocess.run([str(python), 'test_real.py', '-v'], cwd=tmp_path, capture_output=True, text=True,
                          timeout=600, env={'PATH': '/usr/bin:/bin', 'CUDA_VISIBLE_DEVICES': ''})
    assert done.returncode == 1, done.stderr[-2000:]
    log = ('Running test_real 1/1 ... [2026-11-29 20:00:00.000000]\n' + done.stdout + done.stderr
           + 'test_real 1/1 failed!\n')
    result = parse_log_text(log)
    context = ScopeContext('aarch64', 'aarch64/neoverse_v1')
    assert suggest(result, Policy(0)) == [
        Entry('test_real::TestReductions.test_min_max_reduction_nan'),
        Entry('test_real::TestScatterGatherCPU.test_scatter_reduce_prod_cpu_complex128')]
    run = Run('test_real.log', context.target, context, result, Policy(0))
    merged, outcome = suggest_runs([run])
    assert outcome == [(True, 0, 0)]
    assert judge(result, Policy(0, known_failures({k: [e.as_tuple() for e in v] for k, v in merged.items()},
                                                  context))).passed


def test_a_failed_eb_build_leaves_a_summary_and_results_that_suggest_the_entry(eb, tmp_path):
    """Real eb with our easyblock on the stand-in tree: a new regression fails the test step; the Markdown
    summary in the build directory ends with the entry for it, scoped to the job's target, and report
    --suggest-policy on the saved results (no --target: the target recorded in them) prints the same."""
    done = eb.run('PyTorch-2.1.2-standin-easyblock.eb',
                  f"--include-easyblocks={REPO / 'easybuild' / 'easyblocks' / 'p' / 'pytorch.py'}",
                  env={'STANDIN_UNKNOWN_FAILURE': '1', 'EESSI_SOFTWARE_SUBDIR': 'x86_64/intel/skylake_avx512'})
    assert done.returncode != 0 and '1 unknown failure(s), budget 0' in done.stdout + done.stderr
    summary = next((tmp_path / 'eb').rglob('pytorch-test-summary.md')).read_text()
    block = summary[summary.index('<details><summary>Suggested known_test_failures'):]
    entry = "('test_known_failure::TestKnown.test_new_regression', 'TODO: why it fails, and the issue or PR URL'),"
    assert "    'x86_64/intel/skylake_avx512': [\n        " + entry in block
    assert '[x86_64/intel/skylake_avx512]: FAIL now; with these entries: PASS' in block
    results = next((tmp_path / 'eb').rglob('pytorch-test-results.json'))
    suggested = cli('report', results, '--suggest-policy', '--easyconfig',
                    TEST_EASYCONFIGS / 'PyTorch-2.1.2-standin-easyblock.eb', check_rc=1).stdout
    assert "    'x86_64/intel/skylake_avx512': [\n        " + entry in suggested


def test_known_failures_of_suites_missing_from_the_results_are_pointed_out():
    context = ScopeContext('x86_64', 'x86_64/intel/icelake')
    policy = Policy(0, known_failures({'': [('test_never_ran', 'known', 1)]}, context))
    run = Run('partial.log', context.target, context, parse_log_text(run_log(FIELD[context.target])), policy)
    merged, outcome = suggest_runs([run])
    text = render([run], merged, outcome)
    assert '#   its known failures naming suites missing from its results (did they run?): test_never_ran' in text


def test_test_names_with_glob_characters_are_suggested_literally():
    result = parse_log_text(suite_log('test_nn', 1, ['TestNN.test_conv[cpu-float32]']))
    entries = suggest(result, Policy(0))
    assert entries == [Entry('test_nn::TestNN.test_conv[[]cpu-float32]')]
    context = ScopeContext('x86_64', 'x86_64/intel/icelake')
    assert judge(result, Policy(0, known_failures({'': [entries[0].as_tuple()]}, context))).passed


def test_a_named_entry_wins_over_a_suite_count_of_a_wider_scope():
    # found by benchmarks/bench_suggest_policy.py: one target also names a failure in a suite that every
    # target counts once; the '' count must be left for the unnamed failure
    context = ScopeContext('x86_64', 'x86_64/intel/sapphirerapids')
    setting = {'': [('test_x', 'counted everywhere', 1)],
               'x86_64/intel/sapphirerapids': [('test_x::TestX.test_named', 'named here')]}
    result = parse_log_text(suite_log('test_x', 2, ['TestX.test_named']))
    verdict = judge(result, Policy(0, known_failures(setting, context)))
    assert verdict.passed and [(t, e.scope) for _, t, e in verdict.known] == [
        ('TestX.test_named', 'x86_64/intel/sapphirerapids'), (None, '')]


def test_a_gpu_runs_cpu_test_keeps_its_target_and_its_cuda_test_gets_the_compute_capability():
    # a CUDA build tested on an x86_64 H100 node: a '9.0' entry would also apply on a Grace node of the same GPU,
    # where this CPU test's failure was never seen; a CUDA device test's failure is the GPU's
    context = ScopeContext('x86_64', 'x86_64/intel/icelake', ('9.0',))
    result = parse_log_text(run_log([('test_ops', 2, ['TestCommonCUDA.test_out_cuda_float32',
                                                      'TestCommonCPU.test_out_cpu_float32'])]))
    merged, outcome = suggest_runs([Run('H100', '9.0', context, result, Policy(0))])
    assert merged == {'x86_64/intel/icelake': [Entry('test_ops::TestCommonCPU.test_out_cpu_float32')],
                      '9.0': [Entry('test_ops::TestCommonCUDA.test_out_cuda_float32')]}, merged
    assert outcome == [(True, 0, 0)]
    grace = ScopeContext('aarch64', 'aarch64/nvidia/grace', ('9.0',))
    suggestion = {scope: [entry.as_tuple() for entry in entries] for scope, entries in merged.items()}
    assert resolved(suggestion, grace) == [('test_ops::TestCommonCUDA.test_out_cuda_float32', None)]
    # forced into one scope (--suggest-scope), both go there
    forced, _ = suggest_runs([Run('H100', '9.0', context, result, Policy(0))], scope='9.0')
    assert list(forced) == ['9.0'] and len(forced['9.0']) == 2
