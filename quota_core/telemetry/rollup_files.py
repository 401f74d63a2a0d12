"""The rollups directory on disk, and reading it without Spark (pyarrow; for the pages).

Layout (``--rollups DIR``, default ``<history>/rollups``)::

    DIR/hourly/hour=2025-01-06T14/part-*.parquet   the rollups (pipeline.rollups), an hour each
    DIR/_state.json                                 hours kept, their quota signature, freshness
    DIR/_versions.pkl                               the quota versions last folded (a cache)
    DIR/_checkpoints/usage, DIR/_checkpoints/quotas Structured Streaming's checkpoints

``_state.json`` is replaced atomically (written beside, then renamed). ``up_to`` is the time
of the latest sample rolled up and ``updated_at`` when that run ended, both ISO-8601 UTC.
"""
from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path
from typing import Any

__all__ = ["HOURLY", "STATE", "VERSIONS", "CHECKPOINTS", "hour_key", "load_state",
           "save_state", "read_rollups"]

HOURLY = "hourly"
STATE = "_state.json"
VERSIONS = "_versions.pkl"
CHECKPOINTS = "_checkpoints"


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


def read_rollups(rollups: str | Path, start: datetime | None = None,
                 end: datetime | None = None, columns: list[str] | None = None):
    """The hourly rollups whose hour starts in ``[start, end)`` (naive UTC; None: open), as a
    pandas DataFrame with ``hour`` as text; empty (no rows) when there are none yet. pyarrow
    only: no Spark. ``rates`` (the sketches) are bytes; read them with Spark's
    ``kll_sketch_*`` functions."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.dataset as ds

    where = Path(rollups) / HOURLY
    if not where.is_dir():
        return pd.DataFrame(columns=columns or ["hour"])
    dataset = ds.dataset(str(where), format="parquet", partitioning=ds.partitioning(
        pa.schema([("hour", pa.string())]), flavor="hive"))
    hour = ds.field("hour")
    cond = None
    if start is not None:  # a range not on the hour keeps the hours it touches
        cond = hour >= hour_key(start)
    if end is not None:
        on_hour = end == end.replace(minute=0, second=0, microsecond=0)
        test = hour < hour_key(end) if on_hour else hour <= hour_key(end)
        cond = test if cond is None else cond & test
    return dataset.to_table(columns=columns, filter=cond).to_pandas()
