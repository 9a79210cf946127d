"""`eb-pytorch-cuda doctor`: predict "cannot open shared object file" and "undefined symbol" before users do.

It simulates, without running the loader, what glibc does when a process loads each root object
(with dlopen(), as Python loads torch), following docs/design.md section 1:
- the NEEDED closure, breadth first, each entry resolved from the object that needs it with the
  RPATH chain of the objects that loaded it as NEEDED; an object loaded by dlopen() starts a new
  chain; RUNPATH is never inherited; a soname already loaded wins;
- dlopen() targets: the object's .note.dlopen metadata, library names found as strings in its .rodata
  (cuDNN 9 stores them without version, e.g. "libcudnn_graph.so", and probes .so.9.19.0, .so.9.19,
  .so.9, .so in turn) and the cuDNN catalog's verified edges (cudnn.py, cudnn_catalog.json).  A target
  is only a finding when the file exists next to the opener or in
  a directory of the process, yet cannot be found from the opener (the cuDNN failure), or when it
  resolves to another copy than the one next to the opener (on an H200 image the search fell through
  to a system cuDNN of another version); names that exist nowhere are optional probes;
- undefined non-weak dynamic symbols that no object of the process defines (with the version the
  object requires from a named library);
- a NEEDED library or dlopen() target the loader fails on (truncated, not ELF, a corrupt dynamic table:
  what read_elf refuses, elf/tables.py), 'needed-corrupt' or 'dlopen-corrupt'; one it loads although its
  section headers contradict its dynamic section is loaded here too, its symbols unread ('symbols-unread');
- a soname that two objects would resolve to different files: only the first loaded is used;
- order hazards: an object loaded by dlopen() whose NEEDED entries it cannot find itself, only as objects
  an earlier dlopen() left loaded (cuDNN 8's sub-libraries in an RPATH-only layout: which order cuDNN
  opens them in decides whether the load works; verified on all 720 orders with the real loader).
  A hazard that an order PyTorch itself uses hits (the catalog's field orders, each with its evidence:
  cuDNN 8's ops_infer, cnn_infer, cnn_train of PyTorch's convolutions) is severity 'fails', not 'order';
- executable stacks: an object loaded by dlopen() whose PT_GNU_STACK asks for one, which glibc >= 2.41
  refuses (execstack.py; judged for the glibc --glibc names, else the executable's, else this machine's);
- a cuDNN sub-library the installation lacks that the search finds elsewhere (a system cuDNN in ld.so.cache:
  'sublibrary-elsewhere', with both versions and whether the loader or cuDNN's version check refuses it, as on
  the H200, docs/validation/gpu-mixed-cudnn.md); the CUDA libraries cuDNN dlopen()s itself (the catalog's
  cuda_dlopen, asked for with the CUDA major of the process); a target that exists only in a directory of the
  caller's LD_LIBRARY_PATH (never searched) is named as such.

Scope: the objects under the paths given are audited; what lies outside them (system directories, the
driver, ld.so.cache entries) is context: it is loaded and can be the cause (a system cuDNN that shadows
the installation's), but its own problems are not findings.  cuDNN's versioned probing is followed
(libX.so.9.19.0, libX.so.9.19, libX.so.9, libX.so, stopping at the first loaded or found name).
Symbols that no loaded object defines are presumed to come from the host program (perl, slurmd, python)
unless that program is named with --executable.

Each finding has a severity: 'fails' (the load fails), 'wrong-copy' (another copy than intended loads),
'order' (works or fails depending on load order, and no known caller's order fails), 'info'.  Only the
first two make the command exit 1.
"""

import functools
import json
import os
import re
import shlex
import stat
from dataclasses import asdict, dataclass, field

from typing import Callable, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

from eb_pytorch_cuda import cudnn
from eb_pytorch_cuda.elf.reader import ElfInfo, read_elf
from eb_pytorch_cuda.elf.symbols import ElfSymbols, SymbolTable
from eb_pytorch_cuda.errors import CorruptElf, PluginError
from eb_pytorch_cuda.inputs import require_regular
from eb_pytorch_cuda.loader import execstack
from eb_pytorch_cuda.loader.dlopen_note import dlopen_note_sonames
from eb_pytorch_cuda.loader.resolve import Resolver

_SHARED_OBJECT = re.compile(r'\.so(\.\d+)*$')
_INFO_CACHE: dict = {}


@functools.lru_cache(maxsize=None)
def _realpath(path):
    """os.path.realpath, once per path and run (an lstat per component each time was 7 % of doctor's time)."""
    return os.path.realpath(path)


def _read_elf(path, check_sections=True):
    """read_elf, once per file and run (a 739 MB library is read by several roots and resolutions)."""
    try:
        stat_key = os.stat(path)
    except OSError:
        return read_elf(path)  # raises the one-line error
    key = (_realpath(path), path, stat_key.st_mtime_ns, stat_key.st_size, check_sections)
    if key not in _INFO_CACHE:
        _INFO_CACHE[key] = read_elf(path, check_sections=check_sections)
    return _INFO_CACHE[key]


_SYSTEM_VIA = ('ld.so.cache', 'system directories')

SEVERITY_OF_KIND = {'needed-unresolved': 'fails', 'dlopen-unresolved': 'fails', 'undefined-symbol': 'fails',
                    'needed-corrupt': 'fails', 'dlopen-corrupt': 'fails', 'symbols-unread': 'info',
                    'dlopen-shadowed': 'wrong-copy', 'soname-conflict': 'wrong-copy', 'order-hazard': 'order',
                    'sublibrary-elsewhere': 'wrong-copy',
                    'execstack': 'fails', 'skipped': 'info', 'started': 'info'}
SEVERITIES = ('fails', 'wrong-copy', 'order', 'info')
BLOCKING = ('fails', 'wrong-copy')  # the exit status is 1 only for these


