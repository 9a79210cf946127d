"""The one reader of a time read from a file: a finite number of seconds from 0 to MOST_SECONDS, or NotSeconds.

Times come from files anyone may hand us: an XML report's `time` attribute, a log's `Ran N tests in Xs`, a
store record, a previous installation's results JSON (`suite_seconds`, `test_seconds`, a suite's `seconds`).
Python's float() takes `inf`, `nan`, `1e999` (inf), `-5` and `1_0`; JSON's reader turns `1e999` into inf and a
401-digit integer into an int that math.isfinite() and float() refuse with OverflowError.  Let through, such a
time broke the run far from where it was read: `json.dumps(allow_nan=False)` of the store's append raised on
inf (no record, the same crash on every rerun), a negative time went into the results JSON, a timeout computed
from 1e999 or 401 digits raised OverflowError.  So every reader of a time calls seconds_of (seconds_in_text
for text) and sets the value aside with a note naming where it was when NotSeconds comes back; what is
accepted always writes as JSON (allow_nan=False) and reads back equal.
"""

import math
import re

MOST_SECONDS = 1e9  # about 31 years: no test or suite takes longer, and 4x it is still a valid thread timeout
_LONGEST_TEXT = 64  # characters: a time written as text is never longer (a 401-digit one is no time)
_DECIMAL = re.compile(r'[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?')


class NotSeconds(ValueError):
    """A value that is not a time; str() says what a time must be and what it was (shortened)."""

    def __init__(self, value: object) -> None:
        shown = repr(value)
        shown = shown if len(shown) <= 40 else f'{shown[:40]}... ({len(shown)} characters)'
        super().__init__(f'must be a finite number of seconds from 0 to {MOST_SECONDS:.0e}, got {shown}')


def seconds_of(value: object) -> float:
    """value, a number as JSON gives it (an int or a float; not a bool, not a string: we never write a time
    as one), as a float of seconds; NotSeconds for inf, nan, a negative time, one beyond MOST_SECONDS, an int
    too large for a float."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise NotSeconds(value)
    try:
        number = float(value)
    except OverflowError:  # an int too large for a float: JSON's 401 digits
        raise NotSeconds(value) from None
    if not math.isfinite(number) or not 0 <= number <= MOST_SECONDS:
        raise NotSeconds(value)
    return abs(number)  # -0.0 as 0.0


def seconds_in_text(text: str) -> float:
    """A time written as text (an XML attribute, a log's summary): plain decimal notation (no sign, no
    underscores, no surrounding space, at most 64 characters), then as seconds_of; NotSeconds otherwise."""
    if len(text) > _LONGEST_TEXT or not _DECIMAL.fullmatch(text):
        raise NotSeconds(text)
    try:
        return seconds_of(float(text))
    except NotSeconds:
        raise NotSeconds(text) from None


def is_seconds(value: object) -> bool:
    """seconds_of would accept value (for a reader that only sorts the good from the bad)."""
    try:
        seconds_of(value)
    except NotSeconds:
        return False
    return True


def shown(seconds: float) -> str:
    """A time as a person reads it on a progress line or in a report: '42s', '12m05s', '2h10m' (whole seconds
    under an hour, whole minutes from an hour on)."""
    whole = max(0, int(round(seconds)))
    if whole < 60:
        return f'{whole}s'
    if whole < 3600:
        return f'{whole // 60}m{whole % 60:02d}s'
    minutes = (whole + 30) // 60
    return f'{minutes // 60}h{minutes % 60:02d}m'
