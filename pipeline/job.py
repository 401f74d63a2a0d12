"""The analysis as a library call: inputs in, the tables out (no argv, no printing).

:func:`run` is what ``pipeline.analyze`` (the command line) and the tests call; it reads,
resolves, rolls the samples up by hour (pipeline.rollups; kept and updated incrementally
with a rollups directory, pipeline.incremental), derives the tables from the rollups and
writes them all or nothing.
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping

from quota_core.domain import Entity
from quota_core.telemetry.rollup_files import HOURLY, LEVELS
from quota_core.telemetry.schema import SnapshotWindows

from pipeline import analysis, rollups
from pipeline.errors import PipelineError
from pipeline.output import WINDOWS_OPTIONS, check_out, staged, write_table
from pipeline.readers import TimeRange, check_buckets, read_quota_rows, read_usage
from pipeline.resolve import distinct_buckets, resolution_table, with_key
from pipeline.snapshots import (QuotaVersions, single_version, split_windows, versions_from_rows,
                                with_version)
from pipeline.spark_errors import translating

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["Inputs", "load_inputs", "build_windows", "summary_levels", "derived_tables",
           "build_tables", "read_hourly", "read_levels", "run"]

QuotaSet = Mapping[Entity, Mapping[str, float]]
#: Scratch tables under the output's staging directory, removed before it is renamed
#: (not "_..." or ".…": Spark would not read them back).
LEVELS = "levels-scratch"


@dataclass
class Inputs:
    samples: "DataFrame"        # with ``version``
    versions: QuotaVersions
    where: str                  # the usage path or topic, for messages
    when: TimeRange
    #: The brokers' quota windows the snapshots carried (Kafka's defaults when none did).
    quota_windows: SnapshotWindows = field(default_factory=SnapshotWindows)


def load_inputs(spark: "SparkSession", usage: str, when: TimeRange,
                quotas: QuotaSet | None = None, kafka_bootstrap: str | None = None,
                kafka_client: Mapping[str, str] | None = None) -> Inputs:
    """Samples and quota versions from a directory (``DIR/usage``, ``DIR/quotas``) or a topic
    (``kafka:TOPIC``). ``quotas`` (from --quotas FILE) replaces any snapshots."""
    if usage.startswith("kafka:"):
        from pipeline.kafka_source import read_topic

        if not kafka_bootstrap:
            raise PipelineError(f"--usage {usage} needs --kafka-bootstrap HOST:PORT.",
                                path=usage)
        samples, quota_rows = read_topic(spark, kafka_bootstrap, usage.removeprefix("kafka:"),
                                         when, kafka_client)
        where = usage_where = usage
    else:
        base = usage.rstrip("/")
        if "://" not in base:  # over Spark Connect the *server* would resolve a relative path
            base = str(Path(base).resolve())
        usage_where = f"{base}/usage"
        samples = read_usage(spark, usage_where, when)
        quota_dir = where = f"{base}/quotas"
        quota_rows = None
        if quotas is None:
            if "://" not in base and not Path(quota_dir).exists():
                raise PipelineError(f"{quota_dir}: no quota snapshots; give --quotas FILE (an "
                                    f"export) instead.", path=quota_dir)
            quota_rows = read_quota_rows(spark, quota_dir, when)
    found = SnapshotWindows(missing="--quotas FILE carries no quota window") \
        if quota_rows is None else SnapshotWindows()
    if quota_rows is not None:
        quota_rows, found = split_windows(quota_rows, where)
    if quotas is not None:
        versions = single_version(quotas)
    else:
        if quota_rows is None:
            raise PipelineError(f"{usage}: no quota snapshots; give --quotas FILE.", path=usage)
        versions = versions_from_rows(quota_rows, where)
    return Inputs(with_version(samples, versions), versions, usage_where, when, found)


def build_windows(inputs: Inputs) -> tuple["DataFrame", "pd.DataFrame"]:
    """The windows table (lazily) and the buckets' names (analysis.bucket_names). One job runs
    here: the distinct buckets, which are checked (any samples? known quota types?) and
    resolved on the driver."""
    keyed = with_key(inputs.samples)
    with translating(inputs.where):
        buckets = distinct_buckets(keyed)
    check_buckets(buckets, inputs.where, inputs.when)
    table = resolution_table(buckets, inputs.versions)
    win = analysis.windows(keyed, buckets, inputs.versions, table, inputs.quota_windows)
    return win, analysis.bucket_names(buckets, table)


def summary_levels(win: "DataFrame", names: "pd.DataFrame") -> "DataFrame":
    """analysis.per_level of ``win``, lazily, with ``names`` from :func:`build_windows`
    (the exact per-sample summary; the job itself summarises from rollups)."""
    frame = win.sparkSession.createDataFrame(names, analysis.NAMES_SCHEMA)
    return analysis.per_level(win, analysis.bucket_id(frame), frame)


def derived_tables(levels: "DataFrame", what_if: "DataFrame | None" = None
                   ) -> dict[str, "DataFrame"]:
    """The tables from a per-level summary (:func:`pipeline.rollups.levels` of rollups, or
    :func:`summary_levels` of the samples) and a what_if table, lazily, in the order they are
    written."""
    tables = {"by_client": analysis.by_client(levels), "by_entry": analysis.by_entry(levels)}
    if what_if is not None:
        tables["what_if"] = what_if
    tables["sizing"] = analysis.sizing(levels)
    return tables


def _what_if(roll: "DataFrame | None", win: "DataFrame | None", what_if: QuotaSet | None):
    if what_if is None:
        return None
    proposed = single_version(what_if)
    return rollups.what_if(roll, proposed) if roll is not None else \
        analysis.what_if(win, proposed)


def build_tables(inputs: Inputs, what_if: QuotaSet | None = None) -> dict[str, "DataFrame"]:
    """Every table, lazily (each derived one computes ``windows`` again; :func:`run` instead
    derives them from rollups it writes once)."""
    win, _ = build_windows(inputs)
    roll = rollups.hourly(win)
    return {"windows": win, **derived_tables(rollups.levels(roll), _what_if(roll, None, what_if))}


def read_hourly(spark: "SparkSession", where: str, when: TimeRange) -> "DataFrame":
    """The rollups kept under ``where`` (``--rollups``) whose hour touches ``when``: a range
    not on the hour is widened to the hours it touches."""
    from pyspark.sql import functions as F

    from quota_core.telemetry.rollup_files import HOURLY, hour_key

    path = Path(where) / HOURLY
    if not path.is_dir():
        raise PipelineError(f"{where}: no rollups yet (no usage samples were found).",
                            path=where)
    with translating(str(path)):
        # the hour from the rows themselves: Spark's partition type inference could read the
        # directory names' "2025-01-06T14" as a timestamp
        roll = spark.read.parquet(str(path)).withColumn("hour", rollups.hour_of(F.col("t_last")))
    if when.start is not None:
        roll = roll.where(F.col("hour") >= F.lit(hour_key(when.start)))
    if when.end is not None:
        on_hour = when.end == when.end.replace(minute=0, second=0, microsecond=0)
        key = F.lit(hour_key(when.end))
        roll = roll.where(F.col("hour") < key if on_hour else F.col("hour") <= key)
    return roll


def _hour_in(hour: str, when: TimeRange) -> bool:
    """Whether the hour ``2025-01-06T14`` touches ``when`` (as :func:`read_hourly` keeps it)."""
    from quota_core.telemetry.rollup_files import hour_key

    if when.start is not None and hour < hour_key(when.start):
        return False
    if when.end is not None:
        key = hour_key(when.end)
        on_hour = when.end == when.end.replace(minute=0, second=0, microsecond=0)
        return hour < key if on_hour else hour <= key
    return True


def _hours_in(where: str, when: TimeRange) -> list[str]:
    """The kept hours (``hourly/hour=…`` folders) that touch ``when``."""
    path = Path(where) / HOURLY
    hours = sorted(p.name[5:] for p in path.glob("hour=*") if p.is_dir()) \
        if path.is_dir() else []
    return [h for h in hours if _hour_in(h, when)]


def read_levels(spark: "SparkSession", where: str, when: TimeRange) -> "DataFrame | None":
    """pipeline.rollups.levels of the rollups kept under ``where`` in ``when`` (widened to the
    hours it touches), from the days' merged rows (``levels/day=…``) for the days the range
    holds whole and from the hourly rows for the rest: a row per day, bucket and level
    instead of one per hour, broker, bucket and level. None when no hour is kept there."""
    hours = _hours_in(where, when)
    if not hours:
        return None
    levels_dir = Path(where) / LEVELS
    by_day: dict[str, list[str]] = {}
    for hour in hours:
        by_day.setdefault(hour[:10], []).append(hour)
    whole = [d for d in sorted(by_day)
             if len(_hours_in_day(d, when)) == 24 and (levels_dir / f"day={d}").is_dir()]
    parts = []
    with translating(str(Path(where))):
        if whole:
            parts.append(spark.read.parquet(*[str(levels_dir / f"day={d}") for d in whole]))
        rest = [h for h in hours if h[:10] not in whole]
        if rest:
            hourly_dir = Path(where) / HOURLY
            roll = spark.read.option("basePath", str(hourly_dir)).parquet(
                *[str(hourly_dir / f"hour={h}") for h in rest])
            parts.append(rollups.day_levels(roll).drop("day"))
    union = parts[0]
    for part in parts[1:]:
        union = union.unionByName(part)
    return rollups.merge_levels(union)


def _hours_in_day(day: str, when: TimeRange) -> list[str]:
    """The hours of ``day`` (``YYYY-MM-DD``) that touch ``when``."""
    return [f"{day}T{h:02d}" for h in range(24) if _hour_in(f"{day}T{h:02d}", when)]


def run(spark: "SparkSession", usage: str, out: str, when: TimeRange = TimeRange(),
        quotas: QuotaSet | None = None, what_if: QuotaSet | None = None,
        kafka_bootstrap: str | None = None, overwrite: bool = False,
        progress: Callable[[str], None] = lambda line: None,
        kafka_client: Mapping[str, str] | None = None, windows: bool = True,
        rollups_dir: str | None = None, update: bool = True) -> Path:
    """Read, resolve, analyse, write: the whole job. Returns the output directory.

    With ``rollups_dir`` the hourly rollups kept there are brought up to date first
    (pipeline.incremental: only what arrived since the last run is read) and the tables come
    from them; without, the samples in ``when`` are rolled up here, in one pass. ``windows``
    (one row per sample) is written only when asked; ``update=False`` reads the rollups as
    they are."""
    path = check_out(out, overwrite)
    if rollups_dir is not None and update:
        from pipeline.incremental import update_rollups

        progress(f"updating the rollups in {rollups_dir}")
        progress(update_rollups(spark, usage, rollups_dir, quotas, progress).describe())
    with staged(out, overwrite) as tmp:
        roll = win = kept = None
        if rollups_dir is not None:
            kept = read_levels(spark, rollups_dir, when)
            if kept is None:
                if not (Path(rollups_dir) / HOURLY).is_dir():
                    raise PipelineError(f"{rollups_dir}: no rollups yet (no usage samples "
                                        f"were found).", path=rollups_dir)
                raise PipelineError(f"{rollups_dir}: no usage samples from {when.describe()}: "
                                    f"widen --from/--to or check the collector ran then.",
                                    path=rollups_dir)
            if what_if is not None:  # per hour and broker: the proposal's share per sketch
                roll = read_hourly(spark, rollups_dir, when)
        if windows or kept is None:
            progress(f"reading {usage} ({when.describe()})")
            inputs = load_inputs(spark, usage, when, quotas, kafka_bootstrap, kafka_client)
            progress(f"{len(inputs.versions)} quota version(s); the throttle estimate uses the "
                     f"{inputs.quota_windows.text()}; resolving buckets")
            win, names = build_windows(inputs)
            if windows:
                written = write_table(win, tmp, "windows", progress, WINDOWS_OPTIONS)
                # Rolled up from windows read back (only the columns needed): cheaper than
                # computing it again, or caching every sample (more than a 1g driver holds).
                with translating(f"reading {written}"):
                    win = spark.read.parquet(written)
        # The per-level summary is read three times: written once (small) beside the tables,
        # and removed before they appear. (A cache of it read slower.) With no rollups kept,
        # it comes from the samples themselves (sorted rates, exact): rolling a range up
        # only to summarise it costs a sketch per hour, broker and bucket, as many as the
        # samples when buckets are many and scrapes sparse (115 s of 10M samples).
        if kept is None:
            levels = _scratch(spark, summary_levels(win, names), tmp, LEVELS, progress)
        else:
            levels = _scratch(spark, kept, tmp, LEVELS, progress)
        for name, df in derived_tables(levels, _what_if(roll, win, what_if)).items():
            write_table(df, tmp, name, progress)
        shutil.rmtree(tmp / LEVELS, ignore_errors=True)
    return path


def _scratch(spark: "SparkSession", df: "DataFrame", tmp: Path, name: str,
             progress: Callable[[str], None]) -> "DataFrame":
    at = write_table(df, tmp, name, progress)
    with translating(f"reading {at}"):
        return spark.read.parquet(at)
