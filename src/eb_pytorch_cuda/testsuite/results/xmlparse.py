"""Parse the JUnit XML reports PyTorch's run_test.py writes (test/test-reports/...) into the result model.

Layout (results/reportdirs owns it): <reports>/<runner or variant>/<dotted.suite.name>/<file>.xml, where the
runner is python-pytest or python-unittest (or an attempt's own directory of one).  A variant such as
dist-gloo-init-env runs the same suite in another configuration: it is kept as a suite of its own,
`<variant>/<suite>` (upstream EB_PyTorch's name), so a pass under one backend never cancels a failure under
another.  Reports in `python-unittest/-c/` come
from `python -c` subprocesses that PyTorch tests spawn, not from a suite: ignored, as upstream does.

What is refused, each with a one-line error naming the file (upstream easybuild-easyblocks' corpus,
`test/pytorch_test_logs/faulty-reports`, holds one of each): malformed XML, a DTD or entity declarations
(no entity expansion), a root other than <testsuites>/<testsuite>, a <testsuite> whose `tests` is below
max(failures, errors) + skipped, one that reports tests but holds no test case, and one test case twice
in one file (except failed + errored, which pytest writes when a failed test's teardown errors too: one
failure).  So is a declared encoding expat cannot read (shift_jis, gbk, UTF-7: pyexpat takes single-byte codecs
only).  In the test step (strict=False) such a file does not abort the step: its suite becomes
SUITE_BAD_REPORT, judged like a crash.  An empty or comment-only file (a suite killed while writing it)
is skipped and its suite marked SUITE_REPORT_INCOMPLETE, never "passed", as is a suite whose reports
hold no test case at all (2.6 writes a `tests="0"` report for a pool suite's `-m serial` pass; a suite
killed in the pool leaves only that).  A nameless <testcase/> is ignored.  A test case both skipped
and failed (pytest writes it when a skipped test's teardown fails) counts as failed: upstream refuses
the file; counting the failure keeps it and still gives a verdict.

Speed (a PyTorch run has ~207,000 test cases in ~1,000 files): every file is checked for
well-formedness by expat with no callbacks (pure C), then its test cases are found by splitting the
bytes at "<testcase": in well-formed XML without CDATA sections or comments, "<" never appears in
text or attribute values, so each piece holds one test case's tag and children.  Only the pieces
with failures, errors or reruns (well under one percent) are looked at further; passes and skips
are counted.  Files with CDATA, comments, repeated or missing test names (looked for where the
<testsuite> `tests` counts disagree with the test cases present), or a failing test case that is also
skipped, and suites spread over several files that have failures or skips (where a pass in
one file must override a failure or skip in another), take the ElementTree path, which names every
test case.
"""

import os
import re
import xml.etree.ElementTree as ElementTree
from xml.parsers import expat

from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.inputs import read_bytes
from eb_pytorch_cuda.testsuite.results.cudatests import cuda_counts
from eb_pytorch_cuda.testsuite.results.reportdirs import all_report_files, suite_of_report
from eb_pytorch_cuda.testsuite.results.model import (ERROR, FAILED, PASSED, SKIPPED, SUITE_BAD_REPORT, SUITE_FAILED,
                                                     SUITE_PASSED, SUITE_REPORT_INCOMPLETE, XFAILED, RunResult,
                                                     TestCase)

STATE_COUNT_KEY = {PASSED: 'passed', FAILED: 'failed', ERROR: 'errors', SKIPPED: 'skipped', XFAILED: 'xfailed'}

_EMPTY = 'empty'  # a file holding no element at all


class _Refused(Exception):
    """A report file that must not be trusted; str() is the problem."""


_PROLOG_ONLY = re.compile(rb'\s*(?:<\?[^?]*(?:\?(?!>)[^?]*)*\?>\s*)?(?:<!--(?:[^-]|-(?!->))*-->\s*)*\Z')
_ROOT_TAG = re.compile(rb'\s*(?:<\?[^?]*(?:\?(?!>)[^?]*)*\?>\s*)?(?:<!--(?:[^-]|-(?!->))*-->\s*)*<([\w:.-]+)')
_TAG_REST = re.compile(rb'(?:[^>"\']|"[^"]*"|\'[^\']*\')*>')  # the rest of a tag, '>' inside values allowed
_ATTRIBUTE = re.compile(rb'\b([\w:.-]+)\s*=\s*(?:"([^"]*)"|\'([^\']*)\')')
_FAILING_CHILD = re.compile(rb'<(failure|error|rerun)[\s/>]')
_SKIPPED = re.compile(rb'<skipped[\s/>]')
_XFAIL = re.compile(rb'<skipped[^>]*pytest\.xfail')
_NAME_VALUE = re.compile(rb' name="([^"]*)"')  # of test cases and test suites alike (fast; see _fast_cases)


