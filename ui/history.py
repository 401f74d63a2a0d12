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
           "suggested_value", "sizing_rows", "rollup_state", "range_tables", "range_sizing",
           "bucket_hours", "bucket_client_wait"]


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


def _concat(tables):
    import pyarrow as pa

    tables = [t for t in tables if t is not None and t.num_rows]
    return pa.concat_tables(tables, promote_options="permissive") if tables else None


#: The rows whose clients reported a wait (quota_core.analysis.history_rollups.client_wait):
#: optional columns, null in rollups kept before them.
_WAIT_FIELDS = [("client_samples", "int64"), ("client_sum_ms", "float64"),
                ("client_max_ms", "float64")]
_WAIT_COLUMNS = ["hour", "user", "client_id", "key"] + [name for name, _ in _WAIT_FIELDS]


def _hours_part(rollups: str, hours: list[str]):
    """The summary (quota_core.analysis.history_rollups.summarize), the throttled rows and the
    rows whose clients reported a wait (a few: most clients push none) of ``hours``, read
    once with the columns they need (no sketches)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from quota_core.analysis import HEAT_COLUMNS, SUMMARY_COLUMNS, summarize
    from quota_core.telemetry.rollup_files import read_parts

    optional = pa.schema([(name, getattr(pa, kind)()) for name, kind in _WAIT_FIELDS])
    summary, hot, waits = None, [], []
    for at in range(0, len(hours), _HOURS_AT_ONCE):  # a few hours in memory at a time
        rows = read_parts(rollups, hours[at:at + _HOURS_AT_ONCE],
                          ["hour"] + SUMMARY_COLUMNS + optional.names, optional=optional)
        if rows is None:
            continue
        hot.append(rows.filter(pc.greater(rows["throttled_s"], 0)).select(HEAT_COLUMNS))
        waits.append(rows.filter(pc.greater(rows["client_samples"], 0)).select(_WAIT_COLUMNS))
        summary = summarize(_concat([summary, rows]))
    return summary, _concat(hot), _concat(waits)


#: Hours read at once: a day of a month at real scale is 2.4 million rows.
_HOURS_AT_ONCE = 6


@st.cache_resource(show_spinner="Summing a day of rollups…", max_entries=62)
def _day_part(rollups: str, day: str, stamp: tuple):
    """:func:`_hours_part` of a whole day, kept per day and its hours' update times
    (``stamp``): a range of days merges these, a row per broker and bucket each; a day a job
    redid is read again, the others are not. Shared, never modified."""
    summary, hot, waits = _hours_part(rollups, [h for h, _ in stamp])
    if summary is not None:  # each name once: a month of days in a few hundred MiB
        summary = _encoded(summary)
    _give_back()
    return summary, hot, waits


_TEXT = ("broker", "user", "client_id", "key", "source")


def _encoded(table):
    import pyarrow.compute as pc

    for name in _TEXT:
        table = table.set_column(table.schema.get_field_index(name), name,
                                 pc.dictionary_encode(table[name]))
    return table


def _decoded(table):
    import pyarrow as pa

    for name in _TEXT:
        table = table.set_column(table.schema.get_field_index(name), name,
                                 table[name].cast(pa.string()))
    return table


def _give_back() -> None:
    """Hand the memory a day's read used back to the system: an allocator keeps freed pages
    for reuse, which at a month's size would double the process's memory (pyarrow's own pool,
    and glibc's arenas, one per thread that ran a script)."""
    import ctypes
    import pyarrow as pa

    pa.default_memory_pool().release_unused()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: its allocator keeps what it keeps
        pass


@st.cache_resource(max_entries=2)
def _days_part(rollups: str, stamps: tuple):
    """The days of ``stamps`` (a (day, its stamp) each) merged: a range moved within its end
    days merges the same whole days, kept here, and reads only the hours at its ends."""
    from quota_core.analysis import summarize

    parts = [_day_part(rollups, day, stamp) for day, stamp in stamps]
    summary = _concat([p[0] for p in parts])
    return (_decoded(summarize(summary.unify_dictionaries())) if summary is not None
            else None, _concat([p[1] for p in parts]), _concat([p[2] for p in parts]))


@st.cache_resource(max_entries=8)  # both ends of a range
def _block_part(rollups: str, stamp: tuple):
    """:func:`_hours_part` of a block of :data:`_HOURS_AT_ONCE` hours of a day at a range's
    end (a (hour, update time) each): a range moved an hour at a time reads one block's hours
    again, not the day's."""
    parts = _hours_part(rollups, [h for h, _ in stamp])
    _give_back()
    return parts


def _edge_parts(rollups: str, hours: list[str], stamps: dict[str, float]) -> list:
    """The parts of the hours of a range's end days: each whole block of hours (cached), the
    others read together (cached too: the range's tables and its bucket's wait read them)."""
    blocks: dict[tuple[str, int], list[str]] = {}
    for hour in stamps:
        blocks.setdefault((hour[:10], int(hour[11:13]) // _HOURS_AT_ONCE), []).append(hour)
    wanted, alone = set(hours), []
    parts = []
    for key in sorted({(h[:10], int(h[11:13]) // _HOURS_AT_ONCE) for h in hours}):
        block = sorted(blocks[key])
        if wanted.issuperset(block):
            parts.append(_block_part(rollups, tuple((h, stamps[h]) for h in block)))
        else:
            alone += [h for h in block if h in wanted]
    if alone:
        parts.append(_alone_part(rollups, tuple((h, stamps[h]) for h in alone)))
    return parts


@st.cache_resource(max_entries=4)
def _alone_part(rollups: str, stamp: tuple):
    """:func:`_hours_part` of the hours of a range's end days not in a whole block (a (hour,
    update time) each): read once for the range's tables and its bucket's client wait."""
    parts = _hours_part(rollups, [h for h, _ in stamp])
    _give_back()
    return parts


def _stamps(rollups: str) -> dict[str, float]:
    from quota_core.telemetry.rollup_files import hour_stamps

    return hour_stamps(rollups)


#: The longest range whose heatmap has a column an hour; a longer one has a column a day.
HEAT_HOURS = 48


def _range_parts(rollups: str, first: str, last: str) -> list:
    """The parts (summary, throttled rows, rows with a client's wait) of the hours ``first``
    to ``last``: the whole days' merged (cached per day and per range of days), the hours of
    the days at the ends (cached per block of hours, the others read)."""
    from quota_core.analysis import split_range

    stamps = _stamps(rollups)
    days, hours = split_range(stamps, first, last)
    parts = [_days_part(rollups, tuple((d, tuple(sorted((h, m) for h, m in stamps.items()
                                                        if h[:10] == d))) for d in days))]
    return parts + _edge_parts(rollups, hours, stamps)


@st.cache_data(show_spinner="Summing the hours…", max_entries=16)
def range_tables(rollups: str, updated_at: str, first: str, last: str) -> dict:
    """History's tables for the hours ``first`` to ``last`` (``hour`` keys, both included):
    each whole day's summary (cached per day), the hours of the days at the ends read alone,
    merged per broker and bucket (quota_core.analysis.history_rollups.summarize)."""
    import pandas as pd

    from quota_core.analysis import (HEAT_COLUMNS, SUMMARY_COLUMNS, as_samples, clients, entries,
                                     split_range, summarize, throttle_heatmap)

    parts = _range_parts(rollups, first, last)
    days, hours = split_range(_stamps(rollups), first, last)
    summary = _concat([p[0] for p in parts])
    heat = _concat([p[1] for p in parts])
    part = (summarize(summary).to_pandas() if summary is not None
            else pd.DataFrame(columns=SUMMARY_COLUMNS))
    by_day = len(hours) + 24 * len(days) > HEAT_HOURS
    hot = (_heat_rows(heat, by_day) if heat is not None
           else pd.DataFrame(columns=HEAT_COLUMNS))
    del summary, heat
    _give_back()
    return {"by_client": clients(part), "by_entry": entries(part),
            "heat": throttle_heatmap(as_samples(hot)), "heat_by": "day" if by_day else "hour"}


def _heat_rows(heat, by_day: bool):
    """The throttled rows summed per hour (``by_day``: per day, a column a day, what a chart
    of a long range can show and Plotly carry), broker and bucket, in pyarrow: the heatmap
    sums them so anyway, and its labels are built per row (names as plain objects)."""
    import pyarrow.compute as pc

    if by_day:
        day = pc.utf8_slice_codeunits(heat["hour"], 0, 10)
        heat = heat.set_column(heat.schema.get_field_index("hour"), "hour",
                               pc.binary_join_element_wise(day, "T00", ""))
    keys = ["hour", "broker", "user", "client_id", "key"]
    summed = heat.group_by(keys, use_threads=False).aggregate([("throttled_s", "sum")])
    out = summed.rename_columns([c if c != "throttled_s_sum" else "throttled_s"
                                 for c in summed.column_names]).to_pandas()
    return out.astype({c: object for c in keys})


#: What sizing reads of a row (quota_core.analysis.history_rollups.sizing).
_SIZING = ["source", "level", "key", "user", "client_id", "rates", "q_last", "t_last"]


@st.cache_data(show_spinner="Sizing from the rate sketches…", max_entries=16)
def range_sizing(rollups: str, updated_at: str, first: str, last: str):
    """Sizing for the hours ``first`` to ``last``: the day's merged sketches
    (``<rollups>/daily``) for each whole day, the hourly ones for the other hours, of the
    rows an entry bound only (the sketches sizing merges)."""
    import pandas as pd
    import pyarrow.dataset as ds

    from quota_core.analysis import sizing, split_range
    from quota_core.telemetry.rollup_files import read_parts

    stamps = _stamps(rollups)
    held = [d for d in {h[:10] for h in stamps}
            if (Path(rollups) / "daily" / f"day={d}").is_dir()]
    days, hours = split_range(stamps, first, last, held)
    bound = ds.field("level") > 0
    rows = _concat([read_parts(rollups, days, _SIZING, bound, daily=True) if days else None,
                    read_parts(rollups, hours, _SIZING, bound) if hours else None])
    return sizing(rows.to_pandas() if rows is not None else pd.DataFrame(columns=_SIZING))


def _match(column: str, value):
    import pyarrow.dataset as ds

    return ds.field(column).is_null() if value is None else ds.field(column) == value


def _bucket_rows(rollups: str, values: list[str], columns: list[str], bucket, daily=False):
    from quota_core.telemetry.rollup_files import read_parts

    user, client_id, key = bucket
    rows = read_parts(rollups, values, columns, _match("user", user)
                      & _match("client_id", client_id) & _match("key", key), daily=daily) \
        if values else None
    if rows is None:
        import pandas as pd

        return pd.DataFrame(columns=columns)
    return rows.to_pandas()


#: A bucket's own rows (with their sketches) of a range's end hours and whole days.
_BUCKET_COLUMNS = ["hour", "broker", "user", "client_id", "key", "max_rate", "rates", "q_last",
                   "t_last", "throttled_s"]


def _bucket_edge(rollups: str, hours: list[str], stamps: dict[str, float], bucket):
    """A bucket's rows of a range's end hours: each whole block of hours (as
    :func:`_edge_parts` splits them) cached, the others read; a range moved an hour reads
    the hours of its partial block again, not its end days'."""
    import pandas as pd

    blocks: dict[tuple[str, int], list[str]] = {}
    for hour in stamps:
        blocks.setdefault((hour[:10], int(hour[11:13]) // _HOURS_AT_ONCE), []).append(hour)
    wanted, alone, parts = set(hours), [], []
    for key in sorted({(h[:10], int(h[11:13]) // _HOURS_AT_ONCE) for h in hours}):
        block = sorted(blocks[key])
        if wanted.issuperset(block):
            parts.append(_bucket_block(rollups, tuple((h, stamps[h]) for h in block), bucket))
        else:
            alone += [h for h in block if h in wanted]
    parts.append(_bucket_rows(rollups, alone, _BUCKET_COLUMNS, bucket))
    return pd.concat(parts, ignore_index=True)


@st.cache_resource(max_entries=64)
def _bucket_block(rollups: str, stamp: tuple, bucket):
    """A bucket's rows of a block of hours (a (hour, update time) each). Shared, never
    modified."""
    rows = _bucket_rows(rollups, [h for h, _ in stamp], _BUCKET_COLUMNS, bucket)
    _give_back()
    return rows


@st.cache_resource(max_entries=16)
def _bucket_days(rollups: str, updated_at: str, days: tuple, bucket):
    """A bucket's rows of the days' merged sketches (``<rollups>/daily``), as of the rollups'
    update ``updated_at``: a range moved within its end days keeps them. Shared, never
    modified."""
    rows = _bucket_rows(rollups, list(days), ["day", "rates", "q_last", "t_last"], bucket,
                        daily=True)
    _give_back()
    return rows


@st.cache_data(max_entries=32)
def bucket_hours(rollups: str, updated_at: str, first: str, last: str,
                 bucket: tuple[str | None, str | None, str]):
    """One bucket in range: per hour and broker for a range of up to :data:`HEAT_HOURS` hours
    (its rows alone read: a filter applied while reading); per day and broker for a longer one
    (quota_core.analysis.history_rollups.bucket_days: the day's largest rate from the days' summaries,
    its p99 from the day's merged sketch, the hours at the ends from their own rows)."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.compute as pc

    from quota_core.analysis import bucket_days, split_range, bucket_hours as rollup_bucket_hours

    stamps = _stamps(rollups)
    hours = [h for h in sorted(stamps) if first <= h <= last]
    columns = ["hour", "broker", "user", "client_id", "key", "max_rate", "rates", "q_last",
               "t_last", "throttled_s"]
    if len(hours) <= HEAT_HOURS:
        rows = _bucket_rows(rollups, hours, columns, bucket)
        _give_back()
        return rollup_bucket_hours(rows, *bucket)
    held = [d for d in {h[:10] for h in stamps}
            if (Path(rollups) / "daily" / f"day={d}").is_dir()]
    days, edge = split_range(stamps, first, last, held)
    user, client_id, key = bucket
    summaries = []
    for day in days:
        summary = _day_part(rollups, day, tuple(sorted(
            (h, m) for h, m in stamps.items() if h[:10] == day)))[0]
        if summary is None:
            continue
        summary = summary.select(["user", "client_id", "key", "broker", "max_rate",
                                  "throttled_s"])
        mine = summary.filter(pc.and_(pc.equal(summary["key"], key), pc.and_(
            pc.is_null(summary["user"]) if user is None else pc.equal(summary["user"], user),
            pc.is_null(summary["client_id"]) if client_id is None
            else pc.equal(summary["client_id"], client_id))))
        summaries.append(mine.cast(pa.schema(  # the bucket's rows: names as text
            [(f.name, pa.string() if f.name in _TEXT else f.type) for f in mine.schema]))
            .to_pandas().assign(day=day))
    hourly = _bucket_edge(rollups, edge, stamps, bucket)
    summaries.append(hourly.assign(day=hourly["hour"].str[:10]))
    daily = _bucket_days(rollups, updated_at, tuple(days), bucket)
    sketches = pd.concat([daily, hourly.assign(day=hourly["hour"].str[:10])[
        ["day", "rates", "q_last", "t_last"]]], ignore_index=True)
    _give_back()
    return bucket_days(pd.concat(summaries, ignore_index=True), sketches)


@st.cache_data(max_entries=32)
def bucket_client_wait(rollups: str, updated_at: str, first: str, last: str,
                       bucket: tuple[str | None, str | None, str]) -> str:
    """The sentence on what one bucket's clients reported waiting in the hours ``first`` to
    ``last`` (quota_core.analysis.history_rollups.client_wait): its rows whose clients
    reported a wait, out of the range's parts (cached with its tables); when there are any,
    the hours the bucket has rows in (its rows alone read, the hour column). Rollups kept
    before the client columns read as none."""
    import pyarrow.compute as pc

    from quota_core.analysis import client_wait
    from quota_core.domain import NO_CLIENT_HISTORY_TEXT, client_wait_history
    from quota_core.telemetry.rollup_files import read_parts

    waits = _concat([p[2] for p in _range_parts(rollups, first, last)])
    if waits is None:
        return NO_CLIENT_HISTORY_TEXT
    user, client_id, key = bucket
    waits = waits.filter(pc.and_(pc.equal(waits["key"], key), pc.and_(
        pc.is_null(waits["user"]) if user is None else pc.equal(waits["user"], user),
        pc.is_null(waits["client_id"]) if client_id is None
        else pc.equal(waits["client_id"], client_id))))
    if not waits.num_rows:  # no client of the bucket reported a wait: the rows not read
        return NO_CLIENT_HISTORY_TEXT
    hours = [h for h in sorted(_stamps(rollups)) if first <= h <= last]
    seen = read_parts(rollups, hours, ["hour"], _match("user", user)
                      & _match("client_id", client_id) & _match("key", key))
    of_hours = len(pc.unique(seen["hour"])) if seen is not None else 0
    _give_back()
    figures = client_wait(waits.to_pandas(), of_hours=of_hours)
    if figures is None:
        return NO_CLIENT_HISTORY_TEXT
    return client_wait_history(*figures)


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
