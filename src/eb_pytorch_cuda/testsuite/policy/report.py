"""The judged run as a console summary (one screen), a JSON document and a Markdown summary.

Names, test ids, signals and notes come from files (logs, XML, results JSON): the console summary has
every line made printable and the Markdown quotes each value (eb_pytorch_cuda.escape); the JSON holds
them exactly, and `report` reads it back.
"""

from typing import Any, Dict, Optional, Sequence

from eb_pytorch_cuda.escape import markdown_code, markdown_text, printable_lines

from eb_pytorch_cuda.testsuite.results.cudatests import cuda_totals
from eb_pytorch_cuda.testsuite.results.model import SUITE_FAILED, SUITE_PASSED, RerunOutcome, RunResult
from eb_pytorch_cuda.testsuite.results.scopes import ScopeContext
from eb_pytorch_cuda.testsuite.policy.judging import Verdict
from eb_pytorch_cuda.testsuite.results.saved import RESULT_FORMAT
from eb_pytorch_cuda.testsuite.policy.suggest import for_verdict

# the file names of a judged run's reports, where the easyblock (<installdir>/easybuild/) and test-suite
# (its results directory) write them and where the next run reads per-suite times from
RESULTS_JSON = 'pytorch-test-results.json'
RESULTS_MARKDOWN = 'pytorch-test-summary.md'


def _failure_label(suite, test_id):
    return f'{suite}::{test_id}' if test_id else f'{suite} (unnamed failure)'


def to_json(result: RunResult, verdict: Verdict, context: Optional[ScopeContext] = None) -> dict:
    """Everything a maintainer or a script needs; holds at least failed_tests, failed_suites,
    terminated_suites and verdict, and reloads with `eb-pytorch-cuda report`."""
    data: Dict[str, Any] = {
            'format': RESULT_FORMAT, 'verdict': 'pass' if verdict.passed else 'fail', 'reasons': verdict.reasons,
            'tolerated': verdict.tolerated,
            'failed_tests': sum(s.failing_count for s in result.suites.values()),
            'tests': sum(sum(s.counts[k] for k in ('failed', 'errors', 'passed', 'skipped', 'xfailed', 'xpassed'))
                         for s in result.suites.values()),
            'failed_suites': [{'name': s.name, 'status': s.status, 'summary': s.summary(),
                               'failed_tests': [t.test_id for t in s.failed_tests]}
                              for s in sorted(result.suites.values(), key=lambda s: s.name)
                              if s.status != SUITE_PASSED],
            'terminated_suites': [{'name': s.name, 'signal': s.signal}
                                  for s in sorted(result.suites.values(), key=lambda s: s.name) if s.signal],
            'known_failures': [{'suite': s, 'test': t, 'pattern': e.pattern, 'reason': e.reason, 'scope': e.scope}
                               for s, t, e in verdict.known],
            'unknown_failures': [{'suite': s, 'test': t} for s, t in verdict.unknown],
            'flaky_failures': [{'suite': s, 'test': t} for s, t in verdict.flaky],
            'stale_known_failures': [{'pattern': e.pattern, 'reason': e.reason, 'scope': e.scope}
                                     for e in verdict.stale],
            'budget': verdict.budget,
            'suite_seconds': {s.name: s.seconds for s in result.suites.values() if s.seconds is not None},
            'cuda_tests': cuda_totals(result),
            'input_notes': list(result.notes)}
    if context is not None:
        data['scope'] = context.to_json()
    data.update(result.to_dict())
    return data


def to_text(result: RunResult, verdict: Verdict) -> str:
    """The verdict and its reasons in one screen."""
    lines = []
    for suite in sorted(result.suites.values(), key=lambda s: s.name):
        if suite.status == SUITE_PASSED:
            continue
        detail = suite.summary() if suite.status == SUITE_FAILED else str(suite.status)
        if suite.signal:
            detail = f'killed by {suite.signal}'
        if suite.note:
            detail += f': {suite.note}'
        lines.append(f'{suite.name} ({detail})')
    lines.append(_totals(result))
    terminated = ', '.join(f"{name} ({signal or status}, {'known' if entry else 'UNKNOWN'})"
                           for name, status, signal, entry in verdict.unjudgeable) or 'none'
    lines.append(f'known: {len(verdict.known)}, unknown: {len(verdict.unknown)} (budget {verdict.budget}), '
                 f'flaky: {len(verdict.flaky)}, terminated or uncounted: {terminated}')
    for name, test in verdict.unknown[:20]:
        lines.append(f'  unknown failure: {_failure_label(name, test)}')
    if len(verdict.unknown) > 20:
        lines.append(f'  ... and {len(verdict.unknown) - 20} more unknown failures')
    for name, test in verdict.flaky:
        lines.append(f"  flaky (passed on rerun): {name}{'::' + test if test else ' (whole suite)'}")
    reproducible = [f'{s.name}::{t.test_id}' for s in result.suites.values() for t in s.failed_tests
                    if t.rerun_outcome == RerunOutcome.REPRODUCIBLE]
    if reproducible:
        lines.append(f"  reproducible on rerun: {', '.join(sorted(reproducible)[:10])}"
                     + (f' and {len(reproducible) - 10} more' if len(reproducible) > 10 else ''))
    for entry in verdict.stale:
        lines.append(f'  stale known failure (did not fail): {entry.pattern} [{entry.scope or "all"}]')
    for line in verdict.tolerated:
        lines.append(f'  WARNING, not judged but allowed: {line}')
    lines.append(_cuda_line(result))
    lines += [f'note: {note}' for note in result.notes]
    lines.append(f"verdict: {'PASS' if verdict.passed else 'FAIL'}"
                 + ('' if verdict.passed else ': ' + '; '.join(verdict.reasons)))
    return printable_lines(lines)


