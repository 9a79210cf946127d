"""EasyBuild failure summaries read from a file with any line ends (eb/ebsummary.read_summary): the field's real
excerpts (tests/data/field/, verbatim), also with CRLF and lone-CR line ends and read in blocks that cut every
line, give what the text itself parses to (split on LF only, a CR-only copy would be one line)."""

import glob
import os

import pytest

from eb_pytorch_cuda.eb import ebsummary

FIELD = sorted(glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'data', 'field', '*.txt')))


def _facts(result):
    return None if result is None else {name: (suite.status, dict(suite.counts), len(suite.failed_tests))
                                        for name, suite in result.suites.items()}


def test_the_field_excerpts_are_there():
    assert len(FIELD) >= 5


@pytest.mark.parametrize('path', FIELD, ids=os.path.basename)
@pytest.mark.parametrize('block', [1, 2, 7, ebsummary.BLOCK])
def test_every_line_end_reads_as_the_text_does(path, block, tmp_path, monkeypatch):
    with open(path, 'rb') as handle:
        data = handle.read().replace(b'\r\n', b'\n')
    expected = _facts(ebsummary.parse_summary(data.decode('utf-8', 'replace'), path))
    assert expected, path  # each excerpt holds a summary
    monkeypatch.setattr(ebsummary, 'BLOCK', block)
    for name, variant in (('lf', data), ('crlf', data.replace(b'\n', b'\r\n')), ('cr', data.replace(b'\n', b'\r'))):
        copy = tmp_path / name
        copy.write_bytes(variant)
        assert _facts(ebsummary.read_summary(str(copy))) == expected, name


def test_a_line_longer_than_the_limit_comes_in_pieces_and_matches_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(ebsummary, 'BLOCK', 1000)
    path = tmp_path / 'long.txt'
    path.write_bytes(b'x' * (3 * ebsummary.LINE_LIMIT) + b'\rtest_jit 1/1 (1 failed, 2 passed)\r')
    lines = list(ebsummary._lines(open(path, 'rb')))
    assert [len(line) for line in lines] == [ebsummary.LINE_LIMIT] * 3 + [len('test_jit 1/1 (1 failed, 2 passed)')]
