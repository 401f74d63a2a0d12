"""Client telemetry on the session broker: subscriptions and what real clients push.

* Differential: a subscription ``telemetry subscribe`` writes is what Kafka's own
  ``kafka-client-metrics.sh --describe`` (``org.apache.kafka.tools.ClientMetricsCommand``, one
  JVM) reads back, and one that ClientMetricsCommand ``--alter`` writes (one JVM) is what
  ``telemetry list --output json`` reads back.
* Proof: under a 1 s subscription, a confluent-kafka producer (librdkafka) and Kafka's
  ``ProducerPerformance`` (the Java client, over a 200 KB/s produce quota) push; the
  broker's metrics endpoint (the plugin, through the JMX exporter agent) shows both, and
  ``client_reports`` reads their client id, software name and version, the throttle time they
  were told to wait and their request latency to the broker.
"""
from __future__ import annotations

import io
import json
import subprocess
import threading
import time

import pytest

from localkafka import tool_argv
from quota_core.cli import main as cli
from quota_core.domain.client_metrics import Subscription, subscription_from_configs
from quota_core.telemetry import client_reports, scrape, telemetry_collected

pytestmark = pytest.mark.kafka

COMMAND = "org.apache.kafka.tools.ClientMetricsCommand"


def ours(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(["telemetry", *args], out, err)
    return code, out.getvalue(), err.getvalue()


def kafkas(bootstrap: str, *args: str) -> str:
    done = subprocess.run(tool_argv(COMMAND, "--bootstrap-server", bootstrap, *args),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _described(text: str) -> dict[str, Subscription]:
    """ClientMetricsCommand --describe's text: 'Client metrics configs for N are:' + k=v lines."""
    found: dict[str, dict[str, str]] = {}
    name = None
    for line in text.splitlines():
        if line.startswith("Client metrics configs for ") and line.endswith(" are:"):
            name = line[len("Client metrics configs for "):-len(" are:")]
            found[name] = {}
        elif name is not None and "=" in line:
            key, _, value = line.strip().partition("=")
            found[name][key] = value
    return {n: subscription_from_configs(n, c) for n, c in found.items()}


def test_what_we_write_kafka_reads_and_the_reverse(kafka_broker):
    bs = kafka_broker.bootstrap
    mine = "t1 ours/α"
    code, _, err = ours("subscribe", mine, "--metrics", "org.apache.kafka.producer.,org.apache.kafka.consumer.node",
                        "--match", "client_id=batch-.*", "--match", "client_software_name=apache-kafka-java|librdkafka",
                        "--interval-ms", "2500", "--bootstrap-server", bs)
    assert code == 0, err
    theirs = "t1 kafka's"
    try:
        # one JVM: Kafka writes `theirs`, then describes both (ours was written before it)
        kafkas(bs, "--alter", "--name", theirs, "--metrics", "org.apache.kafka.consumer.,*",
               "--match", "client_id=etl-[0-9]+,client_source_port=9\\d{3}", "--interval", "60000")
        described = _described(kafkas(bs, "--describe"))
        assert described[mine] == Subscription(
            mine, ("org.apache.kafka.producer.", "org.apache.kafka.consumer.node"),
            {"client_id": "batch-.*", "client_software_name": "apache-kafka-java|librdkafka"}, 2500)
        code, out, err = ours("list", "--output", "json", "--bootstrap-server", bs)
        assert code == 0, err
        listed = {s["name"]: s for s in json.loads(out)}
        assert listed[theirs] == {"name": theirs, "metrics": ["org.apache.kafka.consumer.", "*"],
                                  "match": {"client_id": "etl-[0-9]+", "client_source_port": "9\\d{3}"},
                                  "interval_ms": 60000}
        assert listed[mine] == described[mine].as_dict()
    finally:
        for name in (mine, theirs):
            ours("unsubscribe", name, "--bootstrap-server", bs)
    code, out, _ = ours("list", "--output", "json", "--bootstrap-server", bs)
    assert code == 0 and not {mine, theirs} & {s["name"] for s in json.loads(out)}


def test_a_cluster_without_the_plugin_is_named_and_the_rest_works(kafka_broker, monkeypatch):
    from quota_core.backends import kafka_client_metrics

    code, _, err = ours("list", "--bootstrap-server", kafka_broker.bootstrap)
    assert code == 0 and "not collected" not in err  # the session broker has the plugin
    # a broker without it advertises no GetTelemetrySubscriptions (see test_client_metrics.py)
    monkeypatch.setattr(kafka_client_metrics, "telemetry_collected", lambda backend: False)
    code, out, err = ours("list", "--bootstrap-server", kafka_broker.bootstrap)
    assert code == 0 and out
    assert "client telemetry is not collected on this cluster" in err and err.count("\n") == 1


def _rdkafka_load(bootstrap: str, stop: threading.Event) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "client.id": "t1-rdkafka",
                         "linger.ms": 5, "log_level": 3})
    while not stop.is_set():
        producer.produce("t1-telemetry", b"x" * 200)
        producer.poll(0.005)
    producer.flush(5)


