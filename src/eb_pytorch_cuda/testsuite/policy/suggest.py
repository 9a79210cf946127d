"""From a failed test run to the `known_test_failures` entries that would make it pass, for review.

A bot job fails on a target; the maintainer wants the policy entry, not a raised bare count.  For each
failure the policy did not cover this proposes one entry: 'suite::Class.test' where the log or XML names
the test, a suite-level entry with the number of failures it covers where only a count is known, and a
suite-level entry for a suite that crashed, timed out or never finished, marked as such (such an entry
excuses the crash itself: read the suite's log first).  The reason is a placeholder to fill in.  Each
suggestion is proven by judging the run again with it added, which also gives the budget it leaves.

Several runs (one per target) are merged: an entry seen in every run gets scope '', one seen in every
run of a CPU family gets the family, in every run of a vendor's targets ('x86_64/intel/*') that glob,
otherwise the scope of each run that saw it (its target; for a CUDA build made for one compute
capability, that capability for a CUDA device test or a suite-level entry: GPU failures differ between GPU nodes,
while a named CPU test that failed on a GPU node keeps its CPU target, so that a '9.0' entry does not carry an
x86_64 CPU failure to a Grace node); a scope is only widened as far as
the runs span (runs of Intel targets alone say nothing about AMD ones: they give 'x86_64/intel/*', not
'x86_64').  Entries only merge when their count is the same, so a merged entry never covers more than a
run showed.
"""

import os
import re
from dataclasses import dataclass, field, replace
from typing import Callable, Dict, Optional, Tuple

from eb_pytorch_cuda.escape import printable_lines
from eb_pytorch_cuda.testsuite.results.model import RunResult
from eb_pytorch_cuda.testsuite.results.cudatests import is_cuda_test
from eb_pytorch_cuda.testsuite.results.scopes import EVERYWHERE, Scope, ScopeContext
from eb_pytorch_cuda.testsuite.policy.judging import Budget, KnownFailure, Policy, Verdict, judge
from eb_pytorch_cuda.testsuite.results.saved import load_results, recorded_context

PLACEHOLDER = 'TODO: why it fails, and the issue or PR URL'


@dataclass(frozen=True)
class Entry:
    """One suggested entry: a test ('suite::Class.test') or a suite with the failures it covers."""

    pattern: str
    limit: Optional[int] = None  # suite-level: how many failures it covers; None for a named test
    unjudgeable: Optional[str] = None  # 'killed by SIGSEGV', 'timed out', ...: the entry also excuses that

    def as_tuple(self, reason: str = PLACEHOLDER) -> tuple:
        return (self.pattern, reason) if self.limit is None else (self.pattern, reason, self.limit)


@dataclass
class Run:
    """One test run to suggest for: its results, the policy in force there and what scope new entries get."""

    label: str  # where it came from, for the report
    scope: Scope  # the target (or compute capability, or family) the entries are scoped to; its text is parsed
    context: Optional[ScopeContext]
    result: RunResult
    policy: Policy
    entries: list = field(default_factory=list)
    not_run: list = field(default_factory=list)  # patterns of known entries whose suite is not in the results
    passes_now: Optional[bool] = None  # its verdict under its own policy, before any suggested entry
    # where scope is a compute capability: the scope of its named CPU tests' entries (the run's CPU target)
    cpu_scope: Optional[Scope] = None

    def __post_init__(self) -> None:
        self.scope = Scope.parse(self.scope)
        if self.cpu_scope is None and self.context is not None and self.scope == self.context.run_scope() \
                and self.scope != self.context.cpu_run_scope():  # its GPU's compute capability
            self.cpu_scope = self.context.cpu_run_scope()

    def scope_of(self, entry: 'Entry') -> Scope:
        """The scope entry gets from this run: its CPU target for a named test that is no CUDA device test
        (results/cudatests) where the run's scope is a compute capability; the run's scope otherwise."""
        if self.cpu_scope is None or entry.limit is not None:
            return self.scope
        classname, _, name = entry.pattern.split('::', 1)[-1].rpartition('.')
        return self.scope if is_cuda_test(classname, name) else self.cpu_scope


def suggest(result: RunResult, policy: Policy) -> list:
    """Entries covering every failure of result that policy leaves unknown, and every suite it cannot judge."""
    return entries_for(judge(result, policy))


def entries_for(verdict: Verdict) -> list:
    """The entries for a verdict's unknown failures and unexcused unjudgeable suites.

    Named tests come before their suite's count entry, so the count is left for the unnamed failures.
    Flaky failures (passed on an isolated rerun) are not suggested: they are what the rerun is for.
    """
    named, unnamed, crashed = [], {}, {}  # type: list, dict, dict
    for suite, test in verdict.unknown:
        if test is None:
            unnamed[suite] = unnamed.get(suite, 0) + 1
        elif f'{suite}::{_literal(test)}' not in named:
            named.append(f'{suite}::{_literal(test)}')
    for suite, status, signal, entry in verdict.unjudgeable:
        if entry is None:
            crashed[suite] = f'killed by {signal}' if signal else status
    entries = [Entry(pattern) for pattern in sorted(named)]
    for suite in sorted(set(unnamed) | set(crashed)):
        entries.append(Entry(suite, max(1, unnamed.get(suite, 0)), crashed.get(suite)))
    return sorted(entries, key=_entry_order)


