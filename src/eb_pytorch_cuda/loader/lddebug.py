"""Read glibc's LD_DEBUG=libs,files output: which libraries a process asked for by name, and what became of them.

The real loader is the judge of what loads; this turns its trace into data, for the GPU validation
(which sub-library cuDNN could not open) and for tests that compare our predictions with glibc.
"""

import os
import re

_REQUEST = re.compile(r'file=(\S+) \[\d+\];\s+(?:dynamically loaded|needed) by (\S+)')
_TRYING = re.compile(r'trying file=(\S+)')
_MAPPED = re.compile(r'file=(\S+) \[\d+\];\s+generating link map')
_DESTROYED = re.compile(r'file=(\S+) \[\d+\];\s+destroying link map')
_INIT = re.compile(r'calling init: (\S+)')
_PROBE = re.compile(r'^(.*\.so)((?:\.\d+)*)$')


def trace_outcomes(lines):
    """{soname: {'requested_by': path, 'path': file mapped or None, 'stayed': bool}} for names asked for.

    'stayed' is False when glibc mapped the file and then destroyed its link map without running its
    initialisers (the dlopen() failed after all, e.g. a dependency or version problem of the file it
    found).  A library whose init ran did load: a later dlclose() destroys its link map too.
    """
    outcomes: dict = {}
    tried: dict = {}
    destroyed: set = set()
    initialised: set = set()
    for line in lines:
        match = _REQUEST.search(line)
        if match:
            if '/' not in match.group(1):
                outcomes.setdefault(match.group(1), {'requested_by': match.group(2), 'path': None})
            continue
        match = _TRYING.search(line)
        if match:
            tried[os.path.basename(match.group(1))] = match.group(1)
            continue
        match = _MAPPED.search(line)
        if match:
            name = os.path.basename(match.group(1))
            if name in outcomes and outcomes[name]['path'] is None:
                outcomes[name]['path'] = match.group(1) if '/' in match.group(1) else tried.get(name, name)
            continue
        match = _DESTROYED.search(line)
        if match:
            destroyed.add(match.group(1))
            continue
        match = _INIT.search(line)
        if match:
            initialised.add(match.group(1))
    # with LD_DEBUG=files alone there are no 'trying file=' lines: the file is known by its name only, and the
    # link map destroyed or initialised is matched by that name (the H200 trace of a system cuDNN's sub-library)
    destroyed_names = {os.path.basename(p) for p in destroyed}
    initialised_names = {os.path.basename(p) for p in initialised}
    for outcome in outcomes.values():
        path = outcome['path']
        if path is not None and '/' not in path:
            outcome['stayed'] = path not in destroyed_names or path in initialised_names
            continue
        outcome['stayed'] = path is not None and (path not in destroyed or path in initialised)
    return outcomes


def failed_requests(lines):
    """The libraries asked for by name whose load did not stick, one entry per library.

    cuDNN probes libX.so.9.19.0, libX.so.9.19, libX.so.9, libX.so in turn: probes of one library are
    grouped, a probe that stayed loaded clears the group, and the entry shown is the libX.so.N probe.
    Returns {soname: {'requested_by': path, 'outcome': 'not found' | 'found PATH, then unloaded'}}.
    """
    groups: dict = {}
    for name, outcome in trace_outcomes(lines).items():
        match = _PROBE.match(name)
        groups.setdefault(match.group(1) if match else name, []).append((name, outcome))
    failures = {}
    for probes in groups.values():
        if any(outcome['stayed'] for _, outcome in probes):
            continue
        name, outcome = max(probes, key=lambda item: (bool(re.search(r'\.so\.\d+$', item[0])),
                                                      item[1]['path'] is not None))
        failures[name] = {'requested_by': outcome['requested_by'],
                          'outcome': f"found {outcome['path']}, then unloaded" if outcome['path'] else 'not found'}
    return failures


def _base(name):
    match = _PROBE.match(name)
    return match.group(1) if match else name


def compare_with_trace(findings, lines, ignore=('libcuda.so',)):
    """doctor's findings (dicts as in `doctor --format json`) against the real loader's trace of a process.

    Failed loads of libraries whose name starts with one of `ignore` are not counted (the driver's
    libcuda.so.1 is not part of an installation, and is absent where there is no GPU).
    Returns {'predicted', 'observed', 'missed', 'false', 'unexercised', 'order_hazards', 'agree'}:
    observed are the sub-libraries whose load failed (failed_requests); a blocking finding ('fails',
    'wrong-copy') is false when the trace shows that library requested and loaded from the expected file,
    unexercised when the process never asked for it; agree means nothing missed and nothing false.
    """
    outcomes = trace_outcomes(lines)
    observed = sorted(n for n in failed_requests(lines) if not n.startswith(tuple(ignore)))
    blocking = [f for f in findings if f['severity'] in ('fails', 'wrong-copy') and f['details'].get('soname')]
    predicted = sorted({f['details']['soname'] for f in blocking})
    false, unexercised = [], []
    for finding in blocking:
        soname = finding['details']['soname']
        if soname in observed:
            continue
        probes = [o for name, o in outcomes.items() if _base(name) == _base(soname)]
        if not probes:
            unexercised.append(soname)
        elif finding['severity'] == 'fails' or any(
                o['stayed'] and os.path.realpath(o['path']) == os.path.realpath(finding['details'].get('expected', ''))
                for o in probes):
            false.append(soname)
    missed = sorted(set(observed) - set(predicted))
    return {'predicted': predicted, 'observed': observed, 'missed': missed, 'false': sorted(set(false)),
            'unexercised': sorted(set(unexercised)),
            'order_hazards': sorted(f['details']['soname'] for f in findings if f['severity'] == 'order'),
            'agree': not missed and not false}
