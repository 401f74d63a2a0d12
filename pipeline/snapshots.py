"""Quota snapshots -> versions: which quota set was in force when.

The collector writes the whole quota set at every scrape, mostly unchanged. Consecutive equal
snapshots are folded into one *version* (compared by a hash of their rows, in Spark, so only
the snapshots that changed something come to the driver). Version ``i`` is in force from
its first snapshot's ``ts`` up to the next version's; a sample before the first snapshot has
no version (its quota is unknown, not unlimited).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping

from quota_core.domain import Entity, entity_from_json, entity_to_json
from quota_core.errors import QuotaError

from pipeline.errors import PipelineError
from pipeline.spark_errors import translating

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

    from quota_core.telemetry.schema import SnapshotWindows

__all__ = ["QuotaVersions", "entity_json", "parse_entity", "versions_from_rows", "single_version",
           "with_version", "split_windows"]

QuotaSet = dict[Entity, dict[str, float]]
#: Up to this many versions, ``with_version`` is a CASE expression (beyond, a range join:
#: a CASE of thousands of branches would outgrow generated code's method size).
CASE_VERSIONS = 64


def entity_json(entity: Entity | None) -> str | None:
    """The contract's entity text (quota_core.domain.entities.entity_to_json), None for None."""
    return None if entity is None else entity_to_json(entity)


def parse_entity(text: str, where: str) -> Entity:
    try:
        return entity_from_json(text)
    except QuotaError as exc:
        raise PipelineError(f"{where}: column 'entity' holds {text!r}, which is not a quota "
                            f"entity ({exc})", path=where, column="entity") from exc


@dataclass(frozen=True)
class QuotaVersions:
    """``sets[i]`` is in force from ``starts_us[i]`` (epoch µs; None = always) until the next."""

    starts_us: list[int | None]
    sets: list[QuotaSet] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.sets)


def single_version(quotas: Mapping[Entity, Mapping[str, float]]) -> QuotaVersions:
    """One quota set in force over the whole history (``--quotas FILE``, what-if)."""
    return QuotaVersions([None], [{e: dict(q) for e, q in quotas.items()}])


def split_windows(rows: "DataFrame", where: str) -> tuple["DataFrame", "SnapshotWindows"]:
    """The quota rows without the quota window's, and the window of the latest snapshot that
    carried one (quota_core.telemetry.schema: its rows are few, read on the driver). Old
    snapshots carry none: Kafka's defaults, ``carried`` False."""
    from pyspark.sql import functions as F

    from quota_core.telemetry.schema import WINDOW_KEYS, windows_from_rows

    is_window = F.coalesce(F.col("key").isin(*WINDOW_KEYS), F.lit(False))
    with translating(where):
        found = rows.where(is_window).select("ts", "entity", "key", "value").collect()
    return rows.where(~is_window), windows_from_rows(r.asDict() for r in found)


def versions_from_rows(rows: "DataFrame", where: str) -> QuotaVersions:
    """Fold snapshot rows (ts, entity, key, value) into versions; see the module docstring.
    The quota window's rows (:func:`split_windows`) are not quotas: left out here."""
    from pyspark.sql import functions as F

    from quota_core.telemetry.schema import WINDOW_KEYS

    rows = rows.where(~F.coalesce(F.col("key").isin(*WINDOW_KEYS), F.lit(False)))
    spark = rows.sparkSession
    with translating(where):
        # An order-free hash of each snapshot: the exact sum of its rows' hashes (a decimal:
        # no overflow) and their count. Sorting each snapshot's rows instead is an
        # interpreted comparison per pair: seconds for a 100k-entry quota set.
        row_hash = F.xxhash64("entity", "key", "value", F.isnull("entity"), F.isnull("key"),
                              F.isnull("value")).cast("decimal(38,0)")
        per_snapshot = (rows.groupBy(F.unix_micros("ts").alias("ts_us"))
                        .agg(F.struct(F.sum(row_hash), F.count(F.lit(1))).alias("h")))
        hashes = per_snapshot.orderBy("ts_us").collect()
    if not hashes:
        raise PipelineError(f"{where}: no quota snapshots at or before the end of the range; "
                            f"give --quotas FILE or widen --to.", path=where)
    starts, previous = [], None
    for row in hashes:
        if row["h"] != previous:
            starts.append(row["ts_us"])
            previous = row["h"]
    with translating(where):
        wanted = spark.createDataFrame([(s,) for s in starts], "ts_us long")
        # Through Arrow (a row object per snapshot row is most of the cost otherwise); nulls
        # flagged apart, as pandas would turn a null value into NaN (a valid quota).
        picked = (rows.withColumn("ts_us", F.unix_micros("ts"))
                  .join(F.broadcast(wanted), "ts_us")
                  .select("ts_us", "entity", "key", "value",
                          F.col("key").isNull().alias("no_key"),
                          F.col("value").isNull().alias("no_value")).toPandas())
    sets: dict[int, QuotaSet] = {s: {} for s in starts}
    # Versions mostly repeat each other's entities: each distinct text is parsed once.
    parsed: dict[str, Entity] = {}
    for ts_us, text, key, value, no_key, no_value in zip(
            picked["ts_us"].tolist(), picked["entity"].astype(object).tolist(),
            picked["key"].astype(object).tolist(), picked["value"].tolist(),
            picked["no_key"].tolist(), picked["no_value"].tolist()):
        if text is None or text != text:  # the marker row of an empty quota set
            continue
        if no_key or no_value:
            raise PipelineError(f"{where}: a row for {text} has no "
                                f"{'key' if no_key else 'value'}.", path=where,
                                column="key" if no_key else "value")
        entity = parsed.get(text)
        if entity is None:
            entity = parsed[text] = parse_entity(text, where)
        sets[ts_us].setdefault(entity, {})[key] = float(value)
    return QuotaVersions(list(starts), [sets[s] for s in starts])


def with_version(samples: "DataFrame", versions: QuotaVersions) -> "DataFrame":
    """``samples`` plus ``version``: the latest version starting at or before each ``ts``.

    Native Spark, no UDF: a CASE expression, or for many versions a broadcast range join
    against the version intervals.
    """
    from pyspark.sql import functions as F

    if versions.starts_us == [None]:
        return samples.withColumn("version", F.lit(0))
    starts = versions.starts_us
    ts_us = F.unix_micros("ts")
    if len(starts) <= CASE_VERSIONS:
        # A few versions: a CASE on ts, latest start first (null before the first, or for a
        # null ts), evaluated in the scan; no join.
        latest_first = list(enumerate(starts))[::-1]
        version = F.when(ts_us >= F.lit(latest_first[0][1]), F.lit(latest_first[0][0]))
        for i, start in latest_first[1:]:
            version = version.when(ts_us >= F.lit(start), F.lit(i))
        return samples.withColumn("version", version)
    spark = samples.sparkSession
    ends = starts[1:] + [None]
    bounds = spark.createDataFrame([(i, s, e) for i, (s, e) in enumerate(zip(starts, ends))],
                                   "version int, v_start long, v_end long")
    cond = (ts_us >= F.col("v_start")) & (F.col("v_end").isNull() | (ts_us < F.col("v_end")))
    return (samples.join(F.broadcast(bounds), cond, "left")
            .drop("v_start", "v_end"))
