"""The slowest suites in every report format (text, JSON, Markdown) and the per-suite time chart: the Markdown bar
table always, the SVG where matplotlib is installed (the `chart` extra, never required)."""

import configparser
import json
import os
import sys
import xml.etree.ElementTree as ET

from environment import REPO, missing
from eb_pytorch_cuda.testsuite.policy import timechart
from eb_pytorch_cuda.testsuite.policy.judging import Policy, judge
from eb_pytorch_cuda.testsuite.policy.report import to_json, to_markdown, to_text
from eb_pytorch_cuda.testsuite.results.model import Counts, RunResult, Suite
from eb_pytorch_cuda.testsuite.results.saved import read_saved
from eb_pytorch_cuda.testsuite.service import StepOutcome, report_texts

TIMES = {'test_nn': 3725.0, 'test_torch': 1205.0, 'distributed/test_c10d': 600.5, 'test_fast': 0.4}


def _result(times=TIMES, untimed=('test_untimed',)):
    result = RunResult()
    for name, seconds in times.items():
        result.suites[name] = Suite(name, counts=Counts(passed=3), sources=['log'], seconds=seconds)
    for name in untimed:
        result.suites[name] = Suite(name, counts=Counts(passed=1), sources=['log'])
    return result


def test_slowest_are_the_timed_suites_longest_first_at_most_ten():
    result = _result({f'test_{n:02d}': float(n) for n in range(15)})
    assert timechart.slowest(result) == [(f'test_{n:02d}', float(n)) for n in range(14, 4, -1)]
    assert timechart.slowest(_result({}, ('test_a',))) == []


def test_the_text_report_names_the_slowest_suites_with_their_times():
    result = _result()
    lines = to_text(result, judge(result, Policy(0, []))).splitlines()
    assert 'slowest suites: test_nn 1h02m, test_torch 20m05s, distributed/test_c10d 10m00s, test_fast 0s' in lines
    untimed = _result({}, ('test_a',))
    assert not any(line.startswith('slowest') for line in to_text(untimed, judge(untimed, Policy(0, []))).split('\n'))


def test_the_json_report_lists_the_slowest_suites_and_reads_back(tmp_path):
    result = _result()
    data = to_json(result, judge(result, Policy(0, [])))
    assert data['slowest_suites'] == [{'name': 'test_nn', 'seconds': 3725.0}, {'name': 'test_torch', 'seconds': 1205.0},
                                      {'name': 'distributed/test_c10d', 'seconds': 600.5},
                                      {'name': 'test_fast', 'seconds': 0.4}]
    path = tmp_path / 'r.json'
    path.write_text(json.dumps(data))
    assert read_saved(str(path))['slowest_suites'] == data['slowest_suites']  # `report` still reads its JSON


def test_the_markdown_report_has_the_bar_table_scaled_to_the_slowest():
    result = _result()
    markdown = to_markdown(result, judge(result, Policy(0, [])))
    lines = markdown.splitlines()
    start = lines.index('**Time per suite** (the 4 slowest of 4 suites with a time, 1h32m in all)')
    assert lines[start + 2:start + 8] == [
        '| suite | time | |', '| --- | ---: | --- |',
        '| `test_nn` | 1h02m | ' + '\u2588' * 30 + ' |',
        '| `test_torch` | 20m05s | ' + '\u2588' * 10 + ' |',  # 1205 / 3725 of 30 characters
        '| `distributed/test_c10d` | 10m00s | ' + '\u2588' * 5 + ' |',
        '| `test_fast` | 0s | \u2588 |']  # any time above 0 gets a bar
    assert '![' not in markdown  # no image without one drawn


def test_the_bar_table_quotes_names_from_files():
    result = _result({'test_a|b`\n': 5.0}, ())
    table = timechart.bar_table(result)
    assert '| ``test_a\\|b`\\n`` | 5s | ' + '\u2588' * 30 + ' |' in table


def test_the_markdown_shows_the_svg_beside_it_when_one_was_drawn():
    result = _result()
    markdown = to_markdown(result, judge(result, Policy(0, [])), chart_image=timechart.TIME_CHART)
    assert '![Time per suite](pytorch-test-times.svg)' in markdown.splitlines()


def test_without_matplotlib_the_reports_are_json_and_markdown_without_svg(monkeypatch):
    """sys.modules[name] = None is Python's own way to make `import name` fail (as where it is not installed)."""
    monkeypatch.setitem(sys.modules, 'matplotlib', None)
    result = _result()
    assert timechart.svg_chart(result) is None
    outcome = StepOutcome(result, judge(result, Policy(0, [])), None)
    texts = report_texts(outcome)
    assert set(texts) == {'pytorch-test-results.json', 'pytorch-test-summary.md'}
    assert '| `test_nn` | 1h02m |' in texts['pytorch-test-summary.md'] and '![' not in texts['pytorch-test-summary.md']


def _matplotlib():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        missing("matplotlib (the package's `chart` extra, in its `test` extra: pip install -e '.[test]')")


def test_with_matplotlib_the_svg_is_drawn_beside_the_markdown_and_named_in_it():
    _matplotlib()
    result = _result(dict(TIMES, **{'test_$x^2$': 30.0}))
    outcome = StepOutcome(result, judge(result, Policy(0, [])), None)
    texts = report_texts(outcome)
    svg = texts[timechart.TIME_CHART]
    root = ET.fromstring(svg)  # well-formed SVG
    assert root.tag == '{http://www.w3.org/2000/svg}svg'
    text = ' '.join(''.join(node.itertext()) for node in root.iter('{http://www.w3.org/2000/svg}text'))
    for name in ('test_nn', 'test_torch', 'distributed/test_c10d', 'test_$x^2$', '1h02m'):  # names as plain text
        assert name in text, name
    assert 'test_untimed' not in text
    assert '![Time per suite](pytorch-test-times.svg)' in texts['pytorch-test-summary.md']
    assert report_texts(outcome)[timechart.TIME_CHART] == svg  # no date, a fixed salt: the same bytes again


def _metadata():
    """(install_requires, {extra: requirements}) as text, from pyproject.toml's [project] where it has one (PEP 621),
    else from setup.cfg."""
    try:
        import tomllib  # Python >= 3.11
        with open(os.path.join(REPO, 'pyproject.toml'), 'rb') as handle:
            project = tomllib.load(handle).get('project', {})
    except ImportError:
        project = {}
    if 'optional-dependencies' in project:
        extras = project['optional-dependencies']
        return ' '.join(project.get('dependencies', [])), {key: ' '.join(value) for key, value in extras.items()}
    config = configparser.ConfigParser()
    config.read(os.path.join(REPO, 'setup.cfg'))
    return config['options']['install_requires'], dict(config['options.extras_require'])


def test_matplotlib_is_an_extra_never_a_requirement():
    required, extras = _metadata()
    assert 'matplotlib' not in required
    assert 'matplotlib' in extras['chart'] and 'matplotlib' in extras['test']


def test_no_chart_where_no_suite_has_a_time_and_no_bar_for_0_seconds():
    untimed = _result({}, ('test_a',))
    assert timechart.bar_table(untimed) == [] and timechart.svg_chart(untimed) is None
    assert '| `test_zero` | 0s |  |' in timechart.bar_table(_result({'test_zero': 0.0}, ()))
