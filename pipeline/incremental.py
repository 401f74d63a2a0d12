"""Keep the hourly rollups current: read only what arrived since the last run.

Two Structured Streaming queries over the collector's folder, each with its own checkpoint
and ``trigger(availableNow=True)`` (process what is there, then stop):

* ``usage/``: each micro-batch holds the sample files new since the last run; the UTC hours
  their samples fall in are **redone**: every sample of those hours is read again (date
  partitions pruned), given its quota and rolled up, and those hour partitions of the rollups
  are replaced (dynamic partition overwrite). Late samples (a file for an old hour) so redo
  that hour; a partly seen hour is redone whole when the rest arrives.
* ``quotas/``: when a snapshot file arrives, the quota versions are folded again from every
  snapshot (pipeline.snapshots) and compared, hour by hour, with the versions each kept hour
  was rolled up with (a signature per hour in ``_state.json``); every hour whose versions
  changed is redone. A quota change mid-hour is two levels (or quotas) in that hour's rows;
  a snapshot that arrives after its samples changes the signature of the hours after it.

After the hours, the **days** they fall in are merged again into ``levels/``
(pipeline.rollups.day_levels: a row per day, bucket, key and level over its brokers, what the
tables take) and ``daily/`` (its sketch columns, for History), so that the tables of a long
range merge a row per day instead of one per hour and broker (pipeline.job.read_levels). An
update reads the new files and at most one day of hourly rows, whatever the history's length.
The snapshot stream starts only when the names under ``quotas/`` changed since its last run.

Nothing new, no work: both queries read 0 rows, no hour is redone. The redo happens inside
the micro-batch (before Spark commits it), so a run that fails is redone by the next one.
Files are picked up once, by name (Spark's file source): a file rewritten in place is not
read again. Only a local (or mounted) folder: a ``kafka:TOPIC`` history is analysed whole.
"""
from __future__ import annotations

import hashlib
import json
import pickle
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping

from quota_core.domain import Entity

from quota_core.telemetry import rollup_files as files
from pipeline.errors import PipelineError
from pipeline.readers import (TimeRange, check_buckets, check_ts_text, detect_format,
                              read_quota_rows, read_usage)
from pipeline.schema import QUOTA_COLUMNS, USAGE_COLUMNS, check_columns, spark_schema
from pipeline.snapshots import QuotaVersions, entity_json, single_version, versions_from_rows
from pipeline.spark_errors import spark_logs_off, translating

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["Update", "update_rollups", "follow", "hour_signatures"]

QuotaSet = Mapping[Entity, Mapping[str, float]]
HOUR = timedelta(hours=1)


@dataclass
class Update:
    """What one run did: input rows read by the two queries, the hours redone."""

    input_rows: int = 0
    hours: list[str] = field(default_factory=list)
    up_to: str | None = None

    def describe(self) -> str:
        if not self.hours:
            return f"rollups current ({self.input_rows} new rows)" + (
                f", up to {self.up_to}" if self.up_to else "")
        shown = ", ".join(self.hours[:4]) + (" …" if len(self.hours) > 4 else "")
        return (f"rollups: {self.input_rows} new rows, {len(self.hours)} hour(s) redone "
                f"({shown}), up to {self.up_to}")


def _set_hash(quotas: QuotaSet) -> str:
    rows = sorted((entity_json(e), k, repr(float(v))) for e, q in quotas.items()
                  for k, v in q.items())
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest()[:16]


def hour_signatures(versions: QuotaVersions, hashes: list[str], hours: list[str]
                    ) -> dict[str, str]:
    """Per hour (``2025-01-06T14``), the versions in force during it, as text: the one in
    force at its start and every one starting inside it (start and content hash)."""
    starts = versions.starts_us
    out = {}
    for hour in hours:
        t0 = datetime.strptime(hour, "%Y-%m-%dT%H").replace(tzinfo=timezone.utc)
        lo, hi = int(t0.timestamp() * 1e6), int((t0 + HOUR).timestamp() * 1e6)
        live = [i for i, s in enumerate(starts) if s is None or s <= lo]
        picked = live[-1:] + [i for i, s in enumerate(starts) if s is not None and lo < s < hi]
        out[hour] = "|".join(f"{starts[i]}:{hashes[i]}" for i in picked) or "none"
    return out


