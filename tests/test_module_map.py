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
