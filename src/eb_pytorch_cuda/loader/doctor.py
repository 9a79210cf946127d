"""`eb-pytorch-cuda doctor`: predict "cannot open shared object file" and "undefined symbol" before users do.

It simulates, without running the loader, what glibc does when a process loads each root object
(with dlopen(), as Python loads torch), following docs/design.md section 1:
- the NEEDED closure, breadth first, each entry resolved from the object that needs it with the
  RPATH chain of the objects that loaded it as NEEDED; an object loaded by dlopen() starts a new
  chain; RUNPATH is never inherited; a soname already loaded wins;
- dlopen() targets: library names found as strings in an object's .rodata (cuDNN 9 stores them
  without version, e.g. "libcudnn_graph.so", and appends ".9": both forms are tried) and the cuDNN
  catalog's known edges.  A target is only a finding when the file exists next to the opener or in
  a directory of the process, yet cannot be found from the opener (the cuDNN failure), or when it
  resolves to another copy than the one next to the opener (on an H200 image the search fell through
  to a system cuDNN of another version); names that exist nowhere are optional probes;
- undefined non-weak dynamic symbols that no object of the process defines (with the version the
  object requires from a named library);
- a soname that two objects would resolve to different files: only the first loaded is used.
"""

import json
import os
import re
from dataclasses import asdict, dataclass, field

from eb_pytorch_cuda.elf.reader import read_elf
from eb_pytorch_cuda.elf.symbols import ElfSymbols
from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.loader.resolve import Resolver

# verified dlopen() edges (LD_DEBUG on real cuDNN 8.9.2 and 9.19, docs/design.md), beyond .rodata strings
CATALOG_EDGES = {
    'libcudnn_cnn_infer.so.8': ('libcudnn_cnn_train.so.8',),
    'libcudnn_graph.so.9': ('libcudnn_engines_precompiled.so.9', 'libcudnn_engines_runtime_compiled.so.9'),
}
_SHARED_OBJECT = re.compile(r'\.so(\.\d+)*$')


@dataclass
class Finding:
    kind: str  # 'needed-unresolved', 'dlopen-unresolved', 'dlopen-shadowed', 'undefined-symbol', 'soname-conflict'
    root: str
    object: str
    message: str
    details: dict = field(default_factory=dict)


@dataclass
class Loaded:
    info: object
    path: str
    chain: list  # objects that loaded it as NEEDED, nearest first ([] when loaded by dlopen())
    how: str  # 'root', 'needed by X', 'dlopen() by X'
    optional: bool = False  # loaded by dlopen() (or under such an object): its failure is the opener's to handle
    broken: bool = False  # a NEEDED entry of it does not resolve
    parent: object = None  # the Loaded entry that needed or dlopen()ed it


def _major_suffix(soname):
    match = re.search(r'\.so\.(\d+)', soname or '')
    return match.group(1) if match else None


def dlopen_targets(info, names_of):
    """Library names an object may dlopen(): its .rodata strings (plus the major-suffixed form of
    unversioned ones, as cuDNN does) and the catalog's edges; its own NEEDED and soname excluded."""
    names = set(CATALOG_EDGES.get(info.soname, ()))
    major = _major_suffix(info.soname)
    for name in names_of(info.path):
        names.add(name)
        if major and name.endswith('.so'):
            names.add(f'{name}.{major}')
    return sorted(n for n in names if n not in info.needed and n != info.soname)


