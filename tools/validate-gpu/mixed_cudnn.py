"""On a GPU: a cuDNN installation missing one sub-library beside a system cuDNN of another version, and cuDNN's
own dlopen() of libnvrtc where CUDA is not on cuDNN's search path; the real failures against doctor's predictions.

Built from the machine's torch and pip cuDNN, in a scratch directory, on copies only (validate_gpu.build_layout:
cuDNN in its own prefix without RUNPATH, torch's search paths as DT_RPATH), with the catalog's default NEEDED
entries added (the fix as shipped, which works there: docs/validation/gpu.md).  Phases, each real cuDNN work
(cudnn_work.py's conv2d fp32/bf16, conv3d-transpose, LSTM, plus scaled-dot-product attention through cuDNN)
in a fresh `python -I -S`, LD_LIBRARY_PATH unset, traced with LD_DEBUG=libs,files (cuDNN's error log on
stderr: CUDNN_LOGERR_DBG=1), then libcudnn.so.9's version checks:

  baseline        the patched layout as it is
  without-X       the same with the sub-library X moved out of the cuDNN prefix: its dlopen() falls through to
                  the machine's ld.so.cache (a system cuDNN of another version where the image has one)
  nvrtc-*         cuDNN's files given RUNPATH=$ORIGIN (as NVIDIA's x86_64 tarballs have it), run through the
                  machine's own loader with --inhibit-cache (a loader whose cache has no CUDA: EESSI's
                  compatibility layer; this image's cache has a CUDA toolkit that would hide the failure):
                  nvrtc-unreachable (no LD_LIBRARY_PATH), nvrtc-ld-library-path (CUDA's lib directory on
                  LD_LIBRARY_PATH, NVIDIA's advice), nvrtc-hook-fix (no LD_LIBRARY_PATH; the NEEDED entries
                  patch.plan chooses, CUDA's included, added to libtorch_cuda.so)

For each phase, doctor's prediction (`doctor --from libtorch_cuda.so <torch/lib> <cudnn prefix> --format json`,
`--ld-so-cache none` for the nvrtc phases) and lddebug.compare_with_trace of it with the trace.  Writes
results.json (everything but the traces) and one LD_DEBUG trace per phase (gzip) into --out.

    python3 tools/validate-gpu/mixed_cudnn.py --workdir /tmp/mixed --out results/
"""

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import validate_gpu  # noqa: E402  (tools/validate-gpu, beside this file)
from eb_pytorch_cuda import cudnn  # noqa: E402
from eb_pytorch_cuda.elf.patchelf import patchelf_binary  # noqa: E402
from eb_pytorch_cuda.elf.reader import read_elf  # noqa: E402
from eb_pytorch_cuda.loader.lddebug import compare_with_trace, failed_requests, trace_outcomes  # noqa: E402
from eb_pytorch_cuda.loader.resolve import HOST_LOADERS, Resolver  # noqa: E402
from eb_pytorch_cuda.patch import plan as patch_plan  # noqa: E402

WORKER = os.path.join(HERE, 'mixed_work.py')
REMOVE = ('libcudnn_cnn.so.9', 'libcudnn_heuristic.so.9', 'libcudnn_engines_precompiled.so.9', 'libcudnn_ops.so.9',
          'libcudnn_adv.so.9')