def _hour_ranges(hours: list[str]) -> list[TimeRange]:
    """Sorted hours as the fewest contiguous time ranges."""
    ranges: list[list[datetime]] = []
    for hour in sorted(hours):
        t = datetime.strptime(hour, "%Y-%m-%dT%H")
        if ranges and ranges[-1][1] == t:
            ranges[-1][1] = t + HOUR
        else:
            ranges.append([t, t + HOUR])
    return [TimeRange(a, b) for a, b in ranges]


def _stream(spark: "SparkSession", path: str, columns: dict[str, str], checkpoint: Path,
            batch: Callable[["DataFrame", int], None]) -> int:
    """Run one availableNow query over the files under ``path``; the rows it read."""
    fmt = detect_format(path)
    schema = spark_schema(columns, ts_as_text=(fmt == "json"))
    errors: list[BaseException] = []

    def guarded(df: "DataFrame", batch_id: int) -> None:
        try:
            if fmt == "json":  # a ts that is not a time, named (before a cast fails on it)
                check_ts_text(df, path)
            # the stream's own column ``file`` (input_file_name) is passed through
            batch(check_columns(df, {"ts": "timestamp", "file": "string"}, path,
                                text_ts=(fmt == "json")), batch_id)
        except BaseException as exc:  # re-raised below: Spark would wrap it in a Py4J error
            errors.append(exc)
            raise

    with translating(path):
        reader = spark.readStream.schema(schema)
        raw = reader.parquet(path) if fmt == "parquet" else reader.json(path)
        from pyspark.sql import functions as F

        writer = (raw.select("ts", F.input_file_name().alias("file")).writeStream
                  .foreachBatch(guarded)
                  .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True))
        # A streaming plan runs without adaptive execution anyway; asking for it only adds a
        # WARN line between the progress lines. The batch jobs inside keep the session's.
        adaptive = spark.conf.get("spark.sql.adaptive.enabled", "true")
        spark.conf.set("spark.sql.adaptive.enabled", "false")
        with spark_logs_off(spark):  # a failed batch is said in one line, below
            try:
                query = writer.start()
            finally:
                spark.conf.set("spark.sql.adaptive.enabled", adaptive)
            try:
                query.awaitTermination()
            except Exception:
                if errors:
                    raise errors[0] from None
                raise
        rows = sum(int(p["numInputRows"]) for p in query.recentProgress)
    return rows


def _listing(folder: str) -> str:
    """A digest of the names of the data files under ``folder``, as Spark's file source lists
    them (hidden ones left out)."""
    import os

    found = []
    for root, dirs, names in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith((".", "_"))]
        found.extend(os.path.join(root, n) for n in names if not n.startswith((".", "_")))
    return hashlib.sha256("\n".join(sorted(found)).encode()).hexdigest()[:32]


def _versions(spark: "SparkSession", base: str, rollups: Path,
              quotas: QuotaSet | None, state: dict) -> tuple[QuotaVersions, list[str], int]:
    """The quota versions (and their content hashes), and the snapshot rows read: folded
    again only when snapshot files arrived since the last run. When every snapshot file is
    one the last run's stream had seen (the same names as then: ``quota_files`` in the state
    is their digest), the stream is not started: it would read nothing."""
    if quotas is not None:
        versions = single_version(quotas)
        return versions, [_set_hash(s) for s in versions.sets], 0
    quota_dir = f"{base}/quotas"
    if not Path(quota_dir).exists():
        raise PipelineError(f"{quota_dir}: no quota snapshots; give --quotas FILE (an "
                            f"export) instead.", path=quota_dir)
    cache = rollups / files.VERSIONS
    listed = _listing(quota_dir)
    if cache.exists() and state.get("quota_files") == listed:
        with open(cache, "rb") as f:
            versions, hashes = pickle.load(f)
        return versions, hashes, 0

    def arrived(df: "DataFrame", batch_id: int) -> None:
        cache.unlink(missing_ok=True)  # before Spark commits the batch: refolded next time
        df.count()  # the rows are read (and so counted in the query's progress)

    rows = _stream(spark, quota_dir, dict(QUOTA_COLUMNS), rollups / files.CHECKPOINTS / "quotas",
                   arrived)
    state["quota_files"] = listed  # the stream has seen these (and any that came since)
    if cache.exists():
        with open(cache, "rb") as f:
            versions, hashes = pickle.load(f)
        return versions, hashes, rows
    versions = versions_from_rows(read_quota_rows(spark, quota_dir), quota_dir)
    hashes = [_set_hash(s) for s in versions.sets]
    tmp = cache.with_name(cache.name + ".tmp")
    with open(tmp, "wb") as f:
        pickle.dump((versions, hashes), f)
    tmp.replace(cache)
    return versions, hashes, rows


