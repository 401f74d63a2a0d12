"""Per-sample columns derived from rate and quota, as native Spark expressions (and the one
percentile of a sorted array, :func:`array_percentile`).

The throttle estimate is quota_core.throttling.throttle's arithmetic written as a column: Kafka's
``Math.round((rate - quota) / quota * window_ms)`` (half up), with the window and the per-key
caps *read from* quota_core.throttling.throttle, not restated, for each broker's own quota window as the
snapshots carried it (quota_core.telemetry.schema). tests/test_pipeline_columns.py checks it
against the core, row for row.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from quota_core.analysis import whole_number_keys
from quota_core.throttling import estimate_throttle, rate_window_ms

from pipeline.resolve import KEYS

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column

    from quota_core.telemetry.schema import SnapshotWindows

__all__ = ["throttle_caps", "over_quota", "utilisation", "estimated_throttle_ms",
           "integral_keys", "suggested_quota", "array_percentile"]


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
    quota_core.analysis.quota_sizing's list)."""
    return [k for k in whole_number_keys() if k in KEYS]


def suggested_quota(key: "Column", p99: "Column") -> "Column":
    """quota_core.analysis.quota_sizing.suggest_quota as a column: ``ceil(p99)`` for whole-number keys, the
    p99 otherwise (NaN and null kept). tests/pipeline/test_pipeline_resolution.py checks it against the
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
                          level: "Column", broker: "Column | None" = None,
                          windows: "SnapshotWindows | None" = None) -> "Column":
    """The delay Kafka would give one request (ms, long): 0 when not over or unlimited, null
    when the quota is unknown (no snapshot yet). The window is the sample's broker's, from
    ``windows`` (what the quota snapshots carried); without, Kafka's defaults (11 × 1 s).
    The window and the cap (one sample) are asked of quota_core.throttling.throttle per window."""
    from pyspark.sql import functions as F

    from quota_core.throttling import DEFAULT_WINDOW

    def figures(window) -> tuple[float, float]:
        return float(rate_window_ms(None, window.samples, window.sample_ms)), \
            float(window.sample_ms)

    cluster = windows.cluster if windows is not None else DEFAULT_WINDOW
    window_ms, sample_ms = (F.lit(x) for x in figures(cluster))
    own = dict(windows.brokers) if windows is not None and broker is not None else {}
    if own:
        table = {b: figures(w) for b, w in own.items()}
        by_window = F.create_map(*[F.lit(x) for b, (w, _) in table.items() for x in (b, w)])
        by_sample = F.create_map(*[F.lit(x) for b, (_, m) in table.items() for x in (b, m)])
        window_ms = F.coalesce(by_window[broker], window_ms)
        sample_ms = F.coalesce(by_sample[broker], sample_ms)
    raw = F.floor((rate - quota) / quota * window_ms + F.lit(0.5))
    capped_keys = [k for k, c in throttle_caps().items() if c is not None]
    capped = raw
    if capped_keys:
        capped = F.when(key.isin(*capped_keys), F.least(raw, sample_ms.cast("long"))) \
            .otherwise(raw)
    est = F.when(over_quota(rate, quota), F.greatest(capped, F.lit(0))).otherwise(F.lit(0))
    return F.when(level.isNull(), F.lit(None)).otherwise(est).cast("long")


def array_percentile(sorted_values: "Column", p: float) -> "Column":
    """Spark's exact ``percentile`` (linear between the closest ranks, the lower value when
    both are equal) of an ascending array; null when it is empty. The one definition: the
    analysis applies it to sorted rate arrays, :mod:`pipeline.sketches` to a small sketch's
    values read back in order."""
    from pyspark.sql import functions as F

    n = F.size(sorted_values)
    position = (n - 1).cast("double") * F.lit(p)
    lower, higher = F.floor(position), F.ceil(position)
    low = F.get(sorted_values, lower.cast("int"))
    high = F.get(sorted_values, higher.cast("int"))
    between = (higher - position) * low + (position - lower) * high
    return F.when(n > 0, F.when(low == high, low).otherwise(between))
