"""Scope: a scope of excluded_tests / known_test_failures parsed once (its kind, where it applies, how a
suggestion widens it, how it is described), refused in one line where it could never apply; ScopeContext's
record in a results JSON; the rerun outcomes' enum, whose words the files keep."""

import ast
import copy
import json
import os
import pickle

import pytest

from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.testsuite.policy.settings import TestSettings, check_values
from eb_pytorch_cuda.testsuite.results import model
from eb_pytorch_cuda.testsuite.results.model import RerunOutcome, RunResult, Suite
from eb_pytorch_cuda.testsuite.results.scopes import (EVERYWHERE, FORMS, Scope, ScopeContext, ScopeKind,
                                                      detect_context)

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'src', 'eb_pytorch_cuda')
HASWELL = ScopeContext('x86_64', 'x86_64/intel/haswell', ('9.0',))
GRACE = ScopeContext('aarch64', 'aarch64/nvidia/grace', ('9.0',))


@pytest.mark.parametrize('text,kind,family', [
    ('', ScopeKind.EVERYWHERE, ''),
    ('x86_64', ScopeKind.CPU_FAMILY, 'x86_64'),
    ('riscv64', ScopeKind.CPU_FAMILY, 'riscv64'),
    ('AArch64', ScopeKind.CPU_FAMILY, 'aarch64'),  # EasyBuild's names, as upstream's excluded_tests use them
    ('POWER', ScopeKind.CPU_FAMILY, 'ppc64le'),
    ('RISCV64', ScopeKind.CPU_FAMILY, 'riscv64'),
    ('x86_64/intel/haswell', ScopeKind.CPU_TARGET, 'x86_64'),
    ('aarch64/*', ScopeKind.CPU_TARGET, 'aarch64'),
    ('9.0', ScopeKind.COMPUTE_CAPABILITY, ''),
    ('10.0', ScopeKind.COMPUTE_CAPABILITY, ''),
])
def test_parse_gives_the_kind_and_keeps_the_text(text, kind, family):
    scope = Scope.parse(text)
    assert (scope.kind, scope.family) == (kind, family)
    assert scope == text and str(scope) == text and repr(scope) == repr(text)  # a key, a literal, as written
    assert Scope.parse(scope) is scope  # parsed once


@pytest.mark.parametrize('text,hint', [
    ('haswell', ''), ('Haswell', ''), (' x86_64', ''), ('x86_64/', ''), ('*/intel/*', ''), ('9', ''),
    ('9.0a', ''), ('AArch32', ''), ('sm_90', " (compute capability 9.0 is written '9.0')"),
    ('compute_100', " (compute capability 10.0 is written '10.0')"), (9.0, ''), (None, ''),
])
def test_parse_refuses_what_could_never_apply_in_one_line(text, hint):
    with pytest.raises(PluginError) as refused:
        Scope.parse(text, 'PyTorch.eb')
    assert str(refused.value) == f'PyTorch.eb: scope {text!r} is not {FORMS}{hint}'
    assert '\n' not in str(refused.value)


def test_an_easyconfig_scope_that_could_never_apply_is_refused_naming_the_parameter():
    for name, value in (('excluded_tests', {'Haswell': ['test_x']}), ('known_test_failures', {'sm_90': []})):
        with pytest.raises(PluginError) as refused:
            check_values({name: value}, 'PyTorch.eb')
        assert str(refused.value).startswith(f'PyTorch.eb: {name}: scope ')
    check_values({'excluded_tests': {'': ['a'], 'POWER': ['b']}, 'known_test_failures': {'9.0': [('c', 'r')]}})


def test_settings_hold_their_scopes_parsed():
    settings = TestSettings.from_values({'excluded_tests': {'AArch64': ['test_x'], '9.0': ['test_y']}})
    assert [scope.kind for scope in settings.excluded_tests] == [ScopeKind.CPU_FAMILY, ScopeKind.COMPUTE_CAPABILITY]
    assert settings.excluded(GRACE) == ['test_x', 'test_y'] and settings.excluded(HASWELL) == ['test_y']


@pytest.mark.parametrize('text,haswell,grace', [
    ('', True, True), ('x86_64', True, False), ('AArch64', False, True), ('POWER', False, False),
    ('x86_64/intel/*', True, False), ('x86_64/amd/*', False, False), ('aarch64/nvidia/grace', False, True),
    ('9.0', True, True), ('8.0', False, False),
])
def test_applies_where_the_build_runs(text, haswell, grace):
    scope = Scope.parse(text)
    assert (scope.applies(HASWELL), scope.applies(GRACE)) == (haswell, grace)
    assert HASWELL.applies(text) == haswell  # the text, parsed


@pytest.mark.parametrize('text,wider', [
    ('x86_64/intel/haswell', ['x86_64/intel/*', 'x86_64']), ('aarch64/neoverse_v1', ['aarch64']),
    ('x86_64', []), ('9.0', []), ('', []),
])
def test_widenings_narrowest_first(text, wider):
    widenings = Scope.parse(text).widenings()
    assert widenings == wider
    if wider:
        assert [scope.kind for scope in widenings] == [ScopeKind.CPU_TARGET] * (len(wider) - 1) + [
            ScopeKind.CPU_FAMILY]


