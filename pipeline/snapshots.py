"""Quota snapshots -> versions: which quota set was in force when.

The collector writes the whole quota set at every scrape, mostly unchanged. Consecutive equal
snapshots are folded into one *version* (compared by a hash of their sorted rows, in Spark, so
only the snapshots that changed something come to the driver). Version ``i`` is in force from
its first snapshot's ``ts`` up to the next version's; a sample before the first snapshot has
no version (its quota is unknown, not unlimited).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping

from quota_core.entities import Entity, entity_from_json, entity_to_json
from quota_core.errors import QuotaError

from .errors import PipelineError
from .spark_errors import translating

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

__all__ = ["QuotaVersions", "entity_json", "parse_entity", "versions_from_rows", "single_version",
           "with_version"]

QuotaSet = dict[Entity, dict[str, float]]


def entity_json(entity: Entity | None) -> str | None:
    """The contract's entity text (quota_core.entities.entity_to_json), None for None."""
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


def versions_from_rows(rows: "DataFrame", where: str) -> QuotaVersions:
    """Fold snapshot rows (ts, entity, key, value) into versions; see the module docstring."""
    from pyspark.sql import functions as F

    spark = rows.sparkSession
    with translating(where):
        per_snapshot = (rows.groupBy(F.unix_micros("ts").alias("ts_us"))
                        .agg(F.xxhash64(F.array_sort(F.collect_list(
                            F.struct("entity", "key", "value")))).alias("h")))
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
        picked = (rows.withColumn("ts_us", F.unix_micros("ts"))
                  .join(F.broadcast(wanted), "ts_us")
                  .select("ts_us", "entity", "key", "value").collect())
    sets: dict[int, QuotaSet] = {s: {} for s in starts}
    for row in picked:
        if row["entity"] is None:  # the marker row of an empty quota set
            continue
        if row["key"] is None or row["value"] is None:
            raise PipelineError(f"{where}: a row for {row['entity']} has no "
                                f"{'key' if row['key'] is None else 'value'}.", path=where,
                                column="key" if row["key"] is None else "value")
        entity = parse_entity(row["entity"], where)
        sets[row["ts_us"]].setdefault(entity, {})[row["key"]] = float(row["value"])
    return QuotaVersions(list(starts), [sets[s] for s in starts])


def with_version(samples: "DataFrame", versions: QuotaVersions) -> "DataFrame":
    """``samples`` plus ``version``: the latest version starting at or before each ``ts``.

    A broadcast range join against the (few) version intervals: native Spark, no UDF.
    """
    from pyspark.sql import functions as F

    if versions.starts_us == [None]:
        return samples.withColumn("version", F.lit(0))
    spark = samples.sparkSession
    starts = versions.starts_us
    ends = starts[1:] + [None]
    bounds = spark.createDataFrame([(i, s, e) for i, (s, e) in enumerate(zip(starts, ends))],
                                   "version int, v_start long, v_end long")
    ts_us = F.unix_micros("ts")
    cond = (ts_us >= F.col("v_start")) & (F.col("v_end").isNull() | (ts_us < F.col("v_end")))
    return (samples.join(F.broadcast(bounds), cond, "left")
            .drop("v_start", "v_end"))
