"""The main easyconfig's known failures against the public field data, as the threads posted it.

tests/data/field/ holds verbatim excerpts (EasyBuild's failure summary of one build each) and
sources.json their URLs and the targets and GPU generations they stand for.  Each excerpt is judged by
the real `eb-pytorch-cuda report` with the policy the main easyconfig resolves (read with EasyBuild's own
parser) for its target and GPU: it passes, and fails with one failure more; and `report --suggest-policy`
on the excerpts gives, scope by scope, exactly the easyconfig's entries.
"""

import ast
import json
from pathlib import Path

import pytest

from helpers import cli
from eb_pytorch_cuda.eb.ebsummary import parse_summary
from eb_pytorch_cuda.eb.ecpolicy import read_easyconfig
from eb_pytorch_cuda.errors import PluginError

FIELD = Path(__file__).resolve().parent / 'data' / 'field'
MAIN_EC = Path(__file__).resolve().parent.parent / 'easyconfigs' / 'p' / 'PyTorch' / \
    'PyTorch-2.1.2-foss-2023a-CUDA-12.1.1.eb'
SOURCES = json.loads((FIELD / 'sources.json').read_text())
CASES = [(source, target) for source in SOURCES for target in source['targets']]


def case_id(case):
    source, target = case
    return f"{source['file'][:-4]}@{target}"


def scope_args(source, target):
    args = ['--target', target]
    if source['capabilities']:
        args += ['--cuda-compute-capabilities', ','.join(source['capabilities'])]
    return args


def one_more(text, suite=None):
    """The excerpt with one failure more: in suite (its first 'N failed' raised by one) or, without suite,
    in a suite of its own; the header's count follows."""
    lines = text.splitlines()
    if suite is None:
        lines.append('test_autograd 1/1 (1 failed, 484 passed)')
    else:
        index = next(i for i, line in enumerate(lines) if line.startswith(f'{suite} '))
        count = int(lines[index].split('(', 1)[1].split(' ', 1)[0])
        lines[index] = lines[index].replace(f'({count} ', f'({count + 1} ', 1)
    for index, line in enumerate(lines):
        if ' test failures, ' in line:
            count = int(line.split(' test failures, ')[0].rsplit(' ', 1)[1])
            lines[index] = line.replace(f'{count} test failures, ', f'{count + 1} test failures, ')
    return '\n'.join(lines) + '\n'


def test_every_source_is_a_complete_summary_of_its_thread():
    for source in SOURCES:
        text = (FIELD / source['file']).read_text()
        result = parse_summary(text, source['file'])
        assert result is not None and all(suite.failing_count for suite in result.suites.values())
        assert source['url'].startswith('https://github.com/') and source['url'] in (FIELD / 'README.md').read_text()


@pytest.mark.parametrize('case', CASES, ids=case_id)
def test_each_excerpt_passes_for_its_target_and_gpu_and_fails_with_one_failure_more(case, tmp_path):
    source, target = case
    path = FIELD / source['file']
    done = cli('report', path, '--easyconfig', MAIN_EC, *scope_args(source, target), check_rc=0)
    assert 'verdict: PASS' in done.stdout
    first = parse_summary(path.read_text())
    for suite in (None, next(iter(first.suites))):
        worse = tmp_path / f'worse-{suite is None}.txt'
        worse.write_text(one_more(path.read_text(), suite))
        done = cli('report', worse, '--easyconfig', MAIN_EC, *scope_args(source, target), check_rc=1)
        assert '1 unknown failure(s), budget 0' in done.stdout, done.stdout


def suggested(source, target):
    """{(pattern, max)} that report --suggest-policy prints for one excerpt, all in the scope it stands for."""
    scope = source['capabilities'][0] if source['capabilities'] else target
    done = cli('report', FIELD / source['file'], '--max-failed-tests', '0', '--suggest-scope', scope,
               *scope_args(source, target), check_rc=1)
    text = done.stdout.split('known_test_failures = ', 1)[1].split('\n}\n', 1)[0] + '\n}'
    setting = ast.literal_eval(text)
    assert list(setting) == [scope] and 'with these entries: PASS' in done.stdout
    return scope, {(entry[0], entry[2] if len(entry) > 2 else None) for entry in setting[scope]}


