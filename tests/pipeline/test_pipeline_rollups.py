"""Hourly rollups kept incrementally (pipeline.incremental, pipeline.rollups, pipeline.sketches).

One history grows step by step in a module fixture, the rollups updated after each step:

1. hours 00 and 01 of 2025-01-06 (every 10 min, brokers b1 and b2), one snapshot at 00:00;
2. nothing new;
3. hour 02 arrives, and with it a late sample for 00:35 (a file for an old hour);
4. a snapshot for 01:30 arrives late, after its samples: alice's client gets its own entry
   (``{user=alice, client-id=app}`` instead of ``{user=alice, client-id=<default>}``: a
   level change mid-hour) and etl's quota is lowered (a quota change mid-hour).

Each step's :class:`~pipeline.incremental.Update` and the rollups after it are kept; the
tests check what each step read, which hours it redid and what they hold, and that the
tables from the final rollups are the tables of a whole analysis of the final history.
"""
from __future__ import annotations

import json
import os
import signal
import threading
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pipeline import sketches
from pipeline.incremental import update_rollups
from pipeline.job import run
from quota_core.telemetry.rollup_files import hour_files, load_state, read_daily, read_rollups
from pipeline.schema import QUOTA_COLUMNS, USAGE_COLUMNS, arrow_schema
from quota_core.analysis import history_rollups, rate_sketch
from quota_core.domain.entities import Entity
from tests.spark_fixtures import comparable

T0 = datetime(2025, 1, 6)
ALICE = '{"user":"alice","client-id":null}'
ALICE_APP = '{"user":"alice","client-id":"app"}'
ETL = '{"user":"etl"}'
H = ["2025-01-06T00", "2025-01-06T01", "2025-01-06T02"]


def usage(hour: int, minutes=range(0, 60, 10)) -> pd.DataFrame:
    rows = []
    for m in minutes:
        ts = pd.Timestamp(T0 + timedelta(hours=hour, minutes=m), tz="UTC")
        for broker in ("b1", "b2"):
            rows.append((ts, broker, "produce", "alice", "app", 800.0 + 40 * m, None, 600.0))
            rows.append((ts, broker, "produce", "etl", None, 3000.0 + 10 * m, None, 600.0))
    df = pd.DataFrame(rows, columns=list(USAGE_COLUMNS))
    return df.astype({"user": object, "client_id": object, "throttle_ms": float})


def snapshot(at: datetime, quotas: dict[str, float]) -> pd.DataFrame:
    return pd.DataFrame([(pd.Timestamp(at, tz="UTC"), e, "producer_byte_rate", v)
                         for e, v in quotas.items()], columns=list(QUOTA_COLUMNS))


def put(base, kind: str, name: str, df: pd.DataFrame) -> None:
    day = df["ts"].iloc[0].strftime("%Y-%m-%d")
    folder = base / kind / f"date={day}"
    folder.mkdir(parents=True, exist_ok=True)
    columns = USAGE_COLUMNS if kind == "usage" else QUOTA_COLUMNS
    df.to_parquet(folder / f"{name}.parquet", index=False, schema=arrow_schema(columns))


def hours_of(rollups) -> pd.DataFrame:
    return read_rollups(rollups).drop(columns=["rates"]).sort_values(
        ["hour", "broker", "user", "level"]).reset_index(drop=True)


