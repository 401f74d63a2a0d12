"""The core's validation messages in the words of the Edit form.

``quota_core`` words its messages for the command line (``--delete producer_byte_rate``,
"too large for a LONG"), and the CLI's tests pin them. On the form there is no flag to give
and no Java type to know: a key is removed by clearing its field, and a limit is a number.
:func:`form_message` rewrites those phrases, and only those; every other word of the
message (the input, the rule, the fix) stays the core's.
"""
from __future__ import annotations

import re

from quota_core.domain import QUOTA_KEYS

__all__ = ["form_message"]

_DELETE_KEY = re.compile(r"delete the key \(--delete [A-Za-z_.]+\)")
_TOO_LARGE_TYPED = re.compile(r"too large for (?:a LONG|an INT) \(at most (\d+)\)")
_TOO_LARGE_DOUBLE = re.compile(r"too large for any quota \(beyond a double's range, about "
                               r"1\.8e308\)")


def _limit(key: str, match: re.Match) -> str:
    spec = QUOTA_KEYS.get(key)
    unit = f" {spec.unit}" if spec is not None else ""
    return f"too large: the most a broker stores for {key} is {int(match.group(1)):,}{unit}"


def form_message(key: str | None, message: str) -> str:
    """``message`` with its command-line phrases in form words (see the module doc)."""
    text = _DELETE_KEY.sub("clear the field", message)
    text = _TOO_LARGE_TYPED.sub(lambda m: _limit(key or "", m), text)
    return _TOO_LARGE_DOUBLE.sub("too large for any quota (the largest number a broker stores "
                                 "is about 1.8e308)", text)
