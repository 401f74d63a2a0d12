"""The History page's tables from the hourly rollups (pipeline.rollups), in pandas: no Spark.

A rollup row is (hour, broker, bucket, key, level, source) with its sums, maxima and a KLL
rate sketch; any range of hours is answered by merging rows, as the Spark job does
(pipeline.rollups.levels, then pipeline.analysis.by_client / by_entry / sizing): the same
sums and maxima, and percentiles by the rules of :mod:`quota_core.analysis.rate_sketch`. A test holds
these tables equal to the Spark job's over the same rollups.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

from quota_core.analysis import rate_sketch
from quota_core.analysis.quota_sizing import suggest_quota

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["BUCKET", "ENTRY", "hours_of", "hour_label", "freshness", "clients", "entries",
           "sizing", "sketch_rows", "as_samples", "bucket_hours"]

BUCKET = ["user", "client_id", "key"]
ENTRY = ["source", "level", "key"]


def hours_of(roll: "pd.DataFrame") -> "pd.Series":
    """The rows' hours as (naive UTC) timestamps."""
    import pandas as pd

    return pd.to_datetime(roll["hour"], format="%Y-%m-%dT%H")


def hour_label(hour: str) -> str:
    """``2025-01-06T14`` as people read it: ``2025-01-06 14:00``."""
    return hour.replace("T", " ") + ":00"


def freshness(state: dict, now: float) -> str:
    """How fresh the rollups are, from their state (pipeline's ``_state.json``: ``up_to`` the
    latest sample rolled up, ``updated_at`` when that run ended, UTC) and the time ``now``
    (epoch seconds): ``Rollups up to 2025-01-06 14:05 UTC (40 s ago), updated 12 s ago.``"""
    from datetime import datetime, timezone

    from quota_core.analysis.history import duration_text

    def age(text: str) -> str:
        then = datetime.fromisoformat(text).replace(tzinfo=timezone.utc).timestamp()
        return f"{duration_text(max(0.0, now - then))} ago"

    up_to, updated = state.get("up_to"), state.get("updated_at")
    if not up_to:
        return "The rollups hold no samples yet."
    text = f"Rollups up to {up_to[:16]} UTC ({age(up_to)})"
    return text + (f", updated {age(updated)}." if updated else ".")


def _per_level(roll: "pd.DataFrame") -> "pd.DataFrame":
    """The rows merged per bucket and level (pipeline.rollups.levels), sketches left apart."""
    return (roll.groupby(BUCKET + ["level", "source"], dropna=False, sort=False)
            .agg(throttled_s=("throttled_s", "sum"),
                 broker_throttled_s=("broker_throttled_s", "sum"),
                 max_utilisation=("max_utilisation", "max"), samples=("samples", "sum"))
            .reset_index())


def clients(roll: "pd.DataFrame") -> "pd.DataFrame":
    """Per bucket (user, client id, key): throttled_s, broker_throttled_s, max_utilisation,
    samples, brokers (how many brokers saw it)."""
    return (roll.groupby(BUCKET, dropna=False, sort=False)
            .agg(throttled_s=("throttled_s", "sum"),
                 broker_throttled_s=("broker_throttled_s", "sum"),
                 max_utilisation=("max_utilisation", "max"), samples=("samples", "sum"),
                 brokers=("broker", "nunique"))
            .reset_index())


def entries(roll: "pd.DataFrame") -> "pd.DataFrame":
    """Per entry (source, level, key): throttled_s over the buckets it bound, clients (those
    buckets), clients_throttled (those of them over quota at some time)."""
    import pandas as pd

    bound = _per_level(roll[roll["level"].fillna(0) > 0])
    if bound.empty:
        return pd.DataFrame(columns=ENTRY + ["throttled_s", "clients", "clients_throttled"])
    return (bound.assign(hit=bound["throttled_s"] > 0)
            .groupby(ENTRY, sort=False)
            .agg(throttled_s=("throttled_s", "sum"), clients=("throttled_s", "size"),
                 clients_throttled=("hit", "sum"))
            .reset_index())


