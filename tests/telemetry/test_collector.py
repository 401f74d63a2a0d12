"""The collector's promises, on real files: schema, gaps, bounded memory, nothing lost.

Scrapes are injected here (a function returning series, or raising MetricsError as an
unreachable endpoint does); the real broker end to end is in tests/telemetry/test_collect_kafka.py.
"""
from __future__ import annotations

import math
import threading
from datetime import datetime, timezone

import pandas as pd
import pytest

from quota_core import Entity
from quota_core.telemetry.collector import Collector, Endpoint, parse_endpoints
from quota_core.errors import MetricsError, ParseError, SinkError
from quota_core.telemetry import QuotaSeries
from quota_core.backends.sandbox import SandboxBackend
from quota_core.telemetry.sinks import ParquetSink
from quota_core.telemetry.schema import snapshots_to_quotas

MiB = 1024 * 1024
T0 = datetime(2026, 11, 23, 23, 59, 50, tzinfo=timezone.utc).timestamp()


def series(broker, user, client_id, rate, throttle=math.nan, quota_type="produce"):
    attr = "byte-rate" if quota_type in ("produce", "fetch") else "request-time"
    return [QuotaSeries(broker, quota_type, attr, user, client_id, None, rate),
            QuotaSeries(broker, quota_type, "throttle-time", user, client_id, None, throttle)]


@pytest.fixture
def sandbox(tmp_path):
    with SandboxBackend(tmp_path / "q.sqlite") as backend:
        backend.replace_all({Entity.of(user="alice"): {"producer_byte_rate": 1.0 * MiB}})
        yield backend


class Endpoints:
    """What each endpoint answers on the next scrape (an exception: it is down)."""

    def __init__(self):
        self.answers = {}

    def __call__(self, url, label, timeout):
        answer = self.answers[label]
        if isinstance(answer, Exception):
            raise answer
        return answer


def make(tmp_path, sandbox, scrape, sink=None, logs=None, **kw):
    return Collector([Endpoint("b1", "http://127.0.0.1:1/metrics"),
                      Endpoint("b2", "http://127.0.0.1:2/metrics")],
                     sandbox.describe, sink or ParquetSink(tmp_path / "out"), scrape,
                     log=(logs.append if logs is not None else lambda line: None), **kw)


def test_samples_and_snapshots_land_as_parquet_in_the_documented_schema(tmp_path, sandbox):
    scrape = Endpoints()
    scrape.answers = {"b1": series("b1", "alice", None, 1.8 * MiB, 8000.0)
                      + series("b1", None, "x=y,z", 10.0, quota_type="request"),
                      "b2": series("b2", "名前 a", "c", 5.0)}
    collector = make(tmp_path, sandbox, scrape, scrape_every=10)
    collector.snapshot(T0)
    collector.scrape_all(T0)
    collector.scrape_all(T0 + 12)  # crosses midnight: two date partitions
    assert collector.flush()
    usage = pd.read_parquet(tmp_path / "out" / "usage")
    assert sorted(usage.columns) == sorted(["ts", "broker", "quota_type", "user", "client_id",
                                            "rate", "throttle_ms", "interval_s", "client_throttle_ms",
                                            "cluster", "date"])
    assert usage.cluster.isna().all()  # one cluster, not of a fleet: null
    assert usage.client_throttle_ms.isna().all()  # no endpoint carries client telemetry
    assert len(usage) == 6 and collector.stats.samples_written == 6
    assert sorted(usage["date"].astype(str).unique()) == ["2026-11-23", "2026-11-24"]
    alice = usage[(usage.user == "alice")].sort_values("ts")
    assert list(alice.throttle_ms) == [8000.0, 8000.0] and list(alice.interval_s) == [10.0, 12.0]
    assert alice.client_id.isna().all()  # not keyed by client id: null, not ""
    other = usage[usage.broker == "b2"].iloc[0]
    assert other.user == "名前 a" and math.isnan(other.throttle_ms)  # NaN throttle → null
    assert str(usage.ts.dtype).startswith("datetime64") and "UTC" in str(usage.ts.dtype)
    snaps = pd.read_parquet(tmp_path / "out" / "quotas")
    [quotas] = snapshots_to_quotas(snaps.to_dict("records")).values()
    assert quotas == {Entity.of(user="alice"): {"producer_byte_rate": 1.0 * MiB}}


def test_a_snapshot_is_written_only_when_the_quota_set_changed(tmp_path, sandbox):
    collector = make(tmp_path, sandbox, Endpoints())
    collector.snapshot(T0)
    collector.snapshot(T0 + 60)
    assert len({r["ts"] for r in collector._snapshots}) == 1
    sandbox.replace_all({})
    collector.snapshot(T0 + 120)  # an empty set is one null row
    assert collector._snapshots[-1]["entity"] is None
    assert collector.flush() and collector.stats.snapshots_written == 2


