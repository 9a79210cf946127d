##
# This file is part of eb-pytorch-cuda and, like the easyblock it extends (easybuild-easyblocks'
# EB_PyTorch), licensed under the GNU General Public License v2 (GPL-2.0-only).
##
"""EasyBuild support for PyTorch with CUDA on RPATH-linked stacks: `eb --include-easyblocks <this file>`.

A thin adapter over the eb_pytorch_cuda library.  It extends the installed easybuild-easyblocks
EB_PyTorch (configure logic, BLAS selection, CUDA capabilities stay upstream's) and replaces how the
test step is run and judged: tests run against a temporary installation whose libtorch_cuda.so has
the cuDNN NEEDED fix, without a shell, with progress on the console; the results are judged by a
policy with a budget, named known failures per scope, and isolated reruns; the verdict is printed and
written to <installdir>/easybuild/ as JSON and Markdown.

This file takes the name of upstream's module (easybuild.easyblocks.pytorch), however a site deploys
it: --include-easyblocks (with or without other included easyblocks), a site easyblocks tree in
place of upstream's p/pytorch.py, or the copy a pip install puts in share/eb-pytorch-cuda.  So
upstream's module is found by content, not by where another easyblock's file lies: the first
pytorch.py on easybuild.easyblocks' search path that is not a copy of this file (EXTENDS_UPSTREAM
below marks every copy).  Upstream's module-level API (get_test_results, parse_test_log, TestState,
...) is re-exported at the end, so code importing it from easybuild.easyblocks.pytorch keeps working.
"""

import contextlib
import dataclasses
import importlib.util
import os
import shutil
import sys
import tempfile

import easybuild.easyblocks
from easybuild.framework.easyconfig import CUSTOM
from easybuild.tools.build_log import EasyBuildError, print_msg
from easybuild.tools.config import build_option, build_path
from easybuild.tools.filetools import mkdir, remove_dir, write_file
try:
    from easybuild.tools.run import run_shell_cmd
except ImportError:  # EasyBuild 4.x
    from easybuild.tools.run import run_cmd as _run_cmd

    def run_shell_cmd(cmd):
        return _run_cmd(cmd, log_all=True, simple=True)
from easybuild.tools.modules import get_software_root

from eb_pytorch_cuda import cudnn, docs_url
from eb_pytorch_cuda.eb import hooks as easybuild_hooks
from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.patch.plan import find_libraries
from eb_pytorch_cuda.escape import printable
from eb_pytorch_cuda.eb import compat, ecpolicy, testinstall
from eb_pytorch_cuda.testsuite import service  # the one module of the test step read here


# every copy of this file carries this line; upstream's pytorch.py never does
EXTENDS_UPSTREAM = 'eb-pytorch-cuda easyblock: extends the EB_PyTorch of easybuild-easyblocks'
UPSTREAM_MODULE = 'easybuild.easyblocks.pytorch_upstream'


def _is_this_easyblock(path):
    """True for this file and any copy of it (included, in a site tree, installed by pip)."""
    try:
        if os.path.samefile(path, __file__):
            return True
        with open(path, encoding='utf-8', errors='replace') as handle:
            return EXTENDS_UPSTREAM in handle.read()
    except OSError:
        return False


def upstream_easyblock_paths():
    """Every pytorch.py on easybuild.easyblocks' search path (and sys.path) that is not this easyblock, in order."""
    dirs = list(easybuild.easyblocks.__path__)
    dirs += [os.path.join(entry, 'easybuild', 'easyblocks') for entry in sys.path if entry]
    found = []
    for directory in dirs:
        for candidate in (os.path.join(directory, 'pytorch.py'), os.path.join(directory, 'p', 'pytorch.py')):
            real = os.path.realpath(candidate)
            if os.path.isfile(real) and real not in found and not _is_this_easyblock(real):
                found.append(real)
    return found


