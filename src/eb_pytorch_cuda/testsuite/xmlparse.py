"""Parse the JUnit XML reports PyTorch's run_test.py writes (test/test-reports/...) into the result model.

Layout: <reports>/<runner or variant>/<dotted.suite.name>/<file>.xml, where the runner is
python-pytest or python-unittest and a variant such as dist-gloo runs the same suite in another
configuration (merged into the suite here).  XML with a DTD or entity declarations is refused (no
entity expansion), as are malformed and empty files: each gets a one-line error naming the file.

Speed (a PyTorch run has ~207,000 test cases in ~1,000 files): every file is checked for
well-formedness by expat with no callbacks (pure C), then its test cases are found by splitting the
bytes at "<testcase": in well-formed XML without CDATA sections or comments, "<" never appears in
text or attribute values, so each piece holds one test case's tag and children.  Only the pieces
with failures, errors or reruns (well under one percent) are looked at further; passes and skips
are counted.  Files with CDATA or comments, and suites spread over several files that have failures
or skips (where a pass in one file must override a failure or skip in another), take the
ElementTree path, which names every test case.
"""

import os
import re
import xml.etree.ElementTree as ElementTree
from xml.parsers import expat
from xml.sax.saxutils import unescape

from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.inputs import read_bytes
from eb_pytorch_cuda.testsuite.model import (ERROR, FAILED, PASSED, SKIPPED, SUITE_FAILED, SUITE_PASSED, XFAILED,
                                             RunResult, TestCase)

RUNNERS = ('python-pytest', 'python-unittest')
STATE_COUNT_KEY = {PASSED: 'passed', FAILED: 'failed', ERROR: 'errors', SKIPPED: 'skipped', XFAILED: 'xfailed'}


def _suite_name(path, root):
    """'dynamo/test_dynamic_shapes' from .../python-pytest/dynamo.test_dynamic_shapes/<file>.xml."""
    relative = os.path.relpath(path, root).split(os.sep)
    if len(relative) >= 2:
        return relative[-2].replace('.', '/')
    name = os.path.basename(path)[:-len('.xml')]
    return name.rsplit('-', 1)[0].replace('.', '/')


def _read(path):
    data = read_bytes(path)
    if not data.strip():
        raise PluginError(path, 'is an empty XML report (truncated?)')
    start = data.find(b'<test')
    prolog = data[:start if start >= 0 else len(data)]
    if b'<!DOCTYPE' in prolog or b'<!ENTITY' in prolog:
        raise PluginError(path, 'contains a DTD or entity declarations; refused (no entity expansion)')
    try:
        expat.ParserCreate().Parse(data, True)
    except expat.ExpatError as err:
        raise PluginError(path, f'malformed XML ({err})') from None
    root = _ROOT_TAG.match(data)
    tag = root.group(1).decode('ascii', 'replace') if root else '?'
    if tag not in ('testsuites', 'testsuite'):
        raise PluginError(path, f'root element is <{tag}>, not <testsuites> or <testsuite>')
    return data


_ROOT_TAG = re.compile(rb'\s*(?:<\?.*?\?>\s*)?(?:<!--.*?-->\s*)*<([\w:.-]+)', re.S)
_ATTRIBUTE = re.compile(rb'\b(classname|name)\s*=\s*(?:"([^"]*)"|\'([^\']*)\')')
_FAILING_CHILD = re.compile(rb'<(failure|error|rerun)[\s/>]')
_SKIPPED = re.compile(rb'<skipped[\s/>]')
_XFAIL = re.compile(rb'<skipped[^>]*pytest\.xfail')
_ENTITIES = {'&quot;': '"', '&apos;': "'"}


def _test_id(classname, name):
    return f"{classname.rsplit('.', 1)[-1]}.{name}" if classname else name


