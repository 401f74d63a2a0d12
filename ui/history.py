"""The History page's plumbing: where the analysed tables are, reading them (cached by file
time), and running the Spark job as a separate process whose progress the page follows.

Spark never runs inside the dashboard's process: the job is ``python -m pipeline.analyze``,
started detached, writing its progress lines to ``<analysis>.log``; a ``<analysis>.pid``
file says it is running. Its output directory appears only when the job finished (the job
writes to a hidden sibling and renames it), so a half-written analysis is never shown.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import streamlit as st

from .settings import ANALYSIS_TABLES as TABLES
from .settings import REPO_ROOT, Places, analysis_dir, history_dir

__all__ = ["Places", "places", "tables", "windows", "start_job", "job_running", "job_log"]


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
HEATMAP_COLUMNS = ("ts", "user", "client_id", "interval_s", "over_quota")
BUCKET_COLUMNS = ("ts", "broker", "rate", "quota")


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
             str(p.analysis), "--overwrite"], cwd=REPO_ROOT, env=env, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True)
    p.pid.write_text(str(proc.pid))