@pytest.fixture(scope="module")
def grown(spark, tmp_path_factory):
    base = tmp_path_factory.mktemp("growing")
    roll = str(base / "rollups")
    steps, tables = {}, {}
    put(base, "quotas", "q-0000", snapshot(T0, {ALICE: 1000.0, ETL: 5000.0}))
    put(base, "usage", "h00", usage(0))
    put(base, "usage", "h01", usage(1))
    steps["first"] = (update_rollups(spark, str(base), roll), hours_of(roll))
    steps["nothing"] = (update_rollups(spark, str(base), roll), hours_of(roll))
    put(base, "usage", "h02", usage(2))
    late = usage(0, [35]).iloc[:1].assign(rate=5000.0)  # alice on b1, over her quota
    put(base, "usage", "late-0035", late)
    steps["new hour"] = (update_rollups(spark, str(base), roll), hours_of(roll))
    put(base, "quotas", "q-0130", snapshot(T0 + timedelta(hours=1, minutes=30),
                                           {ALICE: 1000.0, ALICE_APP: 3000.0, ETL: 3200.0}))
    steps["late snapshot"] = (update_rollups(spark, str(base), roll), hours_of(roll))
    what_if = {Entity.of(user="etl"): {"producer_byte_rate": 3300.0}}
    for name, rollups_dir in (("rollups", roll), ("whole", None)):
        out = run(spark, str(base), str(base / f"out-{name}"), what_if=what_if, windows=False,
                  rollups_dir=rollups_dir, update=False)
        tables[name] = {t: pd.read_parquet(out / t)
                        for t in ("by_client", "by_entry", "what_if", "sizing")}
        assert not (out / "windows").exists()
    return base, steps, tables


def rows_for(frame: pd.DataFrame, hour: str, user: str) -> pd.DataFrame:
    return frame[(frame["hour"] == hour) & (frame["user"] == user)]


def test_each_run_reads_only_what_arrived(grown):
    _, steps, _ = grown
    first, _ = steps["first"]
    assert first.hours == H[:2] and first.input_rows == len(usage(0)) * 2 + 2
    nothing, after = steps["nothing"]
    # the two queries' own progress: 0 input rows, and no hour redone
    assert nothing.input_rows == 0 and nothing.hours == []
    pd.testing.assert_frame_equal(after, steps["first"][1])
    new, frame = steps["new hour"]
    assert new.hours == [H[0], H[2]] and new.input_rows == len(usage(2)) + 1  # + the late one
    assert new.up_to == "2025-01-06 02:50:00"
    assert sorted(frame["hour"].unique()) == H


def test_a_late_sample_redoes_its_hour(grown):
    _, steps, _ = grown
    frame = steps["new hour"][1]
    before = rows_for(steps["first"][1], H[0], "alice").set_index("broker")
    now = rows_for(frame, H[0], "alice").set_index("broker")
    assert now.loc["b1", "samples"] == before.loc["b1", "samples"] + 1
    assert now.loc["b1", "throttled_s"] == before.loc["b1", "throttled_s"] + 600
    assert now.loc["b1", "max_rate"] == 5000.0
    assert now.loc["b2", "samples"] == before.loc["b2", "samples"]
    # hour 01 was not touched
    pd.testing.assert_frame_equal(frame[frame["hour"] == H[1]].reset_index(drop=True),
                                  steps["first"][1][lambda f: f["hour"] == H[1]]
                                  .reset_index(drop=True))
    # the hour was redone from the files recorded for it (the late one added), not from
    # every file of its day
    base = grown[0]
    assert [Path(f).name for f in hour_files(base / "rollups", H[0])] == [
        "h00.parquet", "late-0035.parquet"]
    assert [Path(f).name for f in hour_files(base / "rollups", H[2])] == ["h02.parquet"]


def test_a_late_snapshot_redoes_the_hours_it_changes(grown):
    _, steps, _ = grown
    late, frame = steps["late snapshot"]
    # 01: the change falls inside it; 02: its version changed. 00 keeps its version.
    assert late.hours == H[1:] and late.input_rows == 3
    assert frame[frame["hour"] == H[0]].equals(
        steps["new hour"][1][lambda f: f["hour"] == H[0]])
    # mid-hour: alice's bucket is bound by {user=alice, client-id=<default>} until 01:30,
    # then by its own entry
    alice = rows_for(frame, H[1], "alice")
    assert sorted(zip(alice["level"], alice["source"], alice["samples"])) == [
        (1, ALICE_APP, 3), (1, ALICE_APP, 3), (2, ALICE, 3), (2, ALICE, 3)]
    # 800 + 40 m: over 1000 at 10, 20 (not 00); over 3000 at none of 30, 40, 50
    assert set(alice.loc[alice["level"] == 2, "throttled_s"]) == {1200.0}
    assert set(alice.loc[alice["level"] == 1, "throttled_s"]) == {0.0}
    # etl: 3000 + 10 m against 5000, then 3200 from 01:30: over at 30 (3300), 40, 50
    etl = rows_for(frame, H[1], "etl")
    assert set(etl["throttled_s"]) == {1800.0} and set(etl["q_last"]) == {3200.0}
    assert set(rows_for(frame, H[2], "etl")["throttled_s"]) == {1800.0}