def run_phase(label, site, workdir, out_dir, preloads, loader_args=(), extra_env=None):
    """mixed_work.py in a clean interpreter under LD_DEBUG=files; its JSON result, the failed loads and the trace."""
    result_file = os.path.join(workdir, f'work-{label}.json')
    debug_dir = os.path.join(workdir, f'lddebug-{label}')
    os.makedirs(debug_dir, exist_ok=True)
    env = validate_gpu.clean_env({'LD_DEBUG': 'libs,files', 'CUDNN_LOGERR_DBG': '1', 'CUDNN_LOGDEST_DBG': 'stderr',
                                  'LD_DEBUG_OUTPUT': os.path.join(debug_dir, 'lddebug'),
                                  **(extra_env or {})})
    command = [*loader_args, sys.executable, '-I', '-S', WORKER, site, result_file, *preloads]
    start = time.time()
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    try:
        with open(result_file) as handle:
            result = json.load(handle)
    except (OSError, ValueError):
        result = {'crash': (done.stderr or '')[-3000:], 'workloads': {}}
    result.update(seconds=round(time.time() - start, 1), exit_code=done.returncode, command=command,
                  env=dict(extra_env or {}), stderr_tail=(done.stderr or '')[-6000:])
    lines = []
    for name in sorted(os.listdir(debug_dir)):
        with open(os.path.join(debug_dir, name), errors='replace') as handle:
            lines += [f'{name}: {line.rstrip()}' for line in handle]
    shutil.rmtree(debug_dir)
    with gzip.open(os.path.join(out_dir, f'lddebug-{label}.txt.gz'), 'wt') as handle:
        handle.write('\n'.join(lines) + '\n')
    result['ld_debug_failed'] = failed_requests(lines)
    outcomes = trace_outcomes(lines)
    result['ld_debug_cudnn_and_cuda'] = {name: outcome for name, outcome in outcomes.items()
                                         if name.startswith(('libcudnn', 'libnvrtc', 'libcublasLt'))}
    return result, lines


def doctor(library, paths, env=None, extra=()):
    done = subprocess.run([sys.executable, '-m', 'eb_pytorch_cuda', 'doctor', '--from', library, *paths, *extra,
                           '--format', 'json'], capture_output=True, text=True,
                          env=validate_gpu.clean_env({'PYTHONPATH': os.environ.get('PYTHONPATH', ''), **(env or {})}))
    try:
        data = json.loads(done.stdout)
    except ValueError:
        data = {'error': (done.stdout + done.stderr)[-3000:], 'findings': []}
    data['exit_code'] = done.returncode
    return data


def tarball_names(directory, version):
    """Name the prefix's files as NVIDIA's tarball does: libX.so.9.19.0, with libX.so.9 a symlink to it (so that
    the version of each file shows in its name, as in an EasyBuild cuDNN module and in Debian's packages)."""
    if not version:
        return
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if os.path.islink(path) or not name.endswith(f".so.{version.split('.')[0]}"):
            continue
        os.rename(path, f'{path}.{version.split(".", 1)[1]}')
        os.symlink(f'{name}.{version.split(".", 1)[1]}', path)


