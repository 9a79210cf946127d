"""EasyBuild hook functions: patch every libtorch_cuda.so before the tests and in the install, then prove it.

Where the patch must happen depends on the EasyBuild version (docs/design.md section 2): 4.9.4 builds in
the build step and installs into a temporary prefix inside the test step; 5.x builds inside that same
temporary install.  The one moment common to both is just before the test command runs, so
pre_run_shell_cmd_hook patches the test installation the command is about to import (the directories
it exports on PYTHONPATH, and EasyBuild 5's recorded test install dir).  pre_test_hook patches what the
build step left in the build directory, post_install_hook patches the installation, and
pre_sanitycheck_hook fails the installation unless the entries are present, resolve into the cuDNN
installation and are mapped by a real load.

Sites call these functions from their own hooks file; `hooks/eb_hooks.py` is the ready-made one.
EasyBuild is imported inside the functions, so importing this module needs no EasyBuild.
"""

import os
import platform
import re
import tempfile

from eb_pytorch_cuda import cudnn
from eb_pytorch_cuda.elf.reader import read_elf
from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.patch.needed import add_needed, check_needed, check_problems
from eb_pytorch_cuda.loader.resolve import Resolver

LIBRARY_NAME = 'libtorch_cuda.so'

# what a site may change from its own hooks file (the environment variable of cudnn.ENV_VARIABLE wins
# over cudnn_needed here; an easyconfig's cudnn_needed parameter wins over both)
SITE_OPTIONS = {
    'package_names': ('pytorch', 'libtorch'),  # lower-case EasyBuild names the hooks act on
    'cudnn_needed': None,  # None: catalog defaults; a list of sonames, or {major: [sonames]}
    'load_check': True,  # the sanity check loads libtorch_cuda.so in a fresh process
}

_PYTHONPATH_EXPORT = re.compile(r'PYTHONPATH=([^\s&;|]+)')
# the easyblock in its test step; files already reported; (installdir, soname) already warned about
_STATE = {'testing': None, 'reported': set(), 'warned': set()}


def _eb():
    """EasyBuild's logging and error helpers (imported late: this module must import without EasyBuild)."""
    from easybuild.tools.build_log import EasyBuildError, print_msg, print_warning
    return EasyBuildError, print_msg, print_warning


def is_pytorch(self):
    """True for the packages these hooks act on (PyTorch, LibTorch by default)."""
    return self.name.lower() in SITE_OPTIONS['package_names']


def cudnn_root():
    """$EBROOTCUDNN of the loaded cuDNN module, or None."""
    return os.environ.get('EBROOTCUDNN') or None


def has_cudnn_dependency(self):
    """True when the easyconfig depends on cuDNN (a CUDA build that must get the patch)."""
    try:
        deps = self.cfg.dependencies()
    except Exception:  # noqa: BLE001 - an easyconfig without resolvable dependencies has none we know of
        deps = []
    return any(dep.get('name', '').lower() == 'cudnn' for dep in deps) or bool(cudnn_root())


def find_libraries(roots):
    """Every libtorch_cuda.so below the given directories (found by search: no version or path assumed)."""
    found = []
    seen = set()
    for root in roots:
        if not root or not os.path.isdir(root):
            continue
        for dirpath, _dirnames, filenames in os.walk(root):
            if LIBRARY_NAME in filenames:
                path = os.path.join(dirpath, LIBRARY_NAME)
                real = os.path.realpath(path)
                if real not in seen and os.path.isfile(real):
                    seen.add(real)
                    found.append(path)
    return sorted(found)


def _easyconfig_value(self):
    try:
        return self.cfg['cudnn_needed']
    except Exception:  # noqa: BLE001 - the parameter exists only with our easyblock
        return None


def plan_for_library(self, path, resolver=None):
    """What to add to one libtorch_cuda.so: (major, present sonames, absent sonames, cuDNN dirs).

    major is None when the library does not link cuDNN (nothing to do).  Requested sonames come from
    the easyconfig, the environment, the site options or the catalog defaults, and are filtered by the
    files present where libcudnn.so.N really resolves and in $EBROOTCUDNN.
    """
    info = read_elf(path)
    major = cudnn.cudnn_major(info.needed)
    if major is None:
        return None, [], [], []
    resolution = (resolver or Resolver()).resolve(f'libcudnn.so.{major}', info)
    dirs = [os.path.dirname(resolution.path)] if resolution.found else []
    root = cudnn_root()
    if root:
        dirs += [os.path.join(root, sub) for sub in ('lib', 'lib64') if os.path.isdir(os.path.join(root, sub))]
    dirs = list(dict.fromkeys(os.path.realpath(d) for d in dirs))
    requested = cudnn.requested_sonames(major, easyconfig_value=_easyconfig_value(self),
                                        site_value=SITE_OPTIONS['cudnn_needed'])
    present, absent = cudnn.filter_present(requested, dirs)
    return major, present, absent, dirs