class Process:
    """The simulated process of one root object."""

    def __init__(self, root, resolver, cache, executable=None):
        self.resolver, self.cache, self.executable = resolver, cache, executable
        self.objects = []  # Loaded, in load order
        self.by_soname, self.by_path = {}, {}
        self.findings = []
        self.root = root
        if executable:
            self._load(executable, [], 'executable', load_needed=True)
        self._load(root, [], 'root', load_needed=True)

    def _key(self, path):
        return os.path.realpath(path)

    def _load(self, info, chain, how, load_needed, parent=None):
        entry = Loaded(info, info.path, chain, how, optional=how.startswith('dlopen'), parent=parent)
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
            for soname in current.info.needed:
                chain = [current.info] + current.chain
                own = self.resolver.resolve(soname, current.info, loader_chain=chain,
                                            executable=self.executable)
                loaded = self.by_soname.get(soname)
                if loaded is not None:
                    if own.found and self._key(own.path) != self._key(loaded.path):
                        self.findings.append(Finding(
                            'soname-conflict', self.root.path, current.info.path,
                            f'{soname}: {current.info.path} would load {own.path} ({own.via}), but '
                            f'{loaded.path} is already loaded ({loaded.how}) and is used instead',
                            {'soname': soname, 'wanted': own.path, 'used': loaded.path}))
                    continue
                if not own.found:
                    current.broken = True  # it cannot load: its symbols are not checked
                    if current.optional and not self._exists_nearby(soname, current):
                        continue  # optional component whose optional system dependency is absent
                    self.findings.append(Finding(
                        'needed-unresolved', self.root.path, current.info.path,
                        f"{current.info.path}: NEEDED {soname} not found without LD_LIBRARY_PATH "
                        f"(searched: {', '.join(own.tried) or 'nothing'})",
                        {'soname': soname, 'searched': own.tried}))
                    continue
                if self._key(own.path) in self.by_path:
                    continue
                try:
                    info = read_elf(own.path)
                except PluginError:
                    continue
                entry = self._load(info, chain, f'needed by {current.info.path}', load_needed=False, parent=current)
                entry.optional = current.optional
                queue.append(entry)

    def simulate_dlopens(self):
        """Follow dlopen() targets of every loaded object until nothing new loads."""
        index = 0
        while index < len(self.objects):
            opener = self.objects[index]
            index += 1
            pending = []
            for target in dlopen_targets(opener.info, self.cache.names):
                if target in self.by_soname:
                    continue  # already loaded: glibc returns it
                result = self.resolver.resolve(target, opener.info, loader_chain=opener.chain,
                                               executable=self.executable)
                if not result.found:
                    existing = self._exists_nearby(target, opener)
                    if existing:
                        self.findings.append(self._dlopen_finding(target, opener, existing, result))
                    continue
                own_copy = os.path.join(os.path.dirname(opener.path), target)
                if os.path.isfile(own_copy) and self._key(own_copy) != self._key(result.path):
                    self.findings.append(self._shadow_finding(target, opener, own_copy, result))
                try:
                    pending.append(read_elf(result.path))
                except PluginError:
                    continue
            for info in _dependencies_first(pending):
                if self._key(info.path) not in self.by_path and (info.soname or '') not in self.by_soname:
                    self._load(info, [], f'dlopen() by {opener.info.path}', load_needed=True, parent=opener)

    def _exists_nearby(self, name, opener):
        directories = [os.path.dirname(opener.path)] + [os.path.dirname(o.path) for o in self.objects]
        for directory in dict.fromkeys(directories):
            candidate = os.path.join(directory, name)
            if os.path.isfile(candidate):
                return candidate
        return None

    def _dlopen_finding(self, target, opener, existing, result):
        inherited = 'inherits no RPATH chain (it was itself loaded by dlopen())' if not opener.chain else \
            'inherits the RPATH chain of ' + ', '.join(o.path for o in opener.chain)
        fix = ''
        patchable = self._fix_candidate(target, opener, existing)
        if patchable:
            fix = (f'; adding it as NEEDED of {patchable.path} fixes it: '
                   f'eb-pytorch-cuda add-needed {patchable.path} {target}')
        return Finding('dlopen-unresolved', self.root.path, opener.path,
                       f"{target}, dlopen()ed by {opener.path}, will not be found: the opener {inherited} "
                       f"(searched: {', '.join(result.tried) or 'nothing'}), although {existing} exists{fix}",
                       {'soname': target, 'opener': opener.path, 'exists': existing, 'searched': result.tried})

    def _shadow_finding(self, target, opener, own_copy, result):
        patchable = self._fix_candidate(target, opener, own_copy)
        fix = (f'; adding {target} as NEEDED of {patchable.path} loads the right one first: '
               f'eb-pytorch-cuda add-needed {patchable.path} {target}') if patchable else ''
        return Finding('dlopen-shadowed', self.root.path, opener.path,
                       f'{target}, dlopen()ed by {opener.path}, resolves to {result.path} ({result.via}), not to '
                       f'{own_copy} next to it: a different copy (version mix){fix}',
                       {'soname': target, 'opener': opener.path, 'resolved': result.path, 'expected': own_copy})

    def _fix_candidate(self, target, opener, existing):
        """The nearest object up the loading ancestry, loaded at start-up and outside the target's own
        package directory (cuDNN itself may not be patched), whose search path finds the target:
        a NEEDED entry there maps the target at load time, and the later dlopen() finds it loaded."""
        package = os.path.dirname(os.path.realpath(existing))
        entry = opener.parent
        while entry is not None:
            if not entry.optional and os.path.dirname(os.path.realpath(entry.path)) != package:
                if self.resolver.resolve(target, entry.info, loader_chain=entry.chain).found:
                    return entry
            entry = entry.parent
        return None

    def check_symbols(self):
        """Undefined non-weak symbols of every loaded object that nothing in the process defines."""
        tables = [(entry, self.cache.symbols(entry.path)) for entry in self.objects]
        defined_anywhere = {}
        for entry, table in tables:
            for name, versions in table.defined.items():
                defined_anywhere.setdefault(name, []).append((entry, versions))
        for entry, table in tables:
            if entry.broken:
                continue  # a NEEDED library is missing: that is the failure, not its symbols
            for name, version, library in table.undefined:
                providers = defined_anywhere.get(name, ())
                if version and library:
                    ok = any(version in versions for _, versions in providers)
                else:
                    ok = bool(providers)
                if ok:
                    continue
                supplier = self.by_soname.get(library) if library else self._supplier_by_name(entry, name)
                if library and supplier is None:
                    continue  # that library is missing: reported as such (or an optional one, not an error)
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
    """Symbol tables and .rodata names, each read once per file."""

    def __init__(self):
        self._symbols, self._names = {}, {}

    @staticmethod
    def _cached(store, path, read):
        key = os.path.realpath(path)
        if key not in store:
            elf = ElfSymbols(path)
            try:
                store[key] = read(elf)
            finally:
                elf.close()
        return store[key]

    def symbols(self, path):
        return self._cached(self._symbols, path, ElfSymbols.symbols)

    def names(self, path):
        return self._cached(self._names, path, ElfSymbols.rodata_sonames)


