"""The easyblock speaks to the test step through its service only.

The easyblock lives outside src/, so setup.cfg's import contracts (lint-imports) do not see it: this reads its
source with ast, every import at any depth (a lazy one inside a method included), and checks that of
eb_pytorch_cuda.testsuite only the service is imported, and that every `service.NAME` it reads is there.
"""

import ast
import os

import pytest

from eb_pytorch_cuda.testsuite import service

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EASYBLOCK = os.path.join(ROOT, 'easybuild', 'easyblocks', 'p', 'pytorch.py')
STEP = 'eb_pytorch_cuda.testsuite'
SERVICE = STEP + '.service'


def step_imports(source):
    """The modules of the test step that source imports, each as a dotted name (`from P import m` gives P.m
    when P is the step's package itself, as `from eb_pytorch_cuda.testsuite import service` names a module)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if alias.name == STEP or alias.name.startswith(STEP + '.')]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == STEP:
                found += [f'{STEP}.{alias.name}' for alias in node.names]
            elif node.module.startswith(STEP + '.'):
                found.append(node.module)
    return found


def service_names(source):
    """The attributes read of the name `service` in source."""
    return {node.attr for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == 'service'}


def easyblock_source():
    with open(EASYBLOCK, encoding='utf-8') as handle:
        return handle.read()


def test_the_easyblock_imports_only_the_service_of_the_step():
    imports = step_imports(easyblock_source())
    assert imports == [SERVICE], imports


def test_every_name_the_easyblock_reads_of_the_service_is_there():
    names = service_names(easyblock_source())
    assert {'run_step', 'describe_step', 'TestSettings', 'SETTING_DEFAULTS', 'easyconfig_command'} <= names
    missing = sorted(name for name in names if not hasattr(service, name))
    assert missing == []


@pytest.mark.parametrize('line, expected', [
    ('from eb_pytorch_cuda.testsuite.run import batches', ['eb_pytorch_cuda.testsuite.run']),
    ('from eb_pytorch_cuda.testsuite import service, results', [SERVICE, 'eb_pytorch_cuda.testsuite.results']),
    ('import eb_pytorch_cuda.testsuite.run.store as store', ['eb_pytorch_cuda.testsuite.run.store']),
    ('def f():\n    from eb_pytorch_cuda.testsuite.policy.report import to_text',
     ['eb_pytorch_cuda.testsuite.policy.report']),
    ('from eb_pytorch_cuda.testsuites import other', []),
    ('from eb_pytorch_cuda import testsuite_free', []),
])
def test_the_reader_sees_each_form_of_import(line, expected):
    """The check above finds an import of the step's internals in every form it can take, lazy ones included."""
    assert step_imports(line) == expected