@dataclass
class Finding:
    kind: str  # one of SEVERITY_OF_KIND
    root: str
    object: str
    message: str
    details: dict = field(default_factory=dict)
    severity: str = ''
    fix: Optional[list] = None  # [library to patch, soname to add as NEEDED], when a NEEDED entry fixes it
    command: Optional[str] = None  # a fix that is not a NEEDED entry (clearing an executable-stack flag)

    def __post_init__(self):
        self.severity = self.severity or SEVERITY_OF_KIND[self.kind]


@dataclass
class Loaded:
    info: ElfInfo
    path: str
    chain: list  # objects that loaded it as NEEDED, nearest first ([] when loaded by dlopen())
    how: str  # 'root', 'needed by X', 'dlopen() by X'
    optional: bool = False  # loaded by dlopen() (or under such an object): its failure is the opener's to handle
    broken: bool = False  # a NEEDED entry of it does not resolve
    parent: Optional['Loaded'] = None  # the Loaded entry that needed or dlopen()ed it
    transaction: int = 0  # 0: loaded at start-up; n: by the n-th simulated dlopen()
    context: bool = False  # found through ld.so.cache/system directories (or loaded by such an object)
    symbols_unread: bool = False  # loads, but its section headers contradict its dynamic section: symbols unknown


def _major_suffix(soname):
    match = re.search(r'\.so\.(\d+)', soname or '')
    return match.group(1) if match else None


def _full_version(info):
    """'9.19.0' for a cuDNN 9 file installed as libX.so.9.19.0 (the tarball layout), else None."""
    match = re.search(r'\.so\.(\d+\.\d+\.\d+)$', _realpath(info.path))
    return match.group(1) if match else None


def dlopen_requests(info: ElfInfo, names_of: Callable[[str], Iterable[str]],
                    notes_of: Callable[[str], Iterable[str]] = lambda path: (),
                    cuda_major: Optional[int] = None) -> List[Tuple[str, List[str]]]:
    """What an object may ask dlopen() for: [(soname, [names asked for, in order])].

    Sources: the object's .note.dlopen metadata, the cuDNN catalog's verified edges (to its sub-libraries
    and to the CUDA libraries it opens), library names in its .rodata.  An unversioned name (cuDNN 9 keeps
    "libcudnn_graph.so") gets the opener's major version, the name of a CUDA library ("libnvrtc.so") the
    CUDA major version of the process (cuda_major; skipped when unknown); cuDNN names are probed the way
    cuDNN does (full version first, then shorter, then the bare .so)."""
    major = _major_suffix(info.soname)
    version = _full_version(info)
    names = list(notes_of(info.path)) + list(cudnn.DLOPEN_EDGES.get(info.soname, ())) + \
        list(cudnn.CUDA_DLOPEN.get(info.soname, ())) + sorted(names_of(info.path))
    requests = {}
    for name in names:
        if name in cudnn.CUDA_LIBRARIES:
            label = cudnn.cuda_soname(name, cuda_major)
            if label and label not in info.needed and label not in requests:
                requests[label] = [label]  # asked for with the CUDA major only (the H200 trace)
            continue
        label = f'{name}.{major}' if major and name.endswith('.so') else name
        if label in info.needed or label == info.soname or name in info.needed or label in requests:
            continue
        probes = cudnn.probe_names(label, version)
        if name not in probes:
            probes.append(name)
        requests[label] = probes
    return sorted(requests.items())