def _literal(test_id):
    """test_id as a pattern matching only itself: policy patterns are globs ('test_x[cpu]' is not literal)."""
    return re.sub(r'([*?[])', r'[\1]', test_id)


def with_entries(policy: Policy, entries: list, scope: Scope) -> Policy:
    """policy with entries added (placeholder reasons), as the easyconfig would resolve them in that scope."""
    added = [KnownFailure(e.pattern, PLACEHOLDER, str(scope), e.limit) for e in entries]
    return replace(policy, known=list(policy.known) + added)


def budget_left(result: RunResult, policy: Policy) -> Tuple[bool, int, int]:
    """(passes, unknown failures counted against the budget, budget) of result judged by policy (the last two
    are its judging.Budget)."""
    verdict = judge(result, policy)
    return (verdict.passed, *verdict.spent)


def merge(runs: list) -> dict:
    """{scope: [Entry, ...]} covering every run's entries, lifted to the widest scope all of its runs share."""
    seen: dict = {}  # Entry -> scopes of the runs that need it
    for run in runs:
        for entry in run.entries:
            seen.setdefault(entry, [])
            if run.scope_of(entry) not in seen[entry]:
                seen[entry].append(run.scope_of(entry))
    merged: dict = {}
    for entry, where in seen.items():
        for scope in _lift(where, [run.scope_of(entry) for run in runs]):
            merged.setdefault(scope, [])
            if entry not in merged[scope]:
                merged[scope].append(entry)
    return {scope: sorted(merged[scope], key=_entry_order) for scope in sorted(merged, key=Scope.order)}


def _lift(where, scopes):
    """The fewest scopes covering the runs in where, never covering a run of scopes that is not in where.

    A scope is widened only as far as the runs span: to '' when every run needs the entry and the runs
    cover more than one CPU family; to a family when every run of it does and they cover more than one
    of its vendors or targets; to 'family/vendor/*' when every run of that vendor (two or more) does.
    """
    distinct, needed = set(scopes), set(where)
    if needed == distinct and len({s.widenings()[-1] if s.widenings() else s for s in distinct}) > 1:
        return [EVERYWHERE]
    result = []
    for depth in ('family', 'vendor'):
        groups: dict = {}
        for scope in distinct:
            levels = scope.widenings()
            if depth == 'family' and levels:
                groups.setdefault(levels[-1], set()).add(scope)
            elif depth == 'vendor' and len(levels) == 2:
                groups.setdefault(levels[0], set()).add(scope)
        for group, members in sorted(groups.items(), key=lambda item: str(item[0])):
            spread = ({m.widenings()[0] if len(m.widenings()) == 2 else m for m in members} if depth == 'family'
                      else members)
            if len(spread) > 1 and members <= needed:
                result.append(group)
                needed -= members
    return result + sorted(needed, key=str)


def _entry_order(entry):
    return entry.pattern.split('::', 1)[0], entry.limit is not None, entry.pattern


def verify(runs: list, merged: dict) -> list:
    """For each run: (passes, counted, budget) with the merged entries resolved for that run's context."""
    outcome = []
    for run in runs:
        # the entries as the easyconfig would resolve them in the run's context; their names are the suite names
        # the results hold, judged as they are (only printed, escaped: a hostile one is refused once pasted)
        added = [KnownFailure(e.pattern, PLACEHOLDER, str(scope), e.limit) for scope, entries in merged.items()
                 if run.context is not None and scope.applies(run.context) for e in entries]
        policy = replace(run.policy, known=list(run.policy.known) + added)
        outcome.append(budget_left(run.result, policy))
    return outcome


