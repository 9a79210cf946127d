"""Which of a suite's tests ran on a CUDA device, counted from its JUnit XML reports.

Why: on a GPU node the test step must show that it tested the GPU build.  Upstream's SANDCASTLE=1 silently
leaves every device-generic CUDA test out (run/devicetests), and a run of 0 CUDA tests says PASS like any other;
so the reports count, per suite and in total, the tests that ran on CUDA, failed there, or were skipped there.

A test is a CUDA test when PyTorch's device-generic machinery made it for CUDA: its class is instantiated as
`<Base>CUDA` (common_device_type.instantiate_device_type_tests: `TestConvolutionNNDeviceTypeCUDA`, `TestCommonCUDA`)
or its name carries the device suffix `_cuda` (`test_conv_cudnn_nhwc_cuda_float32`: the device type is put after
the test's own name, before the dtype).  Test files written for CUDA alone (test_cuda.py's `TestCuda`) are not
device-generic and are not counted: the count answers "did the device-generic CUDA tests run".
"""

import re
from typing import Dict, Iterable, Optional, Tuple

from eb_pytorch_cuda.testsuite.results.model import CUDA_COUNT_KEYS, RunResult

_TESTCASE = re.compile(rb'<testcase\b')
_CLASSNAME = re.compile(rb'\bclassname\s*=\s*"([^"]*)"')
_NAME = re.compile(rb'\sname\s*=\s*"([^"]*)"')
_TAG_END = re.compile(rb'(?:[^>"]|"[^"]*")*>')
_SKIP = re.compile(rb'<skipped[\s/>]')
_FAIL = re.compile(rb'<(?:failure|error)[\s/>]')
_CUDA_NAME = re.compile(r'(?<!^test)_cuda(?:_|$)')  # the device suffix; not a name that starts test_cuda_

RAN, FAILED, SKIPPED = 'ran', 'failed', 'skipped'


def is_cuda_test(classname: str, name: str) -> bool:
    """True for a device-generic test instantiated for CUDA (see the module's docstring)."""
    return classname.rsplit('.', 1)[-1].endswith('CUDA') or bool(_CUDA_NAME.search(name))


def _cases(data: bytes) -> Iterable[Tuple[str, str]]:
    """(test id, state) of each CUDA test case of one well-formed report (bytes), state ran/failed/skipped; a
    quick `cuda` check first, so the CPU-only reports of a run cost one scan each."""
    if b'CUDA' not in data and b'_cuda' not in data:
        return
    starts = [match.start() for match in _TESTCASE.finditer(data)] + [len(data)]
    for start, end in zip(starts, starts[1:]):
        tag = _TAG_END.match(data, start)
        head = data[start:tag.end()] if tag else data[start:end]
        classname = _CLASSNAME.search(head)
        name = _NAME.search(head)
        if name is None:
            continue
        text_class = classname.group(1).decode('utf-8', 'replace') if classname else ''
        text_name = name.group(1).decode('utf-8', 'replace')
        if not is_cuda_test(text_class, text_name):
            continue
        body = data[tag.end() if tag else start:end]
        state = FAILED if _FAIL.search(body) else SKIPPED if _SKIP.search(body) else RAN
        yield f"{text_class.rsplit('.', 1)[-1]}.{text_name}", state


def _record(states: Dict[str, str], test_id: str, state: str) -> None:
    """state for test_id into states: the same test again (a rerun, another file) counts once, a pass wins and a
    failure beats a skip, as in a suite's own counts (xmlparse)."""
    previous = states.get(test_id)
    if previous is None or state == RAN or (previous == SKIPPED and state == FAILED):
        states[test_id] = state


def _tally(states: Dict[str, str]) -> Dict[str, int]:
    """{ran, failed, skipped} of {test id: state}: a failed test ran too."""
    counts = dict.fromkeys(CUDA_COUNT_KEYS, 0)
    for state in states.values():
        counts[RAN] += state in (RAN, FAILED)
        counts[FAILED] += state == FAILED
        counts[SKIPPED] += state == SKIPPED
    return counts


def cuda_counts(datas: Iterable[bytes]) -> Optional[Dict[str, int]]:
    """{ran, failed, skipped} of the CUDA tests in one suite's reports (the same test in several files, as a rerun
    writes it, once: _record); None without any report."""
    states: Dict[str, str] = {}
    seen = False
    for data in datas:
        seen = True
        for test_id, state in _cases(data):
            _record(states, test_id, state)
    return _tally(states) if seen else None


