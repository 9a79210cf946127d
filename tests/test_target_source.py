"""The CPU target of the failure policy is said with where it came from, never guessed.

$EESSI_SOFTWARE_SUBDIR, else archspec (named as EESSI names its targets), else a fallback that says in one
line that entries scoped to a CPU target will not apply, and then none does: before, a machine without
archspec got 'x86_64/generic' silently, and an entry scoped 'x86_64/*' (or 'x86_64/generic', a real EESSI
target) applied there.  `report --suggest-policy` scopes a fallback run's entries to its CPU family and says
so, never to the fallback's target.

archspec absent is made the way Python knows it: its modules set to None in sys.modules (the import then raises
ImportError, as on a machine without it).
"""

import json
import sys

import pytest

from environment import missing
from eb_pytorch_cuda.testsuite import service
from eb_pytorch_cuda.testsuite.policy import judging, suggest
from eb_pytorch_cuda.testsuite.results import scopes
from eb_pytorch_cuda.testsuite.results.scopes import ScopeContext, detect_context, find_target
from eb_pytorch_cuda.testsuite.policy.report import to_json
from eb_pytorch_cuda.testsuite.policy.settings import TestSettings
from eb_pytorch_cuda.testsuite.results.logparse import parse_log_text
from field_results import run_log

FALLBACK_LINE = ('target unknown (fallback x86_64/generic: neither $EESSI_SOFTWARE_SUBDIR nor archspec names it; '
                 'entries scoped to a CPU target will not apply: set $EESSI_SOFTWARE_SUBDIR, or --target, to name it)')


@pytest.fixture
def no_archspec(monkeypatch):
    for name in ('archspec', 'archspec.cpu'):
        monkeypatch.setitem(sys.modules, name, None)


def _archspec_host():
    try:
        import archspec.cpu
    except ImportError:
        missing('archspec (a declared dependency: pip install .)')
    return archspec.cpu.host()


def test_eessi_software_subdir_comes_first_and_is_said():
    context = detect_context(('9.0',), environ={'EESSI_SOFTWARE_SUBDIR': 'aarch64/neoverse_v1'})
    assert (context.cpu_family, context.target, context.target_source) == \
        ('aarch64', 'aarch64/neoverse_v1', scopes.EESSI)
    assert context.target_line() == 'target aarch64/neoverse_v1 (from $EESSI_SOFTWARE_SUBDIR)'


def test_a_given_target_is_said_as_given():
    context = detect_context(target='x86_64/generic', environ={'EESSI_SOFTWARE_SUBDIR': 'x86_64/amd/zen3'})
    assert context.target_line() == 'target x86_64/generic (as given)'
    assert context.applies('x86_64/generic') and context.applies('x86_64/*')  # EESSI's generic target, named


def test_archspec_names_this_cpu_as_eessi_does():
    host = _archspec_host()
    target, source = find_target('x86_64', {})
    vendor = {'GenuineIntel': 'intel/', 'AuthenticAMD': 'amd/'}.get(host.vendor, '')
    assert (target, source) == (f'x86_64/{vendor}{host.name}', scopes.ARCHSPEC)
    context = detect_context(cpu_family='x86_64', environ={})
    assert context.target_line() == f'target {target} (detected by archspec)'
    assert context.applies(target)


def test_without_archspec_the_fallback_is_said_and_no_target_scope_applies(no_archspec):
    context = detect_context(('8.0',), cpu_family='x86_64', environ={})
    assert (context.target, context.target_source, context.target_known) == \
        ('x86_64/generic', scopes.FALLBACK, False)
    assert context.target_line() == FALLBACK_LINE
    # before: 'x86_64/*' and 'x86_64/generic' applied on any x86_64 machine without archspec
    assert [scope for scope in ('', 'x86_64', '8.0', 'x86_64/*', 'x86_64/generic', 'x86_64/intel/*', '9.0')
            if context.applies(scope)] == ['', 'x86_64', '8.0']
    settings = TestSettings.from_values({'known_test_failures': {
        'x86_64/*': [('test_a', 'scoped to the targets')], 'x86_64': [('test_b', 'the family')]}}, 'ec')
    assert [entry.pattern for entry in settings.policy(context, 0, 'ec').known] == ['test_b']


def test_the_step_says_the_target_and_its_source(no_archspec):
    said = []
    context = service.scope_context(('8.0',), False, {}, progress=said.append)
    assert said == [f'policy scope: {FALLBACK_LINE}'] and not context.target_known
    said.clear()
    service.scope_context(('8.0',), False, {'EESSI_SOFTWARE_SUBDIR': 'x86_64/intel/haswell'}, progress=said.append)
    assert said == ['policy scope: target x86_64/intel/haswell (from $EESSI_SOFTWARE_SUBDIR)']


def _failed_run():
    return parse_log_text(run_log([('test_ops', 1, ['TestOps.test_add'])]))


def test_suggest_policy_scopes_a_fallback_run_to_its_family_and_says_so(no_archspec):
    context = detect_context((), cpu_family='x86_64', environ={})
    assert context.run_scope() == 'x86_64'  # before: 'x86_64/generic', another target's scope
    run = suggest.Run('bot.log', context.run_scope(), context, _failed_run(), judging.Policy(0))
    merged, outcome = suggest.suggest_runs([run])
    text = suggest.render([run], merged, outcome)
    assert "    'x86_64': [" in text and 'x86_64/generic' in text  # the scope, and the fallback named
    assert ('#   its target is not known (fallback x86_64/generic): its entries are scoped to the CPU family x86_64, '
            'not to a target; --target TARGET (or --suggest-scope) scopes them to one') in text.splitlines()
    known = ScopeContext('x86_64', 'x86_64/amd/zen3', target_source=scopes.ARCHSPEC)
    assert known.run_scope() == 'x86_64/amd/zen3'


def test_a_saved_result_keeps_the_source_of_its_target(tmp_path, no_archspec):
    result = _failed_run()
    fallback = detect_context((), cpu_family='x86_64', environ={})
    data = to_json(result, judging.judge(result, judging.Policy(0)), fallback)
    assert data['scope']['target_source'] == 'fallback'
    saved = tmp_path / 'pytorch-test-results.json'
    saved.write_text(json.dumps(data))
    here = ScopeContext('x86_64', 'x86_64/amd/zen3', target_source=scopes.ARCHSPEC)  # not where it ran
    [run] = suggest.runs_from_paths([str(saved)], lambda context: judging.Policy(0), here)
    assert run.scope == 'x86_64' and not run.context.target_known
