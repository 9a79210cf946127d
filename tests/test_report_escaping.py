"""What report and --suggest-policy print from a file is escaped for where it goes, and our JSON reads back.

A results JSON is one bot job's file: its scope target, suite names and test ids are whatever that file says.
Printed unescaped, a newline in them started a line of Python in the `--suggest-policy` suggestion (pasted
into an easyconfig, real EasyBuild ran it), terminal control sequences reached the terminal, a backtick or
'<' broke out of the Markdown.  And the tool refused its own JSON for a 10,000-character test id or an XML
test name holding a newline.
"""

import ast
import json
import re

import pytest

from helpers import cli
from eb_pytorch_cuda.eb.ecpolicy import read_easyconfig
from eb_pytorch_cuda.errors import PluginError

FORMAT = 'eb-pytorch-cuda-test-results'
PAYLOAD = "import os; os.system('touch PWNED')"
# every way a value could end a comment line or rewrite a terminal
HOSTILE = ['\n', '\r', '\r\n', '\x0b', '\x0c', '\x1c', '\x85', '\u2028', '\u2029', '\x1b]0;x\x07', '\x00', '\u202e']


def _crafted(directory, hostile):
    """A results JSON of one job whose target, suite names and test ids carry hostile, each followed by code."""
    inject = f'{hostile}{PAYLOAD}{hostile}#'
    data = {'format': FORMAT, 'scope': {'cpu_family': 'x86_64', 'target': f'x86_64/intel/haswell{inject}',
                                        'compute_capabilities': []},
            'suites': [{'name': f'test_nn{inject}', 'status': 'failed', 'counts': {'failed': 2, 'passed': 3},
                        'failed_tests': [{'test_id': f'TestNN.test_a{inject}', 'state': 'failed'}]},
                       {'name': f'test_crash{inject}', 'status': 'terminated', 'signal': f'SIGSEGV{inject}',
                        'note': f'note{inject}'}]}
    path = directory / 'job.json'
    path.write_text(json.dumps(data))
    return path


def _suggestion(stdout):
    return stdout[stdout.index('# Suggested known_test_failures'):]


def _printable_lines(text):
    return all(line.isprintable() for line in text.split('\n'))


@pytest.mark.parametrize('hostile', HOSTILE, ids=[repr(h) for h in HOSTILE])
def test_a_crafted_results_json_cannot_inject_a_line_into_the_suggested_policy(tmp_path, hostile, monkeypatch):
    monkeypatch.chdir(tmp_path)  # where the injected line would touch PWNED
    done = cli('report', _crafted(tmp_path, hostile), '--suggest-policy')
    assert done.returncode == 1, done.stderr
    suggestion = _suggestion(done.stdout)
    assert _printable_lines(done.stdout)  # no control character, no line break but our own, reaches the terminal
    # the suggestion is one assignment and nothing else, whatever the file held
    tree = ast.parse(suggestion)
    assert [type(node) for node in tree.body] == [ast.Assign], suggestion
    assert [target.id for target in tree.body[0].targets] == ['known_test_failures']
    # pasted into an easyconfig and read by real EasyBuild, as `eb` reads it: it runs nothing
    easyconfig = tmp_path / 'PyTorch-2.1.2.eb'
    easyconfig.write_text("easyblock = 'PyTorch'\nname = 'PyTorch'\nversion = '2.1.2'\nhomepage = 'x'\n"
                          "description = 'x'\ntoolchain = SYSTEM\n" + suggestion + '\n')
    with pytest.raises(PluginError) as refused:  # the hostile name is no test file: the entry is refused, one line
        read_easyconfig(str(easyconfig))
    assert not (tmp_path / 'PWNED').exists()
    assert 'known_test_failures' in str(refused.value) and 'is not a test file' in str(refused.value)


@pytest.mark.parametrize('form', ['text', 'markdown'])
def test_terminal_control_characters_from_a_file_are_escaped_in_every_report(tmp_path, form):
    done = cli('report', _crafted(tmp_path, '\x1b[2J\x1b]0;owned\x07\r\n'), '--format', form, '--suggest-policy')
    assert done.returncode == 1, done.stderr
    assert _printable_lines(done.stdout)
    assert '\\x1b[2J\\x1b]0;owned\\x07\\r\\n' in done.stdout  # shown, as Python writes it
    assert '\nknown_test_failures = {\n' in done.stdout  # and our own lines stay lines


