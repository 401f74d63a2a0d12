"""Resolution at scale: the Spark join gives exactly what quota_core gives, bucket for bucket.

100,000 random buckets (names include the empty name and a user literally named
``<default>``; None = the bucket has no such tag) at random times over three quota versions
(one snapshot repeated, so folding equal snapshots is exercised too, and some samples before
the first snapshot). The Spark side resolves distinct buckets on the driver and joins; here
every row is resolved on its own with ``bulk_resolve_buckets`` and compared. The throttle
column is compared with ``quota_core.throttling.throttle.estimate_throttle`` row for row, ties included.
"""
from __future__ import annotations

import random
from datetime import datetime, timedelta

import numpy as np
import pandas as pd
import pytest

from pipeline.analysis import windows
from pipeline.resolve import KEYS, distinct_buckets, with_key
from pipeline.schema import KEY_FOR_TYPE
from pipeline.snapshots import entity_json, versions_from_rows, with_version
from quota_core.domain.bulk import bulk_resolve_buckets
from quota_core.domain.entities import Entity
from quota_core.domain.ladder import LADDER, source_entity
from quota_core.throttling.throttle import estimate_throttle

N = 100_000
USERS = ["alice", "bob", "", "<default>", "ANONYMOUS", "CN=a,OU=b", None]
CLIENTS = ["app", "cli", "", "x=y,z", "<default>", None]
T0 = datetime(2025, 1, 6)
SNAPSHOTS = [T0, T0 + timedelta(hours=1), T0 + timedelta(hours=2), T0 + timedelta(hours=3)]


def random_set(rnd: random.Random) -> dict[Entity, dict[str, float]]:
    out = {}
    names_u = [u for u in USERS if u]
    names_c = [c for c in CLIENTS if c]
    for r in LADDER:
        for u in names_u:
            for c in names_c:
                if rnd.random() < 0.7:
                    continue
                q = {k: float(rnd.randint(1, 99) * 100 + r.level) for k in KEYS
                     if rnd.random() < 0.5}
                if q:
                    out[r.entity_for(u, c)] = q
    return out


@pytest.fixture(scope="module")
def history(spark):
    rnd = random.Random(2025)
    sets = [random_set(rnd), random_set(rnd), random_set(rnd)]
    in_force = [sets[0], sets[0], sets[1], sets[2]]  # snapshot 2 repeats snapshot 1
    rows = [(pd.Timestamp(t, tz="UTC"), entity_json(e), k, v)
            for t, quotas in zip(SNAPSHOTS, in_force) for e, q in quotas.items()
            for k, v in q.items()]
    quota_rows = spark.createDataFrame(
        pd.DataFrame(rows, columns=["ts", "entity", "key", "value"]),
        "ts timestamp, entity string, key string, value double")
    rng = np.random.default_rng(7)
    start = pd.Timestamp(T0 - timedelta(minutes=30), tz="UTC")
    samples = pd.DataFrame({
        "ts": start + pd.to_timedelta(rng.integers(0, 4 * 3600, N), unit="s"),
        "broker": "b1",
        "quota_type": rng.choice(list(KEY_FOR_TYPE), N),
        "user": pd.Series([USERS[i] for i in rng.integers(0, len(USERS), N)], dtype=object),
        "client_id": pd.Series([CLIENTS[i] for i in rng.integers(0, len(CLIENTS), N)],
                               dtype=object),
        "rate": rng.uniform(0, 20_000, N), "throttle_ms": np.nan, "interval_s": 1.0,
    })
    sdf = spark.createDataFrame(samples, "ts timestamp, broker string, quota_type string, "
                                "user string, client_id string, rate double, "
                                "throttle_ms double, interval_s double")
    versions = versions_from_rows(quota_rows, "test snapshots")
    keyed = with_key(with_version(sdf, versions))
    joined = windows(keyed, distinct_buckets(keyed), versions)
    assert "xxhash64" in _plan(joined)  # the one-key join
    return sets, versions, joined.toPandas(), keyed


def _plan(df) -> str:
    return df._jdf.queryExecution().analyzed().toString()


def test_equal_snapshots_fold_into_one_version(history):
    sets, versions, *_ = history
    assert len(versions) == 3
    assert versions.sets == sets


