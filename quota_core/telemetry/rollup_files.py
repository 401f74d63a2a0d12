"""The rollups directory on disk, and reading it without Spark (pyarrow; for the pages).

Layout (``--rollups DIR``, default ``<history>/rollups``)::

    DIR/hourly/hour=2025-01-06T14/part-*.parquet   the rollups (pipeline.rollups), an hour each
    DIR/daily/day=2025-01-06/part-*.parquet        each day's rate sketches, merged (a reader of
                                                    a long range merges a sketch per day)
    DIR/levels/day=2025-01-06/part-*.parquet       each day's rollups merged per bucket, key
                                                    and level (what the job's tables take:
                                                    a long range merges a row per day)
    DIR/_state.json                                 hours kept, their quota signature, freshness
    DIR/_versions.pkl                               the quota versions last folded (a cache)
    DIR/_checkpoints/usage, DIR/_checkpoints/quotas Structured Streaming's checkpoints
    DIR/_files/hour=2025-01-06T14.json              the sample files holding that hour's samples
                                                    (an hour is redone from these alone)

``_state.json`` is replaced atomically (written beside, then renamed). ``up_to`` is the time
of the latest sample rolled up and ``updated_at`` when that run ended, both ISO-8601 UTC.
"""
from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path
from typing import Any

__all__ = ["HOURLY", "DAILY", "LEVELS", "STATE", "VERSIONS", "CHECKPOINTS", "hour_key", "load_state",
           "save_state", "read_rollups", "read_daily", "hour_files", "add_hour_files",
           "recorded_files", "hour_stamps", "read_parts"]

HOURLY = "hourly"
DAILY = "daily"
LEVELS = "levels"
STATE = "_state.json"
VERSIONS = "_versions.pkl"
CHECKPOINTS = "_checkpoints"
FILES = "_files"


def hour_key(t: datetime) -> str:
    """The ``hour`` partition value of a (naive UTC) time: ``2025-01-06T14``."""
    return t.strftime("%Y-%m-%dT%H")


