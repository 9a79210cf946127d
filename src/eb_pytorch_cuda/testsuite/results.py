"""Load test results from logs, XML report directories and saved JSON, and merge them into one RunResult.

XML reports are the more precise source (every test case, its state and reruns); the log is the only
source for what XML cannot say: suites killed by a signal, suites that failed before writing a report,
suites that never finished.  Merging keeps XML counts and failed tests, and the log's status wherever
the log says the suite could not be judged.
"""

import json
import os

from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.testsuite.logparse import parse_log_file
from eb_pytorch_cuda.testsuite.model import UNJUDGEABLE, RunResult
from eb_pytorch_cuda.testsuite.xmlparse import parse_report_dir

RESULT_FORMAT = 'eb-pytorch-cuda-test-results'


def merge(primary, secondary):
    """Merge secondary (a log) into primary (XML); return primary."""
    for name, suite in secondary.suites.items():
        target = primary.suites.get(name) or _variant_match(primary, name)
        if target is None:
            primary.suites[name] = suite
            continue
        for source in suite.sources:
            if source not in target.sources:
                target.sources.append(source)
        if suite.status in UNJUDGEABLE and not (suite.status != 'terminated' and target.failing_count):
            target.status, target.signal = suite.status, suite.signal
        known = {t.test_id for t in target.failed_tests}
        target.failed_tests += [t for t in suite.failed_tests if t.test_id not in known and not target.failing_count]
    return primary


def _variant_match(result, name):
    """XML suites of variants are stored under the plain suite name; nothing else to match."""
    return result.suites.get(name.split('/', 1)[1]) if name.startswith('dist-') and '/' in name else None


def load_saved(path):
    try:
        with open(path) as handle:
            data = json.load(handle)
    except (OSError, ValueError) as err:
        raise PluginError(path, f'is not a readable JSON result ({err})') from None
    if not isinstance(data, dict) or data.get('format') != RESULT_FORMAT or 'suites' not in data:
        raise PluginError(path, f'is not a saved {RESULT_FORMAT} JSON file')
    try:
        return RunResult.from_dict(data)
    except (TypeError, KeyError) as err:
        raise PluginError(path, f'has an unexpected structure ({err})') from None


def load_results(paths):
    """One RunResult from any mix of run_test.py logs, XML report directories and saved JSON results."""
    xml, logs, saved = RunResult(), [], []
    for path in paths:
        if os.path.isdir(path):
            merge(xml, parse_report_dir(path))
        elif str(path).endswith('.json'):
            saved.append(load_saved(path))
        elif os.path.exists(path):
            logs.append(parse_log_file(path))
        else:
            raise PluginError(path, 'no such file or directory')
    result = xml
    for other in logs + saved:
        result = merge(result, other) if result.suites else other
    return result
