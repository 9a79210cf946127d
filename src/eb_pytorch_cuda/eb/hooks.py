"""EasyBuild hook functions: patch every libtorch_cuda.so before the tests and in the install, then prove it.

Where the patch must happen depends on the EasyBuild version (docs/design.md section 2): 4.9.4 builds in
the build step and installs into a temporary prefix inside the test step; 5.x builds inside that same
temporary install.  The one moment common to both is just before the test command runs, so
pre_run_shell_cmd_hook patches the test installation the command is about to import (the directories
it exports on PYTHONPATH, and EasyBuild 5's recorded test install dir).  pre_test_hook patches what the
build step left in the build directory, post_install_hook patches the installation, and
pre_sanitycheck_hook fails the installation unless the entries are present, resolve into the cuDNN
installation and are mapped by a real load.

What to patch and how is decided by patch.plan (plain values in and out); this module reads those
values from EasyBuild, prints what happens and turns problems into EasyBuildError.  What one eb run
must remember between hooks (the build in its test step, what was already reported) lives in a
PyTorchCudaHooks object, which the hooks file creates: this module keeps no state.  EasyBuild is
imported inside the functions, so importing this module needs no EasyBuild.
"""

import os
import re
import sys
import tempfile
from typing import Any, Iterable, List, Optional, Sequence, Set, Tuple

from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.patch import plan as patch_plan

LIBRARY_NAME = patch_plan.LIBRARY_NAME
PACKAGE_NAMES = ('pytorch', 'libtorch')  # lower-case EasyBuild names the hooks act on
SITE_SETTING = 'PyTorchCudaHooks(cudnn_needed=...)'  # how an error names a site's hooks file setting

_PYTHONPATH_EXPORT = re.compile(r'PYTHONPATH=([^\s&;|]+)')


def _eb() -> Tuple[Any, Any, Any]:
    """EasyBuild's logging and error helpers (imported late: this module must import without EasyBuild)."""
    from easybuild.tools.build_log import EasyBuildError, print_msg, print_warning
    return EasyBuildError, print_msg, print_warning


def cudnn_root() -> Optional[str]:
    """$EBROOTCUDNN of the loaded cuDNN module, or None."""
    return os.environ.get('EBROOTCUDNN') or None


def has_cudnn_dependency(eb: Any) -> bool:
    """True when the easyconfig depends on cuDNN (a CUDA build that must get the patch)."""
    try:
        deps = eb.cfg.dependencies()
    except Exception:  # noqa: BLE001 - an easyconfig without resolvable dependencies has none we know of
        deps = []
    return any(dep.get('name', '').lower() == 'cudnn' for dep in deps) or bool(cudnn_root())


def easyconfig_cudnn_needed(eb: Any) -> Any:
    """The easyconfig's cudnn_needed (a parameter only with our easyblock), else None; EasyBuildError naming
    the easyconfig and the parameter for a value of the wrong form (patch.plan.check_cudnn_needed).  The one
    reader of the parameter: the hooks, the dry run and the easyblock's start all come here."""
    try:
        value = eb.cfg['cudnn_needed']
    except Exception:  # noqa: BLE001 - the parameter exists only with our easyblock
        return None
    return _checked_cudnn_needed(value, getattr(eb.cfg, 'path', None) or 'easyconfig')


def _checked_cudnn_needed(value: Any, source: str) -> Any:
    """patch.plan.check_cudnn_needed, its PluginError as EasyBuild's error (eb shows that in one line)."""
    try:
        return patch_plan.check_cudnn_needed(value, source)
    except PluginError as err:
        try:
            error = _eb()[0]
        except ImportError:
            raise err from None
        raise error(str(err)) from None


def settings_for(eb: Any, site_cudnn_needed: Any = None) -> patch_plan.Settings:
    """The plain values patch.plan decides from, read from this build."""
    return patch_plan.Settings(cudnn_root=cudnn_root(), easyconfig_value=easyconfig_cudnn_needed(eb),
                               site_value=_checked_cudnn_needed(site_cudnn_needed, SITE_SETTING))


def test_install_dirs(eb: Any, cmd: Any) -> List[str]:
    """Directories a test command imports torch from: its PYTHONPATH exports and EB 5's test install dir.

    Only directories inside the build directory or the temporary directory count, so a dependency's
    installation named on PYTHONPATH is never touched.
    """
    allowed = [os.path.realpath(d) for d in (getattr(eb, 'builddir', None), tempfile.gettempdir()) if d]
    candidates = [getattr(eb, 'pypkg_test_installdir', None), os.environ.get('EB_PYTHONPACKAGE_TEST_INSTALLDIR')]
    for match in _PYTHONPATH_EXPORT.finditer(cmd if isinstance(cmd, str) else ' '.join(map(str, cmd))):
        candidates += [entry for entry in match.group(1).split(':') if entry.startswith('/')]
    dirs: List[str] = []
    for candidate in filter(None, candidates):
        real = os.path.realpath(candidate)
        inside = any(real == a or real.startswith(a + os.sep) for a in allowed)
        if os.path.isdir(real) and inside and real not in dirs:
            dirs.append(real)
    return dirs


