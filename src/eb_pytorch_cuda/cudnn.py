"""Catalog of cuDNN sub-libraries per major version, and which of them to add as NEEDED entries.

cuDNN loads its sub-libraries with dlopen().  One dlopen()ed sub-library opening another fails in an
RPATH-only stack (docs/design.md section 1), so the ones it opens that way are added as NEEDED entries of
libtorch_cuda.so.  The defaults are the libraries verified to fix the failure on real binaries; a site
may add others from the catalog.  Whatever is asked for is always filtered by the files present in the
cuDNN installation: the set differs between cuDNN 9 minor versions, and a NEEDED entry that does not
resolve makes `import torch` itself fail.
"""

import json
import os
import re
from dataclasses import dataclass

_DATA_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'cudnn_catalog.json')


def _load_catalog(path=_DATA_FILE):
    """The catalog data file (cudnn_catalog.json, shipped with the package): the one place cuDNN facts live."""
    with open(path, encoding='utf-8') as handle:
        data = json.load(handle)
    return data, {int(major): facts for major, facts in data['majors'].items()}


_DATA, _MAJORS = _load_catalog()

CATALOG = {major: tuple(facts['sublibraries']) for major, facts in _MAJORS.items()}
# verified fixes: cuDNN 8.9.2 with PyTorch 2.1.2; cuDNN 9.19 on an H200 with PyTorch 2.11 (docs/design.md)
DEFAULT_NEEDED = {major: tuple(facts['default_needed']) for major, facts in _MAJORS.items()}
# verified dlopen() edges (LD_DEBUG on real cuDNN 8.9.2 and 9.19) that .rodata strings alone do not show
DLOPEN_EDGES = {opener: tuple(targets) for facts in _MAJORS.values()
                for opener, targets in facts.get('dlopen_edges', {}).items()}
# {sub-library: sub-libraries one of which must have loaded before cuDNN dlopen()s it} (LD_DEBUG, real cuDNN)
OPENED_AFTER = {target: tuple(after) for facts in _MAJORS.values()
                for target, after in facts.get('opened_after', {}).items()}
ENV_VARIABLE = _DATA['env_variable']
# CUDA libraries cuDNN dlopen()s itself ({cuDNN library: names in its .rodata}; strings of the real wheels, H200 trace)
CUDA_DLOPEN = {opener: tuple(targets) for facts in _MAJORS.values()
               for opener, targets in facts.get('cuda_dlopen', {}).items()}
# unversioned names of those: cuDNN asks for them with the CUDA major version of the build (libnvrtc.so.13)
CUDA_LIBRARIES = tuple(_DATA.get('cuda_libraries', ()))
# {sub-library: what really makes cuDNN open it, with the evidence} (cuDNN 9.24's ext and engines_tensor_ir)
LOADED_BY = {soname: text for facts in _MAJORS.values() for soname, text in facts.get('loaded_by', {}).items()}


@dataclass(frozen=True)
class FieldOrder:
    """An order in which a real caller (PyTorch) makes cuDNN open its sub-libraries, with the evidence.

    Why: an order hazard (a sub-library that loads only after others were opened) is hypothetical until a
    caller opens them the wrong way; one that PyTorch's own order hits is a failure, and doctor says so."""

    caller: str
    opens: tuple  # sonames, in the order they are opened
    failure: str  # what the caller then sees in an RPATH-only layout ('none' when the order works)
    evidence: str


FIELD_ORDERS = tuple(FieldOrder(o['caller'], tuple(o['opens']), o['failure'], o['evidence'])
                     for facts in _MAJORS.values() for o in facts.get('field_orders', ()))


def verified_with(major):
    """Which real cuDNN/PyTorch the default NEEDED entries of that major version were verified with."""
    return _MAJORS.get(major, {}).get('verified_with', '')


def runpath_note(major):
    """For which cuDNN layouts of that major version the NEEDED entries are a fix, and where a precaution."""
    return _MAJORS.get(major, {}).get('runpath', '')


def version_checks(major):
    """{sub-library soname: the libcudnn.so.N entry point whose call makes cuDNN dlopen() it} (cuDNN 8)."""
    return dict(_MAJORS.get(major, {}).get('version_checks', {}))


def cuda_soname(name, cuda_major):
    """The soname cuDNN asks dlopen() for when its .rodata names a CUDA library: 'libnvrtc.so' with CUDA 13 is
    'libnvrtc.so.13'; a versioned name stays as it is; None for an unversioned one whose CUDA major is unknown."""
    if name not in CUDA_LIBRARIES:
        return name
    return f'{name}.{cuda_major}' if cuda_major else None