def _redo(spark: "SparkSession", usage_where: str, rollups: Path, hours: set[str],
          versions: QuotaVersions, hashes: list[str], state: dict) -> None:
    """Roll the ``hours`` up again from every one of their samples; record their signature."""
    from pyspark.sql import functions as F

    from pipeline import analysis
    from pipeline.rollups import hour_of, hourly
    from pipeline.resolve import distinct_buckets, resolution_table, with_key
    from pipeline.snapshots import with_version

    ranges = _hour_ranges(sorted(hours))
    # the files known to hold these hours' samples, when every hour has its record: a day's
    # thousands of scrape files are otherwise opened to find one hour's
    known = [files.hour_files(rollups, h) for h in sorted(hours)]
    only = None if any(not k for k in known) else sorted({f for k in known for f in k})
    samples = None
    for when in ranges:
        part = read_usage(spark, usage_where, when, files=only)
        samples = part if samples is None else samples.unionByName(part)
    samples = samples.where(hour_of(F.col("ts")).isin(*sorted(hours)))
    keyed = with_key(with_version(samples, versions))
    with translating(usage_where):
        buckets = distinct_buckets(keyed)
    if not buckets.empty:
        check_buckets(buckets, usage_where, TimeRange())
        table = resolution_table(buckets, versions)
        win = analysis.windows(keyed, buckets, versions, table)
        with translating(f"writing {rollups}"):
            (hourly(win).write.mode("overwrite").option("partitionOverwriteMode", "dynamic")
             .partitionBy("hour").parquet(str(rollups / files.HOURLY)))
        _redo_days(spark, rollups, {h[:10] for h in hours}, set(state["hours"]) | hours)
    state["hours"].update(hour_signatures(versions, hashes, sorted(hours)))
    files.save_state(rollups, state)


def _local(uri: str) -> str:
    """A file of the stream (``input_file_name``: a URI, its special characters escaped) as a
    local path."""
    from urllib.parse import unquote, urlparse

    return unquote(urlparse(uri).path) if uri.startswith("file:") else uri


def _redo_days(spark: "SparkSession", rollups: Path, days: set[str], kept: set[str]) -> None:
    """Merge the hourly rollups of ``days`` (``YYYY-MM-DD``) into their partitions of
    ``levels/`` (pipeline.rollups.day_levels: what the tables take) and of ``daily/`` (its
    sketch columns: what History reads)."""
    from pyspark.sql import functions as F

    from pipeline.analysis import BUCKET
    from pipeline.rollups import day_levels

    hourly_dir = rollups / files.HOURLY
    paths = [str(hourly_dir / f"hour={h}") for h in sorted(kept) if h[:10] in days
             and (hourly_dir / f"hour={h}").is_dir()]
    if not paths:
        return
    levels_dir = rollups / files.LEVELS
    with translating(f"writing {rollups}"):
        hours = spark.read.option("basePath", str(hourly_dir)).parquet(*paths)
        (day_levels(hours).write.mode("overwrite").option("partitionOverwriteMode", "dynamic")
         .partitionBy("day").parquet(str(levels_dir)))
        written = [str(levels_dir / f"day={d}") for d in sorted(days)
                   if (levels_dir / f"day={d}").is_dir()]
        merged = spark.read.option("basePath", str(levels_dir)).parquet(*written)
        (merged.select(F.col("day").cast("string").alias("day"), *BUCKET, "level", "source",
                       "rates", "samples", "q_last", "t_last")
         .write.mode("overwrite").option("partitionOverwriteMode", "dynamic")
         .partitionBy("day").parquet(str(rollups / files.DAILY)))