def load_state(rollups: str | Path) -> dict[str, Any]:
    """The state of a rollups directory (empty when there is none yet)."""
    try:
        state = json.loads((Path(rollups) / STATE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        state = {}
    state.setdefault("hours", {})
    return state


def save_state(rollups: str | Path, state: dict[str, Any]) -> None:
    path = Path(rollups) / STATE
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(state, sort_keys=True), encoding="utf-8")
    tmp.replace(path)


def _read(where: Path, part: str, columns: list[str] | None, cond_of):
    import pandas as pd
    import pyarrow as pa
    import pyarrow.dataset as ds

    if not where.is_dir():
        return pd.DataFrame(columns=columns or [part])
    dataset = ds.dataset(str(where), format="parquet", partitioning=ds.partitioning(
        pa.schema([(part, pa.string())]), flavor="hive"))
    return dataset.to_table(columns=columns, filter=cond_of(ds.field(part))).to_pandas()


def hour_stamps(rollups: str | Path) -> dict[str, float]:
    """Each hour on disk (``hour`` key) and when its folder last changed (a job that redoes an
    hour replaces its files): what a reader caches an hour's or a day's answers by."""
    try:
        found = os.scandir(Path(rollups) / HOURLY)
    except FileNotFoundError:
        return {}
    with found:
        return {e.name[5:]: e.stat().st_mtime for e in found
                if e.name.startswith("hour=") and e.is_dir()}


#: Rows decoded at a time when a read keeps only some rows (``cond``): one batch of one file at
#: a time, so a read that keeps one bucket's rows holds a batch of sketches, not the files'.
FILTERED_BATCH = 16_384


def read_parts(rollups: str | Path, values: list[str], columns: list[str],
               cond=None, daily: bool = False, schema=None, optional=None):
    """``columns`` of the rows of the hours (or, ``daily``, the days) ``values``, as a
    pyarrow Table (the partition column, ``hour`` or ``day``, as text when asked for), only
    the rows ``cond`` keeps: a pyarrow.dataset expression over the files' columns, applied
    while reading (row-group statistics skip what it cannot keep). It opens the folders of
    those partitions alone, not the listing of every hour. None when none of them is there.
    ``schema`` (a pyarrow schema, the partition column included): read every file with it, a
    column a file lacks (an optional one, in rollups kept before it) as null. ``optional`` (a
    pyarrow schema): the first file's schema, with each of these fields it lacks added (null
    in the files without it).

    With ``cond``, the files are decoded a batch at a time (:data:`FILTERED_BATCH` rows, one
    batch and one file read ahead): a filter is applied after its columns are decoded, and a
    bucket's rows out of a month would otherwise hold several files' sketches at once."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    part = "day" if daily else "hour"
    base = Path(rollups) / (DAILY if daily else HOURLY)
    files = []
    for value in values:
        try:
            with os.scandir(base / f"{part}={value}") as found:
                files += sorted(e.path for e in found if e.name.endswith(".parquet"))
        except FileNotFoundError:
            continue
    if not files:
        return None
    if optional is not None and schema is None:
        import pyarrow.parquet as pq

        schema = pq.read_schema(files[0])
        schema = pa.schema(list(schema) + [f for f in optional if f.name not in schema.names]
                           + ([] if part in schema.names else [pa.field(part, pa.string())]))
    dataset = ds.dataset(files, format="parquet", partition_base_dir=str(base), schema=schema,
                         partitioning=ds.partitioning(pa.schema([(part, pa.string())]),
                                                      flavor="hive"))
    if cond is None:
        return dataset.to_table(columns=columns)
    return ds.Scanner.from_dataset(dataset, columns=columns, filter=cond,
                                   batch_size=FILTERED_BATCH, batch_readahead=1,
                                   fragment_readahead=1).to_table()


def hour_files(rollups: str | Path, hour: str) -> list[str] | None:
    """The sample files known to hold samples of ``hour`` that still exist; None when the
    hour has no record (rollups kept before the record was)."""
    try:
        names = json.loads((Path(rollups) / FILES / f"hour={hour}.json").read_text("utf-8"))
    except FileNotFoundError:
        return None
    return [n for n in names if os.path.exists(n)]


def recorded_files(rollups: str | Path) -> set[str]:
    """Every sample file some hour's record names (rolled up by an earlier run)."""
    names: set[str] = set()
    for record in (Path(rollups) / FILES).glob("hour=*.json"):
        try:
            names.update(json.loads(record.read_text("utf-8")))
        except (OSError, ValueError):
            continue
    return names


def add_hour_files(rollups: str | Path, found: dict[str, list[str]]) -> None:
    """Record that the files ``found[hour]`` hold samples of that hour (added to the record;
    each record replaced atomically)."""
    folder = Path(rollups) / FILES
    folder.mkdir(parents=True, exist_ok=True)
    for hour, names in found.items():
        path = folder / f"hour={hour}.json"
        known = set(hour_files(rollups, hour) or ())
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(json.dumps(sorted(known | set(names))), encoding="utf-8")
        tmp.replace(path)


def read_daily(rollups: str | Path, days: list[str], columns: list[str] | None = None):
    """The daily rollups (a sketch per day, bucket, key and level) of ``days``
    (``YYYY-MM-DD``), ``day`` as text; empty when there are none."""
    return _read(Path(rollups) / DAILY, "day", columns, lambda day: day.isin(list(days)))


def read_rollups(rollups: str | Path, start: datetime | None = None,
                 end: datetime | None = None, columns: list[str] | None = None):
    """The hourly rollups whose hour starts in ``[start, end)`` (naive UTC; None: open), as a
    pandas DataFrame with ``hour`` as text; empty (no rows) when there are none yet. pyarrow
    only: no Spark. ``rates`` (the sketches) are bytes: DataSketches' KLL format
    (quota_core.analysis.rate_sketch reads them)."""
    return _read(Path(rollups) / HOURLY, "hour", columns,
                 lambda hour: _hour_filter(hour, start, end))


def _hour_filter(hour, start: datetime | None, end: datetime | None):
    cond = None
    if start is not None:  # a range not on the hour keeps the hours it touches
        cond = hour >= hour_key(start)
    if end is not None:
        on_hour = end == end.replace(minute=0, second=0, microsecond=0)
        test = hour < hour_key(end) if on_hour else hour <= hour_key(end)
        cond = test if cond is None else cond & test
    return cond