_VERSION_IN_NAME = re.compile(r'\.so\.(\d+\.\d+\.\d+)$')
_DIST_INFO = re.compile(r'^nvidia_cudnn_cu\d+-(\d+\.\d+\.\d+)[\d.]*\.dist-info$')


def file_version(path):
    """The cuDNN version ('9.19.0') of the file at path: from the name it resolves to (libX.so.9.19.0, as
    NVIDIA's tarballs and Debian's packages install it), else from the pip wheel's dist-info directory in the
    site-packages above it (nvidia_cudnn_cu13-9.24.0.43.dist-info; the wheel's files are named libX.so.9 only);
    None when neither says."""
    match = _VERSION_IN_NAME.search(os.path.realpath(path))
    if match:
        return match.group(1)
    directory = os.path.dirname(os.path.realpath(path))
    for _ in range(3):  # site-packages/nvidia/cudnn/lib
        directory = os.path.dirname(directory)
        try:
            names = os.listdir(directory)
        except OSError:
            return None
        found = sorted(m.group(1) for m in map(_DIST_INFO.match, names) if m)
        if found:
            return found[-1]
    return None


def probes_versions(major):
    """True when cuDNN of that major version dlopen()s libX.so.M.m.p, libX.so.M.m, libX.so.M, libX.so in turn."""
    return bool(_MAJORS.get(major, {}).get('probe_versions'))


def probe_names(soname, version=None):
    """The names cuDNN asks dlopen() for, in its order, to open the sub-library `soname` (libX.so.M).

    cuDNN 9 tries the full version first (version: '9.19.0' from libcudnn.so.9.19.0), then shorter ones,
    then the bare .so, stopping at the first that loads; cuDNN 8 asks for the soname only."""
    match = re.match(r'^(.*\.so)\.(\d+)$', soname)
    if not match or not soname.startswith('libcudnn') or not probes_versions(int(match.group(2))):
        return [soname]
    base, major = match.groups()
    names = []
    parts = (version or '').split('.')
    if parts and parts[0] == major:
        for count in range(len(parts), 1, -1):
            names.append(f"{base}.{'.'.join(parts[:count])}")
    return names + [soname, base]


_MAIN_SONAME = re.compile(r'^libcudnn\.so\.(\d+)$')


def is_cudnn(soname):
    """True for a cuDNN library (libcudnn.so.N or a sub-library): NVIDIA's binary, never to be patched."""
    return bool(re.match(r'^libcudnn(_\w+)?\.so', soname or ''))


def cudnn_major(needed):
    """The cuDNN major version a library links against, from its NEEDED libcudnn.so.N; None if none."""
    for soname in needed:
        match = _MAIN_SONAME.match(soname)
        if match:
            return int(match.group(1))
    return None


def parse_soname_list(value):
    """Split a site setting ('a.so.9,b.so.9' or 'a.so.9 b.so.9') into sonames."""
    return [item for item in re.split(r'[\s,]+', value or '') if item]


def requested_sonames(major, easyconfig_value=None, site_value=None, environ=None):
    """The sonames asked for, before filtering: easyconfig parameter, else environment, else site, else default.

    Each source may be a list of sonames or a {major: list} dict, so one setting can cover cuDNN 8 and 9;
    a list naming only other majors' libraries does not apply, and an empty list means "add nothing".
    """
    environ = os.environ if environ is None else environ
    env_value = environ.get(ENV_VARIABLE)
    for source in (easyconfig_value, parse_soname_list(env_value) if env_value is not None else None, site_value):
        if source is None:
            continue
        if isinstance(source, dict):
            if major in source or str(major) in source:
                return list(source.get(major, source.get(str(major))) or ())
            continue
        if not source:
            return []  # an explicit empty list switches the patch off
        for_this_major = [s for s in source if not major or s.endswith(f'.so.{major}')]
        if for_this_major:
            return for_this_major
    return list(DEFAULT_NEEDED.get(major, ()))


def unknown_sonames(major, sonames):
    """Sonames outside the catalog of that major version (allowed, but worth a warning)."""
    known = set(CATALOG.get(major, ()))
    return [s for s in sonames if s not in known]


def filter_present(sonames, cudnn_dirs):
    """Split sonames into (present, absent) by whether a file of that name exists in any cudnn_dirs."""
    present: list = []
    absent: list = []
    for soname in sonames:
        found = any(os.path.exists(os.path.join(d, soname)) for d in cudnn_dirs)
        (present if found else absent).append(soname)
    return present, absent
