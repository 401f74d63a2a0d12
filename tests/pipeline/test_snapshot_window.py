"""The quota window travels with the data (issue 28): the collector writes the brokers' quota
window (``quota.window.num`` × ``quota.window.size.seconds``, per broker) into the quota
snapshot, and the Spark throttle estimate uses it, not Kafka's default of 11 × 1 s. Old
snapshots without it fall back to the defaults and say so. The real cluster's case is in
tests/truth/test_broker_settings_kafka.py; the Spark case is marked ``spark``."""
from __future__ import annotations

from datetime import datetime, timezone

import pandas as pd
import pytest

from quota_core.throttling.brokers import BrokerSettings, ClusterSettings
from quota_core.domain.entities import Entity
from quota_core.errors import BackendError
from quota_core.telemetry.schema import (WINDOW_KEYS, snapshot_rows, snapshots_to_quotas,
                                         window_rows, windows_from_rows)
from quota_core.throttling.throttle import QuotaWindow, estimate_throttle

TS = datetime(2026, 11, 23, 12, 0, tzinfo=timezone.utc)
P = "producer_byte_rate"
ALICE = Entity.of(user="alice")


def five_windows(*differ: str) -> ClusterSettings:
    """Two brokers with quota.window.num=5 (as tests/settings_fixtures.py's cluster), any
    in ``differ`` with 4 × 3 s instead."""
    def broker(node):
        num, size = ("4", "3") if node in differ else ("5", "1")
        return BrokerSettings(node, {"quota.window.num": num, "quota.window.size.seconds": size})
    return ClusterSettings((broker("1"), broker("2"), broker("3")))


def test_the_window_round_trips_through_snapshot_rows_per_broker():
    rows = snapshot_rows({ALICE: {P: 1e6}}, TS) + window_rows(five_windows("3"), TS)
    found = windows_from_rows(rows)
    assert found.carried
    assert (found.cluster.samples, found.cluster.sample_s) == (5, 1)
    assert (found.of("1").samples, found.of("3").samples, found.of("3").sample_s) == (5, 4, 3)
    assert found.of("127.0.0.1:7071") == found.cluster  # a label that is no node id
    assert "quota window 5 × 1 s, from the quota snapshots (broker 3 4 × 3 s)" == found.text()
    # the window's rows are not quotas
    assert snapshots_to_quotas(rows) == {TS: {ALICE: {P: 1e6}}}
    assert {r["key"] for r in rows if r["entity"] and "broker" in r["entity"]} == set(WINDOW_KEYS)


def test_old_snapshots_without_a_window_fall_back_to_kafkas_defaults_and_say_so():
    found = windows_from_rows(snapshot_rows({ALICE: {P: 1e6}}, TS))
    assert not found.carried and (found.of("1").samples, found.of("1").sample_s) == (11, 1)
    assert "Kafka's defaults: the quota snapshots carry no quota window" in found.text()


def test_the_latest_snapshot_with_a_window_wins():
    later = datetime(2026, 11, 24, tzinfo=timezone.utc)
    rows = window_rows(ClusterSettings(), TS) + window_rows(five_windows(), later)
    assert windows_from_rows(rows).cluster.samples == 5


def test_the_collector_writes_the_window_with_the_snapshot_and_again_when_it_changes(tmp_path):
    from quota_core.telemetry.collector import Collector

    settings = [five_windows()]
    logs: list[str] = []

    def read_settings():
        if isinstance(settings[0], Exception):
            raise settings[0]
        return settings[0]

    collector = Collector([], lambda: {ALICE: {P: 1e6}}, sink=None, scrape=None,
                          settings=read_settings, log=logs.append)
    t0 = TS.timestamp()
    collector.snapshot(t0)
    collector.snapshot(t0 + 60)  # nothing changed: nothing written
    assert len({r["ts"] for r in collector._snapshots}) == 1
    assert windows_from_rows(collector._snapshots).cluster.samples == 5
    settings[0] = BackendError("the brokers do not answer")
    collector.snapshot(t0 + 120)
    collector.snapshot(t0 + 180)
    assert len({r["ts"] for r in collector._snapshots}) == 1
    assert sum("cannot read the brokers' quota window" in line for line in logs) == 1
    settings[0] = five_windows("2")  # broker 2 changed its window: a new snapshot
    collector.snapshot(t0 + 240)
    assert len({r["ts"] for r in collector._snapshots}) == 2
    assert windows_from_rows(collector._snapshots).of("2").sample_s == 3


@pytest.mark.spark
@pytest.mark.parametrize("carried", [True, False])
def test_the_spark_estimate_uses_the_window_the_snapshot_carried(spark, carried):
    """A snapshot carrying quota.window.num=5: the windows table's est_throttle_ms is what the
    CLI estimates with the cluster's window (4,000 ms at twice the quota, not 10,000); a
    snapshot written before the window travelled gives Kafka's default."""
    from pipeline import analysis
    from pipeline.resolve import distinct_buckets, with_key
    from pipeline.snapshots import entity_json, split_windows, versions_from_rows, with_version

    MiB = 2**20
    rows = snapshot_rows({ALICE: {P: MiB, "request_percentage": 50.0}}, TS)
    if carried:
        rows += window_rows(five_windows("3"), TS)
    quota_rows = spark.createDataFrame(pd.DataFrame(rows),
                                       "ts timestamp, entity string, key string, value double")
    quota_rows, found = split_windows(quota_rows, "test snapshots")
    assert found.carried is carried
    versions = versions_from_rows(quota_rows, "test snapshots")
    assert versions.sets == [{ALICE: {P: MiB, "request_percentage": 50.0}}]
    later = pd.Timestamp(TS) + pd.Timedelta(seconds=30)
    samples = pd.DataFrame({
        "ts": [later] * 4, "broker": ["1", "3", "1", "127.0.0.1:7071"],
        "quota_type": ["produce", "produce", "request", "produce"],
        "user": ["alice"] * 4, "client_id": [None] * 4,
        "rate": [2.0 * MiB, 2.0 * MiB, 400.0, 1.5 * MiB], "throttle_ms": [None] * 4,
        "interval_s": [10.0] * 4})
    sdf = spark.createDataFrame(samples, "ts timestamp, broker string, quota_type string, "
                                "user string, client_id string, rate double, "
                                "throttle_ms double, interval_s double")
    keyed = with_key(with_version(sdf, versions))
    win = analysis.windows(keyed, distinct_buckets(keyed), versions, None,
                           found).toPandas().sort_values(["broker", "key"])
    for _, row in win.iterrows():
        window = found.of(row["broker"])
        cli = estimate_throttle(row["key"], row["rate"], row["quota"], window=window)
        assert row["est_throttle_ms"] == cli.throttle_ms, row.to_dict()
    got = {(r["broker"], r["key"]): r["est_throttle_ms"] for _, r in win.iterrows()}
    if carried:
        # (5 - 1) × 1 s on brokers 1 and the unnamed one, (4 - 1) × 3 s on broker 3; a request
        # throttle capped at one sample (1 s)
        assert got == {("1", P): 4_000, ("3", P): 9_000, ("1", "request_percentage"): 1_000,
                       ("127.0.0.1:7071", P): 2_000}
    else:
        assert got[("1", P)] == 10_000 and got[("127.0.0.1:7071", P)] == 5_000
    assert entity_json(ALICE) == '{"user":"alice"}'