def with_named_failures(counts: Optional[Dict[str, int]], failed_test_ids: Iterable[str]) -> Optional[Dict[str, int]]:
    """counts raised to the CUDA tests a suite names as failing (`Class.test` ids): a test whose process crashed
    (a segfault in cuDNN's sub-library loading, measured on the H200 with torch 2.11: test_transformers'
    `TestSDPACudaOnlyCUDA.test_cudnn_attention_*_cuda`) leaves no -v result line and no XML case, yet the harness
    names it failing; each named failure beyond the failures counted ran and failed.  Unknown (None) stays
    unknown: a name alone does not say how many CUDA tests passed."""
    if counts is None:
        return None
    named = sum(1 for test_id in failed_test_ids if is_cuda_test(*test_id.partition('.')[::2]))
    missing = named - counts[FAILED]
    if missing <= 0:
        return counts
    return dict(counts, **{RAN: counts[RAN] + missing, FAILED: counts[FAILED] + missing})


def add_counts(total: Optional[Dict[str, int]], more: Optional[Dict[str, int]]) -> Optional[Dict[str, int]]:
    """The sum of two suites' (or pieces') counts; None only when both are unknown."""
    if total is None and more is None:
        return None
    return {key: (total or {}).get(key, 0) + (more or {}).get(key, 0) for key in CUDA_COUNT_KEYS}


def cuda_totals(result: RunResult) -> Optional[Dict[str, int]]:
    """{ran, failed, skipped} over every suite of result (a results.model.RunResult) whose CUDA tests were
    counted; None where no suite's were (no XML report anywhere)."""
    total = None
    for suite in result.suites.values():
        if suite.cuda_counts is not None:
            total = add_counts(total, suite.cuda_counts)
    return total


# a pytest -v result line, as every harness line prints it (`-v -vv`): `nn/test_convolution.py::Class::test PASSED
# [0.1s] [ 10%]` (a rootdir prefix such as `test/` possible; another worker's text may stand between the id and the
# state, a short summary's `FAILED [0.1s] path::...` never starts with the id)
_LOG_RESULT = re.compile(r'^(?:test/)?(?P<suite>[\w./-]+?)\.py::(?P<cls>\w+)::(?P<name>[^\s:]+)\s.*?'
                         r'(?<![\w])(?P<state>PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)(?= \[|\s*$)')
_ANY_RESULT = re.compile(r'(?m)^(?:test/)?[\w./-]+?\.py::\w+::\S+ (?:PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b')
_LOG_STATE = {'PASSED': RAN, 'XFAIL': RAN, 'XPASS': RAN, 'FAILED': FAILED, 'ERROR': FAILED, 'SKIPPED': SKIPPED}


def cuda_counts_in_log(blocks: Iterable[str]) -> Tuple[Dict[str, Dict[str, int]], bool]:
    """({suite: {ran, failed, skipped}} of the CUDA tests a run_test.py log's pytest -v lines show, whether it has
    any pytest -v result line at all), for a log read without its XML reports (`report LOG`); blocks of text, read
    once.  Only the lines around a `CUDA::` or `_cuda` are looked at (C-speed `find`s: a 1 GiB CPU log costs one
    scan); the same test again (a rerun) counts once (_record)."""
    states: Dict[str, Dict[str, str]] = {}
    any_lines = False
    rest = ''
    for block in blocks:
        data = rest + block
        cut = data.rfind('\n')
        if cut < 0:
            rest = data
            continue
        rest = data[cut + 1:]
        any_lines = _log_lines(data[:cut], states) or any_lines
    any_lines = _log_lines(rest, states) or any_lines
    return {suite: _tally(tests) for suite, tests in states.items()}, any_lines


def _candidate_lines(data: str) -> Iterable[str]:
    """The lines of data holding `CUDA::` or `_cuda`, each once, in order."""
    starts = set()
    for needle in ('CUDA::', '_cuda'):
        at = data.find(needle)
        while at >= 0:
            start = data.rfind('\n', 0, at) + 1
            starts.add(start)
            end = data.find('\n', at)
            at = data.find(needle, len(data) if end < 0 else end)
    for start in sorted(starts):
        end = data.find('\n', start)
        yield data[start:] if end < 0 else data[start:end]


def _log_lines(data: str, states: Dict[str, Dict[str, str]]) -> bool:
    """The CUDA tests' states of data's pytest -v lines into states; whether data has any -v result line."""
    if '.py::' not in data:
        return False
    for line in _candidate_lines(data):
        match = _LOG_RESULT.match(line)
        if match is None:
            continue
        classname, name = match.group('cls'), match.group('name')
        if not is_cuda_test(classname, name):
            continue
        _record(states.setdefault(match.group('suite'), {}), f'{classname}.{name}', _LOG_STATE[match.group('state')])
    return _ANY_RESULT.search(data) is not None
