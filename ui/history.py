"""The History page's plumbing: reading the hourly rollups (no Spark: pyarrow, pandas and
DataSketches, cached by the rollups' update time), the analysed per-sample table for Edit's
what-if, and running the Spark job as a separate process whose progress the page follows.

Spark never runs inside the dashboard's process: the job is the CLI's ``kafka-client-quotas
analyze`` subcommand (the pipeline's own entry point, which it registers with the CLI),
started detached, writing its progress lines to ``<analysis>.log``; a ``<analysis>.pid``
file says it is running. One job writes an output folder at a time: the job holds a lock on
it (quota_core.telemetry.folder_lock), and a job started while another holds it stops with
one line naming the holder, which the page shows (:func:`start_job` reads it first). Its output directory appears only when the job finished (the job
writes to a hidden sibling and renames it), so a half-written analysis is never shown.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import streamlit as st

from ui.settings import REPO_ROOT, Places, analysis_dir, history_dir

__all__ = ["Places", "places", "shares_console_history", "WHAT_IF_COLUMNS", "windows", "start_job", "job_holder", "job_running", "job_log",
           "suggested_value", "sizing_rows", "rollup_state", "rollup_rows", "range_tables", "range_sizing",
           "bucket_hours"]


def places(secrets: dict) -> Places | None:
    """The usage history of the cluster shown: a fleet's cluster's own ``history_dir`` (its
    analysis in ``<history_dir>/analysis``), else the console's."""
    import streamlit as st

    from ui.page_context import CTX_KEY

    ctx = st.session_state.get(CTX_KEY)
    chosen, fleet = (ctx.cluster, ctx.fleet) if ctx is not None else (None, None)
    if chosen is not None and chosen.history_dir:
        own = Path(chosen.history_dir)
        return Places(own, own / "analysis")
    if not shares_console_history(chosen, fleet):
        return None
    env = dict(os.environ)
    history, analysis = history_dir(env, secrets), analysis_dir(env, secrets)
    return Places(history, analysis) if history and analysis else None


def shares_console_history(chosen, fleet) -> bool:
    """Whether the console-wide history (``QUOTA_HISTORY_DIR``, ``[history]``) is this
    cluster's: without a fleet file, or in a fleet of one. In a fleet of several it would be
    another cluster's usage shown under this one's name: only a cluster's own
    ``history_dir`` counts there."""
    return chosen is None or fleet is None or len(fleet.names()) <= 1


def rollup_state(p: Places) -> dict:
    """The rollups' ``_state.json``: ``hours`` kept, ``up_to`` (the latest sample rolled up) and
    ``updated_at`` (when that run ended), both ISO-8601 UTC; no hours when there are none."""
    from quota_core.telemetry.rollup_files import load_state

    return load_state(p.rollups)


@st.cache_resource(show_spinner="Reading the rollups…", max_entries=2)
def rollup_rows(rollups: str, updated_at: str):
    """Every rollup row (a row per hour, broker, bucket, key and level), read once per update
    and shared, not copied, by every rerun and session: the sketches make it the one large
    frame here. Callers never modify it."""
    from quota_core.telemetry.rollup_files import read_rollups

    return read_rollups(rollups)


@st.cache_resource(show_spinner="Reading the daily sketches…", max_entries=2)
def daily_rows(rollups: str, updated_at: str):
    """Every day's merged rate sketches (``<rollups>/daily``), read once per update."""
    from quota_core.telemetry.rollup_files import load_state, read_daily

    days = sorted({h[:10] for h in load_state(rollups)["hours"]})
    return read_daily(rollups, days)


def _in_range(rollups: str, updated_at: str, first: str, last: str):
    roll = rollup_rows(rollups, updated_at)
    return roll[(roll["hour"] >= first) & (roll["hour"] <= last)]


@st.cache_data(show_spinner="Summing the hours…", max_entries=16)
def range_tables(rollups: str, updated_at: str, first: str, last: str) -> dict:
    """History's tables for the hours ``first`` to ``last`` (``hour`` keys, both included)."""
    from quota_core.analysis import as_samples, clients, entries, throttle_heatmap

    part = _in_range(rollups, updated_at, first, last)
    return {"by_client": clients(part), "by_entry": entries(part),
            "heat": throttle_heatmap(as_samples(part[part["throttled_s"] > 0]))}


@st.cache_data(show_spinner="Sizing from the rate sketches…", max_entries=16)
def range_sizing(rollups: str, updated_at: str, first: str, last: str):
    from quota_core.analysis import sizing, sketch_rows

    return sizing(sketch_rows(rollup_rows(rollups, updated_at),
                          daily_rows(rollups, updated_at), first, last))


@st.cache_data(max_entries=32)
def bucket_hours(rollups: str, updated_at: str, first: str, last: str,
                 bucket: tuple[str | None, str | None, str]):
    from quota_core.analysis import bucket_hours

    return bucket_hours(_in_range(rollups, updated_at, first, last), *bucket)


#: What Edit's what-if needs of the per-sample table: six of its 15 columns (at millions of
#: samples the whole table would not fit a dashboard, and the cache copies what it returns).
WHAT_IF_COLUMNS = ("ts", "user", "client_id", "key", "rate", "interval_s")


@st.cache_data(show_spinner="Reading the samples…", max_entries=4)
def windows(analysis: str, version: float, columns: tuple[str, ...]):
    """``columns`` of the analysis' per-sample table (``analyze --windows``)."""
    import pyarrow.parquet as pq

    return pq.read_table(Path(analysis) / "windows", columns=list(columns)).to_pandas()


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


def job_holder(p: Places) -> str | None:
    """One line naming the job that writes the analysis or its rollups now (its pid, start
    time and command), None when none does."""
    from quota_core.telemetry.folder_lock import busy_message, holder

    for folder in (p.analysis, p.rollups):
        line = holder(folder)
        if line is not None:
            return busy_message(folder, line)
    return None


def start_job(p: Places) -> str | None:
    """Start ``kafka-client-quotas analyze`` over the history, replacing the last analysis
    when done. When another job writes the folder, start nothing and return the line naming
    it (the job itself would stop with that line, exit 1)."""
    busy = job_holder(p)
    if busy is not None:
        return busy
    p.analysis.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    with open(p.log, "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "quota_core", "analyze", "--usage", str(p.history),
             "--out", str(p.analysis), "--overwrite",
             "--windows"],  # Edit's what-if reads windows
            cwd=REPO_ROOT, env=env, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True)
    p.pid.write_text(str(proc.pid))
    return None


def suggested_value(key: str, value: float) -> float:
    """The suggestion as History shows it: :func:`quota_core.domain.units.round_up_quota` (the one
    display rounding, lint's too) of the sizing table's ``suggested_quota``."""
    from quota_core.domain import round_up_quota

    return round_up_quota(key, value)


def sizing_rows(sizing, quotas) -> list[dict]:
    """History's sizing table: per entry and key, the quota the cluster holds *now* (the
    connection's quota set; "not set" when the entry no longer sets the key) and the
    suggestion, both in the units of every other page."""
    from quota_core.domain import entity_from_json, format_quota, format_rate

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