def session_of(eb: Any) -> Optional['PyTorchCudaHooks']:
    """The PyTorchCudaHooks whose methods EasyBuild loaded as this build's hooks (eb.hooks, a --hooks file),
    else the one of our entry points (eb --use-entrypoints), if any: so that the easyblock patches its test
    installation with the settings of the hooks in force."""
    hooks = getattr(eb, 'hooks', None) or {}
    for hook in (hooks.values() if isinstance(hooks, dict) else hooks):
        owner = getattr(hook, '__self__', None)
        if isinstance(owner, PyTorchCudaHooks):
            return owner
    entry_hooks = sys.modules.get('eb_pytorch_cuda.eb.entry_hooks')  # loaded by eb --use-entrypoints
    session = getattr(entry_hooks, 'SESSION', None)
    return session if isinstance(session, PyTorchCudaHooks) else None


def patch_libraries(eb: Any, roots: Iterable[Optional[str]], where: str,
                    session: Optional['PyTorchCudaHooks'] = None) -> List[str]:
    """Add the planned NEEDED entries to every libtorch_cuda.so under roots; return the paths handled.

    session: the hooks of this eb run (site settings, what was already said: a missing soname is warned
    about once per build, a file already patched is reported once); default: the one loaded as eb's hooks,
    else a fresh one with default settings.
    """
    EasyBuildError, print_msg, print_warning = _eb()
    session = session or session_of(eb) or PyTorchCudaHooks()
    warned, reported = session.warned, session.reported
    settings = settings_for(eb, session.cudnn_needed)
    libraries = patch_plan.find_libraries(roots)
    for path in libraries:
        try:
            plan = patch_plan.plan_library(path, settings)
            if plan.major is None:
                print_msg(f'{path} does not link cuDNN, not patched', log=eb.log)
                continue
            for soname in plan.absent:
                if (eb.installdir, soname) not in warned:  # once per build, not per copy
                    warned.add((eb.installdir, soname))
                    dirs = ', '.join(plan.cudnn_dirs) or 'not found'
                    print_warning(f'{soname} not in the cuDNN installation ({dirs}), not added to {path}', log=eb.log)
            result = patch_plan.apply_plan(plan)
        except PluginError as err:
            raise EasyBuildError(f'Patching {LIBRARY_NAME} ({where}) failed: {err}') from None
        if result is None:
            continue
        for soname in result.added:
            print_msg(f'patched {path}: added NEEDED {soname}', log=eb.log)
        if result.already_present:
            message = f'{path}: NEEDED {", ".join(result.already_present)} already present, nothing to do'
            if os.path.realpath(path) in reported:
                eb.log.info(message)
            else:
                print_msg(message, log=eb.log)
        reported.add(os.path.realpath(path))
    return libraries


def dry_run_plan(eb: Any, site_cudnn_needed: Any = None) -> Tuple[Optional[int], List[str], str]:
    """(cuDNN major, sonames to add, where they come from) as the easyconfig says, for `eb -x`."""
    dependency = next((d for d in eb.cfg.dependencies() if d.get('name', '').lower() == 'cudnn'), None)
    if dependency is None:
        return None, [], 'no cuDNN dependency'
    major, requested = patch_plan.planned_sonames(dependency['version'], settings_for(eb, site_cudnn_needed))
    return major, requested, f"cuDNN {dependency['version']}{dependency.get('versionsuffix', '')}"


def sanity_check_problems(eb: Any, site_cudnn_needed: Any = None, load_check: bool = True) -> List[str]:
    """Messages (file and soname in each) for every installed libtorch_cuda.so that fails the checks."""
    _, print_msg, _ = _eb()
    libraries = patch_plan.find_libraries([eb.installdir])
    if not libraries:
        if has_cudnn_dependency(eb):
            return [f'no {LIBRARY_NAME} found in {eb.installdir}, although this build depends on cuDNN']
        eb.log.info('no %s in %s (CPU-only build): no cuDNN NEEDED check', LIBRARY_NAME, eb.installdir)
        return []
    settings = settings_for(eb, site_cudnn_needed)
    problems = []
    for path in libraries:
        plan = patch_plan.plan_library(path, settings)
        if not plan.all_added:
            continue
        cuda_root = os.environ.get('EBROOTCUDA') or os.environ.get('CUDA_HOME')
        preload = patch_plan.driver_stub_preload(path, cuda_root) if load_check else []
        if preload:
            print_msg(f'sanity check: no libcuda.so.1 on this node, preloading the CUDA driver stub {preload[0]}',
                      log=eb.log)
        checks, found = patch_plan.check_plan(plan, load=load_check, preload=preload, expect_dir=cudnn_root())
        problems += found
        for check in checks:
            resolution: Any = check.resolution
            if not check.problem:
                print_msg(f'sanity check: {path} has NEEDED {check.soname} -> {resolution.path}'
                          f'{", mapped by a real load" if check.mapped else ""}', log=eb.log)
    return problems


