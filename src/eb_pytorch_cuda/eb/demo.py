"""`eb-pytorch-cuda demo`: the whole pipeline for real, on a laptop, in well under two minutes.

Real `eb` (the one installed next to this Python), real Lmod, SYSTEM toolchain, a temporary prefix
configured like EESSI (--rpath, --filter-env-vars=LD_LIBRARY_PATH): it installs a cuDNN stand-in
(prebuilt libraries whose sub-library dlopen()s its train library, as cuDNN 8 does) and a
PyTorch-shaped package through our easyblock and hooks: build, test suite with a known failure and a
flaky test (rerun), install, NEEDED patch, sanity check with a real load, report.  Then it shows the
loader error the patch prevented, on a copy of the installed library with the entry removed.
"""

import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Mapping, Optional, Tuple

from eb_pytorch_cuda import cudnn, standins
from eb_pytorch_cuda.eb.config import plugin_files
from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.escape import markdown_for_terminal
from eb_pytorch_cuda.elf.patchelf import patchelf_binary
from eb_pytorch_cuda.patch.plan import find_libraries
from eb_pytorch_cuda.testsuite.policy.report import RESULTS_JSON, RESULTS_MARKDOWN

ROOT_FLAG = '--allow-use-as-root-and-accept-consequences'
LMOD_CANDIDATES = ('/usr/share/lmod/lmod/libexec/lmod', '/opt/lmod/lmod/libexec/lmod')
EASYCONFIG = 'PyTorch-2.1.2-standin-easyblock.eb'
SHOWN = ('== building and installing', '== patched', '== suite', '== rerun', '== known:', '==   ',
         '== verdict', '== test results', '== sanity check:', '== COMPLETED', '== FAILED', 'ERROR:', 'WARNING: lib')


def find_eb() -> str:
    """The `eb` of this Python's environment, else the one on PATH."""
    beside = os.path.join(os.path.dirname(sys.executable), 'eb')
    found = beside if os.access(beside, os.X_OK) else shutil.which('eb')
    if not found:
        raise PluginError(None, 'eb not found: install easybuild-framework in this environment')
    return found


def find_lmod() -> str:
    candidates = [os.environ.get('LMOD_CMD'), *LMOD_CANDIDATES, shutil.which('lmod')]
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise PluginError(None, 'Lmod not found: install it (Debian: apt-get install lmod) or set $LMOD_CMD')


def eb_environment(workdir: str, lmod: str, entrypoints: bool = False,
                   site_hooks: Optional[str] = None) -> Dict[str, str]:
    """EasyBuild settings for the demo prefix: ours (easyblock, hooks) plus an EESSI-like RPATH stack.

    entrypoints: take our hooks and easyblock from the installed package's entry points (EasyBuild 5,
    --use-entrypoints) instead of naming the files; site_hooks: a site's hooks file (EESSI's) as --hooks,
    which needs entrypoints (the --hooks option holds one file)."""
    files = plugin_files()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(('EASYBUILD_', 'EBROOT', 'EBVERSION', 'LD_LIBRARY_PATH'))}
    env.update({
        'PATH': os.pathsep.join([os.path.dirname(sys.executable), env.get('PATH', '/usr/bin:/bin')]),
        'LMOD_CMD': lmod,
        'MODULEPATH': '',
        'EASYBUILD_PREFIX': os.path.join(workdir, 'easybuild'),
        'EASYBUILD_SOURCEPATH': os.path.join(workdir, 'sources'),
        'EASYBUILD_TMPDIR': os.path.join(workdir, 'tmp'),
        'EASYBUILD_ROBOT_PATHS': standins.EASYCONFIGS,
        'EASYBUILD_INCLUDE_EASYBLOCKS': files['easyblock'],
        'EASYBUILD_HOOKS': files['hooks'],
        'EASYBUILD_MODULES_TOOL': 'Lmod',
        'EASYBUILD_MODULE_SYNTAX': 'Lua',
        'EASYBUILD_RPATH': '1',
        'EASYBUILD_FILTER_ENV_VARS': 'LD_LIBRARY_PATH',
    })
    if entrypoints:
        del env['EASYBUILD_INCLUDE_EASYBLOCKS'], env['EASYBUILD_HOOKS']
        env['EASYBUILD_USE_ENTRYPOINTS'] = '1'
    if site_hooks:
        env['EASYBUILD_HOOKS'] = site_hooks
    return env


