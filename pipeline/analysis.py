"""The analysis tables, each a function of the resolved samples (``windows``).

=========  ===================================================================================
table      one row per
=========  ===================================================================================
windows    sample (broker, bucket, key, ts): rate, the quota in force, its level and source
           entry, utilisation, over_quota, Kafka's estimated delay, the broker's throttle_ms
by_client  bucket (user, client_id) and key: throttled_s, max_utilisation, p95/p99 rate,
           samples, the entries that bound it
by_entry   source entry and key: throttled_s, clients bound / throttled, the worst five
what_if    bucket and key, against another quota set: throttled_s before and after, newly
           throttled / freed
sizing     source entry and key: the smallest quota keeping every bucket's p99 rate under it
=========  ===================================================================================

Rates are per broker (quotas are enforced by each broker on its own), so percentiles are over
per-broker samples and ``throttled_s`` sums ``interval_s`` over them: broker-seconds.
by_client, by_entry and sizing take a per-(bucket, level) summary: :func:`per_level` (one pass
over the samples, ``rates`` as sorted arrays: percentiles exactly Spark's ``percentile``, linear
between the closest ranks) or pipeline.rollups.levels (hourly rollups merged, ``rates`` as KLL
sketches: the same percentiles while a sketch holds every rate, else within its rank error;
see pipeline.sketches). The job uses the rollups.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline import sketches
from pipeline.columns import (array_percentile, estimated_throttle_ms, over_quota, suggested_quota,
                              utilisation)
from pipeline.resolve import attach_quotas, bucket_hash, distinct_over
from pipeline.snapshots import QuotaVersions

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    from pyspark.sql import Column, DataFrame

    from quota_core.telemetry.schema import SnapshotWindows

__all__ = ["TABLES", "NAMES_SCHEMA", "windows", "bucket_id", "bucket_names", "per_level",
           "by_client", "by_entry", "what_if", "sizing"]

TABLES = ("windows", "by_client", "by_entry", "what_if", "sizing")
WORST = 5
BUCKET = ["user", "client_id", "key"]
ENTRY = ["source", "level", "key"]
NAMES_SCHEMA = "user string, client_id string, key string, level int, source string"


def _throttled_s(over: "Column") -> "Column":
    from pyspark.sql import functions as F

    return F.sum(F.when(over, F.col("interval_s")).otherwise(F.lit(0.0)))


def windows(keyed: "DataFrame", buckets: "pd.DataFrame", versions: QuotaVersions,
            table: "pd.DataFrame | None" = None,
            quota_windows: "SnapshotWindows | None" = None) -> "DataFrame":
    """Every sample with the quota in force at its ``ts`` and what that meant.

    ``keyed`` are the samples with ``version`` and ``key`` (resolve.with_key), ``buckets``
    their distinct buckets (resolve.distinct_buckets), ``table`` their resolution when it
    was already made (resolve.resolution_table), ``quota_windows`` the brokers' quota windows
    the snapshots carried (pipeline.snapshots.split_windows; None: Kafka's defaults)."""
    from pyspark.sql import functions as F

    df = attach_quotas(keyed, buckets, versions, table)
    rate, quota = F.col("rate"), F.col("quota")
    return df.select(
        "ts", "broker", "quota_type", "key", "user", "client_id", "rate", "interval_s",
        "quota", "level", "source",
        utilisation(rate, quota).alias("utilisation"),
        over_quota(rate, quota).alias("over_quota"),
        estimated_throttle_ms(rate, quota, F.col("key"), F.col("level"), F.col("broker"),
                              quota_windows).alias("est_throttle_ms"),
        F.col("throttle_ms").alias("broker_throttle_ms"),
        # what the bucket's clients reported (issue 30), when the samples carry it
        *(["client_throttle_ms"] if "client_throttle_ms" in df.columns else []),
    )


def bucket_id(names: "DataFrame") -> "Column":
    """A column identifying a sample's bucket (user, client_id, key): a 64-bit hash when it is
    distinct over the buckets of ``names`` (:data:`NAMES_SCHEMA`; checked here), else the
    three columns.

    Grouping 10M samples by one long rather than three strings is much of per_level's time."""
    from pyspark.sql import functions as F

    hashed = bucket_hash(*BUCKET)
    return hashed if distinct_over(names.select(*BUCKET).distinct(), hashed) \
        else F.struct(*BUCKET)


def bucket_names(buckets: "pd.DataFrame", table: "pd.DataFrame") -> "pd.DataFrame":
    """What :func:`per_level` puts back by name: a row per bucket with a null level (its
    samples before the first snapshot), and a row per bucket and level it resolved to, with
    that level's source entry. ``buckets`` from resolve.distinct_buckets, ``table`` from
    resolve.resolution_table. Rows for :data:`NAMES_SCHEMA`."""
    import pandas as pd

    unknown = buckets[BUCKET].drop_duplicates().astype(object)
    unknown = unknown.where(unknown.notna(), None).assign(
        level=pd.array([None] * len(unknown), dtype="Int32"), source=None)
    resolved = (table.rename(columns={"r_user": "user", "r_client_id": "client_id",
                                      "r_key": "key"})[BUCKET + ["level", "source"]]
                .drop_duplicates().astype({"level": "Int32"}))
    return pd.concat([unknown, resolved], ignore_index=True)


def _sketched(levels: "DataFrame") -> bool:
    """Whether ``levels`` carries its rates as KLL sketches (rollups) or sorted arrays."""
    from pyspark.sql.types import BinaryType

    return isinstance(levels.schema["rates"].dataType, BinaryType)


def _rate_percentile(levels: "DataFrame", rates: "Column", p: float) -> "Column":
    return sketches.percentile(rates, p) if _sketched(levels) else array_percentile(rates, p)


def per_level(win: "DataFrame", bucket: "Column", names: "DataFrame") -> "DataFrame":
    """What the summaries need of every sample, per bucket and level: sums, maxima and the
    sorted rates. Within a bucket the level decides the source entry, so these are also the
    (entry, bucket) groups of by_entry and sizing. One pass over the samples for all three
    summaries, and small (a row per bucket and level). ``bucket`` is from :func:`bucket_id`;
    ``names`` (:data:`NAMES_SCHEMA`, from :func:`bucket_names`) gives each group its user,
    client id, key and source back.

    The pass groups numbers only: the four text columns carried through it (as ``first``)
    made its sort-based aggregation (collect_list has no fixed-size buffer) slower, 45 s
    against 38 s at 10M samples in a fresh JVM. (Splitting it, sums in the generated-code
    hash aggregate and the rates apart, then joining, measured no faster; nor did sorting
    the samples by bucket for an Arrow step.)"""
    from pyspark.sql import functions as F

    agg = win.groupBy(bucket.alias("bucket_id"), "level").agg(
        _throttled_s(F.col("over_quota")).alias("throttled_s"),
        _throttled_s(F.coalesce(F.col("broker_throttle_ms") > 0, F.lit(False)))
        .alias("broker_throttled_s"),
        F.max("utilisation").alias("max_utilisation"),
        F.count(F.lit(1)).alias("samples"),
        F.collect_set("broker").alias("brokers"),
        # percentile ignores nulls, as collect_list does; sort_array orders NaN last, as
        # percentile does (no nulls are left to sort).
        F.sort_array(F.collect_list("rate")).alias("rates"),
        # ties on ts have one quota: same bucket and time, same version
        F.max_by("quota", "ts").alias("q_last"), F.max("ts").alias("t_last"),
    )
    named = names.select(bucket.alias("n_bucket"), F.col("level").alias("n_level"),
                         *BUCKET, "source")
    # One names row per group: (bucket, null) for samples before the first snapshot, else
    # the (bucket, level) its resolution gave.
    joined = agg.join(F.broadcast(named), (F.col("bucket_id") == F.col("n_bucket"))
                      & F.col("level").eqNullSafe(F.col("n_level")), "left")
    return joined.drop("n_bucket", "n_level")


def by_client(levels: "DataFrame") -> "DataFrame":
    """From :func:`per_level` or pipeline.rollups.levels."""
    from pyspark.sql import functions as F

    # A bucket's rates are its levels' rates merged (sorted arrays: mostly one level, already
    # sorted; or sketches).
    rates = (sketches.merge_agg("rates") if _sketched(levels)
             else F.sort_array(F.flatten(F.collect_list("rates"))))
    agg = levels.groupBy("bucket_id").agg(
        *[F.first(c).alias(c) for c in BUCKET],
        F.sum("throttled_s").alias("throttled_s"),
        F.sum("broker_throttled_s").alias("broker_throttled_s"),
        F.max("max_utilisation").alias("max_utilisation"),
        rates.alias("rates"),
        F.coalesce(F.sum("samples"), F.lit(0)).alias("samples"),  # a count: never null
        F.size(F.array_distinct(F.flatten(F.collect_list("brokers")))).cast("long")
        .alias("brokers"),
        # distinct levels of a bucket have distinct sources: this is collect_set(source)
        F.array_sort(F.array_distinct(F.collect_list("source"))).alias("entries"),
    )
    return agg.select(*BUCKET, "throttled_s", "broker_throttled_s", "max_utilisation",
                      _rate_percentile(levels, F.col("rates"), 0.95).alias("p95_rate"),
                      _rate_percentile(levels, F.col("rates"), 0.99).alias("p99_rate"),
                      "samples", "brokers", "entries")


def by_entry(levels: "DataFrame") -> "DataFrame":
    """From :func:`per_level` or pipeline.rollups.levels."""
    from pyspark.sql import functions as F

    per_bucket = levels.where(F.col("level") > 0).select(*ENTRY, "user", "client_id",
                                                        F.col("throttled_s").alias("t"))
    worst = F.struct(F.col("t").alias("throttled_s"), "user", "client_id")
    return per_bucket.groupBy(*ENTRY).agg(
        F.sum("t").alias("throttled_s"),
        F.count(F.lit(1)).alias("clients"),
        F.count_if(F.col("t") > 0).alias("clients_throttled"),
        F.slice(F.sort_array(F.collect_list(F.when(F.col("t") > 0, worst)), asc=False),
                1, WORST).alias("worst_clients"),
    )


def sizing(levels: "DataFrame") -> "DataFrame":
    """Per entry: ``suggested_quota`` = quota_core.analysis.quota_sizing.suggest_quota of the largest p99 rate
    among the buckets it bound (the smallest per-bucket quota under which every one of them
    stays at or below its p99); ``current_quota`` is the entry's latest value.
    From :func:`per_level` or pipeline.rollups.levels (p99 then within the sketch's rank
    error for buckets of more than pipeline.sketches.K samples)."""
    from pyspark.sql import functions as F

    per_bucket = levels.where(F.col("level") > 0).select(
        *ENTRY, "user", "client_id", _rate_percentile(levels, F.col("rates"), 0.99).alias("p99"),
        "q_last", "t_last")
    agg = per_bucket.groupBy(*ENTRY).agg(
        F.max("p99").alias("p99_max"),
        F.max_by("q_last", "t_last").alias("current_quota"),
        F.count(F.lit(1)).alias("clients"),
        F.max_by(F.struct("user", "client_id"), F.struct("p99", "user", "client_id"))
        .alias("tightest_client"),
    )
    suggested = suggested_quota(F.col("key"), F.col("p99_max"))  # quota_core.analysis.quota_sizing's
    return agg.select(*ENTRY, "current_quota", suggested.alias("suggested_quota"),
                      (F.col("current_quota") / suggested).alias("current_over_suggested"),
                      "clients", "tightest_client")


def what_if(win: "DataFrame", proposed: QuotaVersions) -> "DataFrame":
    """Each bucket's throttled time under the quotas it had, and under ``proposed``.

    Buckets keep their historical tags: an entry of another shape than a bucket's tags
    (e.g. ``{user=U}`` for a bucket tagged user and client id) cannot bind it here, although
    on a broker it would re-bucket those clients (their per-client rates are not in the data).
    """
    from pyspark.sql import functions as F

    # The proposal is version 0 of its own; the history's quota and source are kept apart.
    base = win.select(*BUCKET, "ts", "rate", "interval_s", "over_quota",
                      F.col("quota").alias("quota_was"), F.col("source").alias("source_was"),
                      F.lit(0).alias("version"))
    buckets = win.select(*BUCKET).distinct().toPandas().assign(version=0)
    joined = attach_quotas(base, buckets, proposed)
    out = joined.groupBy(*BUCKET).agg(
        _throttled_s(F.col("over_quota")).alias("throttled_s_before"),
        _throttled_s(over_quota(F.col("rate"), F.col("quota"))).alias("throttled_s_after"),
        F.max_by("quota_was", "ts").alias("quota_before"),
        F.max_by("source_was", "ts").alias("source_before"),
        F.first("quota", ignorenulls=True).alias("quota_after"),
        F.max("level").alias("level_after"),
        F.first("source", ignorenulls=True).alias("source_after"),
    )
    before, after = F.col("throttled_s_before"), F.col("throttled_s_after")
    return out.select(*out.columns,
                      ((before == 0) & (after > 0)).alias("newly_throttled"),
                      ((before > 0) & (after == 0)).alias("freed"))