_DECLARED_ENCODING = re.compile(rb'^(<\?xml[^>]*?\bencoding\s*=\s*)(["\'])[^"\']*\2')
_UTF16 = ((b'\xff\xfe', 'utf-16-le'), (b'\xfe\xff', 'utf-16-be'), (b'<\0?\0', 'utf-16-le'), (b'\0<\0?', 'utf-16-be'))


def _as_utf8(data):
    """data, a report in UTF-8 (a byte order mark dropped) or UTF-16 (with or without one), as UTF-8 bytes with
    any encoding declaration saying so: the readers below work on ASCII-compatible bytes (a BOM or UTF-16
    would read as `root element is <?>`).  _Refused naming the encoding when it does not decode."""
    if data.startswith(b'\xef\xbb\xbf'):
        return data[3:]
    if data.startswith((b'\0\0\xfe\xff', b'\xff\xfe\0\0', b'\0\0\0<', b'<\0\0\0')):
        raise _Refused('is UTF-32, which is not read (write the report as UTF-8)')
    for start, encoding in _UTF16:
        if data.startswith(start):
            try:
                text = data.decode(encoding)
            except UnicodeDecodeError as err:
                raise _Refused(f'starts as {encoding.upper()} but does not decode as it ({err.reason} at byte '
                               f'{err.start})') from None
            return _DECLARED_ENCODING.sub(rb'\1\2UTF-8\2', text.lstrip('\ufeff').encode('utf-8'), count=1)
    return data


def _read(path):
    """The bytes of a well-formed report, _EMPTY for an empty or comment-only file; _Refused otherwise."""
    data = _as_utf8(read_bytes(path))
    if b'<test' not in data and _PROLOG_ONLY.match(data):
        return _EMPTY
    start = data.find(b'<test')
    prolog = data[:start if start >= 0 else len(data)]
    if b'<!DOCTYPE' in prolog or b'<!ENTITY' in prolog:
        raise _Refused(_DTD)
    parser = expat.ParserCreate()
    parser.StartDoctypeDeclHandler = _refuse_dtd  # wherever it is: a '<test' in a comment or PI hid it above
    root: list = []

    def first_element(name, attributes):
        root.append(name)
        parser.StartElementHandler = None  # the root is all we need: no callback per test case
    parser.StartElementHandler = first_element
    try:
        parser.Parse(data, True)
    except expat.ExpatError as err:
        raise _Refused(f'malformed XML ({err})') from None
    except LookupError as err:  # expat asks Python's codecs for an encoding it does not know itself
        raise _Refused(f'declares an encoding Python does not know ({err}); write the report as UTF-8') from None
    except ValueError as err:
        # pyexpat takes only single-byte codecs for the encodings expat lacks: shift_jis, gbk, big5, UTF-7
        # ('multi-byte encodings are not supported'), punycode, idna (UnicodeError, a ValueError)
        raise _Refused(f'declares the encoding {_declared_encoding(data)!r}, which is not read ({err}); write the '
                       f'report as UTF-8') from None
    tag = root[0] if root else '?'
    if tag not in ('testsuites', 'testsuite'):
        raise _Refused(f'root element is <{tag}>, not <testsuites> or <testsuite>')
    if not _ROOT_TAG.match(data):  # the fast readers below find test cases by their bytes, after a plain prolog
        raise _Refused('has a prolog this reader does not take (several processing instructions?); refused')
    return data


_DTD = 'contains a DTD or entity declarations; refused (no entity expansion)'
_ENCODING_VALUE = re.compile(rb'<\?xml[^>]*?\bencoding\s*=\s*(["\'])([^"\']*)\1')


def _declared_encoding(data) -> str:
    """The encoding named in data's XML declaration, as text ('?' when there is none)."""
    match = _ENCODING_VALUE.match(data.lstrip()[:200])
    return match.group(2).decode('ascii', 'replace') if match else '?'


def _refuse_dtd(*_declaration):
    raise _Refused(_DTD)


_REFERENCE = re.compile(r'&(?:#(\d+)|#x([0-9A-Fa-f]+)|(lt|gt|amp|quot|apos));')
_NAMED = {'lt': '<', 'gt': '>', 'amp': '&', 'quot': '"', 'apos': "'"}
_LINE_END = re.compile(r'\r\n?|[\n\t]')


def _reference(match) -> str:
    number, hexadecimal, name = match.groups()
    if name:
        return _NAMED[name]
    try:
        return chr(int(number) if number else int(hexadecimal, 16))
    except (ValueError, OverflowError):  # (expat has refused such a file already)
        return match.group(0)


def attribute_value(raw: str) -> str:
    """An attribute's value as XML 1.0 (3.3.3) defines it, and as expat and ElementTree give it: each line end
    and tab a space, then character and entity references replaced (so &#10; stays a newline): the fast path
    and the ElementTree path read the same name."""
    value = _LINE_END.sub(' ', raw)
    return _REFERENCE.sub(_reference, value) if '&' in value else value