class Process:
    """The simulated process of one root object."""

    def __init__(self, root, resolver, cache, executable=None, audited=(), hint_dirs=()):
        self.resolver, self.cache, self.executable = resolver, cache, executable
        self.hint_dirs = [d for d in hint_dirs if d]  # LD_LIBRARY_PATH of doctor's caller: where files may lie
        self.audited = sorted({_realpath(p) for p in audited} | {os.path.abspath(p) for p in audited})
        self.objects = []  # Loaded, in load order
        self.by_soname: dict = {}
        self.by_path: dict = {}
        self.findings = []
        self.hazards = {}  # Loaded (dlopen()ed) -> sonames it needs that only an earlier dlopen() left loaded
        self.transactions = 0
        self.deferred = []  # (Loaded under a dlopen(), soname, Resolution): NEEDED not found, judged at the end
        self.elsewhere = {}  # (id(Loaded), soname) -> the other copy it would take itself: 'path (via)'
        self.root = root
        if executable:
            self._load(executable, [], 'executable', load_needed=True)
        self.startup = set(self.by_path)  # the program's own start-up closure (an executable stack is allowed there)
        self._load(root, [], 'root', load_needed=True)

    def _key(self, path):
        return _realpath(path)

    def cuda_major(self) -> Optional[int]:
        """The CUDA major version of the process: from the libcudart.so.N (else libcublas.so.N) it loaded."""
        for stem in ('libcudart.so.', 'libcublas.so.'):
            for soname in self.by_soname:
                if soname.startswith(stem) and soname[len(stem):].isdigit():
                    return int(soname[len(stem):])
        return None

    def audited_entry(self, entry: Loaded) -> bool:
        """True for an object that is audited: under the paths given, or a cuDNN library the installation's
        own RPATH/RUNPATH reaches (cuDNN is what this tool exists for, and is often a prefix of its own).
        Everything else is context: loaded and able to cause a finding (a system cuDNN that shadows the
        installation's), but its own problems are not findings."""
        if self.inside(entry.path):
            return True
        name = entry.info.soname or os.path.basename(entry.path)
        return not entry.context and cudnn.is_cudnn(name)

    def inside(self, path: str) -> bool:
        """True for an object under the paths being audited (everything else is context)."""
        if not self.audited:
            return True
        for candidate in {_realpath(path), os.path.abspath(path)}:
            if any(candidate == top or candidate.startswith(top.rstrip('/') + '/') for top in self.audited):
                return True
        return False

    def _load(self, info, chain, how, load_needed, parent=None, context=False):
        entry = Loaded(info, info.path, chain, how, optional=how.startswith('dlopen'), parent=parent,
                       context=context)
        if how.startswith('dlopen'):
            self.transactions += 1
            entry.transaction = self.transactions
        self.objects.append(entry)
        self.by_path[self._key(info.path)] = entry
        self.by_soname.setdefault(info.soname or os.path.basename(info.path), entry)
        if load_needed:
            self._needed_closure(entry)
        return entry

    def _needed_closure(self, start):
        queue = [start]
        while queue:
            current = queue.pop(0)
            audited = self.audited_entry(current)
            for soname in current.info.needed:
                chain = [current.info] + current.chain
                own = self.resolver.resolve(soname, current.info, loader_chain=chain,
                                            executable=self.executable)
                loaded = self.by_soname.get(soname)
                if loaded is not None:
                    earlier_dlopen = current.optional and loaded.transaction not in (0, start.transaction)
                    if own.found and own.via in _SYSTEM_VIA and self._key(own.path) != self._key(loaded.path):
                        # glibc takes the loaded object before any search: only an object that could not be
                        # loaded yet (an earlier dlopen() brought it) would let the system's copy in instead
                        if earlier_dlopen:
                            self.hazards.setdefault(id(current), (current, []))[1].append(soname)
                            self.elsewhere[(id(current), soname)] = f'{own.path} ({own.via})'
                    elif own.found and self._key(own.path) != self._key(loaded.path):
                        if audited:
                            self.findings.append(Finding(
                                'soname-conflict', self.root.path, current.info.path,
                                f'{soname}: {current.info.path} would load {own.path} ({own.via}), but '
                                f'{loaded.path} is already loaded ({loaded.how}) and is used instead',
                                {'soname': soname, 'wanted': own.path, 'used': loaded.path}))
                    elif not own.found and earlier_dlopen:
                        # found only because an earlier dlopen() left it loaded: fails in another order
                        self.hazards.setdefault(id(current), (current, []))[1].append(soname)
                    continue
                if not own.found:
                    current.broken = True  # it cannot load: its symbols are not checked
                    if not audited or (current.optional and not self._exists_nearby(soname, current)):
                        continue  # context, or an optional component whose optional system dependency is absent
                    if current.optional:
                        self.deferred.append((current, soname, own))  # a later dlopen() may load it: see the end
                        continue
                    self.findings.append(Finding(
                        'needed-unresolved', self.root.path, current.info.path,
                        f"{current.info.path}: NEEDED {soname} not found without LD_LIBRARY_PATH "
                        f"(searched: {', '.join(own.tried) or 'nothing'})",
                        {'soname': soname, 'searched': own.tried}))
                    continue
                if self._key(own.path) in self.by_path:
                    continue
                main = self._foreign_needed(soname, own, current, chain) if audited and not current.context \
                    and own.via in _SYSTEM_VIA else None
                if main:
                    self.findings.append(self._elsewhere_finding(soname, current, own, main))
                info, unread = self._read_object(own.path, soname, audited, lambda problem, path=own.path: Finding(
                    'needed-corrupt', self.root.path, current.info.path,
                    f'{current.info.path}: NEEDED {soname} resolves to {path}, which {problem}: the load fails',
                    {'soname': soname, 'path': path, 'problem': problem}))
                if info is None:
                    current.broken = True  # it cannot load: its symbols are not checked
                    continue
                entry = self._load(info, chain, f'needed by {current.info.path}', load_needed=False, parent=current)
                entry.optional, entry.transaction = current.optional, start.transaction
                entry.symbols_unread = unread
                entry.context = current.context or own.via in _SYSTEM_VIA
                queue.append(entry)

    def _read_object(self, path, soname, audited, failure):
        """(ElfInfo, symbols unread) of the object at path that the process would load, or (None, False) when
        the loader fails on it (then the Finding failure(problem) is recorded, if audited).

        What read_elf refuses, the real loader fails on too (truncated: SIGBUS or "cannot read file data",
        a corrupt dynamic table: SIGSEGV, an assertion or undefined symbols; docs/design.md section 11).
        The one exception is section headers that contradict the dynamic section (CorruptElf.loader_fails
        False): the loader never reads them and loads the file; it is loaded here too, its symbols unread
        (the sections are all there is to read them by), with a 'symbols-unread' note."""
        try:
            return _read_elf(path), False
        except CorruptElf as err:
            if not err.loader_fails:
                info = _read_elf(path, check_sections=False)
                if audited:
                    self.findings.append(Finding(
                        'symbols-unread', self.root.path, path,
                        f'{path}: loads (the loader reads only its dynamic section), but its symbols were not '
                        f'checked: it {err.problem}', {'soname': soname, 'problem': err.problem}))
                return info, True
            problem = err.problem
        except PluginError as err:
            problem = err.problem
        if audited:
            self.findings.append(failure(problem))
        return None, False

    def _request(self, probes, opener):
        """Ask for each name in turn, as cuDNN does: ('loaded', Loaded) | ('found', Resolution) | ('missing', tried)."""
        tried = []
        for probe in probes:
            if probe in self.by_soname:
                return 'loaded', self.by_soname[probe]
            result = self.resolver.resolve(probe, opener.info, loader_chain=opener.chain, executable=self.executable)
            if result.found:
                if self._key(result.path) in self.by_path:
                    return 'loaded', self.by_path[self._key(result.path)]
                return 'found', result
            tried += [d for d in result.tried if d not in tried]
        return 'missing', tried

    def simulate_dlopens(self) -> None:
        """Follow dlopen() targets of every audited loaded object until nothing new loads."""
        index = 0
        while index < len(self.objects):
            opener = self.objects[index]
            index += 1
            if not self.audited_entry(opener) or opener.symbols_unread:
                continue  # what the driver or a system library dlopen()s is not ours to audit; unreadable
            pending, vias, unreadable = [], {}, set()
            for target, probes in dlopen_requests(opener.info, self.cache.names, self.cache.notes, self.cuda_major()):
                after = cudnn.OPENED_AFTER.get(target)
                if after and not any(name in self.by_soname for name in after):
                    continue  # cuDNN opens it only once one of those loaded (LD_DEBUG on an H200)
                state, value = self._request(probes, opener)
                if state == 'loaded':
                    continue  # already loaded: glibc returns it
                if state == 'missing':
                    existing = next(filter(None, (self._exists_nearby(p, opener) for p in probes)), None)
                    if existing:
                        self.findings.append(self._dlopen_finding(target, opener, existing, value))
                    continue
                own_copy = next((os.path.join(os.path.dirname(opener.path), p) for p in probes
                                 if os.path.isfile(os.path.join(os.path.dirname(opener.path), p))), None)
                if own_copy and self._key(own_copy) != self._key(value.path):
                    self.findings.append(self._shadow_finding(target, opener, own_copy, value))
                    continue  # the real dlopen() maps that copy; what it then does is not this installation's
                if own_copy is None and self._foreign_sublibrary(target, opener, value):
                    self.findings.append(self._elsewhere_finding(target, opener, value))
                    continue  # cuDNN refuses the copy of another version; a copy of this one is still not ours
                info, unread = self._read_object(value.path, target, True, lambda problem, path=value.path: Finding(
                    'dlopen-corrupt', self.root.path, opener.info.path,
                    f'{opener.info.path}: dlopen() of {target} would load {path}, which {problem}: it fails',
                    {'soname': target, 'path': path, 'problem': problem}))
                if info is None:
                    continue
                pending.append(info)
                if unread:
                    unreadable.add(self._key(value.path))
                vias[self._key(value.path)] = value.via
            for info in _dependencies_first(pending):
                if self._key(info.path) not in self.by_path and (info.soname or '') not in self.by_soname:
                    entry = self._load(info, [], f'dlopen() by {opener.info.path}', load_needed=True, parent=opener,
                                       context=vias.get(self._key(info.path)) in _SYSTEM_VIA)
                    entry.symbols_unread = self._key(info.path) in unreadable
        self._hazard_findings()

    def _hazard_findings(self):
        created = {}  # soname -> its order-hazard Finding
        for current, soname, own in self.deferred:
            loaded = self.by_soname.get(soname)
            if loaded is not None and loaded.transaction > 0:
                self.hazards.setdefault(id(current), (current, []))[1].append(soname)
                current.broken = False
                continue
            self.findings.append(Finding(
                'needed-unresolved', self.root.path, current.info.path,
                f"{current.info.path}: NEEDED {soname} not found without LD_LIBRARY_PATH "
                f"(searched: {', '.join(own.tried) or 'nothing'})", {'soname': soname, 'searched': own.tried}))
        for current, needs in self.hazards.values():
            needs.sort(key=current.info.needed.index)
            if not self.audited_entry(current):
                continue
            top = current
            while top.parent is not None and not top.how.startswith('dlopen'):
                top = top.parent
            soname = current.info.soname or os.path.basename(current.path)
            patchable = self._fix_candidate(soname, current, current.path)
            fix = (f'; adding it as NEEDED of {patchable.path} loads it and its dependencies at start-up: '
                   f'eb-pytorch-cuda add-needed {patchable.path} {soname}') if patchable else ''
            opener = top.parent.path if top.parent is not None else '?'
            others = {n: self.elsewhere[(id(current), n)] for n in needs if (id(current), n) in self.elsewhere}
            them = 'they were' if len(needs) > 1 else 'it was'
            if others:
                found = ', '.join(f'{n} as {where}' for n, where in others.items())
                what = (f"finds its NEEDED {', '.join(needs)} itself only outside the installation ({found}; no "
                        f"RPATH chain inherited, no RUNPATH of its own): it gets the installation's copies only "
                        f"once {them} opened by an earlier dlopen(), and the other ones in any other order")
            else:
                what = (f"cannot find its NEEDED {', '.join(needs)} itself (no RPATH chain inherited, no RUNPATH "
                        f"of its own): its dlopen() works only once {them} opened by an earlier dlopen(), and "
                        f"fails in any other order")
            created[soname] = Finding(
                'order-hazard', self.root.path, current.path, f"{soname}, dlopen()ed by {opener}, {what}{fix}",
                {'soname': soname, 'needs_first': list(needs), 'opener': opener, 'elsewhere': others},
                fix=[patchable.path, soname] if patchable else None)
            self.findings.append(created[soname])
        self._field_orders(created)

    @staticmethod
    def _field_orders(created):
        """An order hazard that an order a known caller uses (the catalog's field orders) hits fails: severity
        'fails', with the caller named; the others stay 'order' (no known caller opens them that way)."""
        hazards = {soname: finding.details['needs_first'] for soname, finding in created.items()}
        for order in cudnn.FIELD_ORDERS:
            hit = first_failure(order.opens, hazards)
            if hit is None or created[hit[0]].severity == 'fails':
                continue
            finding = created[hit[0]]
            finding.severity = 'fails'
            finding.message += (f"; the order {order.caller} use ({', '.join(order.opens)}) hits it: this load "
                                f"fails for want of {hit[1]} (seen in the field: {order.failure})")
            finding.details['field_order'] = {'caller': order.caller, 'opens': list(order.opens),
                                              'missing': hit[1], 'evidence': order.evidence}

    def check_execstack(self, target: execstack.TargetGlibc) -> None:
        """Objects loaded by dlopen() (not the program's own start-up closure) that ask for an executable stack:
        glibc >= 2.41 refuses to load them, and with them the whole dlopen() of the root.  Context objects (outside
        the paths given) count too: their refusal fails the root's load as much as an audited object's.  A program
        whose start-up closure (itself or a NEEDED object) asks for an executable stack has one from the start:
        then glibc 2.41's dlopen() accepts them (measured)."""
        if any(execstack.needs_execstack(e.info) for e in self.objects if self._key(e.path) in self.startup):
            return
        for entry in self.objects:
            if self._key(entry.path) in self.startup or not execstack.needs_execstack(entry.info):
                continue
            why = ('PT_GNU_STACK flags RWE' if entry.info.stack_flags is not None else
                   'no PT_GNU_STACK header: an executable stack by default on x86')
            if not self.audited_entry(entry):
                why += ', outside the paths given'
            details = {'path': entry.path, 'stack_flags': entry.info.stack_flags, 'glibc': target.label}
            if not target.refuses_execstack:
                self.findings.append(Finding(
                    'execstack', self.root.path, entry.path,
                    f'{entry.path}: asks for an executable stack ({why}): loads under {target.label}, but glibc '
                    f"2.41 and later refuse to dlopen() it", details, severity='info'))
                continue
            new = entry.path + '.execstack-cleared'
            command = (f'cp -p {shlex.quote(entry.path)} {shlex.quote(new)} && patchelf --clear-execstack '
                       f'{shlex.quote(new)} && mv {shlex.quote(new)} {shlex.quote(entry.path)}')
            self.findings.append(Finding(
                'execstack', self.root.path, entry.path,
                f"{entry.path}: asks for an executable stack ({why}): {target.label} refuses to dlopen() it "
                f"('cannot enable executable stack as shared object requires: Invalid argument'), and with it "
                f"the load of {self.root.path}; if it does not need one, clear the flag on a copy "
                f"(patchelf --clear-execstack), else run with {execstack.TUNABLE}", details, command=command))

    def _foreign_sublibrary(self, target, opener, result):
        """True when a cuDNN library dlopen()s a sub-library of its own family that its installation lacks, and
        the search finds one outside the installation's directory (ld.so.cache, a system directory)."""
        name = opener.info.soname or os.path.basename(opener.path)
        return (cudnn.is_cudnn(name) and cudnn.is_cudnn(target) and _major_suffix(target) == _major_suffix(name)
                and os.path.dirname(self._key(result.path)) != os.path.dirname(self._key(opener.path)))

    def _foreign_needed(self, soname, result, current, chain):
        """For a NEEDED cuDNN sub-library that resolves outside the directory the libcudnn.so.N of the same object
        resolves to: that libcudnn.so.N (the installation's cuDNN); else None."""
        if not cudnn.is_cudnn(soname) or soname.startswith('libcudnn.so'):
            return None
        main_name = f'libcudnn.so.{_major_suffix(soname)}'
        main = self.by_soname.get(main_name)
        path = main.path if main is not None else self.resolver.resolve(
            main_name, current.info, loader_chain=chain[1:], executable=self.executable).path
        if path and os.path.dirname(self._key(result.path)) != os.path.dirname(self._key(path)):
            return path
        return None

    def _elsewhere_finding(self, target, opener, result, family=None):
        """The wrong-copy case of pytorch/pytorch#185512: an installation missing a sub-library that a system cuDNN
        of another version provides: the copy does not fit the installation's other sub-libraries (on the H200,
        9.14's libcudnn_heuristic.so.9 beside 9.19's libcudnn_graph.so.9: an undefined symbol of version
        libcudnn_graph.so.9, the dlopen() fails and PyTorch's convolutions find no engine; cuDNN's own version
        check reports CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH where such a copy loads).
        family: the path of the installation's libcudnn.so.N whose directory and version count (default: the
        opener's)."""
        family = family or opener.path
        ours, theirs = cudnn.file_version(family), cudnn.file_version(result.path)
        directory = os.path.dirname(family)
        lacking = self._lacking_symbols(result.path) if family == opener.path else []
        if family != opener.path:  # a NEEDED entry: its own NEEDED cuDNN entries may come from the system too
            refused = ("it loads at start-up and may bring the system's copies of the sub-libraries it needs before "
                       "the installation's (see the soname conflicts and undefined symbols reported with it)")
        elif lacking:
            name, version, library = lacking[0]
            refused = (f"the real loader refuses it: it needs {name.decode('utf-8', 'replace')}@{version}, which the "
                       f"loaded {library} lacks (undefined symbol), so the dlopen() fails and cuDNN reports the "
                       f"sub-library unavailable (CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE)")
        else:
            refused = ("it loads, and cuDNN's version check refuses it (CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH); "
                       "PyTorch's calls that need it fail")
        if ours and theirs and ours != theirs:
            outcome = f"cuDNN {theirs} beside the installation's {ours}: {refused}"
        elif ours and theirs:
            outcome = f'a copy of the same version {ours}, from outside the installation'
        else:
            outcome = (f"a copy from outside the installation (version {theirs or 'unknown'}, the installation's "
                       f"{ours or 'unknown'}); of another version, {refused}")
        how = 'dlopen()ed' if family == opener.path else 'NEEDED'
        return Finding('sublibrary-elsewhere', self.root.path, opener.path,
                       f'{target}, {how} by {opener.path}, is missing from the installation ({directory}) and '
                       f'resolves to {result.path} ({result.via}): {outcome}; install the complete cuDNN '
                       f'{ours or ""}'.rstrip() + ' (every sub-library of the catalog that the version ships)',
                       {'soname': target, 'opener': opener.path, 'resolved': result.path, 'via': result.via,
                        'version': ours, 'resolved_version': theirs, 'missing_from': directory,
                        'outcome': 'start-up' if family != opener.path else
                        'undefined-symbol' if lacking else 'version-mismatch'})

    def _lacking_symbols(self, path):
        """[(name, version, library)] that the object at path needs, with a version, from a cuDNN library already
        loaded which does not define it in that version: the real loader's 'undefined symbol' for a copy of another
        cuDNN version mapped beside the installation's (9.14's heuristic beside 9.19's graph on the H200)."""
        lacking = []
        for name, version, library in self.cache.symbols(path).undefined:
            supplier = self.by_soname.get(library) if version and cudnn.is_cudnn(library) else None
            if supplier is not None and version not in self.cache.symbols(supplier.path).defined.get(name, ()):
                lacking.append((name, version, library))
        return lacking

    def _exists_nearby(self, name, opener):
        directories = [os.path.dirname(opener.path)] + [os.path.dirname(o.path) for o in self.objects] + \
            self.hint_dirs
        for directory in dict.fromkeys(directories):
            candidate = os.path.join(directory, name)
            if os.path.isfile(candidate):
                return candidate
        return None

    def _dlopen_finding(self, target, opener, existing, tried):
        inherited = 'inherits no RPATH chain (it was itself loaded by dlopen())' if not opener.chain else \
            'inherits the RPATH chain of ' + ', '.join(o.path for o in opener.chain)
        if opener.info.runpath:
            inherited = 'has a RUNPATH of its own (glibc then uses no RPATH of the objects that loaded it)'
        fix = ''
        patchable = self._fix_candidate(target, opener, existing)
        if patchable:
            fix = (f'; adding it as NEEDED of {patchable.path} fixes it: '
                   f'eb-pytorch-cuda add-needed {patchable.path} {target}')
        if os.path.dirname(existing) in self.hint_dirs and not patchable:
            fix = (f'; {os.path.dirname(existing)} is reached only through LD_LIBRARY_PATH, which an RPATH-linked '
                   f'installation does not set: add it to the RPATH of a library loaded at start-up that '
                   f'loads {opener.path}, or {target} as its NEEDED entry once it resolves there')
        return Finding('dlopen-unresolved', self.root.path, opener.path,
                       f"{target}, dlopen()ed by {opener.path}, will not be found: the opener {inherited} "
                       f"(searched: {', '.join(tried) or 'nothing'}), although {existing} exists{fix}",
                       {'soname': target, 'opener': opener.path, 'exists': existing, 'searched': tried},
                       fix=[patchable.path, target] if patchable else None)

    def _shadow_finding(self, target, opener, own_copy, result):
        patchable = self._fix_candidate(target, opener, own_copy)
        fix = (f'; adding {target} as NEEDED of {patchable.path} loads the right one first: '
               f'eb-pytorch-cuda add-needed {patchable.path} {target}') if patchable else ''
        return Finding('dlopen-shadowed', self.root.path, opener.path,
                       f'{target}, dlopen()ed by {opener.path}, resolves to {result.path} ({result.via}), not to '
                       f'{own_copy} next to it: a different copy (version mix){fix}',
                       {'soname': target, 'opener': opener.path, 'resolved': result.path, 'expected': own_copy},
                       fix=[patchable.path, target] if patchable else None)

    def _fix_candidate(self, target, opener, existing):
        """The nearest object up the loading ancestry, loaded at start-up and outside the target's own
        package directory (cuDNN itself may not be patched), whose search path finds the target:
        a NEEDED entry there maps the target at load time, and the later dlopen() finds it loaded."""
        package = os.path.dirname(_realpath(existing))
        entry = opener.parent
        while entry is not None:
            name = entry.info.soname or os.path.basename(entry.path)
            if not entry.optional and os.path.dirname(_realpath(entry.path)) != package \
                    and not cudnn.is_cudnn(name) and self.audited_entry(entry):
                if self.resolver.resolve(target, entry.info, loader_chain=entry.chain).found:
                    return entry
            entry = entry.parent
        return None

    def check_symbols(self) -> None:
        """Undefined non-weak symbols of every audited loaded object that nothing in the process defines.

        Without a named executable, a symbol nothing defines, that carries no version and matches no
        library the object needs, is taken to come from the host program (a plugin's symbols: perl's
        re.so, Slurm plugins, Python extensions) and not reported."""
        tables = [(entry, SymbolTable() if entry.symbols_unread else self.cache.symbols(entry.path))
                  for entry in self.objects]
        every_name = set().union(*(table.defined for _, table in tables))
        by_library = {id(entry): table for entry, table in tables}
        unread = {entry.info.soname or os.path.basename(entry.path) for entry in self.objects if entry.symbols_unread}

        def provided(name: bytes, version: str, library: str) -> bool:
            if unread and (library in unread or not library):
                return True  # it may come from an object whose symbols could not be read: not claimed missing
            if name not in every_name:
                return False
            if not (version and library):
                return True
            named = self.by_soname.get(library)
            if named is not None and version in by_library.get(id(named), SymbolTable()).defined.get(name, ()):
                return True  # the usual case, checked first: the library the version belongs to defines it
            return any(version in table.defined.get(name, ()) for _, table in tables)
        for entry, table in tables:
            if entry.broken or entry.symbols_unread or not self.audited_entry(entry):
                continue  # a NEEDED library is missing or corrupt (that is the failure), unreadable, or context
            for name, version, library in table.undefined:
                if provided(name, version, library):
                    continue
                supplier = self.by_soname.get(library) if library else self._supplier_by_name(entry, name)
                if library and supplier is None:
                    continue  # that library is missing: reported as such (or an optional one, not an error)
                if supplier is None and not version and self.executable is None:
                    continue  # expected from the host program, which was not named
                library = library or (supplier.info.soname if supplier else '')
                label = name.decode('utf-8', 'replace') + (f'@{version}' if version else '')
                where = (f'; {library} resolved to {supplier.path}, which lacks it' if supplier else
                         f'; {library} is not loaded' if library else '')
                self.findings.append(Finding(
                    'undefined-symbol', self.root.path, entry.path,
                    f'{entry.path}: undefined symbol {label}{where}',
                    {'symbol': name.decode('utf-8', 'replace'), 'version': version, 'library': library,
                     'resolved': supplier.path if supplier else None}))

    def _supplier_by_name(self, entry, name):
        """For an unversioned symbol: the NEEDED library whose name it carries (ncclX -> libnccl.so.2)."""
        lowered = name.decode('utf-8', 'replace').lower()
        for soname in entry.info.needed:
            stem = re.match(r'lib([a-z0-9]+)', soname.lower())
            if stem and len(stem.group(1)) >= 3 and lowered.startswith(stem.group(1)) and soname in self.by_soname:
                return self.by_soname[soname]
        return None


