"""The History page's plumbing: where the analysed tables are, reading them (cached by file
time), and running the Spark job as a separate process whose progress the page follows.

Spark never runs inside the dashboard's process: the job is ``python -m pipeline.analyze``,
started detached, writing its progress lines to ``<analysis>.log``; a ``<analysis>.pid``
file says it is running. Its output directory appears only when the job finished (the job
writes to a hidden sibling and renames it), so a half-written analysis is never shown.
"""
from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import streamlit as st

from .settings import ANALYSIS_TABLES as TABLES
from .settings import REPO_ROOT, Places, analysis_dir, history_dir

__all__ = ["Places", "places", "tables", "windows", "start_job", "job_running", "job_log",
           "suggested_value", "sizing_rows"]


def places(secrets: dict) -> Places | None:
    env = dict(os.environ)
    history, analysis = history_dir(env, secrets), analysis_dir(env, secrets)
    return Places(history, analysis) if history and analysis else None


@st.cache_data(show_spinner="Reading the analysis…", max_entries=4)
def tables(analysis: str, version: float) -> dict:
    import pandas as pd

    return {t: pd.read_parquet(Path(analysis) / t) for t in TABLES if t != "windows"}


#: What each reader of the per-sample table needs of it: a few of its 15 columns, and for the
#: heatmap and one bucket's chart a few of its rows. At millions of samples the whole table
#: would not fit a dashboard (and the cache copies what it returns on every rerun).
WHAT_IF_COLUMNS = ("ts", "user", "client_id", "key", "rate", "interval_s")
HEATMAP_COLUMNS = ("ts", "broker", "user", "client_id", "interval_s", "over_quota")
BUCKET_COLUMNS = ("ts", "broker", "rate", "quota", "interval_s", "over_quota")


@st.cache_data(show_spinner="Reading the samples…", max_entries=8)
def windows(analysis: str, version: float, columns: tuple[str, ...], over_only: bool = False,
            bucket: tuple[str | None, str | None, str] | None = None):
    """``columns`` of the samples in the analysis' windows table: only those over quota
    (``over_only``), or only those of one ``bucket`` (user, client id, key; None: no such
    tag)."""
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    where = None
    if over_only:
        where = ds.field("over_quota")
    if bucket is not None:
        user, client_id, key = bucket
        for column, value in (("user", user), ("client_id", client_id), ("key", key)):
            test = ds.field(column).is_null() if value is None else ds.field(column) == value
            where = test if where is None else where & test
    return pq.read_table(Path(analysis) / "windows", columns=list(columns),
                         filters=where).to_pandas()


def job_running(p: Places) -> bool:
    try:
        pid = int(p.pid.read_text().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"


def job_log(p: Places, lines: int = 12) -> list[str]:
    try:
        return p.log.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return []


def start_job(p: Places) -> None:
    """Start ``pipeline.analyze`` over the history, replacing the last analysis when done."""
    p.analysis.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    with open(p.log, "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pipeline.analyze", "--usage", str(p.history), "--out",
             str(p.analysis), "--overwrite", "--windows"],  # the page reads windows
            cwd=REPO_ROOT, env=env, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True)
    p.pid.write_text(str(proc.pid))


def suggested_value(key: str, value: float) -> float:
    """A suggested quota people can type: ``value`` rounded *up* (a smaller quota would not
    keep the p99 under it) to three significant digits in the unit the pages show it in
    (MiB/s, KiB/s for byte rates, as :func:`quota_core.units.format_rate` prints it)."""
    from quota_core.keys import QUOTA_KEYS

    if not math.isfinite(value) or value <= 0:
        return value
    spec = QUOTA_KEYS.get(key)
    size = 1
    if spec is not None and spec.is_byte_rate:
        size = next((s for s in (2**40, 2**30, 2**20, 2**10) if value >= s), 1)
    scaled = value / size
    step = 10 ** (math.floor(math.log10(scaled)) - 2)  # three significant digits
    rounded = math.ceil(round(scaled / step, 6)) * step
    if spec is not None and spec.integral:
        return float(math.ceil(rounded * size))
    return float(f"{rounded:.3g}") * size


def sizing_rows(sizing, quotas) -> list[dict]:
    """History's sizing table: per entry and key, the quota the cluster holds *now* (the
    connection's quota set; "not set" when the entry no longer sets the key) and the
    suggestion, both in the units of every other page."""
    from quota_core.entities import entity_from_json
    from quota_core.units import format_quota, format_rate

    rows = []
    for source, key, suggested, clients in zip(sizing["source"], sizing["key"],
                                               sizing["suggested_quota"], sizing["clients"]):
        entity = entity_from_json(source)
        now = (quotas.get(entity) or {}).get(key) if quotas is not None else None
        rows.append({"entry": entity.display(), "key": key,
                     "now": ("not connected" if quotas is None else
                             "not set" if now is None else format_quota(key, now)),
                     "suggested": format_rate(key, suggested_value(key, float(suggested))),
                     "clients": int(clients)})
    return rows