def _attributes(data, start):
    """{name: value} of the tag starting at start ('<name ...>'), values as XML reads them (attribute_value)."""
    end = _TAG_REST.match(data, start + 1)
    tag = data[start:end.end() if end else len(data)]
    values: dict = {}
    for key, double, single in _ATTRIBUTE.findall(tag):
        values.setdefault(key.decode(), attribute_value((double or single).decode('utf-8', 'replace')))
    return values


def _count_attribute(values, key):
    try:
        return int(values.get(key) or 0)
    except ValueError:
        raise _Refused(f'<testsuite> attribute {key}={values[key]!r} is not a number') from None


def _case_count(data, start=0, end=None):
    return data.count(b'<testcase', start, len(data) if end is None else end)  # JUnit has no <testcases>


def _check_testsuite_counts(data, total):
    """Refuse a <testsuite> whose counts cannot be true (upstream's "Invalid test count" and "no test");
    return (the sum of the `tests` attributes, the number of name attributes outside test cases)."""
    starts, position = [], data.find(b'<testsuite')
    while position >= 0:  # bytes.find: a few hits in megabytes, faster than a regex scan
        if data[position + 10:position + 11] in (b' ', b'\t', b'\n', b'\r', b'/', b'>'):
            starts.append(position)
        position = data.find(b'<testsuite', position + 10)
    declared = 0
    for index, start in enumerate(starts):
        values = _attributes(data, start)
        tests, failures, errors, skipped = (_count_attribute(values, key)
                                            for key in ('tests', 'failures', 'errors', 'skipped'))
        if tests < max(failures, errors) + skipped:
            raise _Refused(f'invalid test count: tests={tests} but failures={failures}, errors={errors}, '
                           f'skipped={skipped}')
        end = starts[index + 1] if index + 1 < len(starts) else len(data)
        cases = total if len(starts) == 1 else _case_count(data, start, end)
        if tests > 0 and cases == 0:
            raise _Refused(f'<testsuite> reports {tests} test(s) but holds no test case')
        declared += tests
    # the name attributes that are not test cases': one per <testsuite>, and <testsuites name="pytest tests">
    return declared, len(starts) + (len(_NAME_VALUE.findall(data, 0, starts[0])) if starts else 0)


def _test_id(classname, name):
    return f"{classname.rsplit('.', 1)[-1]}.{name}" if classname else name


def _fast_cases(data):
    """({state: count} of test cases left unnamed, [(test_id, state, reruns)] of the others), or None.

    Only failures, errors and reruns are named; passes and skips are counted (bytes.count and a C
    regex), so Python work is done per failing test case, never per passing or skipped one.  None
    means: this file needs the slow path (CDATA, comments, a child element outside a test case, a
    test name missing or repeated, or a failing or rerun test case that is also skipped).
    """
    total = _case_count(data)
    declared, other_names = _check_testsuite_counts(data, total)
    if b'<![CDATA[' in data or b'<!--' in data:
        return None
    if declared != total:
        # pytest writes one <testcase> per test counted in `tests` (two for a test that failed and errored
        # in teardown); more or fewer may mean a nameless or repeated test case.  ' name="' appears once
        # per test case and once per test suite: any other count means a nameless test case (or an
        # unusual writer), a repeated value a test case twice: ElementTree decides
        names = _NAME_VALUE.findall(data)
        if len(names) != total + other_names or len(set(names)) != len(names):
            return None
    skipped = len(_SKIPPED.findall(data))
    xfailed = len(_XFAIL.findall(data))
    per_case: dict = {}
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
    for start in per_case:
        following = data.find(b'<testcase', start + 1)
        if _SKIPPED.search(data, start, following if following >= 0 else len(data)):
            return None
    for start, (state, reruns) in per_case.items():
        attributes = _attributes(data, start)
        named.append((_test_id(attributes.get('classname', ''), attributes.get('name')), state, reruns))
    return {PASSED: total - skipped - len(per_case), SKIPPED: skipped - xfailed, XFAILED: xfailed}, named


def _tree_cases(data):
    """The same as _fast_cases, through ElementTree, naming every test case; nameless ones are ignored,
    a test case twice in one file is refused unless it failed once and errored once."""
    cases: list = []
    index: dict = {}
    for testcase in ElementTree.fromstring(data).iter('testcase'):
        name = testcase.get('name')
        if not name:
            continue  # an incomplete record, as upstream ignores it
        state, reruns = _testcase_state(testcase)
        test_id = _test_id(testcase.get('classname') or '', name)
        if test_id in index:
            previous = cases[index[test_id]]
            if {previous[1], state} != {FAILED, ERROR}:
                raise _Refused(f'duplicate test case {test_id}')
            cases[index[test_id]] = (test_id, previous[1], previous[2] + reruns)
            continue
        index[test_id] = len(cases)
        cases.append((test_id, state, reruns))
    return {}, cases