def first_failure(opens: Iterable[str], hazards: Mapping[str, Sequence[str]]) -> Optional[Tuple[str, str]]:
    """(library, the NEEDED it cannot open) for the first load that fails when a caller opens `opens` in turn,
    given the order hazards {soname: NEEDED sonames only an earlier dlopen() can provide}; None if all load.
    Opening a library loads its NEEDED closure too (glibc names the first missing entry in NEEDED order)."""
    opened: set = set()
    for soname in opens:
        needs = hazards.get(soname, ())
        missing = [n for n in needs if n not in opened]
        if soname not in opened and missing:
            return soname, missing[0]
        opened |= {soname, *needs}
    return None


def _dependencies_first(infos):
    """Targets of one opener, each after the other targets it needs: a library that dlopen()s a family of
    sub-libraries (cuDNN) opens them so that their NEEDED entries are already loaded."""
    by_name = {info.soname: info for info in infos}
    ordered, placed = [], set()

    def place(info, seen=()):
        if info.soname in placed or info.soname in seen:
            return
        for needed in info.needed:
            if needed in by_name:
                place(by_name[needed], (*seen, info.soname))
        placed.add(info.soname)
        ordered.append(info)
    for info in infos:
        place(info)
    return ordered


class SymbolCache:
    """Symbol tables, .rodata names and .note.dlopen names, each read once per file."""

    def __init__(self):
        self._symbols, self._names, self._notes = {}, {}, {}

    @staticmethod
    def _cached(store, path, read):
        key = _realpath(path)
        if key not in store:
            elf = ElfSymbols(path)
            try:
                store[key] = read(elf)
            finally:
                elf.close()
        return store[key]

    def symbols(self, path: str) -> SymbolTable:
        return self._cached(self._symbols, path, ElfSymbols.symbols)

    def names(self, path: str) -> Set[str]:
        return self._cached(self._names, path, ElfSymbols.rodata_sonames)

    def notes(self, path: str) -> List[str]:
        key = _realpath(path)
        if key not in self._notes:
            try:
                self._notes[key] = dlopen_note_sonames(path)
            except PluginError:
                self._notes[key] = []
        return self._notes[key]


