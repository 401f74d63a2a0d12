"""The analysis tables on a history small enough to check by hand.

Quotas (snapshots at 00:00 and 00:10 equal, so one version; a change at 00:20):

    {user=alice, client-id=app}  producer_byte_rate 1000, from 00:20: 2000
    {user=etl}                   producer_byte_rate 5000     (one bucket for all etl clients)
    {client-id=<default>}        request_percentage 50       (capped throttle)

Samples, 60 s each: alice/app under, over, then under the raised quota; the shared etl bucket
over on broker b1 and under on b2 (b2 missing at 00:01); app's request bucket over (its
throttle capped at one sample window); a client with no quota; a sample before any snapshot.
"""
from __future__ import annotations

import json
import math
from datetime import datetime

import pandas as pd
import pytest

from pipeline.job import run
from pipeline.readers import TimeRange
from pipeline.schema import QUOTA_COLUMNS, USAGE_COLUMNS, arrow_schema
from quota_core.domain.entities import Entity

T0 = datetime(2025, 1, 6, 0, 0)
ALICE = '{"user":"alice","client-id":"app"}'
ETL = '{"user":"etl"}'
CDEF = '{"client-id":null}'


def at(minute: int) -> pd.Timestamp:
    return pd.Timestamp(T0, tz="UTC") + pd.Timedelta(minutes=minute)


# ts minute, broker, quota_type, user, client_id, rate, throttle_ms (None: NaN reported)
SAMPLES = [
    (0, "b1", "produce", "alice", "app", 900.0, None),
    (1, "b1", "produce", "alice", "app", 1500.0, 4900.0),
    (21, "b1", "produce", "alice", "app", 1500.0, None),
    (0, "b1", "produce", "etl", None, 6000.0, 2100.0),
    (0, "b2", "produce", "etl", None, 4000.0, None),
    (1, "b1", "produce", "etl", None, 3000.0, None),
    (0, "b1", "request", None, "app", 75.0, 1000.0),
    (0, "b1", "fetch", None, "free", 1e6, None),
    (-1, "b1", "fetch", None, "free", 1e6, None),
]
QUOTA_ROWS = [
    (m, e, "producer_byte_rate" if e != CDEF else "request_percentage", v)
    for m in (0, 10) for e, v in ((ALICE, 1000.0), (ETL, 5000.0), (CDEF, 50.0))
] + [(20, ALICE, "producer_byte_rate", 2000.0), (20, ETL, "producer_byte_rate", 5000.0),
     (20, CDEF, "request_percentage", 50.0)]


def usage_frame() -> pd.DataFrame:
    return pd.DataFrame(
        [(at(m), b, qt, u, c, r, math.nan if t is None else t, 60.0)
         for m, b, qt, u, c, r, t in SAMPLES],
        columns=["ts", "broker", "quota_type", "user", "client_id", "rate", "throttle_ms",
                 "interval_s"]).astype({"user": object, "client_id": object})


def quota_frame() -> pd.DataFrame:
    return pd.DataFrame([(at(m), e, k, v) for m, e, k, v in QUOTA_ROWS],
                        columns=["ts", "entity", "key", "value"])


def write_dir(base, fmt: str = "parquet", usage: pd.DataFrame | None = None,
              quotas: pd.DataFrame | None = None):
    """The collector's layout under ``base``: usage/ and quotas/, one date= partition per day."""
    for name, df in (("usage", usage_frame() if usage is None else usage),
                     ("quotas", quota_frame() if quotas is None else quotas)):
        for day, part in df.groupby(df["ts"].dt.strftime("%Y-%m-%d")):
            d = base / name / f"date={day}"
            d.mkdir(parents=True, exist_ok=True)
            if fmt == "parquet":  # typed as the collector must (an all-null column stays text)
                schema = arrow_schema(USAGE_COLUMNS if name == "usage" else QUOTA_COLUMNS)
                part.to_parquet(d / "part-0.parquet", index=False, schema=schema)
            else:
                part.assign(ts=part["ts"].dt.strftime("%Y-%m-%dT%H:%M:%SZ")).to_json(
                    d / "part-0.jsonl", orient="records", lines=True)
    return base


