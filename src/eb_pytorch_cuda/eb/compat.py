"""Where EasyBuild offers no way, the two dry-run workarounds the easyblock needs, in one place.

Both exist because an extended dry run (`eb -x`) installs no dependency and runs no command, while
EasyBuild's own steps assume they did.  Each is a context manager that changes one name for the
duration of one step and restores it on the way out, whatever happens; written against EasyBuild 4.9.4
and 5.4.1, the versions whose dry runs tests/test_dry_run.py runs.

- skip_missing_permission_targets: EasyBuild 5's prepare step chmods the RPATH wrapper scripts of the
  toolchain, which write_file does not write in a dry run (adjust_permissions then raises on a missing
  path); for that step, a path that does not exist is skipped.
- python_version_of_dependency: PythonPackage's configure step asks det_python_version() of the Python
  it would run; in a dry run nothing runs, so it answers from the easyconfig's Python dependency.  The
  name is replaced in the globals of the module PythonPackage's methods were defined in (upstream's, or
  a site's included copy, which need not be what sys.modules holds under that name).

Also here: which of upstream's module-level names our easyblock module re-exports (UPSTREAM_API), so
code that imports them from easybuild.easyblocks.pytorch finds upstream's very objects.
"""

import contextlib
import os
from typing import Callable, Dict, Iterator, List

# upstream p/pytorch.py's own API (4.9.4: the first two; 5.x: all), not the names it imports
UPSTREAM_API = ('find_failed_test_names', 'parse_test_log', 'TestState', 'TestSuite', 'parse_test_cases',
                'determine_suite_name', 'handle_xfail_results', 'parse_test_result_file', 'merge_test_suites',
                'get_test_results')


def reexport_upstream_api(namespace: Dict[str, object], upstream) -> List[str]:
    """Put UPSTREAM_API's names that upstream's module has (and namespace does not define) into namespace."""
    exported = []
    for name in UPSTREAM_API:
        if hasattr(upstream, name) and name not in namespace:
            namespace[name] = getattr(upstream, name)
            exported.append(name)
    return exported


@contextlib.contextmanager
def skip_missing_permission_targets() -> Iterator[None]:
    """For one dry-run step: toolchain.adjust_permissions skips a path that does not exist."""
    import easybuild.tools.toolchain.toolchain as toolchain_module
    original = toolchain_module.adjust_permissions

    def adjust_existing(path, *more, **options):
        if os.path.exists(path):
            return original(path, *more, **options)
        return None
    toolchain_module.adjust_permissions = adjust_existing
    try:
        yield
    finally:
        toolchain_module.adjust_permissions = original


@contextlib.contextmanager
def python_version_of_dependency(easyblock_class: type, version: Callable[[], str]) -> Iterator[None]:
    """For one dry-run step: det_python_version() as PythonPackage sees it answers version() when the real
    one finds no Python to ask."""
    base = next((cls for cls in easyblock_class.__mro__ if cls.__name__ == 'PythonPackage'), None)
    method = getattr(base, 'configure_step', None) if base is not None else None
    namespace = getattr(method, '__globals__', {})
    original = namespace.get('det_python_version')
    if original is None:
        yield
        return
    namespace['det_python_version'] = lambda python_cmd: original(python_cmd) or version()
    try:
        yield
    finally:
        namespace['det_python_version'] = original
