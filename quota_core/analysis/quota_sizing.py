"""Quota sizing: the one definition of the quota to suggest for a measured rate.

The suggestion for an entry is the largest p99 rate among the buckets it bound (per broker:
quotas are enforced by each broker on its own), a whole number for whole-number keys (rounded
*up*: a smaller quota would not keep that rate under it). Lint's chronic fix, History's sizing
table, the rollups reader (quota_core.analysis.history_rollups), the Spark job (pipeline.analysis) and
the pandas baseline (benchmarks/pandas_analysis.py) all take it from here; what people are
shown is :func:`quota_core.domain.units.round_up_quota` of it. Pure.
"""
from __future__ import annotations

import math

from quota_core.domain.keys import QUOTA_KEYS

__all__ = ["suggest_quota", "whole_number_keys"]


def whole_number_keys() -> tuple[str, ...]:
    """The keys whose values are whole numbers (long/int quotas): their suggestion is rounded
    up to one."""
    return tuple(k for k, spec in QUOTA_KEYS.items() if spec.integral)


def suggest_quota(key: str, p99: float) -> float:
    """The raw suggestion for a largest per-bucket p99 rate ``p99``: ``ceil(p99)`` for
    whole-number keys, ``p99`` itself otherwise; NaN (no rate) stays NaN."""
    value = float(p99)
    if not math.isfinite(value):
        return value
    spec = QUOTA_KEYS.get(key)
    return float(math.ceil(value)) if spec is not None and spec.integral else value
