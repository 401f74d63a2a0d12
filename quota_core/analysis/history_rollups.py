"""The History page's tables from the hourly rollups (pipeline.rollups), in pandas: no Spark.

A rollup row is (hour, broker, bucket, key, level, source) with its sums, maxima and a KLL
rate sketch; any range of hours is answered by merging rows, as the Spark job does
(pipeline.rollups.levels, then pipeline.analysis.by_client / by_entry / sizing): the same
sums and maxima, and percentiles by the rules of :mod:`quota_core.analysis.rate_sketch`. A test holds
these tables equal to the Spark job's over the same rollups.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Iterable

from quota_core.analysis import rate_sketch
from quota_core.analysis.quota_sizing import suggest_quota

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["BUCKET", "ENTRY", "SUMMARY", "SUMMARY_COLUMNS", "HEAT_COLUMNS", "hours_of",
           "hour_label", "freshness", "clients", "entries", "sizing", "sketch_rows", "split_range",
           "summarize", "as_samples", "bucket_hours", "bucket_days", "CLIENT_COLUMNS",
           "client_wait"]

BUCKET = ["user", "client_id", "key"]
ENTRY = ["source", "level", "key"]
#: What :func:`clients` and :func:`entries` read of a row, and how rows of one (broker, bucket,
#: level, source) merge: a summary of summaries is the summary of their rows (sums and maxima).
SUMMARY = ["broker"] + BUCKET + ["level", "source"]
_MERGE = (("throttled_s", "sum"), ("broker_throttled_s", "sum"), ("max_utilisation", "max"),
          ("samples", "sum"), ("max_rate", "max"))
SUMMARY_COLUMNS = SUMMARY + [name for name, _ in _MERGE]
#: What the heatmap reads of the rows that throttled (:func:`as_samples`).
HEAT_COLUMNS = ["hour", "broker", "user", "client_id", "key", "throttled_s"]


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


def summarize(table):
    """Rows (a pyarrow Table of rollup rows or of summaries, :data:`SUMMARY_COLUMNS` at least)
    merged per :data:`SUMMARY`: what :func:`clients` and :func:`entries` give the same answers
    from as from the rows themselves, without the sketches, at a row per broker and bucket
    however many hours they cover (pyarrow's group-by: no Python per row)."""
    import pyarrow as pa

    if table.num_rows == 0:
        return table.select(SUMMARY_COLUMNS)
    out = table.select(SUMMARY_COLUMNS).group_by(SUMMARY, use_threads=False).aggregate(
        list(_MERGE))
    return pa.table({**{k: out[k] for k in SUMMARY},
                     **{name: out[f"{name}_{how}"] for name, how in _MERGE}})


def split_range(kept: "Iterable[str]", first: str, last: str,
                held: "Iterable[str] | None" = None) -> tuple[list[str], list[str]]:
    """The hours ``first`` to ``last`` of the ``kept`` hour keys as (whole days, other hours):
    a day is whole when the range holds every kept hour of it (and, given ``held``, the days
    that have a merged row, when ``held`` has it); the other hours are those in range of the
    days that are not whole. Both sorted."""
    kept = sorted(kept)
    inside = [h for h in kept if first <= h <= last]
    outside = {h[:10] for h in kept if not first <= h <= last}
    whole = {h[:10] for h in inside} - outside
    if held is not None:
        whole &= set(held)
    return sorted(whole), [h for h in inside if h[:10] not in whole]


def sketch_rows(hourly: "pd.DataFrame", daily: "pd.DataFrame", first: str,
                last: str) -> "pd.DataFrame":
    """The rows whose sketches :func:`sizing` merges for the hours ``first`` to ``last``: a
    day's merged row (``daily``, pipeline.rollups.daily) where the range holds every kept
    hour of that day, else the day's hourly rows in range: at 48 h, about 1/70 of the
    sketches (a day's row merges 24 hours and every broker)."""
    import pandas as pd

    mine = hourly[(hourly["hour"] >= first) & (hourly["hour"] <= last)]
    held = set(daily["day"].unique()) if len(daily) else set()
    # a few hundred hour keys: sets, not rows
    whole, hours = split_range(set(hourly["hour"].unique()), first, last, held)
    if not whole:
        return mine
    return pd.concat([daily[daily["day"].isin(whole)], mine[mine["hour"].isin(hours)]],
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


def bucket_days(summary: "pd.DataFrame", sketches: "pd.DataFrame") -> "pd.DataFrame":
    """One bucket per day and broker, for a range too long for a point an hour: ts (the day),
    broker, max_rate (the day's largest, :func:`summarize` rows of the bucket with their
    ``day``), p99_rate (of the day's sketches merged over brokers: ``sketches``, its rows with
    their ``day``, the day's merged row or the hours in range), quota (in force at the day's
    last sample), throttled_s."""
    import pandas as pd

    p99, quota = {}, {}
    for day, part in sketches.groupby("day", sort=True):
        p99[day] = rate_sketch.percentile(rate_sketch.merged(part["rates"]), 0.99)
        quota[day] = part.loc[part["t_last"].idxmax(), "q_last"]
    per = (summary.groupby(["day", "broker"], sort=True)
           .agg(max_rate=("max_rate", "max"), throttled_s=("throttled_s", "sum")).reset_index())
    out = pd.DataFrame({"ts": pd.to_datetime(per["day"], format="%Y-%m-%d"),
                        "broker": per["broker"], "max_rate": per["max_rate"],
                        "p99_rate": [p99.get(d, math.nan) for d in per["day"]],
                        "quota": [quota.get(d, math.nan) for d in per["day"]],
                        "throttled_s": per["throttled_s"]})
    return out


#: What the bucket's clients reported, per rollup row (pipeline.rollups): samples carrying
#: ``client_throttle_ms``, their sum and their largest (optional columns: null in rollups
#: kept before them, read as none).
CLIENT_COLUMNS = ["client_samples", "client_sum_ms", "client_max_ms"]


def client_wait(rows: "pd.DataFrame", of_hours: int | None = None
                ) -> tuple[float, float, int, int] | None:
    """From one bucket's rollup rows in a range (``hour`` and :data:`CLIENT_COLUMNS`): the
    average of the ``client_throttle_ms`` its samples carried (ms per request, as the clients
    report it), the largest, the hours with any, and the hours with rows; None when no sample
    carried one. A sample is a scrape of one broker: a bucket seen on 3 brokers counts each
    scrape's figure 3 times, which leaves the average as it is. ``of_hours``: the hours with
    rows, when ``rows`` are only those whose samples carried one (the same answer)."""
    if rows.empty:
        return None
    n = rows["client_samples"].fillna(0)
    if not (n > 0).any():
        return None
    mine = rows[n > 0]
    mean = float(mine["client_sum_ms"].sum()) / float(n.sum())
    return (mean, float(mine["client_max_ms"].max()), int(mine["hour"].nunique()),
            int(rows["hour"].nunique()) if of_hours is None else of_hours)