def _testcase_state(testcase):
    """Failing beats skipped: a test case both skipped and failed is a failure."""
    failed = errored = skipped = xfail = False
    reruns = 0
    for child in testcase:
        tag = child.tag
        if tag == 'failure':
            failed = True
        elif tag == 'error':
            errored = True
        elif tag == 'skipped':
            skipped = True
            xfail = xfail or child.get('type') == 'pytest.xfail'
        elif tag == 'rerun':
            reruns += 1
    if errored:
        return ERROR, reruns
    if failed:
        return FAILED, reruns
    if skipped:
        return (XFAILED if xfail else SKIPPED), reruns
    return PASSED, reruns


def _add_cases(cases, anonymous, found):
    """Merge ({state: unnamed count}, [(test_id, state, reruns)]) into cases and anonymous: the same test
    again (a rerun in another file) keeps one entry, where a pass wins and a failure beats a skip."""
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


def parse_report_dir(root: str) -> RunResult:
    """RunResult of every *.xml below root; PluginError (naming the file) when there is none or one is bad."""
    if not os.path.isdir(root):
        raise PluginError(root, 'is not a directory of XML reports')
    files = all_report_files(root)
    if not files:
        raise PluginError(root, 'holds no XML test reports')
    return parse_report_files(root, files, strict=True)


def _read_suite(name, paths, strict, refused):
    """[(path, data or _EMPTY)] of one suite's files; a refused file raises (strict) or is noted in refused."""
    entries = []
    for path in paths:
        try:
            entries.append((path, _read(path)))
        except (_Refused, PluginError) as err:
            problem = err.problem if isinstance(err, PluginError) else str(err)
            if strict:
                raise PluginError(path, problem) from None
            refused.setdefault(name, f'{path}: {problem}')
    return entries


def parse_report_files(root: str, files: list, strict: bool = False) -> RunResult:
    """RunResult of the given report files below root (suite names come from their place under root).

    strict: a file that cannot be trusted raises PluginError (the `report` command: exit 2).  Otherwise
    (the test step) its suite is recorded as SUITE_BAD_REPORT with the problem in its note, and the
    other suites are parsed as usual.  Files are read one suite at a time (memory: the largest suite).
    """
    paths_of: dict = {}
    for path in files:
        name = suite_of_report(path, root)
        if name is not None:
            paths_of.setdefault(name, []).append(path)
    result, refused = RunResult(), {}  # type: RunResult, dict
    for name, paths in paths_of.items():
        entries = _read_suite(name, paths, strict, refused)
        empty = [path for path, data in entries if data is _EMPTY]
        datas = [(path, data) for path, data in entries if data is not _EMPTY]
        try:
            cases, anonymous = _suite_cases(datas)
        except _Refused as err:
            path = err.args[1] if len(err.args) > 1 else root
            if strict:
                raise PluginError(path, err.args[0]) from None
            refused.setdefault(name, f'{path}: {err.args[0]}')
            cases, anonymous = {}, {}
        suite = result.suite(name)
        suite.cuda_counts = cuda_counts(data for _path, data in datas) if name not in refused else None
        del entries, datas
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
        if name in refused:
            suite.status, suite.note = SUITE_BAD_REPORT, refused[name]
        elif empty:
            suite.status = SUITE_REPORT_INCOMPLETE
            suite.note = f'{empty[0]}: empty or comment-only XML report (killed while writing it?)'
        elif not any(counts[key] for key in STATE_COUNT_KEY.values()):
            # run_test.py 2.6 runs a pool suite alone first (`-m serial`: usually a report with tests="0"),
            # then in the pool: a suite killed there leaves only that empty report
            suite.status = SUITE_REPORT_INCOMPLETE
            suite.note = f'{paths[0]}: its reports hold no test case (killed before writing one?)'
    return result


def _suite_cases(datas):
    """({test_id: [state, reruns]}, {state: unnamed count}) of one suite's well-formed report files."""
    found = []
    for path, data in datas:
        try:
            found.append(_fast_cases(data))
        except _Refused as err:
            raise _Refused(str(err), path) from None
    several_with_failures = len(datas) > 1 and any(f is None or f[1] or f[0][SKIPPED] or f[0][XFAILED]
                                                   for f in found)
    cases: dict = {}
    anonymous: dict = {}
    for (path, data), fast in zip(datas, found):
        if several_with_failures or fast is None:
            # in a suite spread over several files, a pass in one may override a failure in another: name them all
            try:
                fast = _tree_cases(data)
            except _Refused as err:
                raise _Refused(str(err), path) from None
        _add_cases(cases, anonymous, fast)
    return cases, anonymous