def _totals(result: RunResult) -> str:
    """The run's size, as both reports give it: its suites and its failed tests (failed plus errored)."""
    return f'{len(result.suites)} suites, {sum(s.failing_count for s in result.suites.values())} failed tests'


def _cuda_line(result) -> str:
    """The CUDA device tests the run counted (results/cudatests), in one line."""
    total = cuda_totals(result)
    if total is None:
        return 'CUDA device tests: not counted (no XML report)'
    return f"CUDA device tests: {total['ran']} ran, {total['failed']} failed, {total['skipped']} skipped"


def _cuda_table(result) -> list:
    """Markdown rows of the suites that had CUDA device tests."""
    rows = [s for s in sorted(result.suites.values(), key=lambda s: s.name)
            if s.cuda_counts and any(s.cuda_counts.values())]
    if not rows:
        return []
    lines = ['<details><summary>CUDA device tests per suite</summary>', '',
             '| suite | ran | failed | skipped |', '| --- | --- | --- | --- |']
    lines += [f"| {markdown_code(s.name, in_table=True)} | {s.cuda_counts['ran']} | {s.cuda_counts['failed']} | "
              f"{s.cuda_counts['skipped']} |" for s in rows]
    return lines + ['', '</details>', '']


def to_markdown(result: RunResult, verdict: Verdict, title: str = 'PyTorch test suite',
                context: Optional[ScopeContext] = None, suggestion: Optional[str] = None,
                device_tests: Optional[str] = None, warnings: Sequence[str] = (), note: Optional[str] = None) -> str:
    """A summary fit for a pull-request comment; on FAIL it ends with the suggested policy entries (collapsed).
    note (report's line on the terms it judged by), device_tests (the test step's CUDA device tests' mode, in one
    line) and warnings follow the title."""
    lines = [f"### {title}: {'PASS' if verdict.passed else 'FAIL'}", '']
    if note is not None:
        lines += [markdown_text(note), '']
    if device_tests is not None:
        lines += [f'CUDA device tests: {markdown_text(device_tests)}', '']
    for warning in warnings:
        lines += [f'**WARNING**: {markdown_text(warning)}', '']
    for note in result.notes:
        lines += [f'Note: {markdown_text(note)}', '']
    lines += [f'{_totals(result)}: {len(verdict.known)} known, '
              f'{len(verdict.unknown)} unknown (budget {verdict.budget}), {len(verdict.flaky)} flaky', '',
              markdown_text(_cuda_line(result)), '']
    if not verdict.passed:
        lines += ['**Why it failed**', ''] + [f'- {markdown_text(reason)}' for reason in verdict.reasons] + ['']
    failed = [s for s in sorted(result.suites.values(), key=lambda s: s.name) if s.status != SUITE_PASSED]
    if failed:
        lines += ['| suite | outcome |', '| --- | --- |']
        lines += [f'| {markdown_code(s.name, in_table=True)} | '
                  f'{markdown_text(s.summary() if s.status == SUITE_FAILED else s.status)}'
                  f'{" (" + markdown_text(s.signal) + ")" if s.signal else ""} |' for s in failed]
        lines.append('')
    if verdict.known:
        lines += ['<details><summary>Known failures</summary>', '']
        lines += [f'- {markdown_code(_failure_label(s, t))}: {markdown_text(e.reason)} '
                  f'(scope {markdown_code(e.scope or "all")})' for s, t, e in verdict.known]
        lines += ['', '</details>', '']
    for header, items in (('Unknown failures', verdict.unknown), ('Flaky (passed on rerun)', verdict.flaky)):
        if items:
            lines += [f'**{header}**', ''] + [f'- {markdown_code(_failure_label(s, t))}' for s, t in items] + ['']
    if verdict.stale:
        lines += ['**Stale known failures** (did not fail; consider removing them)', '']
        lines += [f'- {markdown_code(e.pattern)} (scope {markdown_code(e.scope or "all")}): '
                  f'{markdown_text(e.reason)}' for e in verdict.stale] + ['']
    lines += _cuda_table(result)
    lines += suggestion_block(result, verdict, context, suggestion)
    return printable_lines(lines)


def suggestion_block(result: RunResult, verdict: Verdict, context: Optional[ScopeContext] = None,
                     suggestion: Optional[str] = None) -> list:
    """Markdown lines: the known_test_failures entries that would make a failed run pass, in a collapsed block.

    suggestion: text from policy.suggest.render (several runs merged); default: this run's own entries,
    scoped to its target.  Nothing for a passing run.
    """
    if verdict.passed:
        return []
    text = suggestion or for_verdict(result, verdict, context)
    return ['<details><summary>Suggested known_test_failures entries (review each, fill in the reasons)</summary>',
            '', '```python', *text.split('\n'), '```', '', '</details>', '']
