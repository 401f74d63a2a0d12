"""The History page's readers (ui.history) answer as the whole-frame reference does
(quota_core.analysis.history_rollups over every row read at once), on a small month of rollups written
as bench_history --month writes the large one: summaries per day and hour, only the rows a view
needs, sizing from the daily sketches, one bucket's rows filtered while reading."""
from __future__ import annotations

import pandas as pd
import pytest

from benchmarks.month_rollups import write_month
from quota_core.analysis import history_rollups as hr
from quota_core.telemetry.rollup_files import read_daily, read_rollups


@pytest.fixture(scope="module")
def month(tmp_path_factory):
    base = tmp_path_factory.mktemp("month") / "rollups"
    # sketches small enough that every merge keeps every value (exact, so equal answers)
    write_month(base, days=3, brokers=3, buckets=60, entries=5, log=lambda _: None,
                rates=(2, 10))
    return base


def _sorted(frame: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    return frame.sort_values(by, na_position="first").reset_index(drop=True)


@pytest.mark.parametrize("first,last", [("2025-03-01T00", "2025-03-03T23"),  # whole days
                                        ("2025-03-01T05", "2025-03-03T02"),  # ends cut
                                        ("2025-03-02T07", "2025-03-02T09")])  # inside one day
def test_range_tables_and_sizing_equal_the_whole_frame(month, first, last):
    from ui.history import bucket_hours, range_sizing, range_tables

    roll = read_rollups(month)
    mine = roll[(roll["hour"] >= first) & (roll["hour"] <= last)]
    got = range_tables(str(month), "t", first, last)
    want = hr.clients(mine)
    pd.testing.assert_frame_equal(_sorted(got["by_client"], hr.BUCKET),
                                  _sorted(want, hr.BUCKET), check_dtype=False)
    pd.testing.assert_frame_equal(_sorted(got["by_entry"], hr.ENTRY),
                                  _sorted(hr.entries(mine), hr.ENTRY), check_dtype=False)
    from quota_core.analysis.history import throttle_heatmap

    hot = mine[mine["throttled_s"] > 0]
    if mine["hour"].nunique() > 48:  # a long range: a column a day, the same sums
        assert got["heat_by"] == "day"
        hot = hot.assign(hour=hot["hour"].str[:10] + "T00")
    pd.testing.assert_frame_equal(got["heat"], throttle_heatmap(hr.as_samples(hot)))
    assert got["heat"].to_numpy().sum() == pytest.approx(
        throttle_heatmap(hr.as_samples(mine[mine["throttled_s"] > 0])).to_numpy().sum())
    days = sorted({h[:10] for h in roll["hour"]})
    want_sizing = hr.sizing(hr.sketch_rows(roll, read_daily(month, days), first, last))
    got_sizing = range_sizing(str(month), "t", first, last)
    pd.testing.assert_frame_equal(_sorted(got_sizing, hr.ENTRY), _sorted(want_sizing, hr.ENTRY),
                                  check_dtype=False)
    if mine["hour"].nunique() > 48:
        return  # a point a day: the next test
    for user, client_id, key in [("user-00001", None, "consumer_byte_rate"),
                                 ("user-00002", "client-1-00009", "consumer_byte_rate")]:
        pd.testing.assert_frame_equal(
            bucket_hours(str(month), "t", first, last, (user, client_id, key)),
            hr.bucket_hours(mine, user, client_id, key), check_dtype=False)


def test_split_range_whole_days_and_the_hours_at_the_ends():
    kept = [f"2025-03-0{d}T{h:02d}" for d in (1, 2, 3) for h in range(24)]
    days, hours = hr.split_range(kept, "2025-03-01T22", "2025-03-03T01")
    assert days == ["2025-03-02"]
    assert hours == ["2025-03-01T22", "2025-03-01T23", "2025-03-03T00", "2025-03-03T01"]
    # a day without its merged row is read by the hour
    assert hr.split_range(kept, "2025-03-01T00", "2025-03-02T23", held=["2025-03-02"]) == (
        ["2025-03-02"], [f"2025-03-01T{h:02d}" for h in range(24)])


def test_a_long_ranges_bucket_is_per_day_with_the_same_sums(month):
    """Past 48 hours the bucket's chart has a point a day and broker: the day's largest rate,
    its throttled seconds summed, the quota at its last sample, its p99 from its sketches."""
    from quota_core.analysis import rate_sketch
    from ui.history import bucket_hours

    roll = read_rollups(month)
    first, last, bucket = "2025-03-01T05", "2025-03-03T23", ("user-00002", "client-1-00009",
                                                              "consumer_byte_rate")
    got = bucket_hours(str(month), "t", first, last, bucket)
    mine = roll[(roll["hour"] >= first) & (roll["hour"] <= last) & (roll["user"] == bucket[0])
                & (roll["client_id"] == bucket[1]) & (roll["key"] == bucket[2])]
    day = mine["hour"].str[:10]
    want = mine.groupby([day, "broker"]).agg(max_rate=("max_rate", "max"),
                                             throttled_s=("throttled_s", "sum"))
    assert len(got) == len(want) == 3 * 3
    for ts, broker, max_rate, throttled_s in zip(got["ts"], got["broker"], got["max_rate"],
                                                 got["throttled_s"]):
        row = want.loc[(ts.strftime("%Y-%m-%d"), broker)]
        assert (max_rate, throttled_s) == pytest.approx((row["max_rate"], row["throttled_s"]))
    # the first day is cut: its p99 is of its hours in range; whole days' of the day's row
    first_day = mine[day == "2025-03-01"]
    assert got[got["ts"] == pd.Timestamp("2025-03-01")]["p99_rate"].iloc[0] == pytest.approx(
        rate_sketch.percentile(rate_sketch.merged(first_day["rates"]), 0.99))
    daily = read_daily(month, ["2025-03-02"])
    daily = daily[(daily["user"] == bucket[0]) & (daily["client_id"] == bucket[1])
                  & (daily["key"] == bucket[2])]
    assert got[got["ts"] == pd.Timestamp("2025-03-02")]["p99_rate"].iloc[0] == pytest.approx(
        rate_sketch.percentile(rate_sketch.merged(daily["rates"]), 0.99))


def test_read_parts_opens_only_the_hours_asked_and_filters_while_reading(month):
    import pyarrow.dataset as ds

    from quota_core.telemetry.rollup_files import hour_stamps, read_parts

    stamps = hour_stamps(month)
    assert len(stamps) == 72 and min(stamps) == "2025-03-01T00"
    got = read_parts(month, ["2025-03-02T05", "2025-03-02T06"], ["hour", "user", "throttled_s"],
                     ds.field("throttled_s") > 0)
    assert set(got["hour"].to_pylist()) <= {"2025-03-02T05", "2025-03-02T06"}
    assert min(got["throttled_s"].to_pylist()) > 0
    roll = read_rollups(month)
    want = roll[roll["hour"].isin(["2025-03-02T05", "2025-03-02T06"]) & (roll["throttled_s"] > 0)]
    assert got.num_rows == len(want)
    assert read_parts(month, ["2024-01-01T00"], ["user"]) is None  # no such hour
    assert hour_stamps(month.parent / "nowhere") == {}


@pytest.fixture(scope="module")
def waits(tmp_path_factory):
    """A small month whose first day was rolled up before the client columns (none in its
    files) and whose other days carry them: a few buckets' clients reported a wait in some
    hours, on some brokers."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    base = tmp_path_factory.mktemp("waits") / "rollups"
    write_month(base, days=3, brokers=3, buckets=60, entries=5, log=lambda _: None,
                rates=(2, 10))
    rng = np.random.default_rng(30)
    for f in sorted((base / "hourly").rglob("*.parquet")):
        if "hour=2025-03-01" in str(f):
            continue
        table = pq.read_table(f)
        user = np.array(table["user"].to_pylist())
        n = np.where(np.isin(user, ["user-00002", "user-00005"]) & (rng.random(len(user)) < 0.4),
                     rng.integers(1, 60, len(user)), 0)
        total = np.where(n > 0, n * rng.uniform(10, 900, len(user)), np.nan)
        table = table.append_column("client_samples", pa.array(n, pa.int64()))
        table = table.append_column("client_sum_ms", pa.array(total, from_pandas=True))
        table = table.append_column("client_max_ms", pa.array(
            np.where(n > 0, total / n * 1.5, np.nan), from_pandas=True))
        pq.write_table(table, f)
    return base


@pytest.mark.parametrize("first,last", [("2025-03-01T00", "2025-03-03T23"),
                                        ("2025-03-01T05", "2025-03-03T02"),
                                        ("2025-03-02T07", "2025-03-02T09"),
                                        ("2025-03-01T02", "2025-03-01T20")])  # no columns
def test_a_buckets_client_wait_equals_the_whole_frames(waits, first, last):
    """The bucket's sentence from the rows that reported a wait (kept with the range's
    parts) says what quota_core's client_wait says over every row of the bucket in range."""
    from quota_core.analysis import CLIENT_COLUMNS
    from quota_core.domain import NO_CLIENT_HISTORY_TEXT, client_wait_history
    from ui.history import bucket_client_wait, range_tables

    import pyarrow as pa
    import pyarrow.parquet as pq

    roll = pa.concat_tables(  # every file as it is: the first day's without the columns
        [pq.read_table(f).append_column("hour", pa.array([f.parent.name[5:]] * len(
            pq.read_table(f)))) for f in sorted((waits / "hourly").rglob("*.parquet"))],
        promote_options="permissive").to_pandas()
    mine = roll[(roll["hour"] >= first) & (roll["hour"] <= last)]
    range_tables(str(waits), "t", first, last)  # the page reads its tables first
    said = set()
    for user, client_id, key in {(u, None if pd.isna(c) else c, k) for u, c, k in
                                 zip(mine["user"], mine["client_id"], mine["key"])}:
        rows = mine[(mine["user"] == user) & (mine["key"] == key) & (
            mine["client_id"].isna() if client_id is None else mine["client_id"] == client_id)]
        want = hr.client_wait(rows[["hour"] + CLIENT_COLUMNS])
        got = bucket_client_wait(str(waits), "t", first, last, (user, client_id, key))
        assert got == (NO_CLIENT_HISTORY_TEXT if want is None else client_wait_history(*want))
        said.add(got != NO_CLIENT_HISTORY_TEXT)
    assert said == ({False} if first.startswith("2025-03-01") and last.startswith("2025-03-01")
                    else {True, False})


def test_read_parts_adds_the_optional_columns_a_file_lacks(waits):
    import pyarrow as pa

    from quota_core.telemetry.rollup_files import read_parts

    optional = pa.schema([("client_samples", pa.int64()), ("client_max_ms", pa.float64())])
    got = read_parts(waits, ["2025-03-01T23", "2025-03-02T00"],
                     ["hour", "user", "client_samples", "client_max_ms"], optional=optional)
    old = got.filter(pa.compute.equal(got["hour"], "2025-03-01T23"))
    assert old.num_rows == 3 * 60 and old["client_samples"].null_count == old.num_rows
    new = got.filter(pa.compute.equal(got["hour"], "2025-03-02T00"))
    assert new.num_rows == 3 * 60 and new["client_samples"].null_count == 0
