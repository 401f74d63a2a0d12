"""The summaries' building blocks: percentiles from sorted arrays are Spark's ``percentile``
to the bit, and the bucket id (a hash, or the columns themselves) gives the same tables."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from pipeline import analysis
from pipeline.columns import array_percentile


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return (math.isnan(a) and math.isnan(b)) or a == b


def test_sorted_array_percentile_is_sparks_percentile(spark):
    from pyspark.sql import functions as F

    rng = np.random.default_rng(3)
    rows = []
    for g in range(300):
        n = int(rng.integers(1, 60))
        values = rng.choice([1.0, 2.5, 1e6, 0.1], n) if g % 3 == 0 else rng.lognormal(0, 2, n)
        rows += [(g, float(v)) for v in values]
    rows += [(1000, None), (1001, None), (1001, 5.0), (1002, math.nan), (1002, 1.0),
             (1003, math.nan), (1003, math.nan), (1004, 7.0)]
    df = spark.createDataFrame(rows, "g int, rate double")  # rows: NaN stays NaN, None null
    want = df.groupBy("g").agg(*[F.percentile("rate", p).alias(f"p{p}") for p in (0.95, 0.99)])
    arrays = df.groupBy("g").agg(F.sort_array(F.collect_list("rate")).alias("a"))
    got = arrays.select("g", *[array_percentile(F.col("a"), p).alias(f"p{p}")
                               for p in (0.95, 0.99)])
    w = {r["g"]: (r["p0.95"], r["p0.99"]) for r in want.collect()}
    g = {r["g"]: (r["p0.95"], r["p0.99"]) for r in got.collect()}
    assert w.keys() == g.keys()
    bad = {k: (w[k], g[k]) for k in w if not all(_same(x, y) for x, y in zip(w[k], g[k]))}
    assert not bad
    assert g[1000] == (None, None) and g[1001] == (5.0, 5.0) and math.isnan(g[1003][0])


def test_bucket_id_hash_and_columns_give_the_same_by_client(spark):
    from pyspark.sql import functions as F

    # (u, null) and (null, u): a hash that skipped the nulls alone would merge them
    win = spark.createDataFrame(pd.DataFrame({
        "ts": pd.to_datetime([0, 1, 2, 3, 4, 5], unit="s"),
        "broker": ["b1", "b2", "b1", "b1", "b2", "b1"],
        "key": ["producer_byte_rate"] * 6,
        "user": ["x", "x", None, None, "x", "y"],
        "client_id": [None, None, "x", "x", None, "c"],
        "rate": [1.0, 3.0, 2.0, 8.0, 5.0, 4.0],
        "interval_s": [1.0] * 6, "quota": [2.0] * 6, "level": [3, 3, 7, 7, 3, 1],
        "source": ['{"user":"x"}'] * 2 + ['{"client-id":"x"}'] * 2 + ['{"user":"x"}',
                                                                    '{"user":"y"}'],
        "utilisation": [0.5] * 6, "over_quota": [False, True, False, True, True, True],
        "broker_throttle_ms": [None, 1.0, None, 2.0, None, None],
    }).astype({"user": object, "client_id": object}),
        "ts timestamp, broker string, key string, user string, client_id string, "
        "rate double, interval_s double, quota double, level int, source string, "
        "utilisation double, over_quota boolean, broker_throttle_ms double")
    names = win.select(*analysis.BUCKET, "level", "source").distinct()
    hashed = analysis.bucket_id(names)
    assert "xxhash64" in str(hashed)
    tables = []
    for bucket in (hashed, F.struct(*analysis.BUCKET)):
        levels = analysis.per_level(win, bucket, names)
        tables.append(analysis.by_client(levels).toPandas()
                      .sort_values(["user", "client_id"], na_position="first")
                      .reset_index(drop=True))
    pd.testing.assert_frame_equal(tables[0], tables[1])
    by = tables[0]
    assert list(by["samples"]) == [2, 3, 1]  # (null, x), (x, null), (y, c)
    assert list(by["brokers"]) == [1, 2, 1]
    assert by["p99_rate"].iloc[1] == pytest.approx(3.0 + 0.98 * 2.0)
