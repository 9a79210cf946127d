"""Our five hooks as EasyBuild 5 entry points (group easybuild.hooks): `eb --use-entrypoints ...`.

`pip install .` registers this module (setup.cfg); EasyBuild 5 imports it when --use-entrypoints is
set and runs the hooks registered below in addition to those of a --hooks file (a site's, EESSI's),
the file's first.  One PyTorchCudaHooks object (SESSION) holds what the run remembers between hooks,
as hooks/eb_hooks.py does for the --hooks way; the easyblock finds it through hooks.session_of.

EasyBuild 5.4.1's run_hook renames the step it filters entry points by ('test' becomes 'pre-test')
once a --hooks file defines the same hook, so without help an entry-point pre_test_hook never runs
beside a file's pre_test_hook (EESSI defines one).  Each hook is therefore registered twice: once
validated as EasyBuild documents it, once as an alias whose step is the renamed one.  Exactly one of
the two matches in any run; ALIASED records which steps needed it (docs/design.md, entry points).

EasyBuild 4.9.4 has no entry points (no easybuild.tools.entrypoints): importing this module there
fails with a message saying to use hooks/eb_hooks.py through --hooks.
"""

from typing import Any, Callable, Dict, List, Tuple

from eb_pytorch_cuda.eb.hooks import PyTorchCudaHooks

try:
    from easybuild.tools.entrypoints import EntrypointHook
except ImportError as err:  # EasyBuild 4.x
    raise ImportError('eb-pytorch-cuda entry points need EasyBuild 5 (easybuild.tools.entrypoints); with '
                      'EasyBuild 4 use --hooks (eb-pytorch-cuda config)') from err

SESSION = PyTorchCudaHooks()
PRIORITY = 0  # EasyBuild runs entry-point hooks of one step by descending priority, then name

# (step, 'pre' or 'post', the PyTorchCudaHooks method) for each hook
HOOKS: Tuple[Tuple[str, str, str], ...] = (
    ('test', 'pre', 'pre_test_hook'),
    ('test', 'post', 'post_test_hook'),
    ('run_shell_cmd', 'pre', 'pre_run_shell_cmd_hook'),
    ('install', 'post', 'post_install_hook'),
    ('sanitycheck', 'pre', 'pre_sanitycheck_hook'),
)
REGISTERED: Dict[str, Callable[..., Any]] = {}
ALIASED: List[str] = []


def _forwarder(method: str, name: str) -> Callable[..., Any]:
    """A module-level function named name that calls SESSION.<method> (EasyBuild names entry points by
    __name__ and imports their __module__)."""
    def hook(*args: Any, **kwargs: Any) -> Any:
        return getattr(SESSION, method)(*args, **kwargs)
    hook.__name__ = hook.__qualname__ = name
    hook.__module__ = __name__
    hook.__doc__ = f'Entry point for PyTorchCudaHooks.{method} (eb --use-entrypoints).'
    return hook


def _register() -> None:
    for step, when, method in HOOKS:
        flags = {'pre_step': when == 'pre', 'post_step': when == 'post'}
        name = f'pytorch_cuda_{method}'
        REGISTERED[name] = EntrypointHook(step, priority=PRIORITY, **flags)(_forwarder(method, name))
        alias = EntrypointHook(step, priority=PRIORITY, **flags)
        alias(_forwarder(method, f'{name}_beside_file_hook'))
        alias.step = f'{when}-{step}'  # the label run_hook filters by when a --hooks file has this hook
        ALIASED.append(alias.step)


_register()
