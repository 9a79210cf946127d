"""Docstrings name only what exists: each module or attribute a docstring of src/, easybuild/
or hooks/ names resolves in the tree.

Why: a reader follows a docstring's name to the code; `suiterun`, `batchrun`, `testsuite.step` and
`queue.SuiteQueue` outlived their modules and sent them nowhere.  The names are read as the docstrings write
them: `eb_pytorch_cuda.process`, `testsuite.service`, `run/gpus.query_gpus` (a path under the package or the
test step, then attributes), `workqueue.SuiteQueue.claim_next` (a module's own name, then attributes).  They
are resolved from the source files (ast), nothing is imported.
"""

import ast
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, 'src', 'eb_pytorch_cuda')
STEP = os.path.join(PACKAGE, 'testsuite')
SOURCES = [os.path.join(ROOT, 'src', 'eb_pytorch_cuda'), os.path.join(ROOT, 'easybuild'), os.path.join(ROOT, 'hooks')]
SKIPPED_DIRS = ('standins', '__pycache__')  # the stand-ins' sources mimic PyTorch's, they name its modules
# a name ending so is a file, not a module (results.json, run.log, spec.json)
FILE_SUFFIXES = {'json', 'jsonl', 'xml', 'txt', 'log', 'md', 'yml', 'yaml', 'eb', 'cfg', 'so', 'gz', 'sh', 'c', 'toml',
                 'ini', 'partial', 'children', 'lock', 'py'}
# module names the tree once had (git log): named in a docstring they can only be stale
GONE = {'suiterun', 'batchrun', 'step', 'queue', 'standalone', 'runner', 'slurmjobs', 'batchlog', 'markers',
        'elfsym', 'ebconfig', 'easybuild_hooks', 'regularfile'}
NAME = re.compile(r'(?<![\w/.-])(\w+(?:/\w+)*)((?:\.\w+)*)')


def _python_files(top):
    for directory, subdirs, files in os.walk(top):
        subdirs[:] = sorted(d for d in subdirs if d not in SKIPPED_DIRS)
        for name in sorted(files):
            if name.endswith('.py'):
                yield os.path.join(directory, name)


def _module_files():
    """{dotted name under eb_pytorch_cuda ('' for the package): its file}."""
    found = {}
    for path in _python_files(PACKAGE):
        relative = os.path.relpath(path, PACKAGE)[:-3].replace(os.sep, '.')
        found[relative[:-len('__init__')].rstrip('.') if relative.endswith('__init__') else relative] = path
    return found


MODULES = _module_files()
BY_BASENAME = {}
for _dotted in MODULES:
    BY_BASENAME.setdefault(_dotted.rsplit('.', 1)[-1], []).append(_dotted)


def _names_of(body):
    """{name: its node} bound at the top of body: defs, classes, assignments, imports."""
    names = {}
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, ast.Assign):
            names.update((t.id, node) for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update(((a.asname or a.name).split('.')[0], node) for a in node.names)
        elif isinstance(node, (ast.If, ast.Try)):
            names.update(_names_of(node.body))
    return names


_TREES = {}


def _has(module, attributes):
    """module (dotted, under eb_pytorch_cuda) has the attribute chain: a top-level name, then names in a class."""
    if module not in MODULES:
        return False
    if not attributes:
        return True
    if attributes[0] in {m.rsplit('.', 1)[-1] for m in MODULES if m.startswith(module + '.') or not module}:
        return _has(f'{module}.{attributes[0]}'.lstrip('.'), attributes[1:])
    if module not in _TREES:
        with open(MODULES[module], encoding='utf-8') as handle:
            _TREES[module] = ast.parse(handle.read())
    body = _TREES[module].body
    for attribute in attributes:
        node = _names_of(body).get(attribute)
        if node is None:
            return False
        if not isinstance(node, ast.ClassDef):
            return True  # an attribute of a function or a value: not followed further
        body = node.body
    return True


def resolves(path, attributes):
    """Whether `path` (a/b or a, dots already split off into attributes) names something that exists, or None
    where path is not a name of ours (an English word, a file, another project's module)."""
    parts = path.split('/')
    if attributes and attributes[-1] in FILE_SUFFIXES:
        return None
    if parts[0] == 'eb_pytorch_cuda' and len(parts) == 1:
        for split in range(len(attributes), -1, -1):  # the longest module prefix, then attributes
            if '.'.join(attributes[:split]) in MODULES:
                return _has('.'.join(attributes[:split]), attributes[split:])
        return False
    if parts[0] == 'testsuite' and len(parts) == 1:
        return resolves('eb_pytorch_cuda', ['testsuite', *attributes])
    if len(parts) > 1:  # a path: under the package or the test step
        tops = {m.split('.')[0] for m in MODULES} | {m.split('.')[1] for m in MODULES if m.startswith('testsuite.')}
        if parts[0] not in tops:
            return None  # tests/..., docs/..., tools/...: not a module path of the package
        for base in ('', 'testsuite.'):
            if f'{base}{".".join(parts)}' in MODULES:
                return _has(f'{base}{".".join(parts)}', attributes)
        return False
    if not attributes:
        return None  # a bare word
    if path in GONE and path not in BY_BASENAME:
        return False
    if path in BY_BASENAME:
        return any(_has(module, attributes) for module in BY_BASENAME[path])
    return None


def _docstrings(path):
    with open(path, encoding='utf-8') as handle:
        tree = ast.parse(handle.read())
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            text = ast.get_docstring(node, clean=False)
            if text:
                yield getattr(node, 'lineno', 1), text


def unresolved(text):
    """The names in text that do not resolve."""
    found = []
    for match in NAME.finditer(text):
        path, dotted = match.group(1), match.group(2)
        attributes = [a for a in dotted.split('.') if a]
        if path.endswith('.py'):
            path = path[:-3]
        if resolves(path, attributes) is False:
            found.append(match.group(0))
    return found


def test_every_name_in_a_docstring_resolves():
    stale = []
    for top in SOURCES:
        for path in _python_files(top):
            for line, text in _docstrings(path):
                stale += [f'{os.path.relpath(path, ROOT)}:{line}: {name}' for name in unresolved(text)]
    assert stale == []


@pytest.mark.parametrize('text', ['the shared queue (queue.SuiteQueue)', 'see suiterun.run_suites',
                                  'testsuite.step.run_and_judge', 'eb_pytorch_cuda.testsuite.run.batches.nothing',
                                  'run/harness.no_such_function', 'results/nomodule', 'workqueue.SuiteQueue.nope'])
def test_a_stale_name_is_found(text):
    assert unresolved(text) != []


@pytest.mark.parametrize('text', ['workqueue.SuiteQueue.claim_next', 'eb_pytorch_cuda.process', 'testsuite.service',
                                  'run/gpus.query_gpus', 'results/pieces.py', 'spread/workqueue.py',
                                  'results.jsonl and run.log', 'tests/test_run_here.py', 'policy/judging.judge',
                                  'eb/ecpolicy', 'an English sentence. Another one.'])
def test_a_name_that_exists_or_is_no_module_passes(text):
    assert unresolved(text) == []
