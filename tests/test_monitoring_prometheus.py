"""A real Prometheus scraping the console while a real broker throttles Kafka's own producer.

On the shared 3-broker cluster: an entry ``{user=ANONYMOUS, client-id=mon-…}`` (level 1)
limits ProducerPerformance to 64 KiB/s while it sends 320 KiB/s to a one-partition topic.
``kafka-client-quotas serve-metrics`` serves the join of the brokers' endpoints and the quota
set on 127.0.0.1; Debian's Prometheus (own config and data dir on 127.0.0.1) scrapes it and
evaluates monitoring/quota-alerts.yml (a copy whose throttling alert waits 3 s instead of
5 min: the promtool tests prove the 5 min). Through Prometheus' HTTP API: the throttled bucket
is there on the partition leader with its entry and level, its limit is the quota, its
utilisation went above 1, the throttling alert fires, and every Grafana panel's query
returns data. Figures land in ``artifacts/monitoring_prometheus.json``.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import pytest

from localkafka import tool_argv
from quota_core import Alteration, Entity, Op
from quota_core.backends.base import checked_alter

pytestmark = pytest.mark.kafka

REPO = Path(__file__).resolve().parent.parent
MONITORING = REPO / "monitoring"
ARTIFACTS = REPO / "artifacts"
PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
KiB = 1024


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(what: str, check, seconds: float, log: Path | None = None):
    deadline = time.monotonic() + seconds
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            tail = "" if log is None or not log.exists() else log.read_text()[-3000:]
            raise AssertionError(f"{what}: not within {seconds:g} s\n{tail}")
        time.sleep(0.5)


class PromAPI:
    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"

    def get(self, path: str, **params) -> dict:
        url = f"{self.base}{path}?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=10) as answer:
            body = json.load(answer)
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict]:
        return self.get("/api/v1/query", query=expr)["result"]

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.base}/-/ready", timeout=2) as answer:
                return answer.status == 200
        except OSError:
            return False


@pytest.fixture
def quota_entry(kafka_cluster):
    from confluent_kafka.admin import NewTopic
    from quota_core.backends.kafka import KafkaBackend

    client_id = f"mon-{uuid.uuid4().hex[:8]}"
    entry = Entity.of(user="ANONYMOUS", client_id=client_id)  # level 1: whatever else exists
    topic = f"monitoring-{uuid.uuid4().hex[:8]}"
    admin = kafka_cluster.admin()
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    leader = _wait("a leader for the topic", lambda: next(
        (str(p.leader) for p in admin.list_topics(topic, timeout=10).topics[topic]
         .partitions.values() if p.leader >= 0), None), 30)
    backend = KafkaBackend(kafka_cluster.bootstrap)
    assert checked_alter(backend, [Alteration(entry, (Op.set("producer_byte_rate", 64 * KiB),))]).ok
    try:
        yield client_id, entry, topic, leader
    finally:
        checked_alter(backend, [Alteration(entry, (Op.remove("producer_byte_rate"),))])
        admin.delete_topics([topic])
        backend.close()


def test_prometheus_sees_the_throttled_bucket_its_entry_and_limit_and_fires_the_alert(
        kafka_cluster, quota_entry, tmp_path):
    client_id, entry, topic, leader = quota_entry
    procs: list[subprocess.Popen] = []
    figures: dict = {"client_id": client_id, "leader": leader}
    try:
        # The console's endpoint, on loopback, over the cluster's three JMX endpoints.
        console_log = tmp_path / "serve-metrics.log"
        with open(console_log, "w") as log:
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "quota_core", "serve-metrics", "--listen", "127.0.0.1:0",
                 "--bootstrap-server", kafka_cluster.bootstrap,
                 "--metrics", ",".join(kafka_cluster.metrics_urls)],
                stderr=log, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}))
        served = _wait("serve-metrics serving", lambda: re.search(
            r"serving http://(127\.0\.0\.1:\d+)/metrics", console_log.read_text()), 30,
            console_log).group(1)

        # Prometheus: 127.0.0.1 only, its own config, rules and data dir.
        rules = (MONITORING / "quota-alerts.yml").read_text()
        assert rules.count("for: 5m") >= 1
        fast = rules.replace("expr: kafka_client_quota_throttled == 1\n        for: 5m",
                             "expr: kafka_client_quota_throttled == 1\n        for: 3s")
        assert fast != rules
        (tmp_path / "rules.yml").write_text(fast)
        (tmp_path / "prometheus.yml").write_text(
            "global:\n  scrape_interval: 2s\n  scrape_timeout: 2s\n  evaluation_interval: 1s\n"
            "rule_files: [rules.yml]\n"
            "scrape_configs:\n  - job_name: kafka-client-quotas\n"
            f"    static_configs:\n      - targets: ['{served}']\n")
        port = _free_port()
        prom_log = tmp_path / "prometheus.log"
        with open(prom_log, "w") as log:
            procs.append(subprocess.Popen(
                [PROMETHEUS, f"--config.file={tmp_path / 'prometheus.yml'}",
                 f"--storage.tsdb.path={tmp_path / 'data'}",
                 f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
                stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path))
        api = PromAPI(port)
        _wait("Prometheus ready", api.ready, 30, prom_log)

        # Kafka's own producer, five times over its quota.
        procs.append(subprocess.Popen(tool_argv(
            "org.apache.kafka.tools.ProducerPerformance", "--topic", topic,
            "--num-records", "100000", "--record-size", "1024", "--throughput", "320",
            "--producer-props", f"bootstrap.servers={kafka_cluster.bootstrap}",
            f"client.id={client_id}", "acks=1"),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

        mine = f'{{client_id="{client_id}",user="ANONYMOUS"}}'
        alert_query = (f'ALERTS{{alertname="KafkaClientThrottled",alertstate="firing",'
                       f'client_id="{client_id}"}}')
        firing = _wait("the throttling alert firing", lambda: api.query(alert_query), 60,
                       console_log)
        over = _wait("utilisation above 1", lambda: api.query(
            f"max_over_time(kafka_client_quota_utilisation_ratio{mine}[1m]) > 1"), 30)

        alert = firing[0]["metric"]
        assert (alert["broker"], alert["entry"], alert["level"], alert["quota_type"]) == (
            leader, str(entry), "1", "produce")
        throttled = api.query(f"kafka_client_quota_throttled{mine} == 1")
        assert [s["metric"]["broker"] for s in throttled] == [leader]
        limit = api.query(f"kafka_client_quota_limit_bytes_per_second{mine}")
        assert [(s["metric"]["broker"], s["metric"]["entry"], s["metric"]["level"],
                 float(s["value"][1])) for s in limit] == [(leader, str(entry), "1", 64 * KiB)]
        configured = api.query(f'kafka_client_quota_configured_bytes_per_second{mine}')
        assert [float(s["value"][1]) for s in configured] == [64 * KiB]
        assert float(over[0]["value"][1]) > 1
        scraped = {s["metric"]["broker"]: s["value"][1]
                   for s in api.query("quota_console_broker_scraped")}
        assert scraped == {"1": "1", "2": "1", "3": "1"}
        figures.update({
            "query": f"kafka_client_quota_utilisation_ratio{mine}",
            "answer": api.query(f"kafka_client_quota_utilisation_ratio{mine}"),
            "max_utilisation_1m": float(over[0]["value"][1]), "alert": alert,
            "throttle_time_seconds": api.query(
                f"kafka_client_quota_throttle_time_seconds{mine}")})

        # Every panel of the board: its query answers with data.
        board = json.loads((MONITORING / "grafana-quotas.json").read_text())
        # the cluster variable at "All" (one cluster: its series have no cluster label)
        empty = [(p["title"], t["expr"]) for p in board["panels"] for t in p["targets"]
                 if not api.query(t["expr"].replace("$cluster", ".*"))]
        assert not empty, f"panels whose query returns nothing: {empty}"
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in reversed(procs):
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        ARTIFACTS.mkdir(exist_ok=True)
        (ARTIFACTS / "monitoring_prometheus.json").write_text(json.dumps(figures, indent=2))
    assert procs[0].returncode == 0, console_log.read_text()
