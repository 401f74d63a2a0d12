"""Each sample's quota at its time: resolved per distinct bucket on the driver, joined in Spark.

The ladder lives in quota_core only. Here the distinct ``(user, client_id, version, key)`` of
the samples (thousands, not millions) come to the driver, each version's buckets go through
:func:`quota_core.domain.bulk.bulk_resolve_buckets` in one vectorised call, and the result goes back
as a small table joined to the samples (broadcast when small): no Python UDF per row.

A bucket's tags narrow the ladder (both tags: rungs 1, 2, 4, 5; user only: 3, 6; client id
only: 7, 8); ``bulk_resolve_buckets`` applies that, given None for a missing tag.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from quota_core.domain import bulk_resolve_buckets, source_entity

from pipeline.schema import KEY_FOR_TYPE
from pipeline.snapshots import QuotaVersions, entity_json

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = ["KEYS", "RESOLUTION_SCHEMA", "resolve_buckets", "distinct_buckets", "resolution_table",
           "resolution_frame", "bucket_hash", "distinct_over", "bucket_version_key", "with_key",
           "attach_quotas"]

#: The keys samples can be bound by, in KEY_FOR_TYPE's order.
KEYS: tuple[str, ...] = tuple(KEY_FOR_TYPE.values())
RESOLUTION_SCHEMA = ("r_user string, r_client_id string, r_version int, r_key string, "
                     "quota double, level int, source string")
#: Above this many rows the resolution table is left to Spark's own join choice.
BROADCAST_ROWS = 2_000_000


def resolve_buckets(versions: QuotaVersions, buckets: "pd.DataFrame") -> "pd.DataFrame":
    """Long table: one row per (bucket, version, key) with quota, level and source entity.

    ``buckets`` has columns user, client_id (None when not a tag) and version, and optionally
    key: then each row gets its own key only (a bucket is bound by the key of its quota type,
    so the other keys' rows would only make the joined table bigger); else every key.
    level 0 means unlimited (quota and source null).
    """
    import numpy as np
    import pandas as pd

    frames = []
    # The source text depends on (level, user, client id) only: built once across versions.
    sources: dict[tuple, str | None] = {}
    for version, group in buckets.groupby("version", sort=True):
        users = group["user"].tolist()
        clients = group["client_id"].tolist()
        own_key = group["key"].to_numpy(dtype=object) if "key" in group else None
        # One call for every key: the ladder work is per distinct name, not per key.
        res = bulk_resolve_buckets(versions.sets[int(version)], users, clients, KEYS)
        for key in KEYS:
            rows = np.arange(len(users)) if own_key is None else np.flatnonzero(own_key == key)
            if not len(rows):
                continue
            levels = np.asarray(res.levels[key], dtype=np.int32)[rows]
            key_users = [users[i] for i in rows.tolist()]
            key_clients = [clients[i] for i in rows.tolist()]
            src = []
            for level, u, c in zip(levels.tolist(), key_users, key_clients):
                token = (level, u, c)
                if token not in sources:
                    sources[token] = (entity_json(source_entity(level, u or "", c or ""))
                                      if level else None)
                src.append(sources[token])
            values = np.asarray(res.values[key], dtype=float)[rows]
            frames.append(pd.DataFrame({
                "r_user": pd.Series(key_users, dtype=object),
                "r_client_id": pd.Series(key_clients, dtype=object),
                "r_version": np.full(len(rows), int(version), dtype=np.int32),
                "r_key": key,
                "quota": np.where(levels > 0, values, np.nan),
                "level": levels,
                "source": pd.Series(src, dtype=object),
            }))
    if not frames:
        return pd.DataFrame({c.split()[0]: [] for c in RESOLUTION_SCHEMA.split(", ")})
    return pd.concat(frames, ignore_index=True)


def distinct_buckets(samples: "DataFrame") -> "pd.DataFrame":
    """The distinct (user, client_id, version, quota_type, key) of the samples: one job, and
    all the driver needs to resolve them (and to check them: readers.check_buckets)."""
    return samples.select("user", "client_id", "version", "quota_type", "key").distinct() \
        .toPandas()


def resolution_table(buckets: "pd.DataFrame", versions: QuotaVersions) -> "pd.DataFrame":
    """:func:`resolve_buckets` of the buckets that have a version (none before the first
    snapshot), with plain object text columns (as Spark's Arrow path takes them)."""
    known = buckets[buckets["version"].notna()]
    wanted = ["user", "client_id", "version"] + (["key"] if "key" in known else [])
    table = resolve_buckets(versions, known[wanted].drop_duplicates())
    # pandas 3 stores text as Arrow-backed `str`, which pyspark 4.2's Arrow path cannot take
    # (ChunkedArray); plain object columns it can.
    for name in ("r_user", "r_client_id", "r_key", "source"):
        table[name] = table[name].astype(object)
    return table


def resolution_frame(spark: "SparkSession", table: "pd.DataFrame") -> "DataFrame":
    """``table`` (from :func:`resolution_table`) as a Spark DataFrame, broadcast when small,
    with ``r_join``, its :func:`bucket_version_key`."""
    from pyspark.sql import functions as F

    # pyarrow turns NaN into null on the way in: unlimited (level 0) has a null quota, and so
    # does an entry set to NaN (a broker accepts it; it never throttles).
    frame = spark.createDataFrame(table, RESOLUTION_SCHEMA).withColumn(
        "r_join", bucket_version_key("r_user", "r_client_id", "r_key", "r_version"))
    return F.broadcast(frame) if len(table) <= BROADCAST_ROWS else frame


def bucket_hash(user: str, client_id: str, key: str, *more: "Column") -> "Column":
    """A 64-bit hash of a bucket (the columns named) and ``more``. The null flags keep
    ``(u, null)`` apart from ``(null, u)`` (xxhash64 skips nulls)."""
    from pyspark.sql import functions as F

    return F.xxhash64(user, client_id, key, *more, F.isnull(user), F.isnull(client_id))


def distinct_over(frame: "DataFrame", column: "Column") -> bool:
    """Whether ``column`` takes a different value on every row of ``frame`` (one small job):
    a hash used as a key must be checked so, or fall back to the columns it hashes."""
    from pyspark.sql import functions as F

    return bool(frame.select(F.count_distinct(column) == F.count(F.lit(1))).first()[0])


def bucket_version_key(user: str, client_id: str, key: str, version: str) -> "Column":
    """One 64-bit join key for a (bucket, version), over the four columns named; null when
    key or version is null (nothing to join)."""
    from pyspark.sql import functions as F

    hashed = bucket_hash(user, client_id, key, F.col(version).cast("int"))
    return F.when(F.col(key).isNotNull() & F.col(version).isNotNull(), hashed)


def with_key(samples: "DataFrame") -> "DataFrame":
    """``samples`` plus ``key``, the quota that bounds their quota_type (null if unknown)."""
    from pyspark.sql import functions as F

    key_map = F.create_map(*[F.lit(x) for kv in KEY_FOR_TYPE.items() for x in kv])
    return samples.withColumn("key", key_map[F.col("quota_type")])


def attach_quotas(keyed: "DataFrame", buckets: "pd.DataFrame", versions: QuotaVersions,
                  table: "pd.DataFrame | None" = None) -> "DataFrame":
    """``keyed`` (samples with ``version`` and ``key``) plus ``quota``, ``level``, ``source``.

    Samples before the first version keep null level/quota/source: unknown, not unlimited.
    The join is on one 64-bit key (:func:`bucket_version_key`) when it is distinct over the
    resolution table: every sample's (bucket, version) is in that table, so its key can only
    match its own row. Else (a hash collision) on the four columns.
    """
    from pyspark.sql import functions as F

    if table is None:
        table = resolution_table(buckets, versions)
    frame = resolution_frame(keyed.sparkSession, table)
    if distinct_over(frame, F.col("r_join")):
        left = keyed.withColumn("s_join", bucket_version_key("user", "client_id", "key",
                                                             "version"))
        cond = F.col("s_join") == F.col("r_join")
    else:
        left = keyed
        cond = (F.col("user").eqNullSafe(F.col("r_user"))
                & F.col("client_id").eqNullSafe(F.col("r_client_id"))
                & (F.col("version") == F.col("r_version")) & (F.col("key") == F.col("r_key")))
    joined = left.join(frame, cond, "left")
    return joined.drop("r_user", "r_client_id", "r_version", "r_key", "s_join", "r_join")