def test_every_sample_matches_bulk_resolve_buckets(history):
    sets, _, win, _ = history
    assert len(win) == N
    starts = [pd.Timestamp(SNAPSHOTS[0]), pd.Timestamp(SNAPSHOTS[2]), pd.Timestamp(SNAPSHOTS[3])]
    version = np.searchsorted(np.array(starts, dtype="datetime64[us]"),
                              win["ts"].to_numpy(dtype="datetime64[us]"), side="right") - 1
    before = version < 0
    assert before.any() and win.loc[before, "level"].isna().all()
    assert win.loc[before, "quota"].isna().all() and win.loc[before, "source"].isna().all()
    checked = 0
    for v, quotas in enumerate(sets):
        part = win[version == v]
        users = [None if pd.isna(x) else x for x in part["user"]]
        clients = [None if pd.isna(x) else x for x in part["client_id"]]
        want = bulk_resolve_buckets(quotas, users, clients, KEYS)
        for key in KEYS:
            rows = (part["key"] == key).to_numpy()
            levels = np.asarray(want.levels[key])[rows]
            values = np.asarray(want.values[key])[rows]
            got = part[rows]
            np.testing.assert_array_equal(got["level"].to_numpy(dtype=int), levels)
            np.testing.assert_array_equal(got["quota"].to_numpy(dtype=float),
                                          np.where(levels > 0, values, np.nan))
            sources = [entity_json(source_entity(lv, u or "", c or "")) if lv else None
                       for lv, u, c in zip(levels, got["user"], got["client_id"])]
            assert [None if pd.isna(x) else x for x in got["source"]] == sources
            checked += rows.sum()
    assert checked == (~before).sum()
    # the edge names really occur, bound and unbound
    assert {"", "<default>"} <= set(win["user"].dropna())
    assert (win["level"] > 0).any() and (win["level"] == 0).any()


def test_a_join_key_collision_falls_back_to_the_four_columns(history, monkeypatch):
    """Joined on one hashed key only when it is distinct over the resolution table; made to
    collide, the join is on the four columns, with the same windows."""
    from pyspark.sql import functions as F

    import pipeline.resolve as resolve

    _, versions, win, keyed = history
    monkeypatch.setattr(resolve, "bucket_version_key", lambda *columns: F.lit(7).cast("long"))
    joined = windows(keyed, distinct_buckets(keyed), versions)
    assert "<=>" in _plan(joined) and "xxhash64" not in _plan(joined)
    order = ["ts", "quota_type", "user", "client_id", "rate"]
    got, want = (df.sort_values(order, na_position="first").reset_index(drop=True)
                 for df in (joined.toPandas(), win))
    pd.testing.assert_frame_equal(got, want)


def test_throttle_column_matches_the_core(history):
    _, _, win, _ = history
    bound = win[win["level"] > 0]
    want = [estimate_throttle(k, r, q).throttle_ms
            for k, r, q in zip(bound["key"], bound["rate"], bound["quota"])]
    assert bound["est_throttle_ms"].tolist() == want
    assert (bound["over_quota"] == (bound["rate"] > bound["quota"])).all()


def test_throttle_rounds_half_up_and_caps_like_the_core(spark):
    """Exact .5 ties (Kafka's Math.round goes up, Python's round to even) and the cap."""
    rows = [(k, q * (1 + i / 20_000), q) for k in KEYS for q in (1000.0, 64.0, 3.0)
            for i in range(0, 41)] + [("request_percentage", 500.0, 50.0)]
    df = spark.createDataFrame(rows, "key string, rate double, quota double")
    from pyspark.sql import functions as F

    from pipeline.columns import estimated_throttle_ms

    got = df.select(estimated_throttle_ms(F.col("rate"), F.col("quota"), F.col("key"),
                                          F.lit(1)).alias("t")).toPandas()["t"].tolist()
    assert got == [estimate_throttle(k, r, q).throttle_ms for k, r, q in rows]
    assert got[-1] == 1000  # request throttles are capped at one sample window


def test_suggested_quota_column_is_the_cores_suggestion(spark):
    """Spark's sizing takes quota_core.analysis.quota_sizing.suggest_quota's formula (issue 28): every key,
    fractions, exact whole numbers and NaN agree value for value."""
    import math

    from pyspark.sql import functions as F

    from pipeline.columns import suggested_quota
    from quota_core.analysis.quota_sizing import suggest_quota

    rows = [(k, p) for k in KEYS for p in (1500.2, 1500.0, 0.01234, 10_848_519.5, math.nan)]
    df = spark.createDataFrame(rows, "key string, p99 double")
    got = df.select(suggested_quota(F.col("key"), F.col("p99")).alias("s")).toPandas()["s"]
    want = [suggest_quota(k, p) for k, p in rows]
    assert [("nan" if math.isnan(g) else g) for g in got] == \
        [("nan" if math.isnan(w) else w) for w in want]
