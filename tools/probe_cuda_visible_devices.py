"""Ask a GPU node's driver which devices CUDA sees for each of a list of CUDA_VISIBLE_DEVICES values, beside what
nvidia-smi lists: the facts run/gpus.resolve implements, measured rather than read.

Run on a GPU node with any Python 3 (no torch needed: libcuda.so.1 through ctypes):
    python3 tools/probe_cuda_visible_devices.py > probe.json
Prints one JSON object: `q`, `q2`, `L`, `v` (nvidia-smi's answers: the query run/gpus makes, the same without
nounits and memory, -L, the driver's version), `L7` and `q7` (the same with CUDA_VISIBLE_DEVICES=7: nvidia-smi
ignores it), and `cvd`: for each value (its Python repr; 'None': unset), what a fresh process got:
`[cuInit's result, [[UUID, compute capability] of each device cuDeviceGetCount counts]]` (100:
CUDA_ERROR_NO_DEVICE, 101: CUDA_ERROR_INVALID_DEVICE).  The values are made from the first GPU's UUID.
tests/data/h200-cuda-visible-devices-probe.json is its answer on the H200 node (one GPU, driver 580.159.04),
made by this code passed to the device tool inline; tests/test_cuda_visible_devices.py replays it.
"""

import json
import os
import subprocess
import sys

QUERY = ['nvidia-smi', '--query-gpu=index,uuid,compute_cap,memory.total', '--format=csv,noheader,nounits']

# what one fresh process sees: cuInit's result and each counted device's UUID and compute capability
DEVICES = '''import ctypes as C,json
l=C.CDLL("libcuda.so.1");r=l.cuInit(0);n=C.c_int(0)
if r==0:l.cuDeviceGetCount(C.byref(n))
g=getattr(l,"cuDeviceGetUuid_v2",None) or l.cuDeviceGetUuid
d=[]
for i in range(n.value):
 h=C.c_int();l.cuDeviceGet(C.byref(h),i);b=(C.c_ubyte*16)();g(b,h);x=bytes(b).hex();a=C.c_int();m=C.c_int();\
l.cuDeviceGetAttribute(C.byref(a),75,h);l.cuDeviceGetAttribute(C.byref(m),76,h)
 d.append(["GPU-%s-%s-%s-%s-%s"%(x[:8],x[8:12],x[12:16],x[16:20],x[20:]),"%d.%d"%(a.value,m.value)])
print(json.dumps([r,d]))'''


def answer(argv, env=None):
    """[exit status, standard output, the end of standard error] of argv."""
    done = subprocess.run(argv, capture_output=True, text=True, env=env)
    return [done.returncode, done.stdout, done.stderr[-300:]]


def values(uuid):
    """The CUDA_VISIBLE_DEVICES values asked about (None: unset), from the first GPU's UUID."""
    return [None, '', '-1', '0', '1', '7', '0,7', '7,0', '0,0', '0,-1', '0,,0', ' 0', '0 ', '+0', '00', '0x1',
            '0gpu', 'a', uuid, uuid[:12], uuid[:5], 'GPU-', uuid[4:], uuid.upper(), 'GPU-zzzz', '0,' + uuid,
            uuid + ',0', uuid + ',' + uuid, uuid[:12] + ',7', 'MIG-' + uuid[4:], 'MIG-' + uuid + '/1/0',
            'gpu-' + uuid[4:], ' ' + uuid]


def main():
    seven = dict(os.environ, CUDA_VISIBLE_DEVICES='7')
    out = {'q': answer(QUERY),
           'q2': answer(['nvidia-smi', '--query-gpu=index,uuid,compute_cap', '--format=csv,noheader']),
           'L': answer(['nvidia-smi', '-L']),
           'v': answer(['nvidia-smi', '--query-gpu=driver_version,name', '--format=csv,noheader']),
           'L7': answer(['nvidia-smi', '-L'], seven), 'q7': answer(QUERY, seven)}
    uuid = out['q'][1].split(',')[1].strip()
    seen = {}
    for value in values(uuid):
        env = {name: text for name, text in os.environ.items() if name != 'CUDA_VISIBLE_DEVICES'}
        if value is not None:
            env['CUDA_VISIBLE_DEVICES'] = value
        done = answer([sys.executable, '-c', DEVICES], env)
        seen[repr(value)] = done[1].strip() or done[2]
    out['cvd'] = seen
    print(json.dumps(out, indent=1))


if __name__ == '__main__':
    main()
