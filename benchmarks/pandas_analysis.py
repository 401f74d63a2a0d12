"""The analysis tables in pandas, in one process: what :mod:`pipeline.analysis` computes in
Spark, for comparison (``benchmarks/bench_pipeline.py``) and as a readable reference.

Same inputs (the collector's ``DIR/usage`` and ``DIR/quotas``, the whole history), same
resolution (the distinct buckets of each quota version through
:func:`pipeline.resolve.resolve_buckets`, i.e. ``quota_core.domain.bulk.bulk_resolve_buckets``),
same tables: ``windows``, ``by_client``, ``by_entry``, ``sizing`` (not ``what_if``), with the
columns and the null, tie and percentile rules of the Spark job. Percentiles are linear
interpolation between closest ranks, as Spark's exact ``percentile``; sums may differ from
Spark's in the last bits (another summation order).

Not for production: everything is held in memory at once, and there is no ``--from/--to``.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from quota_core.analysis.quota_sizing import suggest_quota
from quota_core.telemetry.schema import WINDOW_KEYS

from pipeline.analysis import BUCKET, ENTRY, WORST
from pipeline.columns import throttle_caps
from pipeline.errors import PipelineError
from pipeline.resolve import resolve_buckets
from pipeline.schema import KEY_FOR_TYPE, QUOTA_COLUMNS, USAGE_COLUMNS
from pipeline.snapshots import QuotaVersions, parse_entity
from quota_core.throttling.throttle import rate_window_ms

__all__ = ["read_history", "versions_from_rows", "windows", "by_client", "by_entry", "sizing",
           "build_tables", "run"]

TABLES = ("windows", "by_client", "by_entry", "sizing")


def read_history(path: str | Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(usage samples, quota snapshot rows) from the collector's Parquet directory."""
    base = Path(path)
    usage = pd.read_parquet(base / "usage", columns=list(USAGE_COLUMNS))
    quotas = pd.read_parquet(base / "quotas", columns=list(QUOTA_COLUMNS))
    return usage, quotas


def versions_from_rows(rows: pd.DataFrame, where: str = "quotas") -> QuotaVersions:
    """Snapshots folded into versions: a snapshot equal to the one before it (same rows, in
    any order) starts no new version (snapshots.versions_from_rows, in pandas; the quota
    window's rows left out as there)."""
    rows = rows[~rows["key"].isin(WINDOW_KEYS)]
    if rows.empty:
        raise PipelineError(f"{where}: no quota snapshots.", path=where)
    ts_us = rows["ts"].dt.as_unit("us").astype("int64")
    starts: list[int] = []
    sets = []
    previous = None
    for t, snap in rows.assign(ts_us=ts_us).groupby("ts_us", sort=True):
        body = snap[["entity", "key", "value"]].sort_values(["entity", "key", "value"],
                                                            na_position="first")
        body = body.reset_index(drop=True)
        if previous is not None and body.equals(previous):
            continue
        previous = body
        starts.append(int(t))
        quota_set: dict = {}
        for entity, key, value in body.dropna(subset=["entity"]).itertuples(index=False):
            if pd.isna(key) or pd.isna(value):
                missing = "key" if pd.isna(key) else "value"
                raise PipelineError(f"{where}: a row for {entity} has no {missing}.",
                                    path=where, column=missing)
            quota_set.setdefault(parse_entity(entity, where), {})[key] = float(value)
        sets.append(quota_set)
    return QuotaVersions(starts, sets)


def _none_for_na(s: pd.Series) -> pd.Series:
    return s.astype(object).where(s.notna(), None)