# What EESSI's build environment exports (software-layer-scripts init/minimal_eessi_env and
# init/eessi_environment_variables) and EESSI's hooks file reads: its get_eessi_envvar stops eb with `$EPREFIX is
# not defined!` where one is missing.  The demo's defaults: an installation on top of EESSI 2023.06 (a version
# its hooks know), this machine's CPU family, its generic target.
EESSI_VARIABLES = ('EESSI_VERSION', 'EESSI_OS_TYPE', 'EESSI_CPU_FAMILY', 'EESSI_PREFIX', 'EPREFIX',
                   'EESSI_SOFTWARE_SUBDIR', 'EESSI_SOFTWARE_PATH')


def eessi_environment(environ: Mapping[str, str], machine: Optional[str] = None) -> Tuple[Dict[str, str], List[str]]:
    """(EESSI_VARIABLES with their values, the names that took the demo's default): the environment's value
    where it has one, else a default derived from the values before it (EPREFIX from EESSI_PREFIX, ...)."""
    values: Dict[str, str] = {}
    defaults = {
        'EESSI_VERSION': lambda: '2023.06',
        'EESSI_OS_TYPE': lambda: 'linux',
        'EESSI_CPU_FAMILY': lambda: machine or platform.machine(),
        'EESSI_PREFIX': lambda: f"/cvmfs/software.eessi.io/versions/{values['EESSI_VERSION']}",
        'EPREFIX': lambda: f"{values['EESSI_PREFIX']}/compat/{values['EESSI_OS_TYPE']}/{values['EESSI_CPU_FAMILY']}",
        'EESSI_SOFTWARE_SUBDIR': lambda: f"{values['EESSI_CPU_FAMILY']}/generic",
        'EESSI_SOFTWARE_PATH': lambda: (f"{values['EESSI_PREFIX']}/software/{values['EESSI_OS_TYPE']}/"
                                        f"{values['EESSI_SOFTWARE_SUBDIR']}"),
    }
    defaulted = []
    for name in EESSI_VARIABLES:
        if environ.get(name):
            values[name] = environ[name]
        else:
            values[name] = defaults[name]()
            defaulted.append(name)
    return values, defaulted


def show_prevented_error(library: str, workdir: str) -> None:
    """Run the loader harness on the installed library and on a copy without the NEEDED entry."""
    harness = standins.build_loadcheck(os.path.join(workdir, 'loadcheck'))
    unpatched = os.path.join(os.path.dirname(library), '.demo-unpatched-libtorch_cuda.so')
    shutil.copy2(library, unpatched)
    try:
        removals = [arg for soname in cudnn.DEFAULT_NEEDED[8] for arg in ('--remove-needed', soname)]
        subprocess.run([patchelf_binary(), *removals, unpatched], check=True)
        env = {k: v for k, v in os.environ.items() if k != 'LD_LIBRARY_PATH'}
        for label, path in (('without the NEEDED entry (what EESSI hit)', unpatched), ('as installed', library)):
            done = subprocess.run([harness, path], env=env, capture_output=True, text=True)
            print(f'  {label}: exit {done.returncode}')
            for line in (done.stderr + done.stdout).strip().splitlines():
                print(f'    {line}')
    finally:
        os.unlink(unpatched)


def check_wheel_building(python: str = sys.executable) -> None:
    """EasyBuild 5 installs the stand-in with `pip install --no-build-isolation` run by this Python (the
    stand-ins have no Python dependency), which needs a setuptools that builds wheels: >= 70.1, or the
    `wheel` package.  A venv made by `python3 -m venv` on Python 3.11 has neither (setuptools 65.5,
    docs/design.md section 2); say so up front instead of letting eb fail on `invalid command 'bdist_wheel'`."""
    try:
        from easybuild.tools.version import VERSION
    except ImportError:
        return
    if int(str(VERSION).split('.')[0]) < 5:
        return  # 4.x runs setup.py install
    probe = 'import importlib.util as u; raise SystemExit(0 if u.find_spec("wheel") or ' \
            'u.find_spec("setuptools.command.bdist_wheel") else 1)'
    if subprocess.run([python, '-c', probe], capture_output=True).returncode != 0:
        raise PluginError(python, f'cannot build wheels (no `wheel` package, setuptools older than 70.1), '
                                  f'which EasyBuild {VERSION} needs to install the stand-ins: '
                                  f'`{python} -m pip install wheel`')


