"""Hourly rollups: what the summaries need of the samples, per hour, kept instead of re-read.

One row per (hour, broker, bucket, key, level): the level (and so the entry, ``source``) that
bound the bucket's samples; a bucket has one row per level it had in the hour (two when a
quota change mid-hour moved it to another entry). Columns:

=================  ========================================================================
throttled_s        broker-seconds over the quota in force at each sample's time
broker_throttled_s broker-seconds the broker reported a throttle (throttle_ms > 0)
samples            samples (NaN rates included)
interval_s         seconds the samples stand for; ``rated_interval_s`` those with a rate
max_rate           the largest rate (NaN ignored); ``max_utilisation`` rate / quota
rates              the rates as a KLL sketch (pipeline.sketches): mergeable
q_last, t_last     the quota in force at the row's last sample, and that sample's time
client_samples     samples that carry ``client_throttle_ms`` (what the bucket's clients
                   report, issue 30; 0 when none does); ``client_sum_ms`` the sum and
                   ``client_max_ms`` the largest of those values (null when none)
=================  ========================================================================

The three ``client_*`` columns are optional: rollups kept before them lack them, and a
reader takes a row without them as one of no client telemetry (0, null, null).

by_client, by_entry and sizing come from :func:`levels` (the rollups of any range merged per
bucket and level) through the same functions as before (pipeline.analysis), what_if from
:func:`what_if`. What is exact and what is approximate:

* sums, counts, maxima, entries, the quota in force: exact (the same numbers as per sample);
* percentiles: exact while a bucket's merged sketch holds every rate (at most
  :data:`pipeline.sketches.K` samples per bucket and level in the range), else within the
  sketch's rank error (:data:`pipeline.sketches.RANK_ERROR`, 1.33 % of rank);
* what_if's ``throttled_s_after``: per rollup row, ``rated_interval_s`` times the share of its
  rates above the proposed quota. Exact when the samples of a row have one interval (the
  collector's scrape interval) and the sketch holds every rate; else the share is the
  sketch's (within the rank error).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline import sketches
from pipeline.analysis import BUCKET
from pipeline.resolve import attach_quotas
from pipeline.snapshots import QuotaVersions

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame

__all__ = ["HOUR_FORMAT", "hour_of", "hourly", "daily", "levels", "day_levels", "merge_levels",
           "what_if"]

#: The ``hour`` partition value: the UTC hour's start, ``2025-01-06T14`` (sorts as time).
HOUR_FORMAT = "yyyy-MM-dd'T'HH"


def hour_of(ts: "Column") -> "Column":
    from pyspark.sql import functions as F

    return F.date_format(F.date_trunc("hour", ts), HOUR_FORMAT)


def _sum_if(cond: "Column") -> "Column":
    from pyspark.sql import functions as F

    return F.sum(F.when(cond, F.col("interval_s")).otherwise(F.lit(0.0)))


def hourly(win: "DataFrame") -> "DataFrame":
    """The rollups of ``win`` (analysis.windows' columns)."""
    from pyspark.sql import functions as F

    rate = F.col("rate")
    rated = rate.isNotNull() & ~F.isnan(rate)
    return win.groupBy(hour_of(F.col("ts")).alias("hour"), "broker", *BUCKET, "level",
                       "source").agg(
        _sum_if(F.col("over_quota")).alias("throttled_s"),
        _sum_if(F.coalesce(F.col("broker_throttle_ms") > 0, F.lit(False)))
        .alias("broker_throttled_s"),
        F.count(F.lit(1)).alias("samples"),
        F.sum("interval_s").alias("interval_s"),
        _sum_if(rated).alias("rated_interval_s"),
        F.max(F.when(rated, rate)).alias("max_rate"),
        F.max("utilisation").alias("max_utilisation"),
        sketches.sketch_agg("rate").alias("rates"),
        # ties on ts have one quota: same bucket and time, same version
        F.max_by("quota", "ts").alias("q_last"), F.max("ts").alias("t_last"),
        *_client_aggs(win),
    )


def _client_aggs(win: "DataFrame") -> list["Column"]:
    """count, sum and max of the samples' ``client_throttle_ms`` (NaN ignored); 0, null,
    null when ``win`` has no such column (a topic's samples, a hand-made table)."""
    from pyspark.sql import functions as F

    if "client_throttle_ms" not in win.columns:
        return [F.lit(0).cast("long").alias("client_samples"),
                F.lit(None).cast("double").alias("client_sum_ms"),
                F.lit(None).cast("double").alias("client_max_ms")]
    c = F.col("client_throttle_ms")
    kept = F.when(c.isNotNull() & ~F.isnan(c), c)
    return [F.count(kept).alias("client_samples"), F.sum(kept).alias("client_sum_ms"),
            F.max(kept).alias("client_max_ms")]


def daily(roll: "DataFrame") -> "DataFrame":
    """Hourly rollups merged per UTC day, bucket, key and level, over brokers: the columns a
    percentile over a range needs (``rates``, ``samples``, ``q_last``, ``t_last``), so that a
    long range merges one sketch per day (quota_core.analysis.history_rollups reads them)."""
    from pyspark.sql import functions as F

    return roll.groupBy(F.date_format("t_last", "yyyy-MM-dd").alias("day"), *BUCKET, "level",
                        "source").agg(
        sketches.merge_agg("rates").alias("rates"), F.sum("samples").alias("samples"),
        F.max_by("q_last", "t_last").alias("q_last"), F.max("t_last").alias("t_last"))


def _level_aggs(brokers: "Column") -> list["Column"]:
    """What :func:`levels` keeps per bucket and level, with ``brokers`` the set of brokers."""
    from pyspark.sql import functions as F

    return [F.sum("throttled_s").alias("throttled_s"),
            F.sum("broker_throttled_s").alias("broker_throttled_s"),
            F.max("max_utilisation").alias("max_utilisation"),
            F.sum("samples").alias("samples"),
            brokers.alias("brokers"),
            sketches.merge_agg("rates").alias("rates"),
            F.max_by("q_last", "t_last").alias("q_last"), F.max("t_last").alias("t_last")]


def levels(roll: "DataFrame") -> "DataFrame":
    """Rollups merged per bucket and level: what analysis.by_client, by_entry and sizing take
    (as they take analysis.per_level), with ``rates`` a merged sketch."""
    from pyspark.sql import functions as F

    return roll.groupBy(*BUCKET, "level", "source").agg(
        *_level_aggs(F.collect_set("broker"))).withColumn("bucket_id", F.struct(*BUCKET))


def day_levels(roll: "DataFrame") -> "DataFrame":
    """Hourly rollups merged per UTC day (of ``t_last``), bucket, key and level: what
    :func:`levels` keeps, a day at a time (kept in ``DIR/levels/day=…``), so that the tables
    of a long range merge a row per day (:func:`merge_levels`) instead of one per hour and
    broker. :func:`daily` holds its sketch columns."""
    from pyspark.sql import functions as F

    return roll.groupBy(F.date_format("t_last", "yyyy-MM-dd").alias("day"), *BUCKET, "level",
                        "source").agg(*_level_aggs(F.collect_set("broker")))


def merge_levels(parts: "DataFrame") -> "DataFrame":
    """:func:`day_levels` rows (of any days) merged per bucket and level: :func:`levels` of
    the same hours. Sums, counts, maxima and the latest quota are the same numbers; the
    sketches are merged in another order, which gives the same percentiles while a sketch
    holds every rate (pipeline.sketches.K) and stays within its rank error past it."""
    from pyspark.sql import functions as F

    brokers = F.array_distinct(F.flatten(F.collect_list("brokers")))
    return parts.groupBy(*BUCKET, "level", "source").agg(
        *_level_aggs(brokers)).withColumn("bucket_id", F.struct(*BUCKET))


def what_if(roll: "DataFrame", proposed: QuotaVersions) -> "DataFrame":
    """analysis.what_if's table from rollups: each bucket re-resolved against ``proposed``
    (per bucket and hour: the proposal is one quota set, so one answer per bucket), its
    throttled time after counted from each hour's rate sketch (see the module docstring)."""
    from pyspark.sql import functions as F

    base = roll.select(*BUCKET, "throttled_s", "rated_interval_s", "rates", "t_last",
                       F.col("q_last").alias("quota_was"), F.col("source").alias("source_was"),
                       F.lit(0).alias("version"))
    buckets = roll.select(*BUCKET).distinct().toPandas().assign(version=0)
    joined = attach_quotas(base, buckets, proposed)
    n = sketches.count(F.col("rates"))
    above = sketches.count_above(F.col("rates"), F.col("quota"))
    # (seconds x count) / n: exact in floating point for whole-second intervals
    after = F.when(n > 0, F.col("rated_interval_s") * above / n).otherwise(F.lit(0.0))
    out = joined.groupBy(*BUCKET).agg(
        F.sum("throttled_s").alias("throttled_s_before"),
        F.sum(after).alias("throttled_s_after"),
        F.max_by("quota_was", "t_last").alias("quota_before"),
        F.max_by("source_was", "t_last").alias("source_before"),
        F.first("quota", ignorenulls=True).alias("quota_after"),
        F.max("level").alias("level_after"),
        F.first("source", ignorenulls=True).alias("source_after"),
    )
    before, after_s = F.col("throttled_s_before"), F.col("throttled_s_after")
    return out.select(*out.columns,
                      ((before == 0) & (after_s > 0)).alias("newly_throttled"),
                      ((before > 0) & (after_s == 0)).alias("freed"))