def _load_upstream_module():
    """Upstream's easyblock module, loaded once under its own name (never this file)."""
    if UPSTREAM_MODULE in sys.modules:
        return sys.modules[UPSTREAM_MODULE]
    paths = upstream_easyblock_paths()
    if not paths:
        raise EasyBuildError("eb-pytorch-cuda: upstream EB_PyTorch (easybuild-easyblocks' p/pytorch.py) not found on "
                             "the easyblocks search path %s; install easybuild-easyblocks",
                             ':'.join(easybuild.easyblocks.__path__[:3]))
    spec = importlib.util.spec_from_file_location(UPSTREAM_MODULE, paths[0])
    module = importlib.util.module_from_spec(spec)
    sys.modules[UPSTREAM_MODULE] = module  # EasyBuild's reproducibility copy inspects the class's source file
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[UPSTREAM_MODULE]
        raise
    return module


_UPSTREAM = _load_upstream_module()
UpstreamPyTorch = _UPSTREAM.EB_PyTorch
# EasyBuild 5 renamed the post-install step (the old name still works there, with a deprecation warning)
_POST_INSTALL = 'post_processing_step' if hasattr(UpstreamPyTorch, 'post_processing_step') else 'post_install_step'


# our test-step parameters (defaults: service.SETTING_DEFAULTS, testsuite/policy/settings' one list for all readers)
_OUR_TEST_PARAMETERS = {
    'known_test_failures': "Tests expected to fail, as {scope: [(test, reason), ...]} with scopes as for "
                           "excluded_tests; test is 'suite' or 'suite::Class.test' (globs allowed). They do not "
                           "consume the budget; one that passed is reported as stale; a suite killed by a signal or "
                           "failing without a countable summary fails the build unless listed",
    'rerun_failed_tests': "Rerun each failed test (its suite when the test is not named) in isolation up to this "
                          f"many times (at most {service.MAX_RERUNS}); a pass makes it flaky, else reproducible",
    'harness_retries': "Keep PyTorch's own retries of a failed test (pytest-rerunfailures' --reruns=2, 2.6's "
                       "single-test retries: up to 9 runs of it) on top of rerun_failed_tests; False: the test runs "
                       "once, rerun_failed_tests is the only retry",
    'flaky_failures_consume_budget': "Count flaky failures (passed on a rerun) against max_failed_tests",
    'test_suite_timeout': "Seconds a test suite may run before it is killed with its whole process group and "
                          "recorded as timed out (judged like a crashed suite). Default: "
                          f"{service.TIMEOUT_RULE} (the previous installation's)",
    'parallel_test_suites': "Run this many batches of test suites at a time ('auto': from the node's CPUs, memory "
                            "and GPU memory at the test step; GPU suites are spread over the GPUs with "
                            "CUDA_VISIBLE_DEVICES)",
    'test_suite_heartbeat': "Seconds between the test step's lines naming the suites running, how long each has run, "
                            "and (with the previous installation's results) the time left",
    'test_suite_jobs': "Spread the test suites over this many Slurm jobs (sbatch; shared build path required; "
                       "options from $EB_PYTORCH_CUDA_SLURM_*: "
                       f"{docs_url('user-guide', 'one-builds-test-suites-spread-over-slurm-jobs')})",
    'test_suite_executor': "Where the test suites run: 'here' (the test step's node), 'slurm' (test_suite_jobs Slurm "
                           "jobs) or 'auto' (Slurm where test_suite_jobs > 1, else here)",
    'cuda_device_tests': "Run PyTorch's device-generic tests for CUDA and CPU (SANDCASTLE=0) where the test step sees "
                         "a GPU (nvidia-smi, CUDA_VISIBLE_DEVICES) and the build has CUDA: 'auto'; True: also fail "
                         "the step where it sees none, or where 0 CUDA tests ran; False: upstream's SANDCASTLE=1 "
                         "(CPU device tests only)",
}