def read(out, table: str) -> pd.DataFrame:
    return pd.read_parquet(out / table)


@pytest.fixture(scope="module")
def tables(spark, tmp_path_factory):
    base = write_dir(tmp_path_factory.mktemp("history"))
    what_if = {Entity.of(user="alice", client_id="app"): {"producer_byte_rate": 1200.0},
               Entity.of(user="etl"): {"producer_byte_rate": 7000.0},
               Entity.of(client_id="free"): {"consumer_byte_rate": 500_000.0}}
    out = run(spark, str(base), str(base / "out"), what_if=what_if)
    return {t: read(out, t) for t in ("windows", "by_client", "by_entry", "what_if", "sizing")}


def row(df: pd.DataFrame, **where) -> pd.Series:
    mask = pd.Series(True, index=df.index)
    for col, value in where.items():
        mask &= df[col].isna() if value is None else (df[col] == value)
    found = df[mask]
    assert len(found) == 1, (where, found)
    return found.iloc[0]


def sample(win: pd.DataFrame, minute: int, broker: str, quota_type: str, user, client_id):
    return row(win, ts=at(minute).tz_localize(None), broker=broker, quota_type=quota_type,
               user=user, client_id=client_id)


# minute, broker, type, user, client: quota, level, source, over, estimated ms, broker ms
WINDOWS = [
    (0, "b1", "produce", "alice", "app", 1000.0, 1, ALICE, False, 0, None),
    (1, "b1", "produce", "alice", "app", 1000.0, 1, ALICE, True, 5000, 4900.0),
    (21, "b1", "produce", "alice", "app", 2000.0, 1, ALICE, False, 0, None),   # raised at 00:20
    (0, "b1", "produce", "etl", None, 5000.0, 3, ETL, True, 2000, 2100.0),     # shared bucket
    (0, "b2", "produce", "etl", None, 5000.0, 3, ETL, False, 0, None),
    (0, "b1", "request", None, "app", 50.0, 8, CDEF, True, 1000, 1000.0),      # capped
    (0, "b1", "fetch", None, "free", None, 0, None, False, 0, None),            # no quota
    (-1, "b1", "fetch", None, "free", None, None, None, False, None, None),     # before any
]


@pytest.mark.parametrize("minute,broker,qt,user,client,quota,level,source,over,est,bms", WINDOWS)
def test_windows(tables, minute, broker, qt, user, client, quota, level, source, over, est, bms):
    r = sample(tables["windows"], minute, broker, qt, user, client)
    assert (None if pd.isna(r["quota"]) else r["quota"]) == quota
    assert (None if pd.isna(r["level"]) else r["level"]) == level
    assert (None if pd.isna(r["source"]) else r["source"]) == source
    assert bool(r["over_quota"]) is over
    assert (None if pd.isna(r["est_throttle_ms"]) else r["est_throttle_ms"]) == est
    assert (None if pd.isna(r["broker_throttle_ms"]) else r["broker_throttle_ms"]) == bms
    if quota:
        assert r["utilisation"] == pytest.approx(r["rate"] / quota)
    else:
        assert pd.isna(r["utilisation"])


def test_windows_has_every_sample(tables):
    assert len(tables["windows"]) == len(SAMPLES)


def test_by_client(tables):
    bc = tables["by_client"]
    alice = row(bc, user="alice", client_id="app", key="producer_byte_rate")
    assert (alice["throttled_s"], alice["broker_throttled_s"], alice["samples"]) == (60, 60, 3)
    assert alice["max_utilisation"] == 1.5
    assert list(alice["entries"]) == [ALICE]
    etl = row(bc, user="etl", client_id=None, key="producer_byte_rate")
    assert (etl["throttled_s"], etl["samples"], etl["brokers"]) == (60, 3, 2)
    # exact percentiles, linear between order statistics of 3000, 4000, 6000
    assert etl["p95_rate"] == pytest.approx(4000 + 0.9 * 2000)
    assert etl["p99_rate"] == pytest.approx(4000 + 0.98 * 2000)
    free = row(bc, user=None, client_id="free", key="consumer_byte_rate")
    assert (free["throttled_s"], list(free["entries"])) == (0, [])
    assert pd.isna(free["max_utilisation"])