def test_order_lists_everywhere_families_targets_then_compute_capabilities():
    scopes = [Scope.parse(t) for t in ('9.0', 'x86_64/intel/*', 'aarch64', '', '8.0', 'aarch64/generic')]
    assert sorted(scopes, key=Scope.order) == ['', 'aarch64', 'aarch64/generic', 'x86_64/intel/*', '8.0', '9.0']


@pytest.mark.parametrize('text,words', [
    ('', 'every build'), ('x86_64', 'CPU family x86_64'), ('AArch64', "CPU family aarch64 (EasyBuild's AArch64)"),
    ('x86_64/intel/haswell', 'EESSI CPU target x86_64/intel/haswell'),
    ('x86_64/intel/*', 'EESSI CPU targets matching x86_64/intel/*'), ('9.0', 'GPUs of CUDA compute capability 9.0'),
])
def test_describe(text, words):
    assert Scope.parse(text).describe() == words


def test_a_run_is_scoped_to_its_one_compute_capability_else_its_target():
    assert HASWELL.run_scope() == '9.0' and HASWELL.run_scope().kind is ScopeKind.COMPUTE_CAPABILITY
    several = ScopeContext('x86_64', 'x86_64/intel/haswell', ('8.0', '9.0'))
    assert several.run_scope() == 'x86_64/intel/haswell' and several.run_scope().kind is ScopeKind.CPU_TARGET
    # a target recorded in a results file is taken as it is (printed escaped), never refused
    odd = ScopeContext('x86_64', 'x86_64/intel/haswell\nimport os').run_scope()
    assert odd.kind is ScopeKind.CPU_TARGET and odd.widenings() == ['x86_64/intel/*', 'x86_64']


def test_a_scope_survives_copy_and_pickle():
    scope = Scope.parse('AArch64')
    for again in (copy.deepcopy(scope), pickle.loads(pickle.dumps(scope))):
        assert again == scope and (again.kind, again.family) == (scope.kind, scope.family)
    assert json.dumps({scope: EVERYWHERE}) == '{"AArch64": ""}'


def test_the_recorded_context_reads_back():
    data = json.loads(json.dumps(HASWELL.to_json()))
    assert data == {'cpu_family': 'x86_64', 'target': 'x86_64/intel/haswell', 'target_source': 'given',
                    'compute_capabilities': ['9.0']}
    assert ScopeContext.from_json(data) == HASWELL
    assert ScopeContext.from_json({'cpu_family': 'x86_64'}) is None
    assert detect_context(('9.0',), target='aarch64/neoverse_v1') == ScopeContext('aarch64', 'aarch64/neoverse_v1',
                                                                                  ('9.0',))


def test_only_the_scopes_module_tells_the_kinds_apart():
    """A new scope kind is a member of ScopeKind with its rule in Scope.parse, applies, widenings and describe:
    no other module names a kind or reads a compute capability's shape (run/gpus checks nvidia-smi's answers
    with is_compute_capability, which is no scope)."""
    naming = {}
    for root, _, files in os.walk(SRC):
        for name in files:
            if not name.endswith('.py') or 'standins' in root:
                continue
            path = os.path.join(root, name)
            with open(path) as handle:
                tree = ast.parse(handle.read())
            used = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
            used |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for alias in node.names}
            found = used & {'ScopeKind', 'is_compute_capability', 'FAMILIES', 'EASYBUILD_FAMILIES'}
            if found:
                naming[os.path.relpath(path, SRC)] = sorted(found)
    assert naming == {os.path.join('testsuite', 'results', 'scopes.py'): [
                          'EASYBUILD_FAMILIES', 'FAMILIES', 'ScopeKind', 'is_compute_capability'],
                      os.path.join('testsuite', 'run', 'gpus.py'): ['is_compute_capability']}


def test_rerun_outcomes_are_an_enum_written_and_read_as_their_words():
    suite = Suite('test_x', failed_tests=[model.TestCase('T.test_a', 'failed', rerun_outcome=RerunOutcome.FLAKY),
                                          model.TestCase('T.test_b', 'failed')],
                  rerun_outcome=RerunOutcome.REPRODUCIBLE)
    data = suite.to_json()
    assert [t['rerun_outcome'] for t in data['failed_tests']] == ['flaky', None]
    assert data['rerun_outcome'] == 'reproducible' and type(data['rerun_outcome']) is str
    # a record written before the enum holds the words: they read back as the enum
    back = RunResult.from_dict(json.loads(json.dumps({'suites': [data]}))).suites['test_x']
    assert back.failed_tests[0].rerun_outcome is RerunOutcome.FLAKY and back.rerun_outcome is RerunOutcome.REPRODUCIBLE
    assert back.failed_tests[1].rerun_outcome is None
    assert f'{RerunOutcome.FLAKY}' == 'flaky' and RerunOutcome.FLAKY == 'flaky'