def _regular(path):
    """True for a regular file (after symlinks): the only thing doctor opens (a FIFO would block the read).
    Files found in a directory that are not are skipped with a note; a file named by the user is refused
    through inputs.require_regular instead."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def collect_objects(paths: Iterable[str], skipped: Optional[List[str]] = None, read: bool = True) -> List[ElfInfo]:
    """ElfInfo of every shared object under the given prefixes/directories/files, each file once
    (libfoo.so -> libfoo.so.1 symlinks are one object).  Entries named like libraries that are not regular
    files (FIFOs, sockets, devices, dangling links) are not opened; they are appended to `skipped`."""
    found, seen = [], set()
    skipped = [] if skipped is None else skipped
    for path in paths:
        if os.path.isdir(path):
            candidates = [os.path.join(d, f) for d, _, files in os.walk(path) for f in sorted(files)
                          if _SHARED_OBJECT.search(f)]
        elif os.path.lexists(path):
            require_regular(path)  # named on the command line: refused, not skipped
            candidates = [path]
        else:
            raise PluginError(path, 'no such file or directory')
        for candidate in candidates:
            if not _regular(candidate):
                skipped.append(candidate)
                continue
            real = _realpath(candidate)
            if real in seen:
                continue
            if not read:
                seen.add(real)
                continue
            try:
                info = _read_elf(candidate)
            except PluginError:
                if candidate == path:
                    raise
                continue  # linker scripts, stubs of other formats: not loadable objects
            seen.add(real)
            found.append(info)
    return found


TORCH_CUDA = 'libtorch_cuda.so'  # where a PyTorch process's CUDA loads start (patch/plan.LIBRARY_NAME)


def roots_of(objects: List[ElfInfo], start: Optional[str] = None) -> List[ElfInfo]:
    """The objects to load as roots: --from LIB; else the Python extension modules (what `import` loads);
    else an installation's libtorch_cuda.so (torch_roots); else those no other object of the set needs."""
    if start:
        require_regular(start)
        return [read_elf(start)]
    extensions = [o for o in objects if re.search(r'\.(cpython-[^.]+|abi3)\.so$', o.path)]
    if extensions:
        return extensions
    torch = torch_roots(objects)
    if torch:
        return torch
    needed = {n for o in objects for n in o.needed}
    roots = [o for o in objects if (o.soname or os.path.basename(o.path)) not in needed]
    return roots or objects


