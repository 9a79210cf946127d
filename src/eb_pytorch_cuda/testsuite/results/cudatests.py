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


def cuda_counts(datas: Iterable[bytes]) -> Optional[Dict[str, int]]:
    """{ran, failed, skipped} of the CUDA tests in one suite's reports (the same test in several files, as a rerun
    writes it: a pass wins, a failure beats a skip, as in the suite's own counts); None without any report."""
    states: Dict[str, str] = {}
    seen = False
    for data in datas:
        seen = True
        for test_id, state in _cases(data):
            previous = states.get(test_id)
            if previous is None or (state == RAN) or (previous == SKIPPED and state == FAILED):
                states[test_id] = state
    if not seen:
        return None
    counts = dict.fromkeys(CUDA_COUNT_KEYS, 0)
    for state in states.values():
        if state == FAILED:
            counts[RAN] += 1
            counts[FAILED] += 1
        else:
            counts[state] += 1
    return counts


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