def set_runpath(patchelf, directory, value):
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if os.path.islink(path):
            continue
        subprocess.run([patchelf, '--set-rpath', value, path], check=True)  # RUNPATH: no --force-rpath


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--workdir', required=True)
    parser.add_argument('--out', required=True)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    site, torch_dir, cudnn_src = validate_gpu.locate_wheels()
    scratch_site, scratch_lib, cudnn_lib, rewritten = validate_gpu.build_layout(args.workdir, site, torch_dir,
                                                                                cudnn_src)
    library = os.path.join(scratch_lib, 'libtorch_cuda.so')
    major = cudnn.cudnn_major(read_elf(library).needed)
    version = cudnn.file_version(os.path.join(cudnn_src, f'libcudnn.so.{major}'))
    tarball_names(cudnn_lib, version)
    pristine = os.path.join(args.workdir, 'libtorch_cuda.so.unpatched')
    shutil.copy2(library, pristine)
    defaults, _absent = cudnn.filter_present(list(cudnn.DEFAULT_NEEDED[major]), [cudnn_lib])
    subprocess.run([sys.executable, '-m', 'eb_pytorch_cuda', 'add-needed', library, *defaults], check=True,
                   env=validate_gpu.clean_env({'PYTHONPATH': os.environ.get('PYTHONPATH', '')}))
    preloads = validate_gpu.driver_preloads(library)
    cache_ldconfig = subprocess.run(['ldconfig', '-p'], capture_output=True, text=True).stdout
    report = {'date': time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime()), 'site': site, 'cudnn_wheel_dir': cudnn_src,
              'cudnn_prefix': cudnn_lib, 'cudnn_files': sorted(os.listdir(cudnn_lib)), 'defaults_added': defaults,
              'cudnn_version_of_prefix': cudnn.file_version(os.path.join(cudnn_src, f'libcudnn.so.{major}')),
              'ldconfig_cudnn_nvrtc': [line.strip() for line in cache_ldconfig.splitlines()
                                       if 'libcudnn' in line or 'libnvrtc' in line],
              'rpath_rewritten': rewritten, 'phases': {}}
    paths = [scratch_lib, cudnn_lib]

    def phase(label, doctor_env=None, doctor_extra=(), **kwargs):
        prediction = doctor(library, paths, doctor_env, doctor_extra)
        result, lines = run_phase(label, scratch_site, args.workdir, args.out, preloads, **kwargs)
        result['doctor'] = prediction
        result['comparison'] = compare_with_trace(prediction.get('findings', ()), lines)
        report['phases'][label] = result
        print(label, json.dumps({k: v['ok'] for k, v in result.get('workloads', {}).items()}),
              'doctor exit', prediction['exit_code'], 'failed loads', sorted(result['ld_debug_failed']), flush=True)

    phase('baseline')
    aside = os.path.join(args.workdir, 'aside')
    os.makedirs(aside)
    for name in REMOVE:
        if not os.path.exists(os.path.join(cudnn_lib, name)):
            continue
        moved = [n for n in os.listdir(cudnn_lib) if n == name or n.startswith(name + '.')]  # file and symlink
        for item in moved:
            os.rename(os.path.join(cudnn_lib, item), os.path.join(aside, item))
        try:
            phase(f'without-{name}')
        finally:
            for item in moved:
                os.rename(os.path.join(aside, item), os.path.join(cudnn_lib, item))
    # nvrtc: cuDNN with RUNPATH=$ORIGIN, a loader without ld.so.cache
    patchelf = patchelf_binary()
    set_runpath(patchelf, cudnn_lib, '$ORIGIN')
    loader = next(p for p in HOST_LOADERS if os.path.exists(p))
    inhibit = [loader, '--inhibit-cache']
    driver = [p for p in (Resolver().resolve('libcuda.so.1', read_elf(library)).path,) if p]
    nvrtc = f'libnvrtc.so.{patch_plan._cuda_major(read_elf(library))}'
    nvrtc_dir = os.path.dirname(Resolver(ld_so_cache={}).resolve(nvrtc, read_elf(library)).path or '') or None
    report['nvrtc'] = {'loader': loader, 'driver_preloaded': driver, 'nvrtc_dir_from_torch_rpath': nvrtc_dir,
                       'libtorch_cuda_needs_nvrtc': [n for n in read_elf(library).needed if 'nvrtc' in n]}
    preloads[:] = driver  # the driver by path: the loader reads no cache now
    phase('nvrtc-unreachable', doctor_extra=('--ld-so-cache', 'none'), loader_args=inhibit)
    if nvrtc_dir:
        phase('nvrtc-ld-library-path', doctor_env={'LD_LIBRARY_PATH': nvrtc_dir},
              doctor_extra=('--ld-so-cache', 'none'), loader_args=inhibit, extra_env={'LD_LIBRARY_PATH': nvrtc_dir})
    plan = patch_plan.plan_library(library, patch_plan.Settings(), Resolver(ld_so_cache={}))
    report['nvrtc']['plan'] = {'add': plan.add, 'cuda_add': plan.cuda_add}
    if plan.cuda_add:
        subprocess.run([sys.executable, '-m', 'eb_pytorch_cuda', 'add-needed', library, *plan.cuda_add], check=True,
                       env=validate_gpu.clean_env({'PYTHONPATH': os.environ.get('PYTHONPATH', '')}))
    phase('nvrtc-hook-fix', doctor_extra=('--ld-so-cache', 'none'), loader_args=inhibit)
    with open(os.path.join(args.out, 'results.json'), 'w') as handle:
        json.dump(report, handle, indent=1)
    return 0


if __name__ == '__main__':
    sys.exit(main())
