"""The GPUs the suites run on: the ones nvidia-smi lists, narrowed by CUDA_VISIBLE_DEVICES as CUDA narrows them,
for how many to spread parallel batches over, the CUDA device tests' mode and the compute capabilities the policy
is scoped to.  The one reader of nvidia-smi (gpu_view); resolve, the variable's rule, is pure.

Why: a value that names no GPU of this node (`7` on a node of one GPU, a GPU of another node's UUID, `0` on a
node without GPUs) leaves a CUDA process no device at all; counted as one GPU seen, the test step would turn the
CUDA device tests on for suites that can run none, and scope the policy to GPUs the suites never see.
nvidia-smi ignores the variable (measured on the H200 node: `CUDA_VISIBLE_DEVICES=7 nvidia-smi -L` lists its one
GPU), so its list is every GPU of the node and the variable is applied here; a set value where nvidia-smi gives
no list names no GPU.

The rule (NVIDIA's CUDA Programming Guide, "CUDA Environment Variables", CUDA_VISIBLE_DEVICES; the parts marked
"measured" are the H200 driver's own answers, 580.159.04, cuInit and cuDeviceGetCount in a fresh process for
each of 33 values: tests/data/h200-cuda-visible-devices-probe.json, made by tools/probe_cuda_visible_devices.py):
- unset: every GPU; set empty: none;
- a comma-separated sequence of one kind, the first entry's: indices (nvidia-smi's), `GPU-` UUIDs or `MIG-` UUIDs;
  an entry of another kind ends it (measured: `0,GPU-<the same GPU>` and `GPU-<it>,0` each see the one GPU);
- the sequence ends at the first entry that names no device: only the entries before it count (`0,2,-1,1`:
  0 and 2; measured: `0,7` sees GPU 0, `7,0` nothing, `0,-1` and `0,,0` GPU 0);
- an index is read as C's strtoul reads one (measured: ` 0`, `0 `, `+0`, `00`, `0x1`, `0gpu` are GPU 0; `a`,
  `-1` and an empty entry name none);
- a UUID may be cut to any prefix that names one device (`GPU-8932f937`); measured: its hex digits in either
  case, `GPU-` alone names none, the `GPU-` keyword itself only as written (`gpu-...` and ` GPU-...` name none);
- a `MIG-` UUID names the MIG device nvidia-smi -L lists under it, and only one MIG device is enumerated
  ("Only single MIG instance enumeration is supported"); measured with MIG off, `MIG-<a GPU's UUID digits>`
  names that GPU;
- a device named twice: none at all (measured: cuInit fails with CUDA_ERROR_INVALID_DEVICE for `0,0` and for a
  UUID given twice).
Indices are nvidia-smi's (PCI bus order); CUDA numbers the GPUs so only with CUDA_DEVICE_ORDER=PCI_BUS_ID
(its default, FASTEST_FIRST, can order a node of mixed GPUs otherwise).
"""

import re
import subprocess
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from eb_pytorch_cuda.testsuite.results.scopes import is_compute_capability

VARIABLE = 'CUDA_VISIBLE_DEVICES'
_GPU_LINE = re.compile(r'GPU (\d+): .*\(UUID: (GPU-[^)\s]+)\)')  # nvidia-smi -L: `GPU 0: NVIDIA H200 (UUID: GPU-...)`
_MIG_LINE = re.compile(r'\s+MIG .*\(UUID: (MIG-[^)\s]+)\)')  # under its GPU: `  MIG 1g.10gb Device 0: (UUID: MIG-...)`

GPU_KEYWORD = 'GPU-'
MIG_KEYWORD = 'MIG-'  # as long as GPU_KEYWORD: a UUID's digits follow either


@dataclass(frozen=True)
class ListedGpu:
    """One GPU as nvidia-smi lists it: its index, its UUID (`GPU-...`), the UUIDs of its MIG devices
    (`MIG-...`, from nvidia-smi -L; () where MIG is off or not asked), and the values of the fields asked."""

    index: str
    uuid: str
    migs: Tuple[str, ...] = ()
    values: Tuple[str, ...] = ()


@dataclass(frozen=True)
class VisibleGpu:
    """A device a CUDA process sees: the name that pins a process to it (CUDA_VISIBLE_DEVICES=name: the GPU's
    index, or the MIG device's UUID) and the GPU it is, or is part of."""

    name: str
    gpu: ListedGpu


