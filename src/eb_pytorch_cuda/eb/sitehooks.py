"""A site's EasyBuild hooks file, read (never imported): which of our five hooks it defines, whether it already
runs ours, and the lines that make it run ours.

EasyBuild 4 takes one hooks file (`--hooks`), so where a site has one, our hooks can only run from it: the
file makes a PyTorchCudaHooks object and forwards five hooks to it (docs: user guide, "A site with its own
hooks file").  The file is parsed with `ast`, so nothing in it runs here.
"""

import ast
from dataclasses import dataclass
from typing import FrozenSet

from eb_pytorch_cuda.errors import PluginError

# our five hooks, each with its first argument (pre_run_shell_cmd_hook gets the command, the others the easyblock)
FORWARDED = (('pre_test_hook', 'self'), ('post_test_hook', 'self'), ('pre_run_shell_cmd_hook', 'cmd'),
             ('post_install_hook', 'self'), ('pre_sanitycheck_hook', 'self'))
OBJECT = 'pytorch_cuda'


@dataclass(frozen=True)
class HooksFile:
    """path; defined: which of the five hooks it defines at module level; runs_ours: it imports from
    eb_pytorch_cuda (a file that already forwards to our hooks object)."""

    path: str
    defined: FrozenSet[str]
    runs_ours: bool


def read_hooks_file(path: str) -> HooksFile:
    """The site hooks file at path, parsed; PluginError naming it when it cannot be read or parsed (EasyBuild
    would stop on it too)."""
    try:
        with open(path, encoding='utf-8') as handle:
            tree = ast.parse(handle.read(), filename=path)
    except OSError as err:
        raise PluginError(path, f"the hooks file EasyBuild is configured with cannot be read: {err.strerror or err}")
    except (SyntaxError, ValueError, UnicodeDecodeError) as err:
        raise PluginError(path, f'the hooks file EasyBuild is configured with is not Python: {err}')
    names = {hook for hook, _ in FORWARDED}
    defined = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in names:
            defined.add(node.name)
        elif isinstance(node, ast.Assign):
            defined.update(target.id for target in node.targets if isinstance(target, ast.Name) and target.id in names)
    runs_ours = any(
        (isinstance(node, ast.ImportFrom) and (node.module or '').split('.')[0] == 'eb_pytorch_cuda')
        or (isinstance(node, ast.Import) and any(alias.name.split('.')[0] == 'eb_pytorch_cuda' for alias in node.names))
        for node in ast.walk(tree))
    return HooksFile(path, frozenset(defined), runs_ours)


def forwarding_text(hooks: HooksFile) -> str:
    """The lines that make the site's file run our hooks: the import and the object, then each of the five
    hooks either assigned (the file has none of that name) or called from the file's own."""
    lines = ["# eb-pytorch-cuda's hooks (PyTorch with CUDA on RPATH-only stacks), run from this file",
             'from eb_pytorch_cuda.eb.hooks import PyTorchCudaHooks',
             f'{OBJECT} = PyTorchCudaHooks()']
    for hook, first in FORWARDED:
        if hook in hooks.defined:
            lines.append(f'# {hook} is defined there: call {OBJECT}.{hook}({first}, *args, **kwargs) in it')
        else:
            lines.append(f'{hook} = {OBJECT}.{hook}')
    return '\n'.join(lines) + '\n'
