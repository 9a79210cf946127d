"""The module maps name every module that exists: testsuite/__init__.py's and docs/reference.md's Layout.

Why: a newcomer reads the map first; a module missing from it (or found only under an old name) sends them
to read the tree instead.  Each module of src/eb_pytorch_cuda (the stand-ins' sources aside) must be named
in the Layout section, each module of the test step in its layer's paragraph of the package docstring.
"""

import ast
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, 'src', 'eb_pytorch_cuda')
STEP = os.path.join(PACKAGE, 'testsuite')


def modules(top):
    """Paths relative to top, without .py, of its modules (packages' __init__ and __main__ left out)."""
    found = []
    for directory, subdirs, files in os.walk(top):
        subdirs[:] = sorted(d for d in subdirs if d not in ('standins', '__pycache__'))
        for name in sorted(files):
            if name.endswith('.py') and name not in ('__init__.py', '__main__.py'):
                found.append(os.path.relpath(os.path.join(directory, name[:-3]), top))
    return found


def layout_section():
    with open(os.path.join(ROOT, 'docs', 'reference.md'), encoding='utf-8') as handle:
        text = handle.read()
    start = text.index('\n## Layout\n')
    end = text.find('\n## ', start + 1)
    return text[start:end if end != -1 else len(text)]


def layers_of_step_docstring():
    """{layer: its paragraph} of testsuite/__init__.py's map (a layer line starts at column 4)."""
    with open(os.path.join(STEP, '__init__.py'), encoding='utf-8') as handle:
        doc = ast.get_docstring(ast.parse(handle.read()))
    layers, current = {}, None
    for line in doc.splitlines():
        match = re.match(r'    (\w+)/?\s{2,}(.*)', line)
        if match:
            current = match.group(1)
            layers[current] = match.group(2)
        elif current and line.startswith(' ' * 8):
            layers[current] += ' ' + line.strip()
        else:
            current = None
    return layers


def test_the_layout_names_every_module():
    section = layout_section()
    named = set(re.findall(r'`([\w/.]+)`', section))
    missing = [path for path in modules(PACKAGE)
               if path not in named and os.path.basename(path) not in named]
    assert len(modules(PACKAGE)) > 60
    assert missing == []


def test_the_step_map_names_each_module_in_its_layer():
    layers = layers_of_step_docstring()
    assert set(layers) == {'service', 'spread', 'run', 'policy', 'results'}
    missing = []
    for path in modules(STEP):
        layer, _, name = path.rpartition(os.sep)
        if not layer:
            continue  # service.py is a layer of its own, checked above
        if not re.search(rf'\b{re.escape(name)}\b', layers.get(layer, '')):
            missing.append(path)
    assert missing == []


def _layer_modules(paragraph):
    """The modules a layer's paragraph names: after what the layer is for (up to a colon), its items, each a
    name (or `a + b`, `a and b`) before its parenthesised description."""
    depth, text = 0, ''
    for char in paragraph:
        depth += char == '('
        if depth == 0:
            text += char
        depth -= char == ')'
    names = []
    for item in text.rpartition(': ')[2].split(','):
        names += [word for word in re.split(r'\s+(?:\+|and)\s+', item.strip()) if word]
    return names


def test_the_step_map_names_only_modules_that_exist():
    """The other way round: each item of a layer's paragraph is a module of that layer (a renamed or removed
    module leaves no name behind)."""
    layers = layers_of_step_docstring()
    stale = []
    for layer, paragraph in layers.items():
        if layer == 'service':
            continue  # a module of its own: its paragraph describes it
        for name in _layer_modules(paragraph):
            if not os.path.isfile(os.path.join(STEP, layer, f'{name}.py')):
                stale.append(f'{layer}/{name}')
    assert stale == []
    assert _layer_modules(layers['spread']) == ['workqueue', 'jobpool', 'slurm', 'worker', 'controller']


def test_every_path_the_layout_names_exists():
    """Each path of the Layout (a backquoted name with a slash: `patch/needed`, `tests/test_module_map.py`,
    `eb/`) is a file or directory of the repository, of the package, or of the test step."""
    bases = (ROOT, PACKAGE, STEP)
    stale = []
    for path in set(re.findall(r'`([\w./-]*/[\w./-]*)`', layout_section())):
        candidates = [os.path.join(base, path.rstrip('/')) for base in bases]
        if not any(os.path.exists(c) or os.path.exists(c + '.py') for c in candidates):
            stale.append(path)
    assert stale == []