def sizing(roll: "pd.DataFrame") -> "pd.DataFrame":
    """Per entry: ``suggested_quota`` (:func:`quota_core.analysis.quota_sizing.suggest_quota` of the largest
    p99 rate among the buckets it bound), ``current_quota`` its latest value, ``clients`` and
    ``tightest_client`` (user, client id of that largest p99)."""
    import numpy as np
    import pandas as pd

    columns = ENTRY + ["current_quota", "suggested_quota", "clients", "tightest_client"]
    bound = roll[roll["level"].fillna(0) > 0]
    if bound.empty:
        return pd.DataFrame(columns=columns)
    # one pass in group order: each (entry, bucket)'s sketches merged, its p99 read
    group = bound.groupby(ENTRY + ["user", "client_id"], dropna=False, sort=False).ngroup()
    order = np.argsort(group.to_numpy(), kind="stable")
    codes, blobs = group.to_numpy()[order], bound["rates"].to_numpy()[order]
    starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])
    p99 = [rate_sketch.percentile(rate_sketch.merged(blobs[a:b]), 0.99)
           for a, b in zip(starts, np.r_[starts[1:], len(codes)])]
    first = bound.iloc[order[starts]]
    buckets = first[ENTRY + ["user", "client_id"]].assign(p99=p99).reset_index(drop=True)
    latest = bound.loc[bound.groupby(ENTRY, sort=False)["t_last"].idxmax(),
                       ENTRY + ["q_last"]].rename(columns={"q_last": "current_quota"})
    per_entry = buckets.groupby(ENTRY, sort=False)
    out = latest.merge(per_entry.size().rename("clients").reset_index(), on=ENTRY)
    ranked = buckets.dropna(subset=["p99"])
    # ties as Spark's max_by(…, (p99, user, client_id)): the greatest names, nulls least
    top = ranked.sort_values(["p99", "user", "client_id"], na_position="first").groupby(
        ENTRY, sort=False, dropna=False).tail(1)
    top = top.assign(tightest_client=[tuple(None if pd.isna(v) else v for v in pair)
                                      for pair in zip(top["user"], top["client_id"])])
    out = out.merge(top[ENTRY + ["p99", "tightest_client"]], on=ENTRY, how="left")
    out["suggested_quota"] = [suggest_quota(k, p) for k, p in zip(out["key"], out["p99"])]
    return out[columns]


def sketch_rows(hourly: "pd.DataFrame", daily: "pd.DataFrame", first: str,
                last: str) -> "pd.DataFrame":
    """The rows whose sketches :func:`sizing` merges for the hours ``first`` to ``last``: a
    day's merged row (``daily``, pipeline.rollups.daily) where the range holds every kept
    hour of that day, else the day's hourly rows in range: at 48 h, about 1/70 of the
    sketches (a day's row merges 24 hours and every broker)."""
    import pandas as pd

    mine = hourly[(hourly["hour"] >= first) & (hourly["hour"] <= last)]
    kept = set(hourly["hour"].unique())  # a few hundred hour keys: sets, not rows
    outside = {h[:10] for h in kept if not first <= h <= last}
    held = set(daily["day"].unique()) if len(daily) else set()
    whole = ({h[:10] for h in kept if first <= h <= last} - outside) & held
    if not whole:
        return mine
    in_whole = [h for h in kept if h[:10] in whole]
    return pd.concat([daily[daily["day"].isin(whole)], mine[~mine["hour"].isin(in_whole)]],
                     ignore_index=True)


def as_samples(roll: "pd.DataFrame") -> "pd.DataFrame":
    """Each row as one sample standing for its throttled seconds: the shape
    :func:`quota_core.analysis.history.throttle_heatmap` and ``throttled_by_broker`` read (ts, broker,
    user, client_id, key, interval_s, over_quota), giving the same sums per hour as the
    samples themselves."""
    import pandas as pd

    return pd.DataFrame({"ts": hours_of(roll), "broker": roll["broker"], "user": roll["user"],
                         "client_id": roll["client_id"], "key": roll["key"],
                         "interval_s": roll["throttled_s"],
                         "over_quota": roll["throttled_s"] > 0})


def _is(column: "pd.Series", value) -> "pd.Series":
    return column.isna() if value is None else column == value


def bucket_hours(roll: "pd.DataFrame", user: str | None, client_id: str | None,
                 key: str) -> "pd.DataFrame":
    """One bucket per hour and broker: ts (the hour), broker, max_rate, p99_rate (that
    hour's sketch), quota (in force at its last sample), throttled_s."""
    import pandas as pd

    mine = roll[_is(roll["user"], user) & _is(roll["client_id"], client_id)
                & (roll["key"] == key)]
    rows = []
    for (hour, broker), part in mine.groupby(["hour", "broker"], sort=True):
        latest = part.loc[part["t_last"].idxmax()]
        rows.append({"ts": hour, "broker": broker, "max_rate": part["max_rate"].max(),
                     "p99_rate": rate_sketch.percentile(rate_sketch.merged(part["rates"]), 0.99),
                     "quota": latest["q_last"], "throttled_s": part["throttled_s"].sum()})
    out = pd.DataFrame(rows, columns=["ts", "broker", "max_rate", "p99_rate", "quota",
                                      "throttled_s"])
    out["ts"] = pd.to_datetime(out["ts"], format="%Y-%m-%dT%H")
    return out
