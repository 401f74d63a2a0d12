"""Read the collector's history: usage samples and quota snapshots, checked against the contract.

Layout: ``DIR/usage/date=YYYY-MM-DD/*.parquet`` and ``DIR/quotas/date=YYYY-MM-DD/*.parquet``
(JSON lines accepted instead). ``date=`` partitions are UTC days and are pruned by the time
range, so a month of history costs only the days asked for. Every problem becomes one
PipelineError naming the path and, where one is at fault, the column.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.errors import BadInputFile, PipelineError
from pipeline.schema import OPTIONAL_USAGE_COLUMNS, QUOTA_COLUMNS, USAGE_COLUMNS, check_columns
from pipeline.spark_errors import translating

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["TimeRange", "detect_format", "read_table", "read_usage", "check_buckets",
           "read_quota_rows", "check_parquet_files", "check_history", "check_ts_text"]


@dataclass(frozen=True)
class TimeRange:
    """``start <= ts < end`` in UTC (naive datetimes); None leaves that side open."""

    start: datetime | None = None
    end: datetime | None = None

    def describe(self) -> str:
        def fmt(t: datetime | None) -> str:
            return t.isoformat(sep=" ") if t else "…"
        return f"{fmt(self.start)} to {fmt(self.end)}"


def detect_format(path: str) -> str:
    """``parquet`` or ``json``, from the data files found under a local ``path``."""
    if "://" in path and not path.startswith("file:"):
        return "parquet"  # remote stores: the collector writes Parquet
    local = Path(path.removeprefix("file:"))
    if not local.exists():
        raise PipelineError(f"{path}: no such directory. Point --usage at the collector's "
                            f"output (it holds usage/ and quotas/).", path=path)
    kinds = set()
    for _root, dirs, files in os.walk(local):
        dirs[:] = [d for d in dirs if not d.startswith((".", "_"))]
        for name in files:
            if name.startswith((".", "_")):
                continue
            suffix = Path(name).suffix.lower()
            kinds.add("json" if suffix in (".json", ".jsonl") else
                      "parquet" if suffix == ".parquet" else suffix or name)
    if not kinds:
        raise PipelineError(f"{path}: no data files (expected date=YYYY-MM-DD/*.parquet or "
                            f"*.jsonl).", path=path)
    if kinds - {"json", "parquet"} or len(kinds) > 1:
        raise PipelineError(f"{path}: mixed or unknown files ({', '.join(sorted(kinds))}): "
                            f"keep only .parquet or only .json/.jsonl files there.", path=path)
    return kinds.pop()


def _arrow_kind(arrow_type) -> str:
    import pyarrow as pa

    if pa.types.is_timestamp(arrow_type) or pa.types.is_date(arrow_type):
        return "timestamp"
    if pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type) \
            or pa.types.is_decimal(arrow_type):
        return "double"
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        return "string"
    if pa.types.is_null(arrow_type):
        return "null"
    return str(arrow_type)


def _in_range(file: Path, when: TimeRange, keep_before_start: bool) -> bool:
    """False only for a ``date=YYYY-MM-DD`` partition wholly outside ``when``."""
    for part in file.parts:
        if part.startswith("date="):
            try:
                day = datetime.strptime(part[5:], "%Y-%m-%d")
            except ValueError:
                return True
            if when.end is not None and day > when.end:
                return False
            if when.start is not None and not keep_before_start \
                    and day.date() < when.start.date():
                return False
    return True


def check_parquet_files(path: str, columns: dict[str, str], when: TimeRange,
                        keep_before_start: bool = False, only: list[str] | None = None,
                        optional: dict[str, str] | None = None) -> bool:
    """Every local Parquet file in range has every column with the contract's type (and each
    ``optional`` column it has, that column's type). True when some files have an optional
    column and others lack it: Spark must then merge their schemas, or it may take one that
    lacks it and read the column as null in every file.

    Spark takes the schema from one file and reads a column missing from another file as
    nulls, silently; reading each footer (a few KB, no data) catches that, names the file,
    and catches a file that is not Parquet at all before any job starts.
    """
    import pyarrow.parquet as pq

    if "://" in path and not path.startswith("file:"):
        return False
    root = Path(path.removeprefix("file:"))
    files = [Path(f) for f in only] if only is not None else [
        f for f in sorted(root.rglob("*.parquet"))
        if not any(p.startswith((".", "_")) for p in f.relative_to(root).parts)
        and _in_range(f, when, keep_before_start)]

    def schema_of(file: Path):
        try:
            return pq.read_schema(file)
        except Exception as exc:  # noqa: BLE001 - pyarrow raises several classes here
            return exc

    # The collector writes a file per scrape: thousands a day. Footers are tiny reads, so a
    # few threads (pyarrow releases the GIL) keep this to a fraction of the job.
    with ThreadPoolExecutor(max_workers=8) as pool:
        schemas = list(pool.map(schema_of, files))
    for file, schema in zip(files, schemas):
        if isinstance(schema, Exception):
            first = (str(schema).splitlines() or [type(schema).__name__])[0]
            raise BadInputFile(f"{file}: not a readable Parquet file ({first}); remove or "
                               f"rewrite it.", path=str(file)) from None
        for name, kind in (optional or {}).items():
            if name in schema.names:
                found = _arrow_kind(schema.field(name).type)
                if found != kind and found != "null":
                    raise BadInputFile(f"{file}: column {name!r} is {schema.field(name).type}, "
                                       f"expected {kind}.", path=str(file), column=name)
        missing = [name for name in columns if name not in schema.names]
        if missing:
            raise BadInputFile(
                f"{file}: {'column' if len(missing) == 1 else 'columns'} "
                f"{', '.join(repr(m) for m in missing)} {'is' if len(missing) == 1 else 'are'} "
                f"missing (found: {', '.join(schema.names) or 'no columns'}). The collector "
                f"writes {', '.join(columns)}.", path=str(file), column=missing[0])
        for name, kind in columns.items():
            found = _arrow_kind(schema.field(name).type)
            if found != kind and found != "null":
                raise BadInputFile(f"{file}: column {name!r} is {schema.field(name).type}, "
                                   f"expected {kind}.", path=str(file), column=name)
    have = {name: sum(name in s.names for s in schemas) for name in optional or {}}
    return any(0 < n < len(schemas) for n in have.values())


def _not_rolled_up(usage_dir: Path, rollups: str) -> list[str]:
    """The sample files an update of ``rollups`` will read: those no hour's record names, and
    any written since the last update ended (a run that failed recorded its files)."""
    from quota_core.telemetry import rollup_files

    seen = rollup_files.recorded_files(rollups)
    updated = rollup_files.load_state(rollups).get("updated_at")
    since = (datetime.fromisoformat(updated).replace(tzinfo=timezone.utc).timestamp()
             if updated else None)
    out = []
    for f in sorted(usage_dir.resolve().rglob("*.parquet")):
        if any(p.startswith((".", "_")) for p in f.relative_to(usage_dir.resolve()).parts):
            continue
        if str(f) not in seen or since is None or f.stat().st_mtime >= since:
            out.append(str(f))
    return out


def check_history(usage: str, when: TimeRange = TimeRange(), snapshots: bool = True,
                  rollups: str | None = None) -> None:
    """Before Spark starts: every Parquet file of the collector's folder ``usage`` that the run
    will read has the contract's columns with their types (pyarrow reads each footer, no
    data). A missing or mistyped column, or a file that is not Parquet, is a
    :class:`BadInputFile` naming the file and the column (exit 2).

    The files: the usage samples in ``when`` (with ``rollups``, those an update will read),
    and, with ``snapshots`` (no ``--quotas``), the quota snapshots up to ``when.end``. A
    topic, a remote store or JSON lines are left to the readers (Spark infers JSON's
    columns as it reads)."""
    if usage.startswith("kafka:") or "://" in usage:
        return
    base = Path(usage.removeprefix("file:"))
    usage_dir, quotas_dir = base / "usage", base / "quotas"
    if usage_dir.is_dir() and detect_format(str(usage_dir)) == "parquet":
        if rollups is None:
            check_parquet_files(str(usage_dir), USAGE_COLUMNS, when)
        else:
            check_parquet_files(str(usage_dir), USAGE_COLUMNS, TimeRange(),
                                only=_not_rolled_up(usage_dir, rollups))
    if snapshots and quotas_dir.is_dir() and detect_format(str(quotas_dir)) == "parquet":
        upto = TimeRange(None, None if rollups else when.end)
        check_parquet_files(str(quotas_dir), QUOTA_COLUMNS, upto, keep_before_start=True)


def check_ts_text(df: "DataFrame", path: str) -> None:
    """JSON carries ``ts`` as text; one that does not parse would become a null time."""
    from pyspark.sql import functions as F

    if dict(df.dtypes).get("ts") != "string":
        return
    bad = df.where(F.col("ts").isNotNull() & F.try_to_timestamp(F.col("ts")).isNull())
    row = bad.select("ts").limit(1).collect()
    if row:
        raise PipelineError(f"{path}: column 'ts' holds {row[0][0]!r}, which is not an ISO-8601 "
                            f"UTC time (e.g. 2025-01-06T00:00:00Z).", path=path, column="ts")


def read_table(spark: "SparkSession", path: str, columns: dict[str, str],
               when: TimeRange, keep_before_start: bool = False,
               files: list[str] | None = None,
               optional: dict[str, str] | None = None) -> "DataFrame":
    """One input table, schema-checked and cut to ``when`` (partitions pruned first).

    ``keep_before_start`` keeps rows before ``when.start``: a quota snapshot taken before the
    range still binds the samples at its start. ``files``: read only these files under
    ``path`` (those known to hold the range), not every file of its days. ``optional``:
    columns after the contract's, null where a file lacks them (pipeline.schema.check_columns).
    """
    from pyspark.sql import functions as F

    fmt = detect_format(path)
    mixed = False
    if fmt == "parquet":
        mixed = check_parquet_files(path, columns, when, keep_before_start, only=files,
                                    optional=optional)
    with translating(path):
        reader = spark.read.option("basePath", path)
        if mixed:  # files before and after an optional column: each file's is read
            reader = reader.option("mergeSchema", "true")
        where = [path] if files is None else files
        raw = reader.parquet(*where) if fmt == "parquet" else reader.json(*where)
        if "_corrupt_record" in raw.columns:
            raise PipelineError(f"{path}: some lines are not JSON objects; fix or remove them.",
                                path=path)
        df = raw
        if "date" in raw.columns and dict(raw.dtypes)["date"] == "date":
            if when.end is not None:  # partition pruning: whole UTC days outside the range
                df = df.where(F.col("date") <= F.lit(when.end.date()))
            if when.start is not None and not keep_before_start:
                df = df.where(F.col("date") >= F.lit(when.start.date()))
        if fmt == "json":
            check_ts_text(df, path)
        df = check_columns(df, columns, path, text_ts=(fmt == "json"), optional=optional)
        if when.end is not None:
            df = df.where(F.col("ts") < F.lit(when.end))
        if when.start is not None and not keep_before_start:
            df = df.where(F.col("ts") >= F.lit(when.start))
    return df


def read_usage(spark: "SparkSession", path: str, when: TimeRange = TimeRange(),
               files: list[str] | None = None) -> "DataFrame":
    """Usage samples under ``path`` in ``when``, schema-checked. Whether there are any, and
    whether every quota_type is known, is checked by :func:`check_buckets` on the distinct
    buckets the resolution collects anyway (no extra pass over the samples). The optional
    ``client_throttle_ms`` follows (null for files written before it)."""
    return read_table(spark, path, USAGE_COLUMNS, when, files=files,
                      optional=OPTIONAL_USAGE_COLUMNS)


def check_buckets(buckets: "pd.DataFrame", path: str, when: TimeRange) -> None:
    """PipelineError when there are no samples, or a quota_type maps to no key."""
    from pipeline.schema import KEY_FOR_TYPE

    if buckets.empty:
        raise PipelineError(f"{path}: no usage samples from {when.describe()}: widen --from/--to "
                            f"or check the collector ran then.", path=path)
    bad = buckets[buckets["key"].isna()]
    if len(bad):
        raise PipelineError(f"{path}: column 'quota_type' holds {bad['quota_type'].iloc[0]!r}; "
                            f"expected one of {', '.join(KEY_FOR_TYPE)}.", path=path,
                            column="quota_type")


def read_quota_rows(spark: "SparkSession", path: str, when: TimeRange = TimeRange()
                    ) -> "DataFrame":
    """Quota snapshot rows up to ``when.end`` (all earlier ones: the last still binds)."""
    return read_table(spark, path, QUOTA_COLUMNS, when, keep_before_start=True)

