"""How many public functions of a package are fully annotated (issue 34: >= 95% in eb_pytorch_cuda/testsuite).

Usage: python tools/annotation_coverage.py [DIR] [--min PERCENT] [--list]

A function is public when neither it nor the class that holds it starts with `_` (nested functions are not
counted); it is fully annotated when every parameter but a method's self/cls (positional, keyword-only,
*args, **kwargs) and its return have annotations (__init__ counts without its return).  Read with ast, so
nothing is imported.  Prints `annotated/public (percent)` per subpackage and in all; --list names the rest;
--min exits 1 below that percentage.
"""

import argparse
import ast
import os
import sys
from typing import Iterator, List, Tuple


def public_functions(tree: ast.Module) -> Iterator[Tuple[str, ast.AST, bool]]:
    """(qualified name, function node, is a method) of the module's public functions and methods."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith('_'):
            yield node.name, node, False
        elif isinstance(node, ast.ClassDef) and not node.name.startswith('_'):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
                        not item.name.startswith('_') or item.name == '__init__'):
                    yield f'{node.name}.{item.name}', item, True


def fully_annotated(node, method: bool) -> bool:
    """Every parameter (a method's first, self or cls, aside; a staticmethod's counts) and the return."""
    args = node.args
    positional = list(args.posonlyargs) + list(args.args)
    static = any(isinstance(d, ast.Name) and d.id == 'staticmethod' for d in node.decorator_list)
    if method and not static and positional:
        positional = positional[1:]
    params = positional + list(args.kwonlyargs) + [a for a in (args.vararg, args.kwarg) if a is not None]
    if any(param.annotation is None for param in params):
        return False
    return node.returns is not None or node.name == '__init__'


def measure(top: str) -> List[Tuple[str, str, bool]]:
    """(module path, function, fully annotated) for every public function under top."""
    rows = []
    for directory, subdirs, files in os.walk(top):
        subdirs[:] = sorted(d for d in subdirs if d != '__pycache__')
        for name in sorted(files):
            if not name.endswith('.py'):
                continue
            path = os.path.join(directory, name)
            with open(path, encoding='utf-8') as handle:
                tree = ast.parse(handle.read(), path)
            for qualified, node, method in public_functions(tree):
                rows.append((os.path.relpath(path, top), qualified, fully_annotated(node, method)))
    return rows


def percent(rows) -> str:
    done = sum(1 for row in rows if row[2])
    return f'{done}/{len(rows)} ({100 * done / len(rows):.1f}%)' if rows else '0/0'


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('top', nargs='?', default=os.path.join('src', 'eb_pytorch_cuda', 'testsuite'))
    parser.add_argument('--min', type=float, default=None, help='exit 1 below this percentage')
    parser.add_argument('--list', action='store_true', help='name the functions not fully annotated')
    args = parser.parse_args(argv)
    if not os.path.isdir(args.top):
        print(f'{args.top}: not a directory', file=sys.stderr)
        return 2
    rows = measure(args.top)
    groups = sorted({row[0].split(os.sep)[0] if os.sep in row[0] else '.' for row in rows})
    for group in groups:
        print(f"{group:10} {percent([r for r in rows if (r[0].split(os.sep)[0] if os.sep in r[0] else '.') == group])}")
    print(f"{'all':10} {percent(rows)}")
    if args.list:
        for path, qualified, done in rows:
            if not done:
                print(f'  {path}: {qualified}')
    done = sum(1 for row in rows if row[2])
    if args.min is not None and rows and 100 * done / len(rows) < args.min:
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