def test_markdown_quotes_names_that_hold_backticks_pipes_and_html(tmp_path):
    data = {'format': FORMAT, 'suites': [
        {'name': 'test_a|b`c', 'status': 'failed', 'counts': {'failed': 1},
         'failed_tests': [{'test_id': 'T.test_x``<b>`', 'state': 'failed'}]},
        {'name': '<img src=x onerror=alert(1)>', 'status': 'terminated', 'signal': '**SIGSEGV**'}]}
    path = tmp_path / 'job.json'
    path.write_text(json.dumps(data))
    done = cli('report', path, '--format', 'markdown')
    assert done.returncode == 1, done.stderr
    out = done.stdout
    prose = re.sub(r'(?ms)^```python$.*?^```$', '', out)  # a fenced block is literal text
    # the file's HTML is text: escaped in prose, literal inside code spans
    assert re.findall(r'.<img', prose) == ['\\<img', '`<img'], prose
    assert '| `<img src=x onerror=alert(1)>` | terminated (\\*\\*SIGSEGV\\*\\*) |' in out
    assert all(not line.startswith('```') for line in out[out.index('```python') + 9:].split('\n')[:-6])
    assert '- \\<img src=x onerror=alert(1)\\>: killed by \\*\\*SIGSEGV\\*\\*, and not a known failure' in out
    # a code span the backtick cannot end, a table cell its '|' cannot end
    assert '| ``test_a\\|b`c`` | 1 failed, 0 passed |' in out
    assert '- ``` test_a|b`c::T.test_x``<b>` ```' in out


def _xml_dir(root, names):
    reports = root / 'test-reports' / 'python-pytest' / 'test_x'
    reports.mkdir(parents=True)
    cases = ''.join(f'<testcase classname="TestX" name="{name}" time="1"><failure message="m"/></testcase>'
                    for name in names)
    (reports / 'test_x-1.xml').write_text(f'<?xml version="1.0"?><testsuites><testsuite name="pytest" '
                                          f'tests="{len(names) + 1}" failures="{len(names)}">{cases}'
                                          '<testcase classname="TestX" name="test_ok" time="1"/></testsuite>'
                                          '</testsuites>')
    return root / 'test-reports'


def test_our_json_of_a_long_id_and_a_newline_name_reads_back_the_same(tmp_path):
    # (a raw newline in an attribute is a space to XML: the references are how a report writes one)
    long_id, newline = 'test_p_' + 'x' * 10000, 'test_b&#10;second line&#13;'
    reports = _xml_dir(tmp_path, [long_id, newline])
    first = cli('report', reports, '--format', 'json', '--max-failed-tests', '5')
    assert first.returncode == 0, first.stderr
    saved = tmp_path / 'saved.json'
    saved.write_text(first.stdout)
    data = json.loads(first.stdout)
    ids = sorted(t['test_id'] for s in data['suites'] for t in s['failed_tests'])
    assert ids == sorted([f'TestX.{long_id}', 'TestX.test_b\nsecond line\r'])
    again = cli('report', saved, '--format', 'json', '--max-failed-tests', '5')
    assert again.returncode == 0, again.stderr  # was: exit 2, "must be a one-line string"
    assert json.loads(again.stdout)['suites'] == data['suites']
    text = cli('report', saved, '--max-failed-tests', '0')
    assert text.returncode == 1 and _printable_lines(text.stdout)
    assert 'unknown failure: test_x::TestX.test_b\\nsecond line\\r' in text.stdout


@pytest.mark.parametrize('scope,problem', [
    (['x86_64'], 'scope: must be an object of cpu_family, target, target_source and compute_capabilities'),
    ({'target': 5}, 'scope.target: must be a non-empty string, got 5'),
    ({'target': 'x86_64/generic', 'compute_capabilities': 8}, 'scope.compute_capabilities: must be a list of'),
])
def test_a_scope_of_the_wrong_shape_is_refused_in_one_line(tmp_path, scope, problem):
    path = tmp_path / 'job.json'
    path.write_text(json.dumps({'format': FORMAT, 'scope': scope, 'suites': []}))
    done = cli('report', path, '--suggest-policy')
    assert done.returncode == 2 and done.stdout == '', done.stdout
    assert done.stderr.count('\n') == 1 and f'{path}: {problem}' in done.stderr, done.stderr
