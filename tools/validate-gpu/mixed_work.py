"""cudnn_work.py's workloads plus scaled-dot-product attention through cuDNN, for mixed_cudnn.py.

Run as `python -I -S mixed_work.py SITE RESULT.json [PRELOAD...]` (LD_LIBRARY_PATH as the caller sets it).
cuDNN's attention kernels are built at run time with NVRTC (its runtime-compiled engines), so this is the
workload that makes cuDNN dlopen() libnvrtc if any does; the convolutions and the LSTM are cudnn_work.py's.
Then libcudnn.so.9's version checks are called (cuDNN's own verdict on each sub-library, with its status).
"""

import ctypes
import json
import os
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cudnn_work  # noqa: E402


def sdpa(torch):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 8, 128, 64, dtype=torch.float64) for _ in range(3))
    reference = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
        out = torch.nn.functional.scaled_dot_product_attention(*(t.to('cuda', torch.bfloat16) for t in (q, k, v)))
    torch.cuda.synchronize()
    error = cudnn_work.max_relative_error(out, reference)
    if error > 3e-2:
        raise AssertionError(f'numerics off: max relative error {error:.3g}')
    return {'max_relative_error': error}


def version_checks():
    """cuDNN's own verdict on each sub-library: libcudnn.so.9's version-check entry points (each dlopen()s its
    sub-library if not loaded yet and checks its version), status and cudnnGetErrorString."""
    library = ctypes.CDLL('libcudnn.so.9')  # loaded by torch already: found by soname
    library.cudnnGetErrorString.restype = ctypes.c_char_p
    checks = {}
    for name in ('cudnnGraphVersionCheck', 'cudnnOpsVersionCheck', 'cudnnCnnVersionCheck', 'cudnnAdvVersionCheck',
                 'cudnnSubquadraticOpsVersionCheck'):
        try:
            status = int(getattr(library, name)())
        except AttributeError:
            checks[name] = None  # not exported by this cuDNN (9.19 has no cudnnSubquadraticOpsVersionCheck)
            continue
        checks[name] = [status, library.cudnnGetErrorString(status).decode('utf-8', 'replace')]
    return checks


def main():
    site, output = sys.argv[1], sys.argv[2]
    sys.path.insert(0, site)
    result = {'preloaded': sys.argv[3:], 'workloads': {}}
    for path in sys.argv[3:]:
        ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_GLOBAL)
    try:
        import torch
        result.update(torch=torch.__version__, cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version(),
                      gpu_available=torch.cuda.is_available())
        if torch.cuda.is_available():
            torch.backends.cudnn.allow_tf32 = False
            work = {'conv2d_fp32_fwd_bwd': lambda: cudnn_work.conv2d(torch, torch.float32, 1e-4),
                    'conv2d_bf16_fwd_bwd': lambda: cudnn_work.conv2d(torch, torch.bfloat16, 3e-2),
                    'conv3d_transpose': lambda: cudnn_work.conv3d_transpose(torch),
                    'lstm_2_layers': lambda: cudnn_work.lstm(torch),
                    'sdpa_cudnn_bf16': lambda: sdpa(torch)}
            for name, run in work.items():
                try:
                    result['workloads'][name] = {'ok': True, **run()}
                except Exception as err:  # noqa: BLE001 - every failure is a result to record
                    result['workloads'][name] = {'ok': False, 'error': f'{type(err).__name__}: {err}'.strip()[:2000]}
        result['version_checks'] = version_checks()
    except Exception:  # noqa: BLE001
        result['import_error'] = traceback.format_exc()[-3000:]
    result['mapped'] = [p for p in cudnn_work.mapped_files()
                        if os.path.basename(p).startswith(('libcudnn', 'libnvrtc', 'libcublasLt'))]
    with open(output, 'w') as handle:
        json.dump(result, handle, indent=1)


if __name__ == '__main__':
    main()