def torch_roots(objects: List[ElfInfo]) -> List[ElfInfo]:
    """The libtorch_cuda.so files among objects where there are other objects too (an installation, with its
    cuDNN or not): what a PyTorch process loads, so the loads start there as with --from.  Every object no
    other one needs would be a root otherwise, cuDNN's sub-libraries among them, each loaded by itself: their
    own dlopen() of a sibling then fails in the simulation (it has no RPATH chain) where PyTorch, loading
    them through libtorch_cuda.so, never does."""
    torch = [o for o in objects if os.path.basename(o.path) == TORCH_CUDA]
    return torch if torch and len(torch) < len(objects) else []


def diagnose(paths: Sequence[str], start: Optional[str] = None, executable: Optional[str] = None,
             resolver: Optional[Resolver] = None, glibc: Optional[execstack.TargetGlibc] = None,
             hint_dirs: Sequence[str] = ()) -> Tuple[List[Finding], int]:
    """All findings for the given paths; one simulated process per root.  glibc: the TargetGlibc executable
    stacks are judged for (default: execstack.target_glibc(), this machine's).  hint_dirs: directories where
    a library may exist without being found (the caller's LD_LIBRARY_PATH, which the simulated process has not)."""
    _realpath.cache_clear()  # one run, one view of the file system (a test may move files between runs)
    resolver = resolver or Resolver()
    glibc = glibc or execstack.target_glibc(executable=executable)
    cache = SymbolCache()
    if executable:
        require_regular(executable)
    executable_info = read_elf(executable) if executable else None
    findings: list = []
    seen: set = set()
    skipped: list = []
    # with --from, the paths only say what is audited: their files are not read unless the root loads them
    objects = collect_objects(paths, skipped, read=not start)
    loaded: set = set()
    # a library given by itself stands for its installation directory (libroot.so and the libuser.so beside it)
    audited = [p if os.path.isdir(p) else os.path.dirname(os.path.abspath(p)) for p in [*paths, *filter(None, [start])]]
    roots = roots_of(objects, start)
    for root in roots:
        process = Process(root, resolver, cache, executable_info, audited=audited, hint_dirs=hint_dirs)
        process.simulate_dlopens()
        process.check_symbols()
        process.check_execstack(glibc)
        loaded.update(process.by_path)
        for finding in process.findings:
            key = (finding.kind, finding.object, finding.message.split(':')[0], json.dumps(finding.details,
                                                                                           sort_keys=True))
            if key not in seen:
                seen.add(key)
                findings.append(finding)
    for path in skipped:
        findings.append(Finding('skipped', '', path, f'{path}: not a regular file (FIFO, socket, device or '
                                'dangling link): not opened', {'path': path}))
    torch = {o.path for o in torch_roots(objects)} if not start else set()
    started = [root.path for root in roots if root.path in torch]
    for path in started:
        findings.append(Finding('started', path, path, f'loads start at {path}, as PyTorch loads it (the '
                                f'installation\'s {TORCH_CUDA}; --from LIB to start elsewhere)', {'path': path}))
    return findings, len(loaded) if start or started else len(objects)