def _fast_cases(data):
    """({state: count} of test cases left unnamed, [(test_id, state, reruns)] of the others), or None.

    Only failures, errors and reruns are named; passes and skips are counted (bytes.count and a C
    regex), so Python work is done per failing test case, never per passing or skipped one.  None
    means: this file needs the slow path (CDATA, comments, or a child element outside a test case).
    """
    if b'<![CDATA[' in data or b'<!--' in data:
        return None
    total = data.count(b'<testcase') - data.count(b'<testcases')
    skipped = len(_SKIPPED.findall(data))
    xfailed = len(_XFAIL.findall(data))
    per_case = {}
    for match in _FAILING_CHILD.finditer(data):
        start = data.rfind(b'<testcase', 0, match.start())
        if start < 0:
            return None
        entry = per_case.setdefault(start, [PASSED, 0])
        tag = match.group(1)
        if tag == b'rerun':
            entry[1] += 1
        elif tag == b'error':
            entry[0] = ERROR
        elif entry[0] != ERROR:
            entry[0] = FAILED
    named = []
    for start, (state, reruns) in per_case.items():
        attributes = {}
        for key, double, single in _ATTRIBUTE.findall(data[start:data.find(b'>', start)]):
            value = (double or single).decode('utf-8', 'replace')
            attributes.setdefault(key.decode(), unescape(value, _ENTITIES) if '&' in value else value)
        named.append((_test_id(attributes.get('classname', ''), attributes.get('name')), state, reruns))
    return {PASSED: total - skipped - len(per_case), SKIPPED: skipped - xfailed, XFAILED: xfailed}, named


def _tree_cases(data):
    """The same as _fast_cases, through ElementTree, naming every test case."""
    cases = []
    for testcase in ElementTree.fromstring(data).iter('testcase'):
        state, reruns = _testcase_state(testcase)
        cases.append((_test_id(testcase.get('classname') or '', testcase.get('name')), state, reruns))
    return {}, cases


def _testcase_state(testcase):
    state, reruns = PASSED, 0
    for child in testcase:
        tag = child.tag
        if tag == 'failure':
            state = FAILED if state != ERROR else state
        elif tag == 'error':
            state = ERROR
        elif tag == 'skipped':
            if state == PASSED:
                state = XFAILED if child.get('type') == 'pytest.xfail' else SKIPPED
        elif tag == 'rerun':
            reruns += 1
    return state, reruns


def _add_cases(cases, anonymous, found):
    """Merge ({state: unnamed count}, [(test_id, state, reruns)]) into cases and anonymous: the same test
    again (a rerun, a variant) keeps one entry, where a pass wins and a failure beats a skip."""
    for state, count in found[0].items():
        anonymous[state] = anonymous.get(state, 0) + count
    for test_id, state, reruns in found[1]:
        previous = cases.get(test_id)
        if previous is None:
            cases[test_id] = [state, reruns]
        else:
            previous[1] += reruns
            if state == PASSED or (previous[0] in (SKIPPED, XFAILED) and state in (FAILED, ERROR)):
                previous[0] = state


def parse_report_dir(root):
    """RunResult of every *.xml below root; PluginError when there is none or one is bad."""
    if not os.path.isdir(root):
        raise PluginError(root, 'is not a directory of XML reports')
    files = sorted(os.path.join(d, f) for d, _, names in os.walk(root) for f in names if f.endswith('.xml'))
    if not files:
        raise PluginError(root, 'holds no XML test reports')
    return parse_report_files(root, files)


def parse_report_files(root, files):
    """RunResult of the given report files below root (suite names come from their place under root)."""
    files_of = {}
    for path in files:
        files_of.setdefault(_suite_name(path, root), []).append(path)
    per_suite = {}
    for name, paths in files_of.items():
        datas = [_read(path) for path in paths]
        found = [_fast_cases(data) for data in datas]
        several_with_failures = len(paths) > 1 and any(f is None or f[1] or f[0][SKIPPED] or f[0][XFAILED]
                                                       for f in found)
        # in a suite spread over several files, a pass in one may override a failure in another: name them all
        found = [_tree_cases(data) if several_with_failures or cases is None else cases
                 for data, cases in zip(datas, found)]
        cases, anonymous = {}, {}  # anonymous: test cases counted without a name, per state
        for file_cases in found:
            _add_cases(cases, anonymous, file_cases)
        per_suite[name] = (cases, anonymous)
    result = RunResult()
    for name, (cases, anonymous) in per_suite.items():
        suite = result.suite(name)
        suite.sources.append('xml')
        counts = suite.counts
        for state, count in anonymous.items():
            counts[STATE_COUNT_KEY[state]] += count
        for test_id, (state, reruns) in cases.items():
            counts[STATE_COUNT_KEY[state]] += 1
            counts['rerun'] += reruns
            if state in (FAILED, ERROR):
                suite.failed_tests.append(TestCase(test_id, state, reruns))
        suite.status = SUITE_FAILED if suite.failing_count else SUITE_PASSED
    return result
