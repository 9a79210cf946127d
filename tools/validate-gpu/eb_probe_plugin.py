"""pytest plugin of tools/validate-gpu/probe_cuda.py: after `-k` has chosen a suite's tests, note how many it chose
and keep a 1/EB_PROBE_SHARDS sample of them (by a hash of the node id, as PyTorch's pytest_shard_custom does: the
same tests on every machine), then append each test phase's outcome and seconds to EB_PROBE_OUT as it ends, one
JSON line each, so a probe stopped at its time limit still leaves what it measured."""

import hashlib
import json
import os
import time

import pytest

_OUT = os.environ.get('EB_PROBE_OUT', '')
_SHARDS = int(os.environ.get('EB_PROBE_SHARDS', '1') or 1)


def _note(record):
    with open(_OUT, 'a') as handle:
        handle.write(json.dumps(record) + '\n')


def in_sample(nodeid, shards):
    """Whether nodeid is in the 1/shards sample (the same rule on every machine)."""
    return int.from_bytes(hashlib.sha256(nodeid.encode()).digest(), 'little') % shards == 0


@pytest.hookimpl(trylast=True)  # after -k and -m deselected theirs
def pytest_collection_modifyitems(config, items):
    _note({'selected': len(items), 'at': time.time()})
    items[:] = [item for item in items if in_sample(item.nodeid, _SHARDS)]
    _note({'sample': len(items), 'at': time.time()})


def pytest_runtest_logreport(report):
    _note({'id': report.nodeid, 'when': report.when, 'outcome': report.outcome,
           'seconds': round(report.duration, 4)})