def test_a_down_endpoint_is_a_gap_and_one_log_line(tmp_path, sandbox):
    scrape, logs = Endpoints(), []
    scrape.answers = {"b1": series("b1", "alice", None, 1.0),
                      "b2": MetricsError("Cannot reach the metrics endpoint http://127.0.0.1:2/metrics")}
    collector = make(tmp_path, sandbox, scrape, logs=logs)
    for i in range(3):
        collector.scrape_all(T0 + 10 * i)
    assert [line for line in logs if "b2 is down" in line] and len(logs) == 1
    assert {r["broker"] for r in collector._usage} == {"b1"}
    assert "endpoints up 1/2; b2 down since" in collector.status_line()
    scrape.answers["b2"] = series("b2", "alice", None, 2.0)
    collector.scrape_all(T0 + 30)
    assert "b2 answers again" in logs[-1]
    assert "endpoints up 2/2" in collector.status_line()


class FailingSink:
    label = "a failing disk"

    def __init__(self):
        self.fail, self.written = True, []

    def write(self, usage, snapshots):
        if self.fail:
            raise SinkError("No space left on device")
        self.written.extend(usage)


def test_a_refusing_sink_keeps_samples_within_a_bound_and_loses_none_reported(tmp_path, sandbox):
    scrape, logs, sink = Endpoints(), [], FailingSink()
    scrape.answers = {"b1": series("b1", "alice", None, 1.0), "b2": series("b2", "bob", None, 1.0)}
    collector = make(tmp_path, sandbox, scrape, sink=sink, logs=logs, max_buffer=5)
    for i in range(4):
        collector.scrape_all(T0 + 10 * i)
        assert not collector.flush()
    assert len(collector._usage) == 5 and collector.stats.samples_dropped == 3
    assert collector.stats.samples_written == 0
    sink.fail = False
    assert collector.flush()
    assert collector.stats.samples_written == len(sink.written) == 5
    assert any("dropped the 1 oldest" in line for line in logs)


def test_run_stops_on_the_event_and_flushes(tmp_path, sandbox):
    scrape = Endpoints()
    scrape.answers = {"b1": series("b1", "alice", None, 1.0), "b2": series("b2", "bob", None, 2.0)}
    collector = make(tmp_path, sandbox, scrape, scrape_every=0.05, flush_every=10,
                     snapshot_every=10)
    stop = threading.Event()
    timer = threading.Timer(0.3, stop.set)
    timer.start()
    assert collector.run(stop) == 0
    usage = pd.read_parquet(tmp_path / "out" / "usage")
    assert len(usage) == collector.stats.samples_written >= 4


@pytest.mark.parametrize("text, labels", [
    ("http://h:1/metrics", ["h:1"]),
    ("b1=http://h:1/metrics,b2=http://h:2/metrics?x=1", ["b1", "b2"]),
])
def test_parse_endpoints(text, labels):
    assert [e.label for e in parse_endpoints(text)] == labels


@pytest.mark.parametrize("text, message", [
    ("h:1/metrics", r"give an http\(s\) URL"),
    ("", "--metrics is empty"),
    ("a=http://h:1/m,a=http://h:2/m", "broker label twice"),
])
def test_parse_endpoints_refuses(text, message):
    with pytest.raises(ParseError, match=message):
        parse_endpoints(text)


def test_a_collector_of_a_fleet_cluster_writes_its_name_and_old_files_stay_readable(tmp_path,
                                                                                   sandbox):
    """collect --all-clusters: every row carries the cluster (issue 29); a file written
    before the column existed reads beside a new one, its cluster null."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from quota_core.telemetry.schema import USAGE_COLUMNS

    scrape = Endpoints()
    scrape.answers = {"b1": series("b1", "alice", None, 1.0 * MiB, None), "b2": []}
    collector = make(tmp_path, sandbox, scrape, cluster="prod-eu")
    collector.snapshot(T0)
    collector.scrape_all(T0)
    assert collector.flush()
    old = tmp_path / "out" / "usage" / "date=2026-11-23" / "part-old.parquet"
    pq.write_table(pa.Table.from_pylist([{
        "ts": datetime(2026, 11, 23, 1, tzinfo=timezone.utc), "broker": "b9",
        "quota_type": "produce", "user": "bob", "client_id": None, "rate": 1.0,
        "throttle_ms": None, "interval_s": 10.0}]), old)
    assert [n for n, _ in USAGE_COLUMNS] == pq.read_schema(old).names  # the old shape
    import pyarrow.dataset as ds

    usage = ds.dataset(tmp_path / "out" / "usage", format="parquet", partitioning="hive",
                       schema=pq.read_schema(next(p for p in (tmp_path / "out" / "usage")
                                                  .rglob("part-2*.parquet")))).to_table()
    rows = {r["broker"]: r["cluster"] for r in usage.to_pylist()}
    assert rows == {"b1": "prod-eu", "b9": None}
    snaps = pd.read_parquet(tmp_path / "out" / "quotas")
    assert set(snaps.cluster) == {"prod-eu"}