def _index(entry: str) -> Optional[int]:
    """The index C's strtoul reads at the start of entry (leading blanks, a sign, decimal digits; what follows
    is ignored), None where it reads none or a negative one."""
    text = entry.lstrip()
    sign = text[:1] if text[:1] in '+-' else ''
    digits = ''
    for char in text[len(sign):]:
        if not ('0' <= char <= '9'):
            break
        digits += char
    if not digits:
        return None
    value = int(digits)
    return None if sign == '-' and value else value


def _by_prefix(entry: str, candidates: Sequence[Tuple[str, VisibleGpu]]) -> Optional[VisibleGpu]:
    """The one candidate whose UUID's digits (after its keyword, GPU- or MIG-) start with entry's, in either
    case; None where none or more than one does, or entry has no digits."""
    digits = entry[len(GPU_KEYWORD):].lower()
    if not digits:
        return None
    found = [device for uuid, device in candidates if uuid[len(GPU_KEYWORD):].lower().startswith(digits)]
    return found[0] if len(found) == 1 else None


def sees_none(value: Optional[str]) -> bool:
    """Whether value leaves CUDA no device whatever GPUs a node has: set empty, or its first entry neither a
    UUID nor an index (`-1`, `a`)."""
    if value is None or value.startswith((GPU_KEYWORD, MIG_KEYWORD)):
        return False
    return _index(value.split(',')[0]) is None


def resolve(value: Optional[str], gpus: Sequence[ListedGpu]) -> List[VisibleGpu]:
    """The devices a CUDA process sees, in its order, where CUDA_VISIBLE_DEVICES is value (None: unset) and
    nvidia-smi lists gpus (the module's rule)."""
    if value is None:
        return [VisibleGpu(gpu.index, gpu) for gpu in gpus]
    if value.startswith(GPU_KEYWORD):
        keyword = GPU_KEYWORD
        candidates = [(gpu.uuid, VisibleGpu(gpu.index, gpu)) for gpu in gpus]
    elif value.startswith(MIG_KEYWORD):
        keyword = MIG_KEYWORD
        candidates = [(mig, VisibleGpu(mig, gpu)) for gpu in gpus for mig in gpu.migs] + \
            [(gpu.uuid, VisibleGpu(gpu.index, gpu)) for gpu in gpus if not gpu.migs]
    else:
        keyword = ''
        candidates = []
    by_index = {gpu.index: gpu for gpu in gpus}
    seen: List[VisibleGpu] = []
    for entry in value.split(','):
        if keyword:
            device = _by_prefix(entry, candidates) if entry.startswith(keyword) else None
        else:
            index = _index(entry)
            gpu = by_index.get(str(index)) if index is not None else None
            device = VisibleGpu(gpu.index, gpu) if gpu else None
        if device is None:
            break  # CUDA stops at the first entry that names no device
        if device.name in (known.name for known in seen):
            return []  # a device named twice: cuInit fails, no device at all
        seen.append(device)
    return seen[:1] if keyword == MIG_KEYWORD else seen


@dataclass(frozen=True)
class GpuView:
    """What the suites see: the devices (visible), how many GPUs nvidia-smi listed (None: it gave no list, and
    why), and the CUDA_VISIBLE_DEVICES value that chose among them (None: unset)."""

    visible: Tuple[VisibleGpu, ...]
    listed: Optional[int]
    setting: Optional[str]
    problem: str = ''  # why nvidia-smi gave no list

    @property
    def names(self) -> List[str]:
        return [device.name for device in self.visible]

    def describe(self) -> str:
        """'1 GPU(s) seen (0)', or 'no GPU seen: ' and why."""
        if self.visible:
            return f"{len(self.visible)} GPU(s) seen ({', '.join(self.names)})"
        variable = f'{VARIABLE}={self.setting!r}'
        if sees_none(self.setting):
            return f'no GPU seen: {variable} (CUDA sees none)'
        if self.listed is None:
            return f'no GPU seen: {self.problem}' + (f' ({variable} names none)' if self.setting is not None else '')
        if self.setting is None:
            return 'no GPU seen: nvidia-smi lists none'
        return f'no GPU seen: {variable} names none of the {self.listed} GPU(s) nvidia-smi lists'


