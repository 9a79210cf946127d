"""Where a run's time went: its slowest suites (for the text, JSON and Markdown reports) and a per-suite time
chart, a Markdown bar table always and an SVG drawn by matplotlib where it is installed (the `chart` extra:
never required, so a missing one costs the picture only).

Why: a ten-hour test step is made long by a few suites; the report shows which at a glance, and the next
build's timeouts and pieces come from the same times (results/previous).  Suite names come from files: the
Markdown quotes them (eb_pytorch_cuda.escape), the SVG gets them printable and as plain text (no mathtext).
"""

import io
from typing import Any, List, Optional, Tuple

from eb_pytorch_cuda.escape import markdown_code, printable
from eb_pytorch_cuda.testsuite.results.model import RunResult
from eb_pytorch_cuda.testsuite.results.seconds import shown

SLOWEST = 10  # suites named by the text and JSON reports
CHART_ROWS = 20  # suites in the Markdown bar table and the SVG
BAR_WIDTH = 30  # characters of the longest bar of the Markdown table
TIME_CHART = 'pytorch-test-times.svg'  # the SVG's file name, beside the Markdown report


def slowest(result: RunResult, most: int = SLOWEST) -> List[Tuple[str, float]]:
    """[(suite, seconds)] of the `most` suites that took longest (those with a time), longest first."""
    timed = [(suite.name, float(suite.seconds)) for suite in result.suites.values() if suite.seconds is not None]
    return sorted(timed, key=lambda item: (-item[1], item[0]))[:most]


def slowest_json(result: RunResult) -> List[dict]:
    """The JSON report's `slowest_suites`: [{'name', 'seconds'}], longest first."""
    return [{'name': name, 'seconds': seconds} for name, seconds in slowest(result)]


def slowest_line(result: RunResult) -> Optional[str]:
    """The text report's 'slowest suites: test_nn 1h02m, test_torch 20m05s, ...' (None: no suite has a time)."""
    found = slowest(result)
    if not found:
        return None
    return 'slowest suites: ' + ', '.join(f'{name} {shown(seconds)}' for name, seconds in found)


def bar_table(result: RunResult, image: Optional[str] = None) -> List[str]:
    """Markdown lines: the CHART_ROWS slowest suites as a table of bars scaled to the slowest (a chart any
    Markdown viewer shows), with image (the SVG's file name, beside the report) above it where one was drawn;
    no lines when no suite has a time."""
    found = slowest(result, CHART_ROWS)
    if not found:
        return []
    timed = sum(1 for suite in result.suites.values() if suite.seconds is not None)
    total = sum(float(suite.seconds) for suite in result.suites.values() if suite.seconds is not None)
    top = found[0][1] or 1.0
    lines = [f'**Time per suite** (the {len(found)} slowest of {timed} suites with a time, {shown(total)} in all)', '']
    if image:
        lines += [f'![Time per suite]({image})', '']
    lines += ['| suite | time | |', '| --- | ---: | --- |']
    for name, seconds in found:
        bar = '\u2588' * max(1 if seconds > 0 else 0, round(BAR_WIDTH * seconds / top))
        lines.append(f'| {markdown_code(name, in_table=True)} | {shown(seconds)} | {bar} |')
    return lines + ['']


def svg_chart(result: RunResult) -> Optional[str]:
    """The CHART_ROWS slowest suites as a horizontal bar chart in SVG text, drawn by matplotlib (the same bytes
    for the same result: no date, a fixed hash salt); None where matplotlib is not installed or no suite has a
    time.  A Figure of its own (no pyplot: no global state, no display), the site's matplotlibrc overridden where
    it would change what is drawn (TeX, mathtext in names)."""
    found = slowest(result, CHART_ROWS)
    if not found:
        return None
    try:
        import matplotlib
        from matplotlib.figure import Figure
    except ImportError:
        return None
    names = [printable(name) for name, _seconds in reversed(found)]
    values = [seconds for _name, seconds in reversed(found)]
    rc: Any = {'svg.hashsalt': 'eb-pytorch-cuda', 'svg.fonttype': 'none', 'text.usetex': False,
               'text.parse_math': False}  # matplotlib's stubs type each key (with it installed, mypy checks them)
    with matplotlib.rc_context(rc):
        figure = Figure(figsize=(8, 1.2 + 0.3 * len(found)))
        axes = figure.subplots()
        bars = axes.barh(range(len(found)), values, color='#4c72b0')
        axes.set_yticks(range(len(found)))
        axes.set_yticklabels(names)
        axes.bar_label(bars, labels=[shown(value) for value in values], padding=3)
        axes.set_xlabel('seconds')
        axes.set_title(f'Time per suite (the {len(found)} slowest)')
        axes.margins(x=0.2)
        figure.tight_layout()
        buffer = io.StringIO()
        figure.savefig(buffer, format='svg', metadata={'Date': None})
    return buffer.getvalue()