def test_tables_from_rollups_are_the_whole_analysis(grown):
    _, _, tables = grown
    for name in ("by_client", "by_entry", "what_if", "sizing"):
        got, want = (comparable(tables[k][name]) for k in ("rollups", "whole"))
        assert len(want) > 0
        pd.testing.assert_frame_equal(got, want, check_exact=True, obj=name)
    entries = tables["rollups"]["by_entry"]
    assert set(entries["source"]) == {ALICE, ALICE_APP, ETL}


def test_the_pages_tables_from_rollups_are_the_spark_jobs(grown):
    """quota_core.analysis.history_rollups (pandas, no Spark: what the History page shows) over the
    final rollups gives the Spark job's by_client sums, by_entry and sizing."""
    base, _, tables = grown
    roll = read_rollups(base / "rollups")
    spark_tables = tables["rollups"]
    key = ["user", "client_id", "key"]
    got = history_rollups.clients(roll).sort_values(key).reset_index(drop=True)
    want = spark_tables["by_client"].sort_values(key).reset_index(drop=True)
    for column in ("throttled_s", "broker_throttled_s", "max_utilisation", "samples",
                   "brokers"):
        assert got[column].tolist() == want[column].tolist(), column
    assert got["throttled_s"].sum() > 0
    entry = ["source", "level", "key"]
    got = history_rollups.entries(roll).sort_values(entry).reset_index(drop=True)
    want = spark_tables["by_entry"].sort_values(entry).reset_index(drop=True)
    for column in entry + ["throttled_s", "clients", "clients_throttled"]:
        assert got[column].tolist() == want[column].tolist(), column
    got = history_rollups.sizing(roll).sort_values(entry).reset_index(drop=True)
    want = spark_tables["sizing"].sort_values(entry).reset_index(drop=True)
    for column in entry + ["current_quota", "suggested_quota", "clients"]:
        assert got[column].tolist() == want[column].tolist(), column
    assert [tuple(t) for t in got["tightest_client"]] == [
        (t["user"], t["client_id"]) for t in want["tightest_client"]]
    # through the daily sketches (the range holds the whole day): the same sizing; the daily
    # rows were merged again after every step (hour 02's day was redone with it)
    daily = read_daily(base / "rollups", ["2025-01-06"])
    assert len(daily) and set(daily["day"]) == {"2025-01-06"}
    assert daily["samples"].sum() == roll["samples"].sum()
    rows = history_rollups.sketch_rows(roll, daily, H[0], H[2])
    assert set(rows["day"].dropna()) == {"2025-01-06"} and rows["hour"].isna().all()
    tiered = history_rollups.sizing(rows).sort_values(entry).reset_index(drop=True)
    pd.testing.assert_frame_equal(tiered, got)
    # a range of part of the day: its hours, not the day
    part = history_rollups.sketch_rows(roll, daily, H[1], H[2])
    assert set(part["hour"]) == {H[1], H[2]}
    # one bucket's hours: etl on b1, hour 02 under the lowered quota
    hours = history_rollups.bucket_hours(roll, "etl", None, "producer_byte_rate")
    last = hours[(hours["broker"] == "b1")].iloc[-1]
    assert str(last["ts"]) == "2025-01-06 02:00:00" and last["quota"] == 3200.0
    assert last["max_rate"] == 3500.0 and last["throttled_s"] == 1800.0