def patch_libraries(self, roots, where):
    """Add the planned NEEDED entries to every libtorch_cuda.so under roots; return the paths handled."""
    EasyBuildError, print_msg, print_warning = _eb()
    libraries = find_libraries(roots)
    for path in libraries:
        try:
            major, present, absent, dirs = plan_for_library(self, path)
            if major is None:
                print_msg(f'{path} does not link cuDNN, not patched', log=self.log)
                continue
            for soname in absent:
                if (self.installdir, soname) not in _STATE['warned']:  # once per build, not per copy
                    _STATE['warned'].add((self.installdir, soname))
                    print_warning(f'{soname} not in the cuDNN installation ({", ".join(dirs) or "not found"}), '
                                  f'not added to {path}', log=self.log)
            if not present:
                continue
            result = add_needed(path, present)
        except PluginError as err:
            raise EasyBuildError(f'Patching {LIBRARY_NAME} ({where}) failed: {err}') from None
        for soname in result.added:
            print_msg(f'patched {path}: added NEEDED {soname}', log=self.log)
        if result.already_present:
            message = f'{path}: NEEDED {", ".join(result.already_present)} already present, nothing to do'
            if os.path.realpath(path) in _STATE['reported']:
                self.log.info(message)
            else:
                print_msg(message, log=self.log)
        _STATE['reported'].add(os.path.realpath(path))
    return libraries


def _test_install_dirs(self, cmd):
    """Directories a test command imports torch from: its PYTHONPATH exports and EB 5's test install dir.

    Only directories inside the build directory or the temporary directory count, so a dependency's
    installation named on PYTHONPATH is never touched.
    """
    allowed = [os.path.realpath(d) for d in (getattr(self, 'builddir', None), tempfile.gettempdir()) if d]
    candidates = [getattr(self, 'pypkg_test_installdir', None), os.environ.get('EB_PYTHONPACKAGE_TEST_INSTALLDIR')]
    for match in _PYTHONPATH_EXPORT.finditer(cmd if isinstance(cmd, str) else ' '.join(map(str, cmd))):
        candidates += [entry for entry in match.group(1).split(':') if entry.startswith('/')]
    dirs = []
    for candidate in filter(None, candidates):
        real = os.path.realpath(candidate)
        if os.path.isdir(real) and any(real == a or real.startswith(a + os.sep) for a in allowed) \
                and real not in dirs:
            dirs.append(real)
    return dirs


def pre_test_hook(self, *args, **kwargs):
    """Remember the PyTorch build under test; patch what the build step left in the build directory."""
    if not is_pytorch(self):
        return
    _STATE['testing'] = self
    if self.dry_run:
        return
    patch_libraries(self, [self.builddir], 'build directory')


def post_test_hook(self, *args, **kwargs):
    """The test step is over: stop watching shell commands."""
    if _STATE['testing'] is self:
        _STATE['testing'] = None


def pre_run_shell_cmd_hook(cmd, *args, **kwargs):
    """Before each command of a PyTorch test step, patch the test installation it is about to use."""
    self = _STATE['testing']
    if self is None or self.dry_run:
        return None
    dirs = _test_install_dirs(self, cmd)
    if dirs:
        patch_libraries(self, dirs, 'test installation')
    return None


def dry_run_plan(self):
    """(cuDNN major, sonames to add, where they come from) as the easyconfig says, for `eb -x`."""
    dependency = next((d for d in self.cfg.dependencies() if d.get('name', '').lower() == 'cudnn'), None)
    if dependency is None:
        return None, [], 'no cuDNN dependency'
    major = int(str(dependency['version']).split('.')[0])
    requested = cudnn.requested_sonames(major, easyconfig_value=_easyconfig_value(self),
                                        site_value=SITE_OPTIONS['cudnn_needed'])
    return major, requested, f"cuDNN {dependency['version']}{dependency.get('versionsuffix', '')}"