def _nvidia_smi(args: Sequence[str]) -> Tuple[Optional[str], str]:
    """nvidia-smi's standard output for args, or (None, why it gave none)."""
    try:
        done = subprocess.run(['nvidia-smi', *args], capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        return None, 'no nvidia-smi on PATH'
    except (OSError, subprocess.SubprocessError) as err:
        return None, f'nvidia-smi could not be run ({err})'
    if done.returncode != 0:
        said = (done.stdout.strip() or done.stderr.strip()).splitlines()
        return None, f"nvidia-smi exited {done.returncode}" + (f' ({said[0].strip()})' if said else '')
    return done.stdout, ''


def listed_gpus(fields: Sequence[str] = (), migs: bool = False) -> Tuple[Optional[List[ListedGpu]], str]:
    """Every GPU nvidia-smi lists (`--query-gpu=index,uuid,FIELDS --format=csv,noheader,nounits`), with the
    fields' values and, where migs, the UUIDs of its MIG devices (nvidia-smi -L); (None, why) where it gives no
    list (any non-zero exit: no driver, no GPU, a field this nvidia-smi does not know).  The fields are asked
    apart from the list that counts the GPUs, so an older nvidia-smi without `compute_cap` still counts them."""
    text, problem = _nvidia_smi([f"--query-gpu={','.join(('index', 'uuid', *fields))}",
                                 '--format=csv,noheader,nounits'])
    if text is None:
        return None, problem
    gpus = []
    for line in text.splitlines():
        parts = [part.strip() for part in line.split(',')]
        if len(parts) == 2 + len(fields) and parts[0].isdigit():
            gpus.append(ListedGpu(parts[0], parts[1], values=tuple(parts[2:])))
    if migs:
        found = mig_devices()
        gpus = [ListedGpu(gpu.index, gpu.uuid, tuple(found.get(gpu.index, ())), gpu.values) for gpu in gpus]
    return gpus, ''


def mig_devices() -> Dict[str, List[str]]:
    """{GPU index: the UUIDs of its MIG devices} from nvidia-smi -L, which lists each MIG device under its GPU."""
    text, _ = _nvidia_smi(['-L'])
    found: Dict[str, List[str]] = {}
    current = None
    for line in (text or '').splitlines():
        gpu, mig = _GPU_LINE.match(line), _MIG_LINE.match(line)
        if gpu:
            current = gpu.group(1)
        elif mig and current is not None:
            found.setdefault(current, []).append(mig.group(1))
    return found


def gpu_view(env: Mapping[str, str], fields: Sequence[str] = ()) -> GpuView:
    """The GPUs a CUDA process started with env sees (with the fields' values of each, where asked): nvidia-smi's
    list resolved by env's CUDA_VISIBLE_DEVICES (resolve); nvidia-smi is not asked where the value
    leaves CUDA no device on any node (sees_none: set empty, `-1`)."""
    setting = env.get(VARIABLE)
    if sees_none(setting):
        return GpuView((), None, setting)
    gpus, problem = listed_gpus(fields, migs=bool(setting and setting.startswith(MIG_KEYWORD)))
    if gpus is None:
        return GpuView((), None, setting, problem)
    return GpuView(tuple(resolve(setting, gpus)), len(gpus), setting)


def gpu_count(env: Mapping[str, str]) -> List[str]:
    """The GPUs the suites run on, by the name that pins a process to one (gpu_view): how many to spread
    parallel suites over, and which."""
    return gpu_view(env).names


def slot_gpus(env: Mapping[str, str], slots: int) -> list:
    """The GPUs `slots` suites at a time are spread over (gpu_count), none when one runs at a time (it sees
    every GPU): the rule of the serial step's parallel batches and of each Slurm job's slots."""
    return gpu_count(env) if slots > 1 else []


def query_gpus(env: Mapping[str, str], field: str) -> List[str]:
    """`field` of each GPU the suites will run on (gpu_view; a MIG device: its GPU's), [] where none is seen:
    compute capabilities for the policy, memory for run/node."""
    return [device.gpu.values[0] for device in gpu_view(env, (field,)).visible]


def gpu_compute_capabilities(env: Mapping[str, str]) -> tuple:
    """Compute capabilities ('8.0', '9.0', sorted, once each) of the GPUs the suites will run on (query_gpus);
    () where no GPU can be seen.  Known failures scoped to a compute capability were seen on that hardware, so
    they apply to where the tests run, not to what the build was compiled for."""
    return tuple(sorted({value for value in query_gpus(env, 'compute_cap') if is_compute_capability(value)}))
