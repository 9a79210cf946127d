"""Catalog of cuDNN sub-libraries per major version, and which of them to add as NEEDED entries.

cuDNN loads its sub-libraries with dlopen().  One dlopen()ed sub-library opening another fails in an
RPATH-only stack (docs/design.md section 1), so the ones it opens that way are added as NEEDED entries of
libtorch_cuda.so.  The defaults are the libraries verified to fix the failure on real binaries; a site
may add others from the catalog.  Whatever is asked for is always filtered by the files present in the
cuDNN installation: the set differs between cuDNN 9 minor versions, and a NEEDED entry that does not
resolve makes `import torch` itself fail.
"""

import os
import re
from typing import Any, Iterable, List, Mapping, Optional, Tuple

# a setting: a list of sonames, or {cuDNN major version (int or str): list of sonames}
SonameSetting = Any

CATALOG = {
    8: ('libcudnn_ops_infer.so.8', 'libcudnn_ops_train.so.8', 'libcudnn_cnn_infer.so.8',
        'libcudnn_cnn_train.so.8', 'libcudnn_adv_infer.so.8', 'libcudnn_adv_train.so.8'),
    # seen in 9.24; 9.19 lacks libcudnn_ext and libcudnn_engines_tensor_ir
    9: ('libcudnn_graph.so.9', 'libcudnn_ops.so.9', 'libcudnn_cnn.so.9', 'libcudnn_adv.so.9',
        'libcudnn_heuristic.so.9', 'libcudnn_ext.so.9', 'libcudnn_engines_precompiled.so.9',
        'libcudnn_engines_runtime_compiled.so.9', 'libcudnn_engines_tensor_ir.so.9'),
}

# verified fixes: cuDNN 8.9.2 with PyTorch 2.1.2; cuDNN 9.19 on an H200 with PyTorch 2.11 (docs/design.md)
DEFAULT_NEEDED = {
    8: ('libcudnn_cnn_train.so.8',),
    9: ('libcudnn_engines_precompiled.so.9', 'libcudnn_engines_runtime_compiled.so.9'),
}

ENV_VARIABLE = 'EB_PYTORCH_CUDA_CUDNN_NEEDED'

_MAIN_SONAME = re.compile(r'^libcudnn\.so\.(\d+)$')


def cudnn_major(needed: Iterable[str]) -> Optional[int]:
    """The cuDNN major version a library links against, from its NEEDED libcudnn.so.N; None if none."""
    for soname in needed:
        match = _MAIN_SONAME.match(soname)
        if match:
            return int(match.group(1))
    return None


def parse_soname_list(value: Optional[str]) -> List[str]:
    """Split a site setting ('a.so.9,b.so.9' or 'a.so.9 b.so.9') into sonames."""
    return [item for item in re.split(r'[\s,]+', value or '') if item]


def requested_sonames(major: Optional[int], easyconfig_value: Optional[SonameSetting] = None,
                      site_value: Optional[SonameSetting] = None,
                      environ: Optional[Mapping[str, str]] = None) -> List[str]:
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
                return list(source[major] if major in source else source[str(major)])
            continue
        if not source:
            return []  # an explicit empty list switches the patch off
        for_this_major = [s for s in source if not major or s.endswith(f'.so.{major}')]
        if for_this_major:
            return for_this_major
    return list(DEFAULT_NEEDED.get(major, ())) if major is not None else []


def unknown_sonames(major: int, sonames: Iterable[str]) -> List[str]:
    """Sonames outside the catalog of that major version (allowed, but worth a warning)."""
    known = set(CATALOG.get(major, ()))
    return [s for s in sonames if s not in known]


def filter_present(sonames: Iterable[str], cudnn_dirs: Iterable[str]) -> Tuple[List[str], List[str]]:
    """Split sonames into (present, absent) by whether a file of that name exists in any cudnn_dirs."""
    present: List[str] = []
    absent: List[str] = []
    for soname in sonames:
        found = any(os.path.exists(os.path.join(d, soname)) for d in cudnn_dirs)
        (present if found else absent).append(soname)
    return present, absent