def post_install_hook(self, *args, **kwargs):
    """Patch every libtorch_cuda.so in the installation; one info line for CPU-only builds."""
    if not is_pytorch(self):
        return
    _STATE['testing'] = None  # in case the test step ended with an error, before post_test_hook
    _, print_msg, _ = _eb()
    if self.dry_run:
        major, sonames, source = dry_run_plan(self)
        if not sonames:
            self.dry_run_msg(f'[pytorch-cuda hooks] no cuDNN NEEDED entries to add ({source})')
            return
        self.dry_run_msg(f"[pytorch-cuda hooks] would add NEEDED {', '.join(sonames)} ({source}) to every "
                         f'{LIBRARY_NAME} found under the installation, and before the tests under the test '
                         f'installation; each entry only if $EBROOTCUDNN/lib has that file')
        return
    if not patch_libraries(self, [self.installdir], 'installation'):
        print_msg(f'no {LIBRARY_NAME} in {self.installdir} (CPU-only build): nothing to patch', log=self.log)


def sanity_check_problems(self):
    """Messages (file and soname in each) for every installed libtorch_cuda.so that fails the checks."""
    _, print_msg, _ = _eb()
    libraries = find_libraries([self.installdir])
    if not libraries:
        if has_cudnn_dependency(self):
            return [f'no {LIBRARY_NAME} found in {self.installdir}, although this build depends on cuDNN']
        self.log.info('no %s in %s (CPU-only build): no cuDNN NEEDED check', LIBRARY_NAME, self.installdir)
        return []
    problems = []
    for path in libraries:
        major, present, absent, dirs = plan_for_library(self, path)
        if major is None:
            continue
        if not present:
            continue
        expect_dir = cudnn_root() or dirs[0]
        preload = driver_stub_preload(path) if SITE_OPTIONS['load_check'] else []
        if preload:
            print_msg(f'sanity check: no libcuda.so.1 on this node, preloading the CUDA driver stub {preload[0]}',
                      log=self.log)
        checks, _ = check_needed(path, present, expect_dir=expect_dir, load=SITE_OPTIONS['load_check'],
                                 preload=preload)
        problems += check_problems(path, checks)
        for check in checks:
            if not check.problem:
                print_msg(f'sanity check: {path} has NEEDED {check.soname} -> {check.resolution.path}'
                          f'{", mapped by a real load" if check.mapped else ""}', log=self.log)
    return problems


def driver_stub_preload(path):
    """The CUDA driver stub to preload when libcuda.so.1 is needed but absent (a build node without GPU).

    Preloading the stub, whose soname is libcuda.so.1, satisfies that NEEDED entry by glibc's
    already-loaded rule; it changes nothing about how the cuDNN libraries are found.
    """
    resolver = Resolver()
    if resolver.resolve('libcuda.so.1', read_elf(path)).found:
        return []
    root = os.environ.get('EBROOTCUDA') or os.environ.get('CUDA_HOME')
    stubs = ('lib64/stubs/libcuda.so', 'lib/stubs/libcuda.so', f'targets/{platform.machine()}-linux/lib/stubs/libcuda.so')
    for sub in stubs:
        if root and os.path.exists(os.path.join(root, sub)):
            return [os.path.join(root, sub)]
    return []


def pre_sanitycheck_hook(self, *args, **kwargs):
    """Fail the installation, naming file and soname, unless the cuDNN NEEDED entries are proven."""
    if not is_pytorch(self):
        return
    EasyBuildError, print_msg, _ = _eb()
    if self.dry_run:
        _, sonames, _ = dry_run_plan(self)
        if sonames:
            self.dry_run_msg(f"[pytorch-cuda hooks] sanity check: every installed {LIBRARY_NAME} must have NEEDED "
                             f"{', '.join(sonames)}, each resolving through its RPATH/RUNPATH into $EBROOTCUDNN and "
                             f'mapped by a real load in a fresh process without LD_LIBRARY_PATH')
        return
    try:
        problems = sanity_check_problems(self)
    except PluginError as err:
        problems = [str(err)]
    if problems:
        # printed in full first: EasyBuild 4.9.4 shows only the first 300 characters of an error
        for problem in problems:
            print_msg(f'Sanity check failed: {problem}', log=self.log)
        raise EasyBuildError('Sanity check failed: ' + '; '.join(problems))