def test_real_clients_push_and_the_endpoint_shows_them(kafka_broker):
    import confluent_kafka

    assert tuple(int(x) for x in confluent_kafka.libversion()[0].split(".")[:2]) >= (2, 5)
    bs = kafka_broker.bootstrap
    name = "t1-proof"
    code, _, err = ours("subscribe", "--default", name, "--interval-ms", "1000",
                        "--bootstrap-server", bs)
    assert code == 0 and "not collected" not in err, err
    # the Java client over a produce quota: what it reports waiting must be more than nothing
    assert cli.main(["--bootstrap-server", bs, "--alter", "--client-id", "t1-java", "--add",
                     "producer_byte_rate=200KB"], io.StringIO(), io.StringIO()) == 0
    stop = threading.Event()
    rdkafka = threading.Thread(target=_rdkafka_load, args=(bs, stop), daemon=True)
    java = subprocess.Popen(tool_argv(
        "org.apache.kafka.tools.ProducerPerformance", "--topic", "t1-telemetry", "--num-records",
        "60000", "--record-size", "100", "--throughput", "10000", "--command-property",
        f"bootstrap.servers={bs}", "client.id=t1-java"),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rdkafka.start()
    try:
        # up to 30 s: a JVM starting on a loaded machine, then a throttled client pushes only
        # once its wait is over (a fresh-clone run missed the Java push within 15 s)
        deadline, seen = time.monotonic() + 30, {}
        while time.monotonic() < deadline:
            parsed = scrape(kafka_broker.metrics_url)
            assert telemetry_collected(parsed.client_samples)
            seen = {r.client_id: r for r in client_reports(parsed.client_samples, 1)}
            if {"t1-java", "t1-rdkafka"} <= set(seen) and all(
                    seen[c].request_latency_ms_avg for c in ("t1-java", "t1-rdkafka")) \
                    and seen["t1-java"].produce_throttle_ms_max:
                break
            time.sleep(0.3)
    finally:
        stop.set()
        rdkafka.join(10)
        java.kill()
        java.wait()
        ours("unsubscribe", name, "--bootstrap-server", bs)
        cli.main(["--bootstrap-server", bs, "--alter", "--client-id", "t1-java", "--delete",
                  "producer_byte_rate"], io.StringIO(), io.StringIO())
    java_report, rd_report = seen.get("t1-java"), seen.get("t1-rdkafka")
    assert java_report and rd_report, f"pushed: {sorted(seen)}"
    assert java_report.software_name == "apache-kafka-java"
    assert java_report.software_version == "4.3.1"
    assert rd_report.software_name == "confluent-kafka-python"
    assert rd_report.software_version.startswith(confluent_kafka.version()[0])
    # throttled by the broker, the Java client says how long it was told to wait; librdkafka,
    # under no quota, waited for nothing. (A throttled client sends nothing, pushes included,
    # until its throttle time is over: librdkafka flooding its quota pushed again only ~10 s
    # later, which is why the plugin keeps an instance at least 15 s.)
    assert java_report.produce_throttle_ms_max > 0, java_report
    assert 0 <= java_report.produce_throttle_ms_avg <= java_report.produce_throttle_ms_max
    assert rd_report.produce_throttle_ms_avg == 0.0 and rd_report.produce_throttle_ms_max == 0.0
    for report in (java_report, rd_report):
        assert report.node_id == 1 and report.principal == "User:ANONYMOUS"
        assert report.fetch_throttle_ms_avg is None  # a producer fetches nothing
        assert set(report.request_latency_ms_avg) == {1}  # the broker, not bootstrap pseudo-nodes
        assert report.request_latency_ms_avg[1] >= 0
        # a throttled client sends nothing, pushes included, until its throttle time is over
        assert 0 <= report.last_push_age_s < 15


def test_the_demo_subscribes_its_clients_at_its_interval_before_its_load_starts(
        kafka_broker, tmp_path, capsys):
    """``make run`` (local and --fleet) starts the demo load through start_demo_load, which
    writes the default subscription at DEMO_PUSH_MS first: a client asks for its
    subscriptions as it starts, so the demo clients push from their first seconds."""
    import importlib.util
    from dataclasses import replace

    from localkafka.demo import DEMO_PUSH_MS
    from quota_core.backends.kafka_client_metrics import delete_subscription, describe_subscriptions
    from quota_core.backends.open import open_backend
    from quota_core.domain.client_metrics import DEFAULT_SUBSCRIPTION
    from tests import ROOT

    spec = importlib.util.spec_from_file_location("run_dashboard",
                                                  ROOT / "scripts" / "run_dashboard.py")
    run_dashboard = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run_dashboard)
    with open_backend(bootstrap_servers=kafka_broker.bootstrap) as backend:
        try:
            # tmp_path holds no local cluster: the real load starts, says so and exits 1
            load = run_dashboard.start_demo_load(backend, tmp_path, [1, 2, 3], " on prod")
            assert load.wait(60) == 1
            assert describe_subscriptions(backend, [DEFAULT_SUBSCRIPTION.name]) == [
                replace(DEFAULT_SUBSCRIPTION, interval_ms=DEMO_PUSH_MS)]
            assert DEMO_PUSH_MS == 10_000  # what the README's demo paragraph and docs say
            err = capsys.readouterr().err
            assert err.index("push their metrics every 10 s") < err.index(
                "demo load started on prod")
        finally:
            delete_subscription(backend, DEFAULT_SUBSCRIPTION.name)