def collect_objects(paths):
    """ElfInfo of every shared object under the given prefixes/directories/files, each file once
    (libfoo.so -> libfoo.so.1 symlinks are one object)."""
    found, seen = [], set()
    for path in paths:
        if os.path.isfile(path):
            candidates = [path]
        elif os.path.isdir(path):
            candidates = [os.path.join(d, f) for d, _, files in os.walk(path) for f in sorted(files)
                          if _SHARED_OBJECT.search(f)]
        else:
            raise PluginError(path, 'no such file or directory')
        for candidate in candidates:
            real = os.path.realpath(candidate)
            if real in seen:
                continue
            try:
                info = read_elf(candidate)
            except PluginError:
                if candidate == path:
                    raise
                continue  # linker scripts, stubs of other formats: not loadable objects
            seen.add(real)
            found.append(info)
    return found


def roots_of(objects, start=None):
    """The objects to load as roots: --from LIB; else the Python extension modules (what `import` loads);
    else those no other object of the set needs."""
    if start:
        return [read_elf(start)]
    extensions = [o for o in objects if re.search(r'\.(cpython-[^.]+|abi3)\.so$', o.path)]
    if extensions:
        return extensions
    needed = {n for o in objects for n in o.needed}
    roots = [o for o in objects if (o.soname or os.path.basename(o.path)) not in needed]
    return roots or objects


def diagnose(paths, start=None, executable=None, resolver=None):
    """All findings for the given paths; one simulated process per root."""
    resolver = resolver or Resolver()
    cache = SymbolCache()
    executable_info = read_elf(executable) if executable else None
    findings, seen = [], set()
    objects = collect_objects(paths)
    for root in roots_of(objects, start):
        process = Process(root, resolver, cache, executable_info)
        process.simulate_dlopens()
        process.check_symbols()
        for finding in process.findings:
            key = (finding.kind, finding.object, finding.message.split(':')[0], json.dumps(finding.details,
                                                                                           sort_keys=True))
            if key not in seen:
                seen.add(key)
                findings.append(finding)
    return findings, len(objects)


def to_text(findings, count):
    if not findings:
        return f'doctor: {count} objects checked, nothing found'
    lines = [f'doctor: {count} objects checked, {len(findings)} finding(s)']
    for finding in findings:
        lines.append(f'[{finding.kind}] {finding.message}')
    return '\n'.join(lines)


def to_json(findings, count):
    return json.dumps({'objects': count, 'findings': [asdict(f) for f in findings]}, indent=1)
