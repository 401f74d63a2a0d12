"""The Client telemetry page's pieces: the subscriptions as a table, and the form's input
read with the CLI's own checks (:func:`quota_core.domain.subscription_from_input`).

The checks word their messages for the command line (``--metrics``, ``--interval-ms``);
:func:`form_words` names the form's fields instead, and leaves every other word as it is.
"""
from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from quota_core.domain import Subscription, subscription_from_input

__all__ = ["FIELDS", "form_words", "subscription_from_form", "subscriptions_frame"]

#: The command line's flags and the form's fields that take the same input.
FIELDS = {"--metrics": "Metric prefixes", "--match": "Match", "--interval-ms": "Interval (ms)",
          "or --default": "or add the default subscription"}


def form_words(message: str) -> str:
    """A check's message with the CLI's flags named as the form's fields."""
    for flag, field in FIELDS.items():
        message = message.replace(flag, field)
    return message


def subscription_from_form(name: str, metrics: str, match: str, interval: str) -> Subscription:
    """The subscription the form asks for: ``match`` one ``KEY=REGEX`` a line, an empty
    ``metrics`` (comma-separated, blanks around the commas dropped) or ``interval`` not given (a :class:`quota_core.errors.UsageError` else,
    worded by :func:`form_words` at the page)."""
    lines = [line.strip() for line in match.splitlines() if line.strip()]
    prefixes = ",".join(p.strip() for p in metrics.split(","))  # "a, b": as Kafka reads it
    return subscription_from_input(name.strip(), prefixes or None, lines,
                                   interval.strip() or None)


def subscriptions_frame(subs: Sequence[Subscription]) -> pd.DataFrame:
    """One row per subscription, every cell text (names raw, as the broker holds them)."""
    return pd.DataFrame([{
        "name": s.name, "metric prefixes": ", ".join(s.metrics),
        "match": ", ".join(f"{k}={v}" for k, v in s.match.items()) or "every client",
        "interval": f"{s.interval_ms:,} ms"} for s in subs],
        columns=["name", "metric prefixes", "match", "interval"])