def blocking(findings: Iterable[Finding]) -> bool:
    """True when a finding means a load fails or loads the wrong copy (the command then exits 1)."""
    return any(f.severity in BLOCKING for f in findings)


def fix_commands(findings: Sequence[Finding], blocking_only: bool = True) -> List[str]:
    """One `eb-pytorch-cuda add-needed LIB SONAME...` per library to patch, without sonames that another
    added soname already pulls in as its NEEDED entry (cnn_train brings ops_infer, ops_train, cnn_infer).
    blocking_only: the fixes of what fails or loads the wrong copy; False: those of the order hazards no
    known caller hits (optional: each NEEDED entry costs load time in every process), without what the
    blocking fixes already bring in.  Then the commands of fixes that are not NEEDED entries."""
    wanted: dict = {}
    for finding in findings:
        if finding.fix:
            library, soname = finding.fix
            wanted.setdefault(library, {})[soname] = finding
    commands = []
    for library, sonames in wanted.items():
        covered: set = set()
        for soname, finding in sonames.items():
            if blocking_only and finding.severity not in BLOCKING:
                continue  # what fails is fixed by blocking fixes alone
            target = finding.details.get('exists') or finding.details.get('expected') or finding.object
            try:
                covered.update(n for n in _read_elf(target).needed if n != soname)
            except PluginError:
                continue
        keep = [s for s, f in sonames.items() if s not in covered and (f.severity in BLOCKING) == blocking_only]
        if keep:
            commands.append(f"eb-pytorch-cuda add-needed {shlex.quote(library)} {' '.join(map(shlex.quote, keep))}")
    others = [f for f in findings if f.command and (f.severity in BLOCKING) == blocking_only]
    commands += list(dict.fromkeys(f.command for f in others if f.command))  # (all have one: for mypy)
    if blocking_only and any(f.kind == 'execstack' for f in others):
        commands.append(f'or, instead of clearing the flags: export {execstack.TUNABLE}')
    return commands