def render(runs: list, merged: Dict[Scope, list], outcome: list) -> str:
    """The suggestion as easyconfig text to paste into known_test_failures, with what each entry is and does:
    Python that is only the one assignment, whatever the names and targets in the files hold."""
    sources = ', '.join(f'{run.label} [{run.scope or "all"}]' for run in runs)
    lines = [f'# Suggested known_test_failures entries (from {sources}).',
             '# Replace each TODO with the reason and the issue or pull request; keep the counts.']
    lines += [f'# scope {scope!r}: {scope.describe()}' for scope in merged]
    if not merged:
        lines.append('# Nothing to add: every failure is known or flaky.')
    warnings = []
    lines.append('known_test_failures = {')
    for scope, entries in merged.items():
        lines.append(f'    {scope!r}: [')
        for entry in entries:
            comment = ''
            if entry.unjudgeable:
                comment = f'  # NOT A COUNTED FAILURE: {entry.unjudgeable}; this entry excuses that, read its log first'
                warnings.append(f'{entry.pattern} ({entry.unjudgeable})')
            elif entry.limit is not None:
                comment = f'  # {entry.limit} failure(s) the log counts but does not name'
            lines.append(f'        {entry.as_tuple()!r},{comment}')
        lines.append('    ],')
    lines.append('}')
    for run, (passes, *spent) in zip(runs, outcome):
        budget = Budget(*spent)
        now = '' if run.passes_now is None else f"{'PASS' if run.passes_now else 'FAIL'} now; "
        lines.append(f"# {run.label} [{run.scope or 'all'}]: {now}with these entries: "
                     f"{'PASS' if passes else 'still FAIL'}, {budget.counted} unknown failure(s) against "
                     f'max_failed_tests = {budget.allowed} ({budget.left} left)')
        if run.not_run:
            lines.append('#   its known failures naming suites missing from its results (did they run?): '
                         + ', '.join(run.not_run))
        if run.context is not None and not run.context.target_known and run.scope == run.context.cpu_family:
            lines.append(f'#   its target is not known (fallback {run.context.target}): its entries are scoped to '
                         f'the CPU family {run.scope}, not to a target; --target TARGET (or --suggest-scope) '
                         f'scopes them to one')
    if warnings:
        lines.append('# WARNING: suites that crashed, timed out or never finished, not failures that were counted: '
                     + ', '.join(warnings))
    # literals are repr()s; a comment holds names, targets and labels from files: every line is made printable,
    # so none can end a comment and start a line of Python (escape.printable: no line break of any kind)
    return printable_lines(lines)


def to_data(runs: list, merged: dict, outcome: list) -> dict:
    """The suggestion as JSON-ready data."""
    return {'known_test_failures': {scope: [{'test': e.pattern, 'reason': PLACEHOLDER, 'max': e.limit,
                                             'unjudgeable': e.unjudgeable} for e in entries]
                                    for scope, entries in merged.items()},
            'runs': [_run_data(run, passes, Budget(*spent)) for run, (passes, *spent) in zip(runs, outcome)]}


def _run_data(run, passes: bool, budget: Budget) -> dict:
    """One run's entry of to_data."""
    return {'source': run.label, 'scope': run.scope, 'target': run.context.target, 'passes_now': run.passes_now,
            'passes': passes, 'unknown_failures': budget.counted, 'max_failed_tests': budget.allowed,
            'budget_left': budget.left}


def suggest_runs(runs: list, scope: Optional[Scope] = None) -> tuple:
    """Fill each run's entries, merge them (or put them all in scope when one is forced); (merged, outcome)."""
    scope = None if scope is None else Scope.parse(scope)
    for run in runs:
        verdict = judge(run.result, run.policy)
        run.entries, run.not_run = entries_for(verdict), [entry.pattern for entry in verdict.not_run]
        run.passes_now = verdict.passed
        if scope is not None:
            run.scope, run.cpu_scope = scope, None  # every entry where it is forced
    if scope is None:
        merged = merge(runs)
    else:
        merged = {scope: sorted({entry for run in runs for entry in run.entries}, key=_entry_order)}
    merged = {key: entries for key, entries in merged.items() if entries}
    return merged, verify(runs, merged)


def runs_from_paths(paths: list, policy_for: Callable[[ScopeContext], Policy], given: ScopeContext,
                    recorded: bool = True, load: Callable = load_results) -> list:
    """The runs to suggest for: where recorded, each saved JSON result that recorded where it ran (the easyblock
    and test-suite write one per run) is a run of its own there and the other paths form one run in the given
    context; else all paths are one run in it (as `report` judges them with --target).  policy_for(context)
    gives each run its policy; load reads a run's paths (report also reads EasyBuild's failure summary:
    eb.ebsummary.load)."""
    groups: dict = {}  # ScopeContext -> paths
    for path in paths:
        context = recorded_context(path) if recorded else None
        groups.setdefault(context or given, []).append(path)
    runs = []
    for context, group in groups.items():
        label = ', '.join(os.path.basename(os.path.normpath(str(p))) for p in group)
        runs.append(Run(label, context.run_scope(), context, load(group), policy_for(context)))
    return runs


def for_verdict(result: RunResult, verdict: Verdict, context: Optional[ScopeContext],
                label: str = 'this run') -> str:
    """render() text for one judged run (the Markdown report's block); the scope is the run's target."""
    scope = context.run_scope() if context is not None else EVERYWHERE
    policy = verdict.policy or Policy(verdict.budget)
    run = Run(label, scope, context, result, policy, entries_for(verdict), [e.pattern for e in verdict.not_run],
              verdict.passed)
    merged = merge([run])
    outcome = verify([run], merged) if context is not None else [budget_left(result, with_entries(
        policy, run.entries, scope))]
    return render([run], merged, outcome)