def test_read_rollups_without_spark(grown):
    base, _, _ = grown
    roll = base / "rollups"
    got = read_rollups(roll, datetime(2025, 1, 6, 1, 15), datetime(2025, 1, 6, 2))
    assert sorted(got["hour"].unique()) == [H[1]]  # 01:15 touches hour 01; 02:00 is excluded
    assert {"broker", "user", "client_id", "key", "throttled_s", "samples", "rates",
            "max_rate", "q_last", "t_last"} <= set(got.columns)
    assert isinstance(got["rates"].iloc[0], bytes)
    assert read_rollups(roll, datetime(2025, 1, 6, 2, 30))["hour"].unique().tolist() == [H[2]]
    assert read_rollups(base / "nowhere").empty
    state = load_state(roll)
    assert set(state["hours"]) == set(H) and state["up_to"] == "2025-01-06 02:50:00"
    assert state["updated_at"] > "2025"


def test_percentiles_from_sketches_are_within_the_rank_error(spark):
    """Buckets of 8,640 samples (3 brokers x 24 h x 120) merged from 72 hourly sketches: p95
    and p99 are values whose exact rank is within the stated error of 0.95 and 0.99; what_if's
    share above a quota too. A bucket of 144 samples (n <= K) is exact."""
    from pyspark.sql import functions as F

    from pipeline import analysis, rollups

    rng = np.random.default_rng(19)
    frames = []
    for user, n, sigma in (("big", 120, 1.0), ("wide", 120, 2.5), ("small", 2, 0.7)):
        for broker in ("b1", "b2", "b3"):
            ts = pd.Timestamp(T0) + pd.to_timedelta(np.arange(24 * n) * (3600 // n), unit="s")
            frames.append(pd.DataFrame({"ts": ts, "broker": broker, "user": user,
                                        "rate": rng.lognormal(8, sigma, len(ts))}))
    df = pd.concat(frames, ignore_index=True).assign(
        client_id=None, key="producer_byte_rate", level=3, source="{}", interval_s=1.0,
        over_quota=False, broker_throttle_ms=np.nan, quota=3000.0)
    # pandas 3's Arrow-backed text does not go through pyspark 4.2's Arrow path: plain objects
    df = df.assign(utilisation=df["rate"] / 3000.0).astype(
        {c: object for c in ("broker", "user", "client_id", "key", "source")})
    schema = ("ts timestamp, broker string, user string, rate double, client_id string, "
              "key string, level int, source string, interval_s double, over_quota boolean, "
              "broker_throttle_ms double, quota double, utilisation double")
    win = spark.createDataFrame(df[[c.split()[0] for c in schema.split(", ")]], schema)
    roll = rollups.hourly(win).cache()
    got = analysis.by_client(rollups.levels(roll)).toPandas().set_index("user")
    for user in ("big", "wide"):
        rates = np.sort(df.loc[df["user"] == user, "rate"].to_numpy())
        assert len(rates) == 8640
        for p in (0.95, 0.99):
            value = got.loc[user, f"p{round(p * 100)}_rate"]
            below, at_most = np.mean(rates < value), np.mean(rates <= value)
            assert below - sketches.RANK_ERROR <= p <= at_most + sketches.RANK_ERROR, (user, p)
    small = np.sort(df.loc[df["user"] == "small", "rate"].to_numpy())
    assert len(small) <= sketches.K
    assert got.loc["small", "p99_rate"] == pytest.approx(np.percentile(small, 99), rel=1e-12)
    # what_if's count above a limit, from the merged sketch
    merged = roll.groupBy("user").agg(sketches.merge_agg("rates").alias("s"))
    limit = 4000.0
    share = merged.select("user", (sketches.count_above(F.col("s"), F.lit(limit))
                                   / sketches.count(F.col("s"))).alias("share")).toPandas()
    for user, value in zip(share["user"], share["share"]):
        exact = np.mean(df.loc[df["user"] == user, "rate"] > limit)
        bound = 0 if user == "small" else sketches.RANK_ERROR + 1 / (2 * sketches.K)
        assert abs(value - exact) <= bound + 1e-12, user
    # the pages read the same sketches without Spark (DataSketches' Python binding): merged
    # in Python, within the same bound past K values, and equal to Spark's own up to K
    rows = roll.select("user", "rates").toPandas()
    for user in ("big", "wide", "small"):
        sketch = rate_sketch.merged(rows.loc[rows["user"] == user, "rates"])
        rates = np.sort(df.loc[df["user"] == user, "rate"].to_numpy())
        assert rate_sketch.count(sketch) == len(rates)
        value = rate_sketch.percentile(sketch, 0.99)
        if user == "small":
            assert value == got.loc["small", "p99_rate"]
        else:
            below, at_most = np.mean(rates < value), np.mean(rates <= value)
            assert below - rate_sketch.RANK_ERROR <= 0.99 <= at_most + rate_sketch.RANK_ERROR
    roll.unpersist()


def test_follow_stops_cleanly_on_a_signal(spark, tmp_path, capsys):
    """``analyze --follow``: progress lines, then SIGINT ends it after the update under way,
    exit 0 (SIGTERM sets the same flag: checked on the handler itself)."""
    from pipeline.analyze import main, stop_on_signals

    put(tmp_path, "quotas", "q", snapshot(T0, {ETL: 5000.0}))
    put(tmp_path, "usage", "h00", usage(0))
    state = tmp_path / "rollups" / "_state.json"

    def interrupt_once_running():
        for _ in range(1200):
            if state.exists():
                os.kill(os.getpid(), signal.SIGINT)
                return
            threading.Event().wait(0.1)

    handler = signal.getsignal(signal.SIGINT)
    threading.Thread(target=interrupt_once_running, daemon=True).start()
    code = main(["--usage", str(tmp_path), "--follow", "--interval", "0.2"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "following" in err and "stopped after" in err and "Traceback" not in err
    assert json.loads(state.read_text())["hours"].keys() == {H[0]}
    assert signal.getsignal(signal.SIGINT) is handler  # put back

    stop = threading.Event()
    previous = stop_on_signals(stop)
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.wait(5)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def test_command_line_rollup_flags(tmp_path, capsys):
    from pipeline.analyze import parse_args, rollups_dir
    from quota_core.errors import ParseError

    def where(*argv: str):
        return rollups_dir(parse_args(["--usage", str(tmp_path), *argv]))

    assert where("--out", "o") == str(tmp_path / "rollups")
    assert where("--out", "o", "--rollups", "/r") == "/r"
    assert where("--out", "o", "--no-rollups") is None
    assert where("--follow") == str(tmp_path / "rollups")  # --out optional with --follow
    assert rollups_dir(parse_args(["--usage", "kafka:t", "--out", "o"])) is None
    with pytest.raises(ParseError, match="local folder only"):
        rollups_dir(parse_args(["--usage", "kafka:t", "--follow"]))
    for argv, message in ((["--usage", "x"], "--out is required (unless --follow)"),
                          (["--usage", "x", "--follow", "--interval", "0"], "--interval 0"),
                          (["--usage", "x", "--follow", "--no-rollups"], "--no-rollups goes")):
        with pytest.raises(SystemExit) as info:
            parse_args(argv)
        assert info.value.code == 2 and message in capsys.readouterr().err


def test_a_range_reads_the_hours_it_touches(spark, grown):
    from pipeline.job import read_hourly
    from pipeline.readers import TimeRange

    base, _, _ = grown

    def hours(start, end) -> list[str]:
        roll = read_hourly(spark, str(base / "rollups"), TimeRange(start, end))
        return sorted(r[0] for r in roll.select("hour").distinct().collect())

    assert hours(datetime(2025, 1, 6, 1, 15), datetime(2025, 1, 6, 2)) == [H[1]]
    assert hours(None, datetime(2025, 1, 6, 2, 30)) == H
    assert hours(datetime(2025, 1, 6, 3), None) == []
