"""The GPUs the suites run on: how many to spread parallel batches over, and their compute capabilities."""

import subprocess
from typing import List, Mapping, Optional

from eb_pytorch_cuda.testsuite.policy.judging import is_compute_capability


def visible_devices(env: Mapping[str, str]) -> Optional[List[str]]:
    """CUDA_VISIBLE_DEVICES as CUDA reads it: None where it is unset (every GPU), else its entries up to the first
    that names no device (an index, GPU-<uuid>, MIG-<uuid>): set empty, or to -1, it is [] and CUDA sees no GPU."""
    value = env.get('CUDA_VISIBLE_DEVICES')
    if value is None:
        return None
    entries = []
    for entry in (part.strip() for part in value.split(',')):
        if not (entry.isdigit() or entry.startswith(('GPU-', 'MIG-'))):
            break  # CUDA stops at the first invalid entry
        entries.append(entry)
    return entries


def gpu_count(env: Mapping[str, str]) -> List[str]:
    """GPUs to spread parallel suites over: CUDA_VISIBLE_DEVICES's devices if set (set empty: none), else
    nvidia-smi -L."""
    visible = visible_devices(env)
    if visible is not None:
        return visible
    try:
        listing = subprocess.run(['nvidia-smi', '-L'], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [str(i) for i, line in enumerate(listing.splitlines()) if line.startswith('GPU ')]


def slot_gpus(env: Mapping[str, str], slots: int) -> list:
    """The GPUs `slots` suites at a time are spread over (gpu_count), none when one runs at a time (it sees
    every GPU): the rule of the serial step's parallel batches and of each Slurm job's slots."""
    return gpu_count(env) if slots > 1 else []


def query_gpus(env: Mapping[str, str], field: str) -> List[str]:
    """`field` of each GPU the suites will run on, from `nvidia-smi --query-gpu=index,FIELD` (CUDA_VISIBLE_DEVICES
    applied when it lists indices; set empty, none); [] where no GPU can be seen.  The one reader of nvidia-smi's
    per-GPU answers (compute capabilities for the policy, memory for run/node)."""
    visible = visible_devices(env)
    if visible == []:
        return []  # CUDA sees no device, and neither may anything that asks here
    try:
        listing = subprocess.run(['nvidia-smi', f'--query-gpu=index,{field}', '--format=csv,noheader,nounits'],
                                 capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return []
    if listing.returncode != 0:
        return []
    by_index = visible is not None and all(v.isdigit() for v in visible)
    found = []
    for line in listing.stdout.splitlines():
        index, _, value = (part.strip() for part in line.partition(','))
        if not by_index or index in (visible or []):
            found.append(value)
    return found


def gpu_compute_capabilities(env: Mapping[str, str]) -> tuple:
    """Compute capabilities ('8.0', '9.0', sorted, once each) of the GPUs the suites will run on (query_gpus);
    () where no GPU can be seen.  Known failures scoped to a compute capability were seen on that hardware, so
    they apply to where the tests run, not to what the build was compiled for."""
    return tuple(sorted({value for value in query_gpus(env, 'compute_cap') if is_compute_capability(value)}))