def windows(usage: pd.DataFrame, versions: QuotaVersions,
            lap: Callable[[str], None] = lambda name: None) -> pd.DataFrame:
    """Every sample with the quota in force at its ``ts`` (analysis.windows). ``lap`` is
    told when the distinct buckets are resolved ("resolve")."""
    df = usage.assign(key=usage["quota_type"].map(KEY_FOR_TYPE))
    if versions.starts_us == [None]:
        version = np.zeros(len(df), dtype=np.int64)
    else:  # the latest version starting at or before ts; -1 before the first
        ts_us = df["ts"].dt.as_unit("us").astype("int64").to_numpy()
        version = np.searchsorted(np.asarray(versions.starts_us, dtype=np.int64), ts_us,
                                  side="right") - 1
    df["version"] = version
    known = df.loc[df["version"] >= 0, ["user", "client_id", "version"]].drop_duplicates()
    buckets = pd.DataFrame({"user": _none_for_na(known["user"]),
                            "client_id": _none_for_na(known["client_id"]),
                            "version": known["version"].to_numpy()})
    table = resolve_buckets(versions, buckets)
    for name, like in (("r_user", "user"), ("r_client_id", "client_id"), ("r_key", "key")):
        table[name] = table[name].astype(df[like].dtype)
    table["r_version"] = table["r_version"].astype(np.int64)
    lap("resolve")
    # A left join: pandas matches null keys to null keys, as eqNullSafe does.
    df = df.merge(table, how="left", left_on=["user", "client_id", "version", "key"],
                  right_on=["r_user", "r_client_id", "r_version", "r_key"], sort=False)
    rate = df["rate"].to_numpy(dtype=float, na_value=np.nan)
    quota = df["quota"].to_numpy(dtype=float, na_value=np.nan)
    known_level = df["level"].notna().to_numpy()
    has_quota = ~np.isnan(quota)
    with np.errstate(divide="ignore", invalid="ignore"):
        util = np.where(has_quota & (quota > 0), rate / quota, np.nan)
        over = has_quota & ~np.isnan(rate) & (rate > quota)
        raw = np.floor((rate - quota) / quota * rate_window_ms() + 0.5)
    caps = throttle_caps()
    cap = df["key"].map({k: (np.inf if c is None else c) for k, c in caps.items()})
    capped = np.minimum(raw, cap.to_numpy(dtype=float, na_value=np.inf))
    est = np.where(over, np.maximum(capped, 0), 0.0)
    return pd.DataFrame({
        "ts": df["ts"], "broker": df["broker"], "quota_type": df["quota_type"],
        "key": df["key"], "user": df["user"], "client_id": df["client_id"],
        "rate": df["rate"], "interval_s": df["interval_s"], "quota": df["quota"],
        "level": df["level"].astype("Int32"), "source": df["source"],
        "utilisation": util, "over_quota": over,
        "est_throttle_ms": pd.arrays.IntegerArray(np.where(known_level, est, 0).astype(np.int64),
                                                  mask=~known_level),
        "broker_throttle_ms": df["throttle_ms"],
    })


def _throttled(win: pd.DataFrame, over: pd.Series | np.ndarray) -> np.ndarray:
    return np.where(over, win["interval_s"].to_numpy(dtype=float), 0.0)


def _groups(df: pd.DataFrame, keys: list[str]) -> tuple[np.ndarray, pd.DataFrame]:
    """Group ids over ``keys`` (nulls a group of their own, as Spark's groupBy) and the keys
    of each group, by id. Aggregating on the ids keeps the results aligned; a MultiIndex
    holding NaN does not always align."""
    gid = df.groupby(keys, dropna=False, sort=False).ngroup().to_numpy()
    first = ~pd.Series(gid).duplicated().to_numpy()
    heads = df.loc[first, keys]
    heads.index = gid[first]
    return gid, heads.sort_index()


def by_client(win: pd.DataFrame) -> pd.DataFrame:
    """Per bucket and key (analysis.by_client)."""
    gid, out = _groups(win, BUCKET)
    bt = win["broker_throttle_ms"].to_numpy(dtype=float, na_value=np.nan)
    w = pd.DataFrame({"t": _throttled(win, win["over_quota"].to_numpy()),
                      "b": _throttled(win, bt > 0),
                      "u": win["utilisation"].to_numpy(), "rate": win["rate"].to_numpy(),
                      "broker": win["broker"].to_numpy(), "source": win["source"].to_numpy(),
                      "g": gid})
    g = w.groupby("g", sort=True)
    agg = g.agg(throttled_s=("t", "sum"), broker_throttled_s=("b", "sum"),
                max_utilisation=("u", "max"), samples=("rate", "size"),
                brokers=("broker", "nunique"))
    pct = g["rate"].quantile([0.95, 0.99]).unstack()
    # The sorted distinct entries: from the distinct (bucket, source), not per sample.
    src = w.loc[w["source"].notna(), ["g", "source"]].drop_duplicates()
    entries = src.sort_values("source").groupby("g", sort=True)["source"].agg(list)
    out = out.assign(throttled_s=agg["throttled_s"], broker_throttled_s=agg["broker_throttled_s"],
                     max_utilisation=agg["max_utilisation"], p95_rate=pct[0.95],
                     p99_rate=pct[0.99], samples=agg["samples"], brokers=agg["brokers"])
    out["entries"] = [e if isinstance(e, list) else [] for e in entries.reindex(out.index)]
    return out.reset_index(drop=True)


def _bound(win: pd.DataFrame) -> pd.DataFrame:
    return win[(win["level"] > 0).fillna(False).to_numpy(dtype=bool)]


