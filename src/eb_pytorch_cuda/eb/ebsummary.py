"""Read the failure summary EasyBuild's PyTorch easyblock prints (what bot jobs and pull-request comments post).

The public field data of PyTorch test failures is mostly this summary, not run_test.py's own output: a
header and one line per failing suite, as easybuild-easyblocks' pytorch.py prints it
(4.9: `WARNING: 3 test failures, 0 test errors (out of 211116):` then `test_jit 1/1 (1 failed, 2380
passed, 114 skipped, 12 xfailed, 2 rerun)`, or `distributed/test_c10d_nccl 1/1 (1 unit test(s)
failed)`; 5.x: `Failed tests (suites/files):` then tab-indented `suite (2 failed, 10 passed, 30 skipped,
0 errors)`; older: `suite (219 total tests, failures=1)`).  It counts, it names no test: each failure
becomes an unnamed one of its suite, so only a suite-level known_test_failures entry with that count
covers it.  Where a header gives the totals, the suites must add up to them, else the excerpt is cut.

`load(paths)` is load_results for report: a file that is no run_test.py log but holds such a summary is
read as one; everything else goes to testsuite.results as before.
"""

import os
import re
from typing import Iterable, Iterator, Optional

from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.inputs import open_regular
from eb_pytorch_cuda.testsuite.results.logparse import parse_log_file
from eb_pytorch_cuda.testsuite.results.model import SUITE_FAILED, SUITE_PASSED, RunResult, Suite
from eb_pytorch_cuda.testsuite.results.saved import load_results, merge

HEADER = re.compile(r'(?P<failures>\d+) test failures?, (?P<errors>\d+) test errors? \(out of (?P<total>\d+)\):')
SUITE_LINE = re.compile(r'^[ \t]*(?P<suite>[A-Za-z_][\w/.-]*)(?: \d+/\d+)? '
                        r'\((?P<details>(?:[^()\n]|\(s\))*)\)[ \t]*$', re.M)
ITEM = re.compile(r'^(?P<count>\d+) (?P<key>[\w()]+(?: [\w()]+)*)$')
KEY_VALUE = re.compile(r'^(?P<key>[\w ]+)=(?P<count>\d+)$')
# words of a summary item -> count key of the model ('1 unit test(s) failed' is run_test.py's own count)
KEYS = {'failed': 'failed', 'passed': 'passed', 'skipped': 'skipped', 'xfailed': 'xfailed', 'xpassed': 'xpassed',
        'rerun': 'rerun', 'error': 'errors', 'errors': 'errors', 'unit test(s) failed': 'failed',
        'failures': 'failed', 'expected failures': 'xfailed', 'unexpected successes': 'xpassed',
        'total tests': None, 'warning': None, 'warnings': None, 'deselected': None}


def _counts(details: str) -> Optional[dict]:
    """{count key: n} of one suite's '(...)', or None when it is not a summary (an unknown word)."""
    counts: dict = {}
    for item in (part.strip() for part in details.split(',')):
        match = ITEM.match(item) or KEY_VALUE.match(item)
        if not match or match['key'] not in KEYS:
            return None
        key = KEYS[match['key']]
        if key:
            counts[key] = counts.get(key, 0) + int(match['count'])
    return counts


def parse_summary(text: str, source: str = 'summary') -> Optional[RunResult]:
    """RunResult of EasyBuild's failure summary in text; None when text holds none (parse_summary_lines)."""
    return parse_summary_lines(text.split('\n'), source)


