"""``kafka-client-quotas collect`` on a real broker that restarts mid-run.

The broker goes down for a while and comes back on the same ports: the collector logs the gap,
keeps going, and on SIGTERM flushes and exits 0; every sample it reported written is in the
Parquet files. Also a Kafka topic as the sink.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from localkafka import LocalBroker, free_port
from quota_core import Alteration, Entity, Op
from quota_core.backends.base import checked_alter
from quota_core.telemetry.schema import from_topic_value

from tests import ROOT

pytestmark = pytest.mark.kafka
REPO = ROOT
KiB = 1024


def _load(bootstrap: str, stop: threading.Event) -> None:
    """A librdkafka producer over a 20 KiB/s client-id quota, reconnecting across restarts."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "client.id": "collected",
                         "log_level": 0, "message.timeout.ms": 5000})
    while not stop.is_set():
        try:
            for _ in range(8):
                producer.produce("collect-proof", b"x" * 1024)
        except BufferError:
            pass
        producer.poll(0.1)
    producer.flush(2)


def _quota(bootstrap: str) -> None:
    from quota_core.backends.kafka import KafkaBackend

    with KafkaBackend(bootstrap) as backend:
        assert checked_alter(backend, [Alteration(Entity.of(client_id="collected"),
                                                  (Op.set("producer_byte_rate", 20 * KiB),))]).ok


def test_collector_survives_a_broker_restart_and_loses_nothing_it_reported(tmp_path):
    port, metrics_port = free_port(), free_port()
    broker = LocalBroker(tmp_path / "broker", port=port, metrics_port=metrics_port)
    out = tmp_path / "history"
    stop_load = threading.Event()
    collector = None
    try:
        broker.start(timeout=120)
        _quota(broker.bootstrap)
        load = threading.Thread(target=_load, args=(broker.bootstrap, stop_load), daemon=True)
        load.start()
        collector = subprocess.Popen(
            [sys.executable, "-m", "quota_core", "collect", "--metrics",
             f"b1={broker.metrics_url}", "--bootstrap-server", broker.bootstrap, "--to",
             str(out), "--every", "1", "--snapshot-every", "2", "--status-every", "2",
             "--timeout", "2"],
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(6)
        broker.stop()
        time.sleep(4)
        broker.start(timeout=120)  # same ports, fresh storage
        _quota(broker.bootstrap)
        time.sleep(8)
        collector.send_signal(signal.SIGTERM)
        _, err = collector.communicate(timeout=60)
    finally:
        stop_load.set()
        if collector is not None and collector.poll() is None:
            collector.kill()
        broker.stop()
    assert collector.returncode == 0, err
    assert "Traceback" not in err
    assert "b1 is down" in err and "b1 answers again" in err
    reported = [int(n.replace(",", "")) for n in
                re.findall(r"collect: ([\d,]+) samples and", err)]
    assert reported and reported[-1] > 0
    usage = pd.read_parquet(out / "usage")
    # Every sample reported written is on disk (the last status line is after the last flush).
    assert len(usage) == reported[-1]
    mine = usage[usage.client_id == "collected"].sort_values("ts")
    assert len(mine) >= 6 and mine.user.isna().all()
    gaps = mine.ts.diff().dt.total_seconds().dropna()
    assert gaps.max() >= 4  # the restart shows as a gap, not as made-up samples
    assert (mine.interval_s[1:].to_numpy() >= 0.5).all()
    quotas = pd.read_parquet(out / "quotas")
    assert '{"client-id":"collected"}' in set(quotas.entity)


def test_collector_writes_to_a_kafka_topic(kafka_broker, tmp_path):
    from confluent_kafka import Consumer

    topic = f"usage-{os.getpid()}-{int(time.time())}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "quota_core", "collect", "--metrics",
         f"b1={kafka_broker.metrics_url}", "--bootstrap-server", kafka_broker.bootstrap,
         "--to", f"kafka:{topic}", "--every", "0.5", "--status-every", "1"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(5)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    consumer = Consumer({"bootstrap.servers": kafka_broker.bootstrap, "group.id": topic,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    kinds: dict[str, int] = {}
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and "quota" not in kinds:
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            kind, row = from_topic_value(msg.value())
            kinds[kind] = kinds.get(kind, 0) + 1
            assert row["ts"].tzinfo is not None
    consumer.close()
    assert "quota" in kinds, err
