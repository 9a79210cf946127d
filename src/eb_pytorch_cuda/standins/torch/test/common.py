"""Shared runner of the stand-in test files: unittest console output plus a JUnit XML report.

The XML goes to test-reports/python-unittest/<suite>/TEST-<suite>-<stamp>.xml, as PyTorch writes it (with
$TEST_REPORT_SOURCE_OVERRIDE in place of python-unittest when set, as common_utils' _get_test_report_path);
each <testcase> has its measured `time` and, as pytest's junitxml writes them, its `file` (relative to test/).
"""

import os
import sys
import time
import unittest
from xml.sax.saxutils import quoteattr

HERE = os.path.dirname(os.path.abspath(__file__))


class _Recorder(unittest.TextTestResult):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.outcomes = []
        self.seconds = {}
        self._started = 0.0

    def startTest(self, test):
        self._started = time.monotonic()
        super().startTest(test)

    def stopTest(self, test):
        super().stopTest(test)
        self.seconds[test.id()] = time.monotonic() - self._started

    def addSuccess(self, test):
        super().addSuccess(test)
        self.outcomes.append((test, ''))

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self.outcomes.append((test, '<failure message="failed"/>'))

    def addError(self, test, err):
        super().addError(test, err)
        self.outcomes.append((test, '<error message="error"/>'))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self.outcomes.append((test, f'<skipped message={quoteattr(reason)}/>'))


def run_tests(suite_file):
    """unittest.main-like: honours -k and exact 'Class.test' ids, prints unittest's summary, writes the XML
    report; exits 1 on failure."""
    suite_name = os.path.relpath(os.path.abspath(suite_file), HERE)[:-3]
    argv = sys.argv[1:]
    loader = unittest.TestLoader()
    if '-k' in argv:
        loader.testNamePatterns = [f'*{argv[argv.index("-k") + 1]}*']
    names = [arg for arg in argv if not arg.startswith('-') and '.' in arg]
    module = sys.modules['__main__']
    tests = loader.loadTestsFromNames(names, module) if names else loader.loadTestsFromModule(module)
    runner = unittest.TextTestRunner(stream=sys.stdout, verbosity=2, resultclass=_Recorder)
    result = runner.run(tests)
    cases = ''.join(f'<testcase classname={quoteattr(type(t).__module__ + "." + type(t).__name__)} '
                    f'name={quoteattr(t._testMethodName)} time="{result.seconds.get(t.id(), 0):.3f}" '
                    f'file={quoteattr(suite_name + ".py")}>{child}</testcase>'
                    for t, child in result.outcomes)
    source = os.environ.get('TEST_REPORT_SOURCE_OVERRIDE') or 'python-unittest'
    report_dir = os.path.join(HERE, 'test-reports', source, suite_name.replace(os.sep, '.'))
    os.makedirs(report_dir, exist_ok=True)
    with open(os.path.join(report_dir, f'TEST-{suite_name.replace(os.sep, ".")}-{time.time_ns()}.xml'), 'w') as out:
        out.write(f'<?xml version="1.0" encoding="UTF-8"?><testsuite name={quoteattr(suite_name)} '
                  f'tests="{result.testsRun}">{cases}</testsuite>')
    sys.exit(0 if result.wasSuccessful() else 1)