def test_by_entry(tables):
    be = tables["by_entry"]
    assert set(be["source"]) == {ALICE, ETL, CDEF}  # unlimited samples have no entry
    alice = row(be, source=ALICE, key="producer_byte_rate")
    assert (alice["level"], alice["throttled_s"], alice["clients"], alice["clients_throttled"]) \
        == (1, 60, 1, 1)
    assert [dict(w) for w in alice["worst_clients"]] == [
        {"throttled_s": 60.0, "user": "alice", "client_id": "app"}]


def test_what_if(tables):
    wi = tables["what_if"]
    alice = row(wi, user="alice", client_id="app", key="producer_byte_rate")
    assert (alice["throttled_s_before"], alice["throttled_s_after"]) == (60, 120)
    assert (alice["quota_before"], alice["quota_after"], alice["level_after"]) == (2000, 1200, 1)
    assert not alice["newly_throttled"] and not alice["freed"]
    etl = row(wi, user="etl", client_id=None, key="producer_byte_rate")
    assert (etl["throttled_s_after"], etl["freed"]) == (0, True)
    request = row(wi, user=None, client_id="app", key="request_percentage")
    assert request["freed"] and pd.isna(request["quota_after"])  # no {client-id=<default>}
    free = row(wi, user=None, client_id="free", key="consumer_byte_rate")
    assert (free["throttled_s_before"], free["throttled_s_after"]) == (0, 120)
    assert free["newly_throttled"] and free["source_after"] == '{"client-id":"free"}'


def test_sizing(tables):
    sz = tables["sizing"]
    alice = row(sz, source=ALICE, key="producer_byte_rate")
    # p99 of 900, 1500, 1500 is 1500: the quota then (1000) was too small, now (2000) is not
    assert (alice["suggested_quota"], alice["current_quota"]) == (1500, 2000)
    etl = row(sz, source=ETL, key="producer_byte_rate")
    assert etl["suggested_quota"] == math.ceil(4000 + 0.98 * 2000)  # bytes: whole numbers
    request = row(sz, source=CDEF, key="request_percentage")
    assert request["suggested_quota"] == 75.0 and dict(request["tightest_client"]) == {
        "user": None, "client_id": "app"}


def test_json_lines_give_the_same_windows(spark, tmp_path, tables):
    base = write_dir(tmp_path, fmt="json")
    out = run(spark, str(base), str(tmp_path / "out"))
    got = read(out, "windows").sort_values(["ts", "broker", "quota_type", "client_id"]) \
        .reset_index(drop=True)
    want = tables["windows"].sort_values(["ts", "broker", "quota_type", "client_id"]) \
        .reset_index(drop=True)
    pd.testing.assert_frame_equal(got, want, check_dtype=False)


def test_time_range_and_quota_file(spark, tmp_path):
    """--from/--to cut the samples; --quotas FILE replaces the snapshots for the whole range."""
    base = write_dir(tmp_path)
    quotas = {Entity.of(user="alice", client_id="app"): {"producer_byte_rate": 100.0}}
    out = run(spark, str(base), str(tmp_path / "out"), quotas=quotas,
              when=TimeRange(T0, datetime(2025, 1, 6, 0, 2)))
    win = read(out, "windows")
    assert sorted(win["ts"].dt.minute.unique()) == [0, 1]
    alice = win[win["user"] == "alice"]
    assert set(alice["quota"]) == {100.0} and alice["over_quota"].all()
    assert json.loads(alice["source"].iloc[0]) == {"user": "alice", "client-id": "app"}