def by_entry(win: pd.DataFrame) -> pd.DataFrame:
    """Per source entry and key (analysis.by_entry)."""
    bound = _bound(win)
    per = (bound.assign(t=_throttled(bound, bound["over_quota"].to_numpy()))
           .groupby(ENTRY + ["user", "client_id"], dropna=False, sort=False)["t"].sum()
           .reset_index())
    out = (per.assign(_pos=per["t"] > 0)
           .groupby(ENTRY, dropna=False, sort=False)
           .agg(throttled_s=("t", "sum"), clients=("t", "size"),
                clients_throttled=("_pos", "sum")))
    # sort_array(..., asc=false) of structs (t, user, client_id): descending, nulls last.
    worst = (per[per["t"] > 0]
             .sort_values(["t", "user", "client_id"], ascending=False, na_position="last")
             .groupby(ENTRY, dropna=False, sort=False).head(WORST))
    lists: dict[tuple, list] = {}
    for s, lv, k, t, u, c in worst[ENTRY + ["t", "user", "client_id"]].itertuples(index=False):
        lists.setdefault((s, lv, k), []).append(
            {"throttled_s": t, "user": None if pd.isna(u) else u,
             "client_id": None if pd.isna(c) else c})
    out = out.reset_index()
    out["worst_clients"] = [lists.get(idx, []) for idx in
                            out[ENTRY].itertuples(index=False, name=None)]
    return out[ENTRY + ["throttled_s", "clients", "clients_throttled", "worst_clients"]]


def sizing(win: pd.DataFrame) -> pd.DataFrame:
    """Per source entry and key: the smallest quota keeping every bucket's p99 under it
    (analysis.sizing)."""
    bound = _bound(win).reset_index(drop=True)
    gid, per = _groups(bound, ENTRY + ["user", "client_id"])
    g = pd.DataFrame({"rate": bound["rate"].to_numpy(), "ts": bound["ts"], "g": gid}) \
        .groupby("g", sort=True)
    per["p99"] = g["rate"].quantile(0.99)
    last = g["ts"].idxmax().reindex(per.index).to_numpy()  # max_by(quota, ts)
    per["q_last"] = bound["quota"].to_numpy()[last]
    per["t_last"] = bound["ts"].array[last]
    per = per.reset_index(drop=True)
    e = per.groupby(ENTRY, dropna=False, sort=False)
    out = e.agg(p99_max=("p99", "max"), clients=("p99", "size"))
    current = per.loc[e["t_last"].idxmax().to_numpy()].set_index(ENTRY)["q_last"]
    out["current_quota"] = current.reindex(out.index)
    # max_by(struct(user, client_id), struct(p99, user, client_id)): nulls sort first.
    tight = (per.sort_values(ENTRY + ["p99", "user", "client_id"], na_position="first")
             .groupby(ENTRY, dropna=False, sort=False).tail(1).set_index(ENTRY))
    tight = tight.reindex(out.index)
    out["tightest_client"] = [{"user": None if pd.isna(u) else u,
                               "client_id": None if pd.isna(c) else c}
                              for u, c in zip(tight["user"], tight["client_id"])]
    out = out.reset_index()
    suggested = np.array([suggest_quota(k, p) for k, p in zip(out["key"], out["p99_max"])],
                         dtype=float)  # the one definition (quota_core.analysis.quota_sizing)
    out["suggested_quota"] = suggested
    with np.errstate(divide="ignore", invalid="ignore"):
        out["current_over_suggested"] = out["current_quota"].to_numpy(dtype=float) / suggested
    return out[ENTRY + ["current_quota", "suggested_quota", "current_over_suggested", "clients",
                        "tightest_client"]]


def build_tables(usage: pd.DataFrame, versions: QuotaVersions,
                 lap: Callable[[str], None] = lambda name: None) -> dict[str, pd.DataFrame]:
    win = windows(usage, versions, lap)
    lap("windows")
    tables = {"windows": win}
    for name, fn in (("by_client", by_client), ("by_entry", by_entry), ("sizing", sizing)):
        tables[name] = fn(win)
        lap(name)
    return tables


def run(path: str | Path, out: str | Path | None = None) -> tuple[dict[str, pd.DataFrame],
                                                                  dict[str, float]]:
    """Read, resolve, analyse and (when ``out`` is given) write ``out/<table>.parquet``.
    Returns the tables and the seconds each phase took."""
    times: dict[str, float] = {}
    mark = [time.perf_counter()]

    def lap(name: str) -> None:
        now = time.perf_counter()
        times[name] = now - mark[0]
        mark[0] = now

    usage, quota_rows = read_history(path)
    lap("read")
    versions = versions_from_rows(quota_rows, str(Path(path) / "quotas"))
    lap("versions")
    tables = build_tables(usage, versions, lap)
    if out is not None:
        Path(out).mkdir(parents=True, exist_ok=True)
        for name, df in tables.items():
            df.to_parquet(Path(out) / f"{name}.parquet", index=False)
        lap("write")
    return tables, times
