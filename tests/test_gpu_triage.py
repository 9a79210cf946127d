"""The first GPU build of a target triaged in one command, on the kept H200 records (docs/validation/h200-*-eb*).

The field's known failures (the main easyconfig's) were collected with SANDCASTLE=1: they name no CUDA device test,
and none is scoped to compute capability 9.0.  The unpatched eb builds on the H200 ran CUDA device tests and failed.
`report <the build's pytorch-test-results.json> --suggest-policy --easyconfig <its easyconfig>` prints the entries
that make that run pass, scoped to the compute capability of the GPU the run saw ('9.0', recorded in the results
JSON); pasted into the easyconfig's known_test_failures, real EasyBuild's parser and our checks accept them, the
judge passes the run with them (in the context the run recorded, wherever the report runs), they do not apply to a
CPU-only build of the same target, and the patched build of the same round still passes (the entries then stale).
"""

import ast
import json
import os

import pytest

from helpers import cli
from eb_pytorch_cuda.eb.ecpolicy import policy_from_values, read_easyconfig
from eb_pytorch_cuda.testsuite.policy.judging import judge
from eb_pytorch_cuda.testsuite.results.saved import load_saved, recorded_context
from eb_pytorch_cuda.testsuite.results.scopes import ScopeContext

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VALIDATION = os.path.join(ROOT, 'docs', 'validation')
MAIN_EC = os.path.join(ROOT, 'easyconfigs', 'p', 'PyTorch', 'PyTorch-2.1.2-foss-2023a-CUDA-12.1.1.eb')
# (record, its unpatched results JSON, the patched results JSON of the same round or None, failures named / counted)
RECORDS = [
    ('h200-2026-12-01-eb', 'unpatched/pytorch-test-results-unpatched.json',
     'patched/pytorch-test-results-patched.json', (10, {'nn/test_convolution': 20})),
    ('h200-2026-12-02-eb', 'unpatched/pytorch-test-results-unpatched.json', None, (10, {'test_transformers': 4})),
    ('h200-2026-12-02-eb-complete', 'pytorch-test-results-unpatched.json', 'pytorch-test-results-patched.json',
     (14, {})),
]


def _suggested(stdout):
    """The known_test_failures dict of a suggestion, as Python reads it."""
    text = stdout[stdout.index('# Suggested known_test_failures'):]
    return ast.literal_eval(text.split('known_test_failures = ', 1)[1].split('\n}\n', 1)[0] + '\n}'), text


def _pasted(suggestion_text, directory):
    """A copy of the main easyconfig with the suggestion's scopes pasted into its known_test_failures, as a
    maintainer does: the lines between `known_test_failures = {` and `}`, after the dict's opening line."""
    body = suggestion_text.split('known_test_failures = {\n', 1)[1].split('\n}\n', 1)[0]
    with open(MAIN_EC) as handle:
        text = handle.read()
    assert text.count('known_test_failures = {\n') == 1
    path = directory / os.path.basename(MAIN_EC)
    path.write_text(text.replace('known_test_failures = {\n', 'known_test_failures = {\n' + body + '\n', 1))
    return path


