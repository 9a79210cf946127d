"""Parse the JUnit XML reports PyTorch's run_test.py writes (test/test-reports/...) into the result model.

Layout: <reports>/<runner or variant>/<dotted.suite.name>/<file>.xml, where the runner is
python-pytest or python-unittest and a variant such as dist-gloo runs the same suite in another
configuration (merged into the suite here).  XML with a DTD or entity declarations is refused (no
entity expansion), as are malformed and empty files: each gets a one-line error naming the file.
Files are parsed by the C parser in one go and only <testcase> elements are visited.
"""

import os
import xml.etree.ElementTree as ElementTree

from ..errors import PluginError
from .model import (ERROR, FAILED, PASSED, SKIPPED, SUITE_FAILED, SUITE_PASSED, XFAILED, RunResult, TestCase)

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
    try:
        with open(path, 'rb') as handle:
            data = handle.read()
    except OSError as err:
        raise PluginError(path, f'cannot be read: {err.strerror}') from None
    if not data.strip():
        raise PluginError(path, 'is an empty XML report (truncated?)')
    start = data.find(b'<test')
    prolog = data[:start if start >= 0 else len(data)]
    if b'<!DOCTYPE' in prolog or b'<!ENTITY' in prolog:
        raise PluginError(path, 'contains a DTD or entity declarations; refused (no entity expansion)')
    try:
        return ElementTree.fromstring(data)
    except ElementTree.ParseError as err:
        raise PluginError(path, f'malformed XML ({err})') from None


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


def parse_report_dir(root):
    """RunResult of every *.xml below root; PluginError when there is none or one is bad."""
    if not os.path.isdir(root):
        raise PluginError(root, 'is not a directory of XML reports')
    files = sorted(os.path.join(d, f) for d, _, names in os.walk(root) for f in names if f.endswith('.xml'))
    if not files:
        raise PluginError(root, 'holds no XML test reports')
    per_suite = {}
    for path in files:
        element = _read(path)
        if element.tag not in ('testsuites', 'testsuite'):
            raise PluginError(path, f'root element is <{element.tag}>, not <testsuites> or <testsuite>')
        cases = per_suite.setdefault(_suite_name(path, root), {})
        for testcase in element.iter('testcase'):
            classname = testcase.get('classname') or ''
            test_id = f"{classname.rsplit('.', 1)[-1]}.{testcase.get('name')}" if classname else testcase.get('name')
            state, reruns = _testcase_state(testcase)
            previous = cases.get(test_id)
            if previous is None:
                cases[test_id] = [state, reruns]
            else:  # the same test again (a rerun, a variant): a pass wins, a failure beats a skip
                previous[1] += reruns
                if state == PASSED or (previous[0] in (SKIPPED, XFAILED) and state in (FAILED, ERROR)):
                    previous[0] = state
    result = RunResult()
    for name, cases in per_suite.items():
        suite = result.suite(name)
        suite.sources.append('xml')
        counts = suite.counts
        for test_id, (state, reruns) in cases.items():
            counts[STATE_COUNT_KEY[state]] += 1
            counts['rerun'] += reruns
            if state in (FAILED, ERROR):
                suite.failed_tests.append(TestCase(test_id, state, reruns))
        suite.status = SUITE_FAILED if suite.failing_count else SUITE_PASSED
    return result