def _count(findings):
    labels = {'fails': 'load fails', 'wrong-copy': 'wrong copy loads', 'order': 'depends on order',
              'info': 'informational'}
    counts = [(labels[s], sum(f.severity == s for f in findings)) for s in SEVERITIES]
    return ', '.join(f'{n} {label}' for label, n in counts if n)


def to_text(findings: Sequence[Finding], count: int, glibc: Optional[execstack.TargetGlibc] = None) -> str:
    """Findings grouped by root, most severe first, then the commands that fix what fails (and, apart, those
    that also close the orders no known caller uses).  glibc: the TargetGlibc judged for (named in the header)."""
    real = [f for f in findings if f.severity != 'info']
    notes = [f for f in findings if f.severity == 'info']
    checked = f'doctor: {count} objects checked' + (f' for {glibc.label}' if glibc else '')
    if not real:
        lines = [f'{checked}, nothing found']
    else:
        lines = [f'{checked}, {len(real)} finding(s): {_count(real)}']
        for root in dict.fromkeys(f.root for f in real):
            lines.append(f'== loading {root}')
            for finding in sorted((f for f in real if f.root == root), key=lambda f: SEVERITIES.index(f.severity)):
                lines.append(f'  {finding.severity:10} [{finding.kind}] {finding.message}')
    lines += [f'note: {f.message}' for f in notes]
    for heading, commands in (('fix:', fix_commands(real)),
                              ('also closes the orders no known caller uses (optional):',
                               fix_commands(real, blocking_only=False))):
        if commands:
            lines.append(heading)
            lines += [f'  {command}' for command in commands]
    return '\n'.join(lines)


def to_json(findings: Sequence[Finding], count: int, glibc: Optional[execstack.TargetGlibc] = None) -> str:
    return json.dumps({'objects': count, 'blocking': blocking(findings), 'fix': fix_commands(findings),
                       'fix_order_only': fix_commands(findings, blocking_only=False),
                       'glibc': {'version': '.'.join(map(str, glibc.version)), 'source': glibc.source}
                       if glibc else None,
                       'findings': [asdict(f) for f in findings]}, indent=1, allow_nan=False)
