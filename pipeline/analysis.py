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
Percentiles are exact (``percentile``), so a local run and a cluster run agree to the bit.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .columns import estimated_throttle_ms, integral_keys, over_quota, utilisation
from .resolve import attach_quotas, resolution_frame
from .snapshots import QuotaVersions

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    from pyspark.sql import Column, DataFrame

__all__ = ["TABLES", "windows", "by_client", "by_entry", "what_if", "sizing"]

TABLES = ("windows", "by_client", "by_entry", "what_if", "sizing")
WORST = 5
BUCKET = ["user", "client_id", "key"]
ENTRY = ["source", "level", "key"]


def _throttled_s(over: "Column") -> "Column":
    from pyspark.sql import functions as F

    return F.sum(F.when(over, F.col("interval_s")).otherwise(F.lit(0.0)))


def windows(keyed: "DataFrame", buckets: "pd.DataFrame", versions: QuotaVersions
            ) -> "DataFrame":
    """Every sample with the quota in force at its ``ts`` and what that meant.

    ``keyed`` are the samples with ``version`` and ``key`` (resolve.with_key), ``buckets``
    their distinct buckets (resolve.distinct_buckets)."""
    from pyspark.sql import functions as F

    df = attach_quotas(keyed, buckets, versions)
    rate, quota = F.col("rate"), F.col("quota")
    return df.select(
        "ts", "broker", "quota_type", "key", "user", "client_id", "rate", "interval_s",
        "quota", "level", "source",
        utilisation(rate, quota).alias("utilisation"),
        over_quota(rate, quota).alias("over_quota"),
        estimated_throttle_ms(rate, quota, F.col("key"), F.col("level")).alias("est_throttle_ms"),
        F.col("throttle_ms").alias("broker_throttle_ms"),
    )


def by_client(win: "DataFrame") -> "DataFrame":
    from pyspark.sql import functions as F

    # One percentile aggregate for both ranks: each keeps its group's values, so two would
    # hold (and sort) every rate twice; at 10M samples that is most of the job.
    agg = win.groupBy(*BUCKET).agg(
        _throttled_s(F.col("over_quota")).alias("throttled_s"),
        _throttled_s(F.coalesce(F.col("broker_throttle_ms") > 0, F.lit(False)))
        .alias("broker_throttled_s"),
        F.max("utilisation").alias("max_utilisation"),
        F.percentile("rate", F.array(F.lit(0.95), F.lit(0.99))).alias("p"),
        F.count(F.lit(1)).alias("samples"),
        F.count_distinct("broker").alias("brokers"),
        F.array_sort(F.collect_set("source")).alias("entries"),
    )
    return agg.select(*BUCKET, "throttled_s", "broker_throttled_s", "max_utilisation",
                      F.col("p")[0].alias("p95_rate"), F.col("p")[1].alias("p99_rate"),
                      "samples", "brokers", "entries")


def by_entry(win: "DataFrame") -> "DataFrame":
    from pyspark.sql import functions as F

    per_bucket = (win.where(F.col("level") > 0)
                  .groupBy(*ENTRY, "user", "client_id")
                  .agg(_throttled_s(F.col("over_quota")).alias("t")))
    worst = F.struct(F.col("t").alias("throttled_s"), "user", "client_id")
    return per_bucket.groupBy(*ENTRY).agg(
        F.sum("t").alias("throttled_s"),
        F.count(F.lit(1)).alias("clients"),
        F.count_if(F.col("t") > 0).alias("clients_throttled"),
        F.slice(F.sort_array(F.collect_list(F.when(F.col("t") > 0, worst)), asc=False),
                1, WORST).alias("worst_clients"),
    )


def sizing(win: "DataFrame") -> "DataFrame":
    """Per entry: ``suggested_quota`` = the largest p99 rate among the buckets it bound (the
    smallest per-bucket quota under which every one of them stays at or below its p99),
    rounded up for whole-number keys; ``current_quota`` is the entry's latest value."""
    from pyspark.sql import functions as F

    per_bucket = (win.where(F.col("level") > 0)
                  .groupBy(*ENTRY, "user", "client_id")
                  .agg(F.percentile("rate", 0.99).alias("p99"),
                       F.max_by("quota", "ts").alias("q_last"), F.max("ts").alias("t_last")))
    agg = per_bucket.groupBy(*ENTRY).agg(
        F.max("p99").alias("p99_max"),
        F.max_by("q_last", "t_last").alias("current_quota"),
        F.count(F.lit(1)).alias("clients"),
        F.max_by(F.struct("user", "client_id"), F.struct("p99", "user", "client_id"))
        .alias("tightest_client"),
    )
    whole = F.col("key").isin(*integral_keys())
    suggested = F.when(whole, F.ceil("p99_max").cast("double")).otherwise(F.col("p99_max"))
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

    base = win.withColumn("version", F.lit(0))
    buckets = win.select("user", "client_id", "key").distinct().toPandas().assign(version=0)
    table = resolution_frame(win.sparkSession, buckets, proposed).select(
        "r_user", "r_client_id", "r_key",
        F.col("quota").alias("quota_after"), F.col("level").alias("level_after"),
        F.col("source").alias("source_after"))
    cond = [base["user"].eqNullSafe(table["r_user"]),
            base["client_id"].eqNullSafe(table["r_client_id"]),
            base["key"] == table["r_key"]]
    joined = base.join(table, cond, "left")
    over_after = over_quota(F.col("rate"), F.col("quota_after"))
    out = joined.groupBy(*BUCKET).agg(
        _throttled_s(F.col("over_quota")).alias("throttled_s_before"),
        _throttled_s(over_after).alias("throttled_s_after"),
        F.max_by("quota", "ts").alias("quota_before"),
        F.max_by("source", "ts").alias("source_before"),
        F.first("quota_after", ignorenulls=True).alias("quota_after"),
        F.max("level_after").alias("level_after"),
        F.first("source_after", ignorenulls=True).alias("source_after"),
    )
    before, after = F.col("throttled_s_before"), F.col("throttled_s_after")
    return out.select(*out.columns,
                      ((before == 0) & (after > 0)).alias("newly_throttled"),
                      ((before > 0) & (after == 0)).alias("freed"))
