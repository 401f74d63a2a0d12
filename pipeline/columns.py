"""Per-sample columns derived from rate and quota, as native Spark expressions.

The throttle estimate is quota_core.throttle's arithmetic written as a column: Kafka's
``Math.round((rate - quota) / quota * window_ms)`` (half up), with the window and the per-key
caps *read from* quota_core.throttle, not restated. tests/test_pipeline_columns.py checks it
against the core, row for row.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from quota_core.sizing import whole_number_keys
from quota_core.throttle import estimate_throttle, rate_window_ms

from .resolve import KEYS

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column

__all__ = ["throttle_caps", "over_quota", "utilisation", "estimated_throttle_ms",
           "integral_keys", "suggested_quota"]


def throttle_caps() -> dict[str, float | None]:
    """Per key, the most a single throttle can be (None: uncapped), asked of the core by
    estimating a 1000x overload."""
    caps: dict[str, float | None] = {}
    for key in KEYS:
        estimate = estimate_throttle(key, 1000.0, 1.0)
        caps[key] = float(estimate.throttle_ms) if estimate.capped else None
    return caps


def integral_keys() -> list[str]:
    """Keys whose values are whole numbers (a suggested quota is rounded up for these:
    quota_core.sizing's list)."""
    return [k for k in whole_number_keys() if k in KEYS]


def suggested_quota(key: "Column", p99: "Column") -> "Column":
    """quota_core.sizing.suggest_quota as a column: ``ceil(p99)`` for whole-number keys, the
    p99 otherwise (NaN and null kept). tests/test_pipeline_resolution.py checks it against the
    core, value for value."""
    from pyspark.sql import functions as F

    whole = key.isin(*integral_keys()) & ~F.isnan(p99)
    return F.when(whole, F.ceil(p99).cast("double")).otherwise(p99.cast("double"))


def over_quota(rate: "Column", quota: "Column") -> "Column":
    """rate > quota, false when unlimited (null quota) or rate is NaN (Spark orders NaN above
    every number, so the comparison alone would call NaN over)."""
    from pyspark.sql import functions as F

    return F.coalesce(quota.isNotNull() & ~F.isnan(rate) & ~F.isnan(quota) & (rate > quota),
                      F.lit(False))


def utilisation(rate: "Column", quota: "Column") -> "Column":
    """rate / quota (1.0 = exactly at the quota); null when unlimited."""
    from pyspark.sql import functions as F

    return F.when(quota.isNotNull() & (quota > 0), rate / quota)


def estimated_throttle_ms(rate: "Column", quota: "Column", key: "Column",
                          level: "Column") -> "Column":
    """The delay Kafka would give one request (ms, long): 0 when not over or unlimited, null
    when the quota is unknown (no snapshot yet)."""
    from pyspark.sql import functions as F

    window = float(rate_window_ms())
    raw = F.floor((rate - quota) / quota * F.lit(window) + F.lit(0.5))
    caps = {k: c for k, c in throttle_caps().items() if c is not None}
    capped = raw
    if caps:
        cap = F.create_map(*[F.lit(x) for kv in caps.items() for x in kv])[key]
        capped = F.when(cap.isNotNull(), F.least(raw, cap.cast("long"))).otherwise(raw)
    est = F.when(over_quota(rate, quota), F.greatest(capped, F.lit(0))).otherwise(F.lit(0))
    return F.when(level.isNull(), F.lit(None)).otherwise(est).cast("long")
