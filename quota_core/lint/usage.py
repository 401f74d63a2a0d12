"""The usage history as the traffic rules read it: pandas over the collector's columns
(``ts``, ``quota_type``, ``user``, ``client_id``, ``rate``, ``throttle_ms``, ``interval_s``;
:mod:`quota_core.telemetry.schema`). Pure: frames in, plain values out; no Spark.

"Now" is the history's last sample, so a history read later, or the demo's, is judged on
its own days. Rates are per broker, and throttled time is broker-seconds, as in the
pipeline's tables (``broker_throttled_s``: samples whose broker ``throttle_ms`` > 0).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from quota_core.throttling.live import KEY_OF_TYPE
from quota_core.analysis.quota_sizing import suggest_quota
from quota_core.domain.units import round_up_quota

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["Span", "span", "last_days", "with_keys", "bucket_stats", "p99", "sized",
           "when_text"]


@dataclass(frozen=True)
class Span:
    start: datetime
    end: datetime

    @property
    def days(self) -> float:
        return (self.end - self.start).total_seconds() / 86400


def span(usage: "pd.DataFrame") -> Span | None:
    import pandas as pd

    if usage is None or usage.empty:
        return None
    ts = pd.to_datetime(usage["ts"], utc=True)
    return Span(ts.min().to_pydatetime(), ts.max().to_pydatetime())


def when_text(t: datetime) -> str:
    return t.strftime("%Y-%m-%d %H:%M UTC")


def last_days(usage: "pd.DataFrame", days: float) -> "pd.DataFrame":
    """The samples of the history's last ``days`` days."""
    import pandas as pd

    ts = pd.to_datetime(usage["ts"], utc=True)
    return usage[ts > ts.max() - pd.Timedelta(days=days)]


def with_keys(usage: "pd.DataFrame") -> "pd.DataFrame":
    """Samples with their quota key (quota_core.throttling.live's quota_type → key table), tags as
    Python None where missing; samples of an unknown quota_type are dropped."""
    out = usage.assign(key=usage["quota_type"].map(KEY_OF_TYPE))
    out = out[out["key"].notna()]
    for col in ("user", "client_id"):
        out[col] = out[col].astype(object).where(out[col].notna(), None)
    return out


def p99(rates) -> float:
    """The exact 99th percentile, linear between the closest ranks (Spark's ``percentile``,
    the pipeline's sizing rule)."""
    import numpy as np

    values = np.sort(np.asarray(rates, dtype=float))
    values = values[~np.isnan(values)]
    if not len(values):
        return math.nan
    return float(np.percentile(values, 99, method="linear"))


def sized(key: str, value: float) -> float:
    """The fix's quota for a largest per-bucket p99 rate: the one suggestion
    (:func:`quota_core.analysis.quota_sizing.suggest_quota`) with the one display rounding
    (:func:`quota_core.domain.units.round_up_quota`), as History shows it: 10,848,520 B/s →
    10,905,191 (10.4 MiB/s); 131.697 % → 132."""
    return round_up_quota(key, suggest_quota(key, value))


def bucket_stats(usage: "pd.DataFrame") -> "pd.DataFrame":
    """Per bucket (user, client_id, key): ``sampled_s`` and ``throttled_s`` (broker-seconds,
    throttled = the broker's ``throttle_ms`` > 0) and ``p99`` of the per-broker rates."""
    import pandas as pd

    keyed = with_keys(usage)
    if keyed.empty:
        return pd.DataFrame(columns=["user", "client_id", "key", "sampled_s", "throttled_s",
                                     "p99"])
    throttled = pd.to_numeric(keyed["throttle_ms"], errors="coerce").fillna(0) > 0
    frame = keyed.assign(t_s=keyed["interval_s"].where(throttled, 0.0))
    groups = frame.groupby(["user", "client_id", "key"], dropna=False, sort=True)
    out = groups.agg(sampled_s=("interval_s", "sum"), throttled_s=("t_s", "sum"),
                     p99=("rate", p99)).reset_index()
    for col in ("user", "client_id"):
        out[col] = out[col].astype(object).where(out[col].notna(), None)
    return out
