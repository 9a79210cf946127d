"""The times in a previous installation's results JSON, read to plan a run: suites' and tests' seconds.

The file is the previous build's, read to set timeouts (service.suite_timeouts), order and split a spread
(spread.controller), never trusted to be ours: a file that cannot be read or is no JSON object gives no times;
in one that is, each time goes through the one number reader (results.seconds), and what is not a time
(1e999, a 401-digit integer, NaN, -5, a string) is left out with a note naming the file and the place.
"""

import json
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Mapping, Optional

from eb_pytorch_cuda.testsuite.results.seconds import NotSeconds, seconds_of

Notice = Callable[[str], None]


def _quiet(note: str) -> None:
    pass


def load(path: Optional[str]) -> dict:
    """The JSON object in path, {} without a path or when it cannot be read or is not an object."""
    if not path:
        return {}
    try:
        with open(path, 'rb') as handle:
            data = json.loads(handle.read())
    except (OSError, ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def _kept(path: str, where: str, values, notice: Notice) -> Dict[str, float]:
    """{key: seconds} of the string keys of values whose value is a time; one note for those that are not."""
    found: Dict[str, float] = {}
    bad: List[str] = []
    for key, value in (values.items() if isinstance(values, Mapping) else ()):
        if not isinstance(key, str):
            continue
        try:
            found[key] = seconds_of(value)
        except NotSeconds as err:
            bad.append(f'{key[:200]!r}: {err}')
    if bad:
        more = f' (and {len(bad) - 1} more)' if len(bad) > 1 else ''
        notice(f'{path}: {where}: {bad[0]}{more}; set aside')
    return found


def suite_seconds(path: Optional[str], data: Mapping, notice: Notice = _quiet) -> Dict[str, float]:
    """{suite: seconds}: the JSON's `suite_seconds`, and for a suite not there its entry's `seconds`."""
    found = _kept(str(path), 'suite_seconds', data.get('suite_seconds'), notice)
    suites = data.get('suites')
    entries = {suite['name']: suite['seconds'] for suite in (suites if isinstance(suites, list) else ())
               if isinstance(suite, dict) and isinstance(suite.get('name'), str) and suite.get('seconds') is not None
               and suite['name'] not in found}
    found.update(_kept(str(path), 'suites[].seconds', entries, notice))
    return found


def test_seconds(path: Optional[str], data: Mapping, notice: Notice = _quiet) -> Dict[str, Dict[str, float]]:
    """{suite: {node id: seconds}} of the JSON's `test_seconds` (what the test step wrote from its records)."""
    times = data.get('test_seconds')
    found: Dict[str, Dict[str, float]] = {}
    for suite, tests in (times.items() if isinstance(times, Mapping) else ()):
        if isinstance(suite, str) and isinstance(tests, Mapping):
            kept = _kept(str(path), f'test_seconds of {suite[:200]!r}', tests, notice)
            if kept:
                found[suite] = kept
    return found


@dataclass(frozen=True)
class History:
    """What a run plans with from the previous installation's results JSON, read once (History.read) and handed to
    the timeouts, the executor's piece rule and a spread's order: its suites' and long suites' tests' seconds."""
    path: Optional[str] = None
    suite_seconds: Mapping[str, float] = field(default_factory=dict)
    test_seconds: Mapping[str, Dict[str, float]] = field(default_factory=dict)

    @classmethod
    def read(cls, path: Optional[str], notice: Notice = _quiet) -> 'History':
        """The times in path (none without one, or when it cannot be read); what is not a time is said once,
        through notice, naming the file and the place."""
        data = load(path)
        return cls(path, suite_seconds(path, data, notice), test_seconds(path, data, notice))
