"""XML reports with a byte order mark or in UTF-16 are read; UTF-32 is refused naming it.

The report is a real pytest JUnit XML file of the kept corpus (tests/data/pytorch_corpus/test-reports),
re-encoded here: UTF-8 with a BOM (what Windows tools write), UTF-16 LE and BE with a BOM and its
declaration saying UTF-16, UTF-16 LE without a BOM; read as bytes, each would be `root element is <?>`.
"""

import os

import pytest

from helpers import one_line_error, run_main
from eb_pytorch_cuda.testsuite.results.xmlparse import parse_report_dir

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUITE_DIR = 'distr.algorithms.quantization.test_quantization'
REPORT = os.path.join(ROOT, 'tests', 'data', 'pytorch_corpus', 'test-reports', 'dist-gloo-init-file', SUITE_DIR,
                      f'{SUITE_DIR}-0b7d2.xml')


def _report_dir(tmp_path, name, data):
    directory = tmp_path / name / 'test-reports'
    (directory / SUITE_DIR).mkdir(parents=True)
    (directory / SUITE_DIR / 'report.xml').write_bytes(data)
    return str(directory)


def _utf16(text, encoding, bom):
    text = text.replace('encoding="utf-8"', 'encoding="UTF-16"')
    return (bom if bom else b'') + text.encode(encoding)


@pytest.mark.parametrize('name, make', [
    ('utf-8-bom', lambda text: b'\xef\xbb\xbf' + text.encode('utf-8')),
    ('utf-16-le-bom', lambda text: _utf16(text, 'utf-16-le', b'\xff\xfe')),
    ('utf-16-be-bom', lambda text: _utf16(text, 'utf-16-be', b'\xfe\xff')),
    ('utf-16-le-no-bom', lambda text: _utf16(text, 'utf-16-le', None)),
])
def test_a_bom_or_utf16_report_reads_as_the_utf8_one(tmp_path, name, make):
    with open(REPORT, encoding='utf-8') as handle:
        text = handle.read()
    plain = parse_report_dir(_report_dir(tmp_path, 'plain', text.encode('utf-8')))
    assert plain.suites and sum(suite.counts['passed'] for suite in plain.suites.values()) == 1
    assert parse_report_dir(_report_dir(tmp_path, name, make(text))) == plain


def test_a_utf32_report_is_refused_naming_the_encoding(tmp_path):
    with open(REPORT, encoding='utf-8') as handle:
        data = handle.read().encode('utf-32')
    directory = _report_dir(tmp_path, 'utf-32', data)
    done = run_main('report', directory, check_rc=2)
    assert done.stderr.count('\n') == 1 and 'report.xml' in done.stderr and 'is UTF-32' in done.stderr
    assert 'root element' not in done.stderr


def test_a_broken_utf16_report_is_refused_naming_it(tmp_path):
    directory = _report_dir(tmp_path, 'broken', b'\xff\xfe<\x00t\x00\x00\xd8')  # a lone high surrogate
    done = run_main('report', directory, check_rc=2)
    assert 'report.xml' in done.stderr and 'UTF-16-LE but does not decode' in done.stderr, done.stderr


@pytest.mark.parametrize('encoding', ['shift_jis', 'euc-jp', 'gbk', 'big5', 'UTF-7', 'punycode', 'idna'])
def test_a_report_declaring_an_encoding_expat_cannot_take_is_refused_in_one_line(tmp_path, encoding):
    """pyexpat hands expat only single-byte codecs: a multi-byte one (or punycode, idna) raised ValueError or
    UnicodeError through `report` as a traceback, rc 1.  The corpus report, ASCII, declaring it."""
    with open(REPORT, encoding='utf-8') as handle:
        text = handle.read()
    assert 'encoding="utf-8"' in text
    directory = _report_dir(tmp_path, encoding, text.replace('encoding="utf-8"', f'encoding="{encoding}"').encode())
    one_line_error(run_main('report', directory), 'report.xml', f"declares the encoding '{encoding}'")


def test_the_corpus_report_is_there():
    assert os.path.isfile(REPORT)  # the tests above would otherwise read no report