class PyTorchCudaHooks:
    """The five hooks of one eb run, with what that run must remember between them.

    package_names: lower-case EasyBuild names acted on; cudnn_needed: the site's choice of sonames (a
    list, or {major: list}; $EB_PYTORCH_CUDA_CUDNN_NEEDED wins over it, an easyconfig's cudnn_needed over
    both; None: catalog defaults); load_check: the sanity check loads libtorch_cuda.so in a fresh process.
    """

    def __init__(self, package_names: Sequence[str] = PACKAGE_NAMES, cudnn_needed: Any = None,
                 load_check: bool = True) -> None:
        self.package_names = tuple(name.lower() for name in package_names)
        self.cudnn_needed = cudnn_needed  # checked where it is used (settings_for): eb shows a raise here as a
        # traceback, since it loads a hooks file outside its error handling
        self.load_check = load_check
        self.testing: Any = None  # the build in its test step (pre_run_shell_cmd_hook gets no easyblock)
        self.reported: Set[str] = set()  # files already reported as patched
        self.warned: Set[Tuple[str, str]] = set()  # (installdir, soname) already warned about

    def is_pytorch(self, eb: Any) -> bool:
        """True for the packages these hooks act on (PyTorch, LibTorch by default)."""
        return eb.name.lower() in self.package_names

    def patch(self, eb: Any, roots: Iterable[Optional[str]], where: str) -> List[str]:
        return patch_libraries(eb, roots, where, self)

    def pre_test_hook(self, eb: Any, *args: Any, **kwargs: Any) -> None:
        """Remember the PyTorch build under test; patch what the build step left in the build directory."""
        if not self.is_pytorch(eb):
            return
        self.testing = eb
        if not eb.dry_run:
            self.patch(eb, [eb.builddir], 'build directory')

    def post_test_hook(self, eb: Any, *args: Any, **kwargs: Any) -> None:
        """The test step is over: stop watching shell commands."""
        if self.testing is eb:
            self.testing = None

    def pre_run_shell_cmd_hook(self, cmd: Any, *args: Any, **kwargs: Any) -> None:
        """Before each command of a PyTorch test step, patch the test installation it is about to use."""
        eb = self.testing
        if eb is None or eb.dry_run:
            return None
        dirs = test_install_dirs(eb, cmd)
        if dirs:
            self.patch(eb, dirs, 'test installation')
        return None

    def post_install_hook(self, eb: Any, *args: Any, **kwargs: Any) -> None:
        """Patch every libtorch_cuda.so in the installation; one info line for CPU-only builds."""
        if not self.is_pytorch(eb):
            return
        self.testing = None  # in case the test step ended with an error, before post_test_hook
        _, print_msg, _ = _eb()
        if eb.dry_run:
            _major, sonames, source = dry_run_plan(eb, self.cudnn_needed)
            if not sonames:
                eb.dry_run_msg(f'[pytorch-cuda hooks] no cuDNN NEEDED entries to add ({source})')
                return
            eb.dry_run_msg(f"[pytorch-cuda hooks] would add NEEDED {', '.join(sonames)} ({source}) to every "
                           f'{LIBRARY_NAME} found under the installation, and before the tests under the test '
                           f'installation; each entry only if $EBROOTCUDNN/lib has that file (and the CUDA '
                           f'libraries cuDNN dlopen()s, where cuDNN cannot find them and {LIBRARY_NAME} can)')
            return
        if not self.patch(eb, [eb.installdir], 'installation'):
            print_msg(f'no {LIBRARY_NAME} in {eb.installdir} (CPU-only build): nothing to patch', log=eb.log)

    def pre_sanitycheck_hook(self, eb: Any, *args: Any, **kwargs: Any) -> None:
        """Fail the installation, naming file and soname, unless the cuDNN NEEDED entries are proven."""
        if not self.is_pytorch(eb):
            return
        EasyBuildError, print_msg, _ = _eb()
        if eb.dry_run:
            _, sonames, _ = dry_run_plan(eb, self.cudnn_needed)
            if sonames:
                eb.dry_run_msg(f"[pytorch-cuda hooks] sanity check: every installed {LIBRARY_NAME} must have NEEDED "
                               f"{', '.join(sonames)}, each resolving through its RPATH/RUNPATH into $EBROOTCUDNN and "
                               f'mapped by a real load in a fresh process without LD_LIBRARY_PATH')
            return
        try:
            problems = sanity_check_problems(eb, self.cudnn_needed, self.load_check)
        except PluginError as err:
            problems = [str(err)]
        if problems:
            # printed in full first: EasyBuild 4.9.4 shows only the first 300 characters of an error
            for problem in problems:
                print_msg(f'Sanity check failed: {problem}', log=eb.log)
            raise EasyBuildError('Sanity check failed: ' + '; '.join(problems))