@pytest.mark.parametrize('record,unpatched,patched,failures', RECORDS, ids=[r[0] for r in RECORDS])
def test_the_h200_record_is_triaged_into_entries_scoped_to_its_compute_capability(record, unpatched, patched,
                                                                                  failures, tmp_path):
    results = os.path.join(VALIDATION, record, unpatched)
    context = recorded_context(results)
    assert context == ScopeContext('x86_64', 'x86_64/generic', ('9.0',))  # nvidia-smi's, as the build recorded it
    main = read_easyconfig(MAIN_EC)
    assert '9.0' not in main['known_test_failures']  # the field's data: no CUDA device test, nothing for 9.0
    assert not judge(load_saved(results), policy_from_values(main, context, MAIN_EC)).passed

    done = cli('report', results, '--suggest-policy', '--easyconfig', MAIN_EC, check_rc=1)
    suggested, text = _suggested(done.stdout)
    assert list(suggested) == ['9.0'], text  # the GPU's compute capability, nothing wider
    named, counted = failures
    assert len([entry for entry in suggested['9.0'] if '::' in entry[0]]) == named
    assert {entry[0]: entry[2] for entry in suggested['9.0'] if len(entry) == 3} == counted
    assert "# scope '9.0': GPUs of CUDA compute capability 9.0" in text
    assert ('[9.0]: FAIL now; with these entries: PASS, 0 unknown failure(s) against max_failed_tests = 0 (0 left)'
            in text)
    # --suggest-scope '9.0' puts them in the same place; nvcc's spelling is refused with the way to write it
    forced = cli('report', results, '--suggest-scope', '9.0', '--easyconfig', MAIN_EC, check_rc=1)
    assert _suggested(forced.stdout)[0] == suggested
    refused = cli('report', results, '--suggest-scope', 'sm_90', check_rc=2)
    assert refused.stdout == '' and "(compute capability 9.0 is written '9.0')" in refused.stderr

    pasted = _pasted(text, tmp_path)
    values = read_easyconfig(pasted)  # real EasyBuild's parser, then our checks: accepted
    assert values['known_test_failures']['9.0'] == suggested['9.0']
    policy = policy_from_values(values, context, str(pasted))
    assert {entry.scope for entry in policy.known} == {'9.0'}
    verdict = judge(load_saved(results), policy)
    assert verdict.passed and verdict.unknown == [] and verdict.stale == [], verdict.reasons
    # the same run judged by report with the pasted easyconfig: where the run ran, as recorded, not this machine
    assert 'verdict: PASS' in cli('report', results, '--easyconfig', pasted, check_rc=0).stdout
    # the options still say where, when given: judged as if on an A100 node, the entries do not apply
    cli('report', results, '--easyconfig', pasted, '--cuda-compute-capabilities', '8.0', check_rc=1)
    # GPU-scoped: a CPU-only build of the target, or one tested on an A100 (8.0), is judged without them
    for elsewhere in (ScopeContext('x86_64', 'x86_64/generic'), ScopeContext('x86_64', 'x86_64/generic', ('8.0',))):
        assert '9.0' not in {entry.scope for entry in policy_from_values(values, elsewhere, str(pasted)).known}
    if patched:  # the fixed build of the same round passes with them; they are then reported stale
        fixed = os.path.join(VALIDATION, record, patched)
        judged = cli('report', fixed, '--easyconfig', pasted, check_rc=0).stdout
        assert 'verdict: PASS' in judged and 'stale known failure (did not fail)' in judged


def test_the_eb_summary_of_the_failed_step_already_holds_the_suggestion():
    """The failed test step's own Markdown summary (written by eb into the build directory, kept in the record)
    ends with the same entries report --suggest-policy prints: the triage needs nothing but the build's files."""
    record = os.path.join(VALIDATION, 'h200-2026-12-02-eb-complete')
    with open(os.path.join(record, 'pytorch-test-summary-unpatched.md')) as handle:
        summary = handle.read()
    block = summary[summary.index('<details><summary>Suggested known_test_failures'):]
    kept = _suggested(block.split('```python\n', 1)[1])[0]
    done = cli('report', os.path.join(record, 'pytorch-test-results-unpatched.json'), '--suggest-policy',
               '--max-failed-tests', '0', check_rc=1)
    assert list(kept) == ['9.0'] and _suggested(done.stdout)[0] == kept
    assert json.loads(cli('report', os.path.join(record, 'pytorch-test-results-unpatched.json'), '--format', 'json',
                          '--max-failed-tests', '0').stdout)['scope']['compute_capabilities'] == ['9.0']


def test_from_the_step_log_the_compute_capability_is_given_on_the_command_line():
    """A console log records no scope: --cuda-compute-capabilities says which GPUs it ran on (without it the
    entries go to this machine's CPU target).  Read by today's parser, the 2026-12-01 log names its 10 failures
    (its results JSON, written by an older parser, also counted 20 retries of them unnamed)."""
    log = os.path.join(VALIDATION, 'h200-2026-12-01-eb', 'unpatched', 'output-unpatched.log')
    done = cli('report', log, '--suggest-policy', '--easyconfig', MAIN_EC, '--cuda-compute-capabilities', '9.0',
               check_rc=1)
    suggested, text = _suggested(done.stdout)
    assert list(suggested) == ['9.0'] and len(suggested['9.0']) == 10
    assert all(len(entry) == 2 and '::TestConvolutionNNDeviceTypeCUDA.' in entry[0] for entry in suggested['9.0'])
    assert 'with these entries: PASS' in text
    here = _suggested(cli('report', log, '--suggest-policy', '--easyconfig', MAIN_EC, check_rc=1).stdout)[0]
    assert '9.0' not in here and len(here) == 1