def _days_without_levels(rollups: Path, state: dict) -> set[str]:
    """The days of kept hours with no ``levels/`` partition (rollups kept before it was)."""
    days = {h[:10] for h in state["hours"]}
    return {d for d in days if not (rollups / files.LEVELS / f"day={d}").is_dir()}


def update_rollups(spark: "SparkSession", usage: str, rollups: str,
                   quotas: QuotaSet | None = None,
                   progress: Callable[[str], None] = lambda line: None) -> Update:
    """Bring the rollups under ``rollups`` up to date with the folder ``usage`` (the
    collector's: usage/ and quotas/); see the module docstring."""
    from pyspark.sql import functions as F

    from pipeline.rollups import hour_of

    if usage.startswith("kafka:") or "://" in usage:
        raise PipelineError(f"--usage {usage}: rollups are kept for a local folder only; "
                            f"analyse a topic whole (--no-rollups).", path=usage)
    base = str(Path(usage).resolve())
    usage_where = f"{base}/usage"
    detect_format(usage_where)  # a clear error for a missing or empty folder
    root = Path(rollups).resolve()
    root.mkdir(parents=True, exist_ok=True)
    state = files.load_state(root)
    versions, hashes, quota_rows = _versions(spark, base, root, quotas, state)
    now = hour_signatures(versions, hashes, list(state["hours"]))
    pending = {h for h, sig in now.items() if state["hours"][h] != sig}
    done = Update()

    def batch(df: "DataFrame", batch_id: int) -> None:
        # one global aggregate (a stream's batch plan runs without adaptive execution: a
        # groupBy would shuffle into 200 partitions)
        found = df.agg(F.collect_set(F.struct(hour_of(F.col("ts")).alias("hour"), "file"))
                       .alias("seen"), F.max("ts").alias("up_to")).first()
        per_hour: dict[str, list[str]] = {}
        for hour, file in found["seen"] or ():
            if hour is not None:
                per_hour.setdefault(hour, []).append(_local(file))
        files.add_hour_files(root, per_hour)
        hours = set(per_hour) | pending
        if hours:
            progress(f"rolling up {len(hours)} hour(s)")
            _redo(spark, usage_where, root, hours, versions, hashes, state)
            done.hours.extend(sorted(hours - set(done.hours)))
            pending.clear()
        if found["up_to"] is not None:
            up_to = found["up_to"].isoformat(sep=" ")
            state["up_to"] = max(state.get("up_to") or "", up_to)

    rows = _stream(spark, usage_where, dict(USAGE_COLUMNS), root / files.CHECKPOINTS / "usage",
                   batch)
    if pending:  # quota versions changed, no new samples
        progress(f"quota versions changed: rolling up {len(pending)} hour(s) again")
        _redo(spark, usage_where, root, set(pending), versions, hashes, state)
        done.hours.extend(sorted(pending))
    missing = _days_without_levels(root, state)
    if missing:  # once, for rollups kept before levels/ was
        progress(f"merging {len(missing)} day(s) of rollups")
        _redo_days(spark, root, missing, set(state["hours"]))
    state["updated_at"] = datetime.now(timezone.utc).replace(tzinfo=None).isoformat(sep=" ")
    files.save_state(root, state)
    done.input_rows = rows + quota_rows
    done.hours.sort()
    done.up_to = state.get("up_to")
    return done


def follow(spark: "SparkSession", usage: str, rollups: str, quotas: QuotaSet | None,
           interval_s: float, stop: threading.Event,
           progress: Callable[[str], None] = lambda line: None,
           after: Callable[[Update], None] = lambda update: None) -> int:
    """:func:`update_rollups` every ``interval_s`` until ``stop`` is set (a run under way
    finishes first); ``after`` is called after each run. Returns the runs made."""
    runs = 0
    while not stop.is_set():
        update = update_rollups(spark, usage, rollups, quotas, progress)
        runs += 1
        progress(update.describe())
        after(update)
        stop.wait(interval_s)
    return runs