def test_the_suggestions_for_the_excerpts_are_the_easyconfig_entries_scope_by_scope():
    expected = {}
    for source, target in CASES:
        scope, entries = suggested(source, target)
        for pattern, limit in entries:
            # two sources for one scope may both count a suite: they must agree (else the stricter is taken)
            known = dict(expected.get(scope, ()))
            assert known.get(pattern, limit) == limit, (scope, pattern)
        expected[scope] = expected.get(scope, set()) | entries
    setting = read_easyconfig(MAIN_EC)['known_test_failures']
    actual = {scope: {(entry[0], entry[2] if len(entry) > 2 else None) for entry in entries}
              for scope, entries in setting.items()}
    assert actual == expected
    # every entry counts (the public data names no test an entry could be tested against)
    assert all(limit for entries in actual.values() for _, limit in entries)


def test_targets_without_public_data_have_no_entries_and_no_budget():
    values = read_easyconfig(MAIN_EC)
    assert values['max_failed_tests'] == 0
    targets = ('aarch64/a64fx', 'aarch64/nvidia/grace', 'x86_64/generic', 'x86_64/intel/haswell',
               'x86_64/intel/skylake_avx512', 'x86_64/amd/zen2', 'x86_64/amd/zen3', 'x86_64/amd/zen4')
    for index, target in enumerate(targets):
        capability = ('8.9', '9.0')[index % 2]
        log = FIELD / 'easyconfigs-issue20222-a40.txt'  # any failure at all fails there
        done = cli('report', log, '--easyconfig', MAIN_EC, '--target', target, '--cuda-compute-capabilities',
                   capability, check_rc=1)
        assert '3 unknown failure(s), budget 0' in done.stdout
        header = MAIN_EC.read_text().split('known_test_failures = {', 1)[0]
        assert target.split('/')[-1] in header


SUMMARY_5X = '''== FAILED: Installation ended unsuccessfully
59 test failures, 0 test errors (out of 261432):
Failed tests (suites/files):
\tinductor/test_cpu_select_algorithm (54 failed, 36 passed, 1620 skipped, 0 errors)
\tprofiler/test_memory_profiler (1 failed, 32 passed, 0 skipped, 0 errors)
\ttest_linalg (4 failed, 1122 passed, 0 skipped, 0 errors)
'''


def test_the_summary_of_easybuild_5_and_old_counts_are_read():
    result = parse_summary(SUMMARY_5X)
    assert {name: suite.failing_count for name, suite in result.suites.items()} == {
        'inductor/test_cpu_select_algorithm': 54, 'profiler/test_memory_profiler': 1, 'test_linalg': 4}
    old = parse_summary('distributions/test_distributions (219 total tests, failures=1)\n'
                        'test_jit (2661 total tests, failures=12, errors=7, skipped=135, expected failures=7)\n')
    assert old.suites['test_jit'].counts['failed'] == 12 and old.suites['test_jit'].counts['errors'] == 7
    assert parse_summary('nothing (here at all)\nplain text\n') is None


def test_a_cut_excerpt_is_refused_with_one_line_and_exit_2(tmp_path):
    cut = tmp_path / 'cut.txt'
    cut.write_text('\n'.join((FIELD / 'eessi-pr444-aarch64-neoverse_v1.txt').read_text().splitlines()[:-1]) + '\n')
    with pytest.raises(PluginError, match='counts 8 failures and errors, its suites add up to 6'):
        parse_summary(cut.read_text(), str(cut))
    done = cli('report', cut, '--target', 'aarch64/neoverse_v1', check_rc=2)
    assert done.stdout == '' and done.stderr.count('\n') == 1 and str(cut) in done.stderr
    other = tmp_path / 'notes.txt'
    other.write_text('no test output here\n')
    done = cli('report', other, check_rc=2)
    assert 'no run_test.py output found' in done.stderr and done.stderr.count('\n') == 1
