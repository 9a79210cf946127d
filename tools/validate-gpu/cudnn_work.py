"""Real cuDNN work, run by validate_gpu.py in a fresh `python -I -S` with LD_LIBRARY_PATH unset.

Imports torch from the scratch site directory given on the command line (never from the machine's
own site-packages, so nothing can be preloaded from the pip nvidia/ packages), runs conv2d forward and
backward in fp32 and bf16 against a float64 CPU reference, conv3d-transpose, and a 2-layer LSTM, all
through cuDNN, and writes a JSON result: each workload's outcome or error, the versions, and which
cuDNN files the process really mapped.
"""

import ctypes
import json
import os
import sys
import traceback


def mapped_files():
    with open('/proc/self/maps') as maps:
        return sorted({line.split(None, 5)[5].strip() for line in maps if len(line.split(None, 5)) == 6
                       and line.split(None, 5)[5].startswith('/')})


def max_relative_error(result, reference):
    result = result.double().cpu()
    return float((result - reference).abs().max() / reference.abs().max().clamp_min(1e-12))


def conv2d(torch, dtype, tolerance):
    torch.manual_seed(0)
    x = torch.randn(8, 32, 40, 40, dtype=torch.float64)
    w = torch.randn(64, 32, 3, 3, dtype=torch.float64)
    reference_x, reference_w = x.clone().requires_grad_(), w.clone().requires_grad_()
    reference = torch.nn.functional.conv2d(reference_x, reference_w, padding=1)
    reference.sum().backward()
    gx = x.to('cuda', dtype).requires_grad_()
    gw = w.to('cuda', dtype).requires_grad_()
    out = torch.nn.functional.conv2d(gx, gw, padding=1)
    out.sum().backward()
    torch.cuda.synchronize()
    errors = {'forward': max_relative_error(out.detach(), reference.detach()),
              'grad_input': max_relative_error(gx.grad, reference_x.grad),
              'grad_weight': max_relative_error(gw.grad, reference_w.grad)}
    worst = max(errors.values())
    if worst > tolerance:
        raise AssertionError(f'numerics off: max relative error {worst:.3g} > {tolerance} ({errors})')
    return {'max_relative_error': errors, 'tolerance': tolerance}


def conv3d_transpose(torch):
    torch.manual_seed(0)
    x = torch.randn(2, 16, 8, 8, 8, dtype=torch.float64)
    w = torch.randn(16, 8, 3, 3, 3, dtype=torch.float64)
    reference = torch.nn.functional.conv_transpose3d(x, w, stride=2)
    out = torch.nn.functional.conv_transpose3d(x.cuda().float(), w.cuda().float(), stride=2)
    torch.cuda.synchronize()
    error = max_relative_error(out, reference)
    if error > 1e-4:
        raise AssertionError(f'numerics off: max relative error {error:.3g}')
    return {'max_relative_error': error}


def lstm(torch):
    torch.manual_seed(0)
    model = torch.nn.LSTM(input_size=32, hidden_size=64, num_layers=2).cuda()
    x = torch.randn(20, 4, 32, device='cuda', requires_grad=True)
    out, _ = model(x)
    out.sum().backward()
    torch.cuda.synchronize()
    reference_model = torch.nn.LSTM(input_size=32, hidden_size=64, num_layers=2).double()
    reference_model.load_state_dict({k: v.double().cpu() for k, v in model.state_dict().items()})
    reference, _ = reference_model(x.detach().double().cpu())
    error = max_relative_error(out.detach(), reference.detach())
    if error > 1e-4:
        raise AssertionError(f'numerics off: max relative error {error:.3g}')
    return {'max_relative_error': error, 'cudnn_rnn': True}


def main():
    site, output = sys.argv[1], sys.argv[2]
    preloads = sys.argv[3:]
    sys.path.insert(0, site)
    result = {'preloaded': preloads, 'workloads': {}}
    for path in preloads:  # the GPU driver only (libcuda.so.1), when the node finds it via LD_LIBRARY_PATH alone
        ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_GLOBAL)
    try:
        import torch
        result.update(torch=torch.__version__, torch_file=torch.__file__, cuda=torch.version.cuda,
                      cudnn=torch.backends.cudnn.version(), gpu_available=torch.cuda.is_available())
        if torch.cuda.is_available():
            result['gpu'] = torch.cuda.get_device_name(0)
            torch.backends.cudnn.enabled = True
            torch.backends.cudnn.allow_tf32 = False
            torch.backends.cuda.matmul.allow_tf32 = False
            work = {'conv2d_fp32_fwd_bwd': lambda: conv2d(torch, torch.float32, 1e-4),
                    'conv2d_bf16_fwd_bwd': lambda: conv2d(torch, torch.bfloat16, 3e-2),
                    'conv3d_transpose': lambda: conv3d_transpose(torch),
                    'lstm_2_layers': lambda: lstm(torch)}
            for name, run in work.items():
                try:
                    result['workloads'][name] = {'ok': True, **run()}
                except Exception as err:  # noqa: BLE001 - every failure is a result to record
                    result['workloads'][name] = {'ok': False, 'error': f'{type(err).__name__}: {err}'.strip()[:2000]}
    except Exception:  # noqa: BLE001
        result['import_error'] = traceback.format_exc()[-3000:]
    result['mapped_cudnn'] = [p for p in mapped_files() if 'libcudnn' in os.path.basename(p)]
    with open(output, 'w') as handle:
        json.dump(result, handle, indent=1)


if __name__ == '__main__':
    main()