class EB_PyTorch(UpstreamPyTorch):
    """Upstream EB_PyTorch with our test step and parameters (see extra_options)."""

    @staticmethod
    def extra_options():
        extra_vars = UpstreamPyTorch.extra_options()
        extra_vars['max_failed_tests'][1] = ("Budget for failed tests NOT covered by known_test_failures "
                                             "(failed plus errored test cases; flaky ones see "
                                             "flaky_failures_consume_budget)")
        extra_vars['excluded_tests'][1] = ("Test files to skip (run_test.py -x), as {scope: [files]}; scope "
                                           + service.SCOPE_HELP)
        # upstream's since easybuild-easyblocks 5.x (#4052); EasyBuild 4.9.4's EB_PyTorch has neither
        extra_vars.setdefault('allow_missing_failures', [service.SETTING_DEFAULTS['allow_missing_failures'],
                                                         "Pass although up to this many test suites failed "
                                                         "uncountably (killed, crashed, no summary) and no "
                                                         "known_test_failures entry names them (True: any "
                                                         "number), with a warning for each", CUSTOM])
        extra_vars.setdefault('allow_extra_failures', [service.SETTING_DEFAULTS['allow_extra_failures'],
                                                       "Accepted as upstream's; no effect: every suite is "
                                                       "counted from its own output and XML reports, so no "
                                                       "failing suite is extra to a summary", CUSTOM])
        extra_vars.update({name: [service.SETTING_DEFAULTS[name], text, CUSTOM]
                           for name, text in _OUR_TEST_PARAMETERS.items()})
        extra_vars.update({
            'cudnn_needed': [None, "cuDNN sub-libraries to add as NEEDED entries of libtorch_cuda.so (a list of "
                                   "sonames, or a dict {cuDNN major version: list}); None: the catalog default "
                                   f"(cuDNN 8: {', '.join(cudnn.DEFAULT_NEEDED[8])}; "
                                   f"cuDNN 9: {', '.join(cudnn.DEFAULT_NEEDED[9])}), [] to switch the patch off; "
                                   "entries missing from the cuDNN installation are always skipped. See "
                                   "`eb-pytorch-cuda cudnn-catalog`", CUSTOM],
        })
        return extra_vars

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.pytorch_test_report = None
        self._store = None
        self._reuse = None
        self._settings()  # a test parameter of the wrong type or range stops eb before any step runs
        easybuild_hooks.easyconfig_cudnn_needed(self)  # and so does a cudnn_needed of the wrong form

    def _raw_runtest(self):
        """runtest as written: %(python)s and %(excluded_tests)s are filled in by service.easyconfig_command."""
        with self.cfg.disable_templating():
            return self.cfg['runtest']

    def _settings(self):
        """The test step's parameters of this easyconfig (testsuite/policy/settings: one list for all their readers),
        checked by type and range: EasyBuildError naming the easyconfig and the parameter otherwise."""
        with self._easybuild_errors():
            values = {name: self.cfg[name] for name in service.SETTING_NAMES}
            return service.TestSettings.from_values(values, self.cfg.path or 'easyconfig')

    def _test_install(self, parent=None):
        """Install into a temporary prefix (in parent, default the system's temporary directory), as
        PythonPackage's test step does; return (prefix, PYTHONPATH entries, bin dir).  The entries make the
        package importable whatever the installer made: pip's site-packages, the posix_local scheme's local/,
        or an egg that only easy-install.pth names."""
        prefix = tempfile.mkdtemp(dir=parent)
        actual = os.path.join(prefix, 'local') if self.using_local_py_install_scheme() else prefix
        pylibdirs = [os.path.join(actual, pylibdir) for pylibdir in self.all_pylibdirs]
        for pylibdir in pylibdirs:
            mkdir(pylibdir, parents=True)
        extrapath = f"export PYTHONPATH={os.pathsep.join(pylibdirs + ['$PYTHONPATH'])} && "
        run_shell_cmd(self.compose_install_command(prefix, extrapath=extrapath))
        self.py_post_install_shenanigans(prefix)
        return prefix, testinstall.import_paths(prefix, pylibdirs), os.path.join(actual, 'bin')

    def _set_test_environment(self):
        """What upstream's test step sets: cache dirs, FB-CI mode, no bottleneck test, MAX_JOBS, OMP threads.
        (Its EASYBUILD_WRITE_PYTORCH_TEST_REPORTS is set for each batch of suites, with --save-xml:
        testsuite/run/batches.)"""
        for name in ('_set_cache_dirs', '_set_cache_dir'):
            if hasattr(self, name):
                getattr(self, name)()
                break
        os.environ.update({'SANDCASTLE': '1', 'SKIP_TEST_BOTTLENECK': '1'})
        parallel = getattr(self.cfg, 'parallel', None) or self.cfg['parallel'] or 1
        os.environ['MAX_JOBS'] = str(parallel)
        os.environ.setdefault('OMP_NUM_THREADS', str(max(4, int(parallel) // 4)))

    @contextlib.contextmanager
    def _easybuild_errors(self):
        """A PluginError of the library (one line naming the file and the problem) as EasyBuild's own error."""
        try:
            yield
        except PluginError as err:
            raise EasyBuildError(str(err)) from None

    def _step_inputs(self, settings):
        """What the test step (service.run_step) is given of this build: the easyconfig's runtest with its
        pretestopts and testopts applied as PythonPackage.test_step applies them, without a shell
        (service.easyconfig_command), its store, EasyBuild's environment and compute capabilities."""
        def command(excluded):
            return service.easyconfig_command(self._raw_runtest() or '', self.cfg['pretestopts'], self.cfg['testopts'],
                                              self.cfg.path or 'easyconfig', self.start_dir or '.',
                                              self.python_cmd or 'python', excluded)
        return service.StepInputs(
            settings, command, env=dict(os.environ), output_dir=os.path.join(self.builddir, 'pytorch-test-output'),
            python=self.python_cmd, store=lambda _command: self._results_store(),
            source=self.cfg.path or 'known_test_failures', default_budget=ecpolicy.upstream_default_max_failed_tests(),
            built_capabilities=build_option('cuda_compute_capabilities') or (),
            previous_results=self._previous_results(), build_dir=self.builddir)

    def test_step(self):
        """The test step of the library (service.run_step: batches of suites against a patched temporary install,
        judged once by the policy), or its plan in a dry run; the verdict printed and written."""
        settings = self._settings()
        host = _EasyBuildHost(self)
        with self._easybuild_errors():
            if self.dry_run:
                for line in service.describe_step(self._step_inputs(settings), host):
                    self.dry_run_msg(line)
                return
            kept = self._reusable_build()
            if not kept and self._raw_runtest() in (None, '', True):
                raise EasyBuildError("Set 'runtest' to the test command, or use --skip-test-step")
            if not kept:
                self._set_test_environment()
            inputs = dataclasses.replace(self._step_inputs(settings), kept=(kept, self._store) if kept else None)
            outcome = service.run_step(inputs, host)
        self._judge(outcome)
        if not kept:
            service.finish(self._store, settings)

    def _has_cuda(self, prefix=None):
        """The build has CUDA: a CUDA dependency (upstream's own test), or a libtorch_cuda.so in the tested
        installation (a wheel that brings its CUDA)."""
        if get_software_root('CUDA'):
            return True
        if any(dep['name'] == 'CUDA' for dep in self.cfg.dependencies()):
            return True
        return bool(prefix) and bool(find_libraries([prefix]))

    def _judge(self, outcome):
        """Print and write the verdict; raise when the policy says the run failed."""
        self.pytorch_test_report = outcome
        for line in service.verdict_lines(outcome):
            print_msg(line, log=self.log)
        self._write_reports(self.builddir)
        if not outcome.verdict.passed:
            raise EasyBuildError('PyTorch test suite failed: ' + printable('; '.join(outcome.verdict.reasons)) +
                                 ' (results and the tested build are kept: change the policy in the easyconfig and '
                                 f'rerun to judge again without running a suite or rebuilding: {self._store.path})')

    # --- a tested build whose only problem was the verdict is reused, not rebuilt ---

    def _results_store(self):
        if self._store is None:
            self._store = service.open_store(self._results_store_path(), self._build_fingerprint())
        return self._store

    def _discard_kept_results(self, store):
        """--rebuild and --force mean "build and test again": drop what an earlier run of this build kept (its
        per-suite results, its complete result, its tested build, a spread run's queue and jobs), and say so."""
        option = next((name for name in ('rebuild', 'force') if build_option(name)), None)
        if not option:
            return
        kept = service.discard_kept(store, self._settings(), lambda message: print_msg(message, log=self.log))
        if kept:
            print_msg(f'--{option}: discarded the test results and tested build kept by an earlier run of this '
                      f'build ({printable(store.path)}): every suite runs again', log=self.log)

    def _reusable_build(self):
        """The previous run's complete result, when that run kept its tested build (failed on the verdict only)."""
        if self._reuse is None:
            store = self._results_store()
            with self._easybuild_errors():  # a store path that is a directory, a final.json we never wrote
                self._discard_kept_results(store)
                final = store.load_final()
            self._reuse = final if final is not None and os.path.isdir(store.cache_dir) else False
        return self._reuse

    def build_step(self, *args, **kwargs):
        """Upstream's, unless the previous run of this very build was tested and failed on the verdict only."""
        if not self.dry_run and self._reusable_build():
            print_msg(f'reusing the build tested by the previous run ({self._store.cache_dir}): nothing is rebuilt',
                      log=self.log)
            return None
        return super().build_step(*args, **kwargs)

    def install_step(self, *args, **kwargs):
        """Upstream's, or a copy of the reused tested build (then its kept results are dropped)."""
        if self.dry_run or not self._reusable_build():
            return super().install_step(*args, **kwargs)
        print_msg(f'installing the reused tested build from {self._store.cache_dir}', log=self.log)
        shutil.copytree(self._store.cache_dir, self.installdir, symlinks=True, dirs_exist_ok=True)
        self._store.remove()
        return None

    # --- per-suite results that survive a killed eb, keyed by what determines the build ---

    def _build_fingerprint(self):
        """Of what the tested build depends on, not of the policy (service.build_fingerprint)."""
        from easybuild.framework.easyconfig.parser import EasyConfigParser
        values = EasyConfigParser(rawcontent=self.cfg.rawtxt).get_config_dict()
        return service.build_fingerprint(values, os.environ, {'cuda_cc': build_option('cuda_compute_capabilities')})

    def _results_store_path(self):
        """Outside the build directory, which EasyBuild empties when a build starts again."""
        root = build_path() or os.path.dirname(self.builddir)
        return os.path.join(root, '.eb-pytorch-cuda-test-results', f'{self.name}-{self.version}'
                            f"{self.cfg['versionsuffix']}-{self.toolchain.name}-{self.toolchain.version}.jsonl")

    def _previous_results(self):
        """The results JSON of the previous installation (per-suite times: timeouts, longest-first spread)."""
        return os.path.join(self.installdir, 'easybuild', service.RESULTS_JSON)

    def _write_reports(self, directory):
        """The service's two reports (the same as `test-suite` writes) into directory; their paths."""
        if self.pytorch_test_report is None:
            return []
        texts = service.report_texts(self.pytorch_test_report, title=f'{self.name} {self.version} test suite')
        paths = []
        for name, text in texts.items():
            paths.append(os.path.join(directory, name))
            write_file(paths[-1], text)
        return paths

    def _post_install_with_reports(self, *args, **kwargs):
        """Upstream's post-install step, then the test results into <installdir>/easybuild/."""
        getattr(super(), _POST_INSTALL)(*args, **kwargs)
        written = self._write_reports(os.path.join(self.installdir, 'easybuild'))
        if written:
            print_msg(f'test results: {written[0]}, summary: {written[1]}', log=self.log)

    # --- extended dry run (eb -x): no dependency is installed, so nothing may be run or read from them ---

    def prepare_step(self, *args, **kwargs):
        """Upstream's; in a dry run, tolerate the RPATH wrappers that a dry run never writes (eb/compat)."""
        if not self.dry_run:
            return super().prepare_step(*args, **kwargs)
        with compat.skip_missing_permission_targets():
            return super().prepare_step(*args, **kwargs)

    def _python_dependency_version(self):
        python = next((dep for dep in self.cfg.dependencies() if dep['name'] == 'Python'), None)
        return python['version'] if python else '%d.%d.%d' % sys.version_info[:3]

    def run_step(self, step_name, step_methods):
        """EasyBuild's; in a dry run, each step with the Python facts of the Python dependency."""
        if not self.dry_run:
            return super().run_step(step_name, step_methods)
        with compat.python_version_of_dependency(type(self), self._python_dependency_version):
            return super().run_step(step_name, step_methods)

    def prepare_python(self):
        """Upstream's; in a dry run, the Python of the Python dependency, without running it."""
        if not self.dry_run:
            return super().prepare_python()
        self.python_cmd = os.path.join(os.environ.get('EBROOTPYTHON', '$EBROOTPYTHON'), 'bin', 'python')
        self.set_pylibdirs()
        return None

    def set_pylibdirs(self):
        """Upstream's; in a dry run, lib/pythonX.Y/site-packages from the Python dependency's version."""
        if not self.dry_run:
            return super().set_pylibdirs()
        short = '.'.join(self._python_dependency_version().split('.')[:2])
        self.pylibdir = os.path.join('lib', f'python{short}', 'site-packages')
        self.all_pylibdirs = [self.pylibdir]
        return None

    def sanity_check_step(self, *args, **kwargs):
        """Upstream's; in a dry run, the pip checks are named instead of run (they need the installation)."""
        if not self.dry_run:
            return super().sanity_check_step(*args, **kwargs)
        self.dry_run_msg('  pip check and pip list of the installed packages (not run in a dry run)')
        saved = {}
        for key in ('sanity_pip_check', 'sanity_check_pip_list'):
            try:
                saved[key] = self.cfg[key]
                self.cfg[key] = False
            except Exception:  # noqa: BLE001 - the parameter does not exist in this EasyBuild version
                continue
        try:
            return super().sanity_check_step(*args, **kwargs)
        finally:
            for key, value in saved.items():
                self.cfg[key] = value

    def load_module(self, *args, **kwargs):
        """Upstream's; in a dry run only said: the dependencies' modules are not installed."""
        if self.dry_run:
            self.dry_run_msg(f'  module load {self.full_mod_name} (not done in a dry run: dependencies not installed)')
            return None
        return super().load_module(*args, **kwargs)


class _EasyBuildHost:
    """The test step's host in EasyBuild (service.StepHost): progress through print_msg and the log, the build's
    CUDA, and a tested installation made as PythonPackage's test step makes one, with the cuDNN fix applied."""

    def __init__(self, easyblock):
        self.easyblock = easyblock

    def say(self, message):
        print_msg(printable(message), log=self.easyblock.log)

    def has_cuda(self, installation):
        return self.easyblock._has_cuda(installation)

    @contextlib.contextmanager
    def tested_installation(self, parent):
        prefix, pylibdirs, bindir = self.easyblock._test_install(parent)
        try:
            easybuild_hooks.patch_libraries(self.easyblock, [prefix], 'test installation')
            yield service.TestedInstallation(prefix, {
                'PYTHONPATH': os.pathsep.join(pylibdirs + [os.environ.get('PYTHONPATH', '')]),
                'PATH': os.pathsep.join([bindir, os.environ.get('PATH', '')])})
        finally:
            remove_dir(prefix)


EB_PyTorch._post_install_with_reports.__name__ = _POST_INSTALL  # as the dry run names the step
setattr(EB_PyTorch, _POST_INSTALL, EB_PyTorch._post_install_with_reports)


UPSTREAM_API = compat.reexport_upstream_api(globals(), _UPSTREAM)
