"""The tables of an incremental run are the tables of a whole run (pipeline.incremental,
pipeline.job.read_levels).

A history over a day boundary, 2025-01-05 22:00 to 2025-01-06 02:00 (hours 22, 23, 00, 01),
two brokers, a quota change at 23:30 and a sample before the first snapshot. The rollups are
kept over the first three hours, then the fourth arrives: the tables after that update are
those of the four hours' samples analysed whole (no rollups). The tables come from each day's merged rows (``levels/day=…``) for the days a range
holds whole, from the hourly rows for the rest.
"""
from __future__ import annotations

import shutil
from datetime import datetime, timedelta

import pandas as pd
import pytest

from pipeline.incremental import update_rollups
from pipeline.job import run
from pipeline.readers import TimeRange
from pipeline.schema import QUOTA_COLUMNS, USAGE_COLUMNS, arrow_schema
from tests.spark_fixtures import comparable

T0 = datetime(2025, 1, 5, 22)
ALICE = '{"user":"alice","client-id":null}'
ETL = '{"user":"etl"}'
TABLES = ("by_client", "by_entry", "sizing")


def usage(hour: int) -> pd.DataFrame:
    rows = []
    for m in range(0, 60, 10):
        ts = pd.Timestamp(T0 + timedelta(hours=hour, minutes=m), tz="UTC")
        for i, broker in enumerate(("b1", "b2")):
            rows.append((ts, broker, "produce", "alice", "app", 700.0 + 37 * m + 11 * hour,
                         None, 600.0))
            rows.append((ts, broker, "produce", "etl", f"job-{i}", 4000.0 + 23 * m * (i + 1),
                         25.0 if m > 30 else None, 600.0))
    if hour == 0:  # before the first snapshot: no quota known
        rows.append((pd.Timestamp(T0 - timedelta(minutes=5), tz="UTC"), "b1", "produce",
                     "early", None, 10.0, None, 600.0))
    df = pd.DataFrame(rows, columns=list(USAGE_COLUMNS))
    return df.astype({"user": object, "client_id": object, "throttle_ms": float})


def snapshot(at: datetime, quotas: dict[str, float]) -> pd.DataFrame:
    return pd.DataFrame([(pd.Timestamp(at, tz="UTC"), e, "producer_byte_rate", v)
                         for e, v in quotas.items()], columns=list(QUOTA_COLUMNS))


def put(base, kind: str, name: str, df: pd.DataFrame) -> None:
    day = df["ts"].iloc[-1].strftime("%Y-%m-%d")
    folder = base / kind / f"date={day}"
    folder.mkdir(parents=True, exist_ok=True)
    columns = USAGE_COLUMNS if kind == "usage" else QUOTA_COLUMNS
    df.to_parquet(folder / f"{name}.parquet", index=False, schema=arrow_schema(columns))


def tables(out) -> dict[str, pd.DataFrame]:
    return {t: comparable(pd.read_parquet(out / t)) for t in TABLES}


@pytest.fixture(scope="module")
def runs(spark, tmp_path_factory):
    base = tmp_path_factory.mktemp("incremental-tables")
    put(base, "quotas", "q-2200", snapshot(T0, {ALICE: 1000.0, ETL: 5000.0}))
    put(base, "quotas", "q-2330", snapshot(T0 + timedelta(minutes=90),
                                           {ALICE: 1500.0, ETL: 4500.0}))
    for hour in range(3):
        put(base, "usage", f"h{hour}", usage(hour))
    kept = str(base / "kept")
    update_rollups(spark, str(base), kept)
    put(base, "usage", "h3", usage(3))
    update = update_rollups(spark, str(base), kept)
    got = {"incremental": run(spark, str(base), str(base / "inc"), windows=False,
                              rollups_dir=kept, update=False),
           "whole": run(spark, str(base), str(base / "whole"), windows=False)}
    return base, update, {k: tables(v) for k, v in got.items()}


def test_one_more_hour_gives_the_tables_of_a_whole_run(runs):
    _, update, got = runs
    assert update.hours == ["2025-01-06T01"]  # only the new hour was rolled up
    for name in TABLES:
        assert len(got["whole"][name]) > 0
        pd.testing.assert_frame_equal(got["incremental"][name], got["whole"][name],
                                      check_exact=True, obj=name)
    by_client = got["whole"]["by_client"]
    assert by_client["throttled_s"].sum() > 0


def test_a_range_merges_whole_days_and_hours(runs, spark):
    """From 23:00: day 05 in part (its hourly rows), day 06 whole (its merged rows): the same
    by_client as from every hour's rows (pipeline.rollups.levels of read_hourly)."""
    from pipeline import analysis, rollups
    from pipeline.job import read_hourly, read_levels

    base, _, _ = runs
    part = TimeRange(datetime(2025, 1, 5, 23), None)
    got, want = (analysis.by_client(levels).toPandas() for levels in (
        read_levels(spark, str(base / "kept"), part),
        rollups.levels(read_hourly(spark, str(base / "kept"), part))))
    pd.testing.assert_frame_equal(comparable(got), comparable(want), check_exact=True)
    assert got["samples"].sum() == 3 * 6 * 2 * 2  # hours 23, 00, 01: 6 scrapes, 2 x 2 rows


def test_each_kept_day_has_its_merged_rows(runs, spark):
    """levels/day=… for both days; rollups kept before it was get it at the next update."""
    base, _, _ = runs
    kept = base / "kept"
    assert sorted(p.name for p in (kept / "levels").iterdir() if p.is_dir()) == [
        "day=2025-01-05", "day=2025-01-06"]
    shutil.rmtree(kept / "levels")
    assert update_rollups(spark, str(base), str(kept)).hours == []
    assert (kept / "levels" / "day=2025-01-05").is_dir()
    assert (kept / "levels" / "day=2025-01-06").is_dir()