def parse_summary_lines(lines: Iterable[str], source: str = 'summary') -> Optional[RunResult]:
    """RunResult of EasyBuild's failure summary in lines (one pass: memory is one line and the suites found);
    None when they hold none.  A suite listed twice (several runs of it) is added up; totals that the suites
    do not add up to are refused (a cut excerpt)."""
    result = RunResult()
    header, headers = None, 0
    for line in lines:
        if ')' not in line:  # (neither a header nor a suite line: most lines of a log, skipped at C speed)
            continue
        for found in HEADER.finditer(line):
            header, headers = header or found, headers + 1
        match = SUITE_LINE.match(line)
        counts = _counts(match['details']) if match else None
        if match is None or counts is None:
            continue
        name = match['suite']
        suite = result.suites.setdefault(name, Suite(name, sources=['summary']))
        for key, count in counts.items():
            suite.counts[key] += count
        suite.status = SUITE_FAILED if suite.failing_count else SUITE_PASSED
    if not result.suites:
        return None
    if headers > 1:
        raise PluginError(source, f'holds {headers} EasyBuild failure summaries; give one per file')
    if header:
        expected = int(header['failures']) + int(header['errors'])
        counted = sum(suite.failing_count for suite in result.suites.values())
        if counted != expected:
            raise PluginError(source, f'EasyBuild summary counts {expected} failures and errors, its suites add up '
                                      f'to {counted} (a cut excerpt?)')
    return result


LINE_LIMIT = 1 << 16  # a summary line is short: longer lines are read in pieces (bounded memory), none matches


_LINE_END = re.compile(rb'\r\n|\r|\n')
BLOCK = 1 << 20


def _lines(handle) -> Iterator[str]:
    """The lines of a binary file, ended by LF, CRLF or a lone CR (as the log reader reads a log: a summary pasted
    through a tool that turned every newline into a CR is still one line per suite), each at most LINE_LIMIT bytes
    (a longer line comes in pieces, none of which matches: memory stays bounded); _Binary at a NUL byte."""
    rest = b''
    while True:
        chunk = handle.read(BLOCK)
        if b'\0' in chunk:
            raise _Binary()
        data = rest + chunk
        held = bool(chunk) and data.endswith(b'\r')  # maybe the CR of a CRLF that the next read completes
        parts = _LINE_END.split(data[:-1] if held else data)
        rest = parts.pop() + (b'\r' if held else b'')  # after the last line end: not yet a whole line
        if not chunk and rest:
            parts.append(rest)
        for part in parts:
            for at in range(0, max(len(part), 1), LINE_LIMIT):
                yield part[at:at + LINE_LIMIT].decode('utf-8', 'replace')
        if not chunk:
            return
        while len(rest) > LINE_LIMIT + 1:
            yield rest[:LINE_LIMIT].decode('utf-8', 'replace')
            rest = rest[LINE_LIMIT:]


class _Binary(Exception):
    """A NUL byte in the file _lines reads: no summary is binary."""


def read_summary(path: str) -> Optional[RunResult]:
    """parse_summary_lines of the file at path, streamed; None for a binary file (a NUL in its first 8 KB,
    checked before anything else is read, or anywhere later) or one that holds no summary; PluginError when it
    cannot be read.  Streamed because reading the whole file first takes 1061 MB for a 1 GiB NUL file, 2117 MB for
    a 1 GiB text log."""
    with os.fdopen(open_regular(path), 'rb') as handle:
        try:
            if b'\0' in handle.read(8192):
                return None
            handle.seek(0)
            return parse_summary_lines(_lines(handle), str(path))
        except _Binary:
            return None
        except OSError as err:
            raise PluginError(path, f'cannot be read: {err.strerror}') from None


def load(paths) -> RunResult:
    """load_results, also reading files that are an EasyBuild failure summary instead of a run_test.py log.

    A log is read streamed (a kept EasyBuild log reaches a gigabyte); a file in which no run_test.py output
    was found is streamed once more, to look for the summary (a short excerpt, as posted)."""
    summaries, others, parsed = [], [], {}
    for path in paths:
        if os.path.isdir(path) or str(path).endswith('.json') or not os.path.lexists(path):
            others.append(path)
            continue
        try:
            parsed[path] = parse_log_file(path)
        except PluginError as err:
            summary = read_summary(path)
            if summary is None:
                raise err from None
            summaries.append(summary)
            continue
        others.append(path)
    result = load_results(others, parsed) if others else RunResult()
    for summary in summaries:
        result = merge(result, summary) if result.suites else summary
    return result