def run_demo(workdir: Optional[str] = None, entrypoints: bool = False, site_hooks: Optional[str] = None) -> int:
    """Run the demo; return the exit code (0 when the build passed for the right reasons)."""
    start = time.time()
    eb, lmod = find_eb(), find_lmod()
    check_wheel_building()  # before anything is written
    if site_hooks:
        site_hooks = os.path.abspath(site_hooks)
        if not os.path.isfile(site_hooks):
            raise PluginError(site_hooks, 'no such hooks file')
        if not entrypoints:
            raise PluginError(site_hooks, '--site-hooks needs --entrypoints (eb --hooks takes one file: ours come '
                                          'from the entry points then)')
    if entrypoints:
        from eb_pytorch_cuda.eb.config import check_entry_points
        check_entry_points()
    workdir = os.path.abspath(workdir or tempfile.mkdtemp(prefix='eb-pytorch-cuda-demo-'))
    os.makedirs(workdir, exist_ok=True)
    command = [eb, '--robot', EASYCONFIG]
    if os.geteuid() == 0:
        command.append(ROOT_FLAG)
        print(f'running as root: passing {ROOT_FLAG} to eb (EasyBuild refuses root otherwise)')
    print(f'demo workdir: {workdir}\n  eb: {eb}\n  Lmod: {lmod}')
    if entrypoints:
        print('  our hooks and easyblock: entry points (--use-entrypoints)'
              + (f'; site hooks file: {site_hooks}' if site_hooks else ''))
    eessi: Dict[str, str] = {}
    if site_hooks:
        eessi, defaulted = eessi_environment(os.environ)
        print(f"  EESSI's environment, which its hooks file reads: "
              f"{', '.join(f'{name}={value}' for name, value in eessi.items())}"
              + (f"\n  (the demo's defaults for {', '.join(defaulted)}: not set here; export them to choose "
                 f"others)" if defaulted else ''))
    standins.make_sources(os.path.join(workdir, 'sources'))
    print(f"== eb {' '.join(command[1:])}  (full output: {workdir}/eb-output.log)")
    env = {**eb_environment(workdir, lmod, entrypoints, site_hooks), **eessi}
    with open(os.path.join(workdir, 'eb-output.log'), 'w') as log, \
            subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             cwd=workdir) as process:
        for line in process.stdout or ():
            log.write(line)
            if line.startswith(SHOWN):
                print(line.rstrip())
        code = process.wait()
    install = os.path.join(workdir, 'easybuild', 'software', 'PyTorch', '2.1.2-standin-easyblock')
    summary = os.path.join(install, 'easybuild', RESULTS_MARKDOWN)
    if code != 0 or not os.path.exists(summary):
        print(f'demo: eb failed (exit {code}); see {workdir}/eb-output.log')
        return 1
    print('\n--- the test report (' + summary + ') ---')
    with open(summary) as handle:
        print(markdown_for_terminal(handle.read().rstrip()))  # the file keeps its escapes, for a renderer
    library = find_libraries([install])[0]  # the eb run above succeeded: it installed one
    print('\n--- the loader error the patch prevents (real glibc, LD_LIBRARY_PATH unset) ---')
    show_prevented_error(library, workdir)
    print('\n--- where everything is ---')
    print(f'  installation: {install}')
    print(f"  module: {os.path.join(workdir, 'easybuild', 'modules', 'all', 'PyTorch', '2.1.2-standin-easyblock.lua')}")
    print(f'  patched library: {library}')
    print(f"  test results: {os.path.join(install, 'easybuild', RESULTS_JSON)}")
    print(f'  eb output: {workdir}/eb-output.log')
    print(f'demo finished in {time.time() - start:.0f}s')
    return 0
