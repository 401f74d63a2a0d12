"""``--resolve --metrics … --output json`` carries the client's own side (issue 30; the
contract's "Client view"): three tiny real HTTP endpoints, one per broker, serving the
quota series and the client-telemetry plugin's series as a broker's exporter does."""
from __future__ import annotations

import json

import pytest

from quota_core import Entity
from tests.cli_steps import run, sandbox_with
from tests.cli.test_spread_cli import serve

MiB = 1024 * 1024
P = "producer_byte_rate"
QUOTAS = {Entity.of(user="alice"): {P: 2 * MiB}}
LABELS = ('client_instance_id="AAAAAAAAAAAAAAAAAAAAAQ",client_id="batch-export",'
          'principal="User:alice",client_software_name="apache-kafka-java",'
          'client_software_version="4.3.1"')


def telemetry(avg: float, mx: float) -> str:
    return ("kafka_client_telemetry_plugin_instances 1.0\n"
            f"kafka_client_telemetry_push_age_seconds{{{LABELS}}} 3.5\n"
            "kafka_client_telemetry_value{metric=\"org.apache.kafka.producer.produce.throttle."
            f"time.avg\",{LABELS}}} {avg}\n"
            "kafka_client_telemetry_value{metric=\"org.apache.kafka.producer.produce.throttle."
            f"time.max\",{LABELS}}} {mx}\n"
            "kafka_client_telemetry_value{metric=\"org.apache.kafka.producer.node.request."
            f"latency.avg\",{LABELS},destination_node_id=\"node-2\"}} 505.0\n")


THROTTLED = ('kafka_server_produce_byte_rate{user="alice"} 2300000.0\n'
             'kafka_server_produce_throttle_time{user="alice"} 480.0\n')


def endpoints_of(bodies: dict[str, str]):
    servers = [serve(body) for body in bodies.values()]
    text = ",".join(f"{label}=http://127.0.0.1:{s.server_address[1]}/metrics"
                    for label, s in zip(bodies, servers))
    return text, servers


@pytest.fixture
def cluster():
    made = []

    def start(bodies):
        text, servers = endpoints_of(bodies)
        made.extend(servers)
        return text
    yield start
    for s in made:
        s.shutdown()
        s.server_close()


def resolve(tmp_path, endpoints, fmt="json"):
    store = sandbox_with(tmp_path / "q.sqlite", QUOTAS)
    return run("--sandbox", store, "--resolve", "--user", "alice", "--client-id",
               "batch-export", "--metrics", endpoints, "--output", fmt)


def test_the_client_object_holds_the_contract_s_shape(tmp_path, cluster):
    endpoints = cluster({"1": "", "2": THROTTLED + telemetry(480.0, 950.0), "3": ""})
    code, out, err = resolve(tmp_path, endpoints)
    assert code == 0, err
    live = json.loads(out)["quotas"][P]["live"]
    assert live["throttled"] is True
    client = live["client"]
    assert set(client) == {"reported", "instances", "agreement", "sentence"}
    assert client["reported"] is True and client["agreement"] == "agree"
    assert client["instances"] == [{
        "instance_id": "AAAAAAAAAAAAAAAAAAAAAQ", "client_id": "batch-export",
        "software_name": "apache-kafka-java", "software_version": "4.3.1",
        "throttle_ms_avg": 480.0, "throttle_ms_max": 950.0, "last_push_age_s": 3.5,
        "brokers": {"2": {"request_latency_ms_avg": 505.0}}}]
    assert client["sentence"] == ("the broker throttles this bucket on broker 2, and the client "
                                  "reports waiting 480 ms per request there (at most 950 ms)")
    code, out, err = resolve(tmp_path, endpoints, "text")
    assert "  client: the broker throttles this bucket on broker 2" in out


def test_a_client_that_reports_no_throttle_and_a_cluster_without_the_plugin(tmp_path, cluster):
    endpoints = cluster({"1": "", "2": THROTTLED + telemetry(0.0, 0.0), "3": ""})
    code, out, err = resolve(tmp_path, endpoints)
    client = json.loads(out)["quotas"][P]["live"]["client"]
    assert client["agreement"] == "client-not-throttled"
    assert "it may ignore throttling (clients before KIP-219 do)" in client["sentence"]

    endpoints = cluster({"1": "", "2": THROTTLED, "3": ""})
    code, out, err = resolve(tmp_path, endpoints)
    client = json.loads(out)["quotas"][P]["live"]["client"]
    assert client == {"reported": False, "instances": [], "agreement": "no-telemetry",
                      "sentence": "client telemetry is not collected on this cluster (no broker "
                                  "shows pushed client metrics): the client's side is unknown"}


def test_a_broker_not_read_claims_no_agreement(tmp_path, cluster):
    # Broker 2 (the one that throttles) is down: the broker side is unknown.
    endpoints = cluster({"1": telemetry(480.0, 950.0), "3": ""})
    endpoints += ",2=http://127.0.0.1:9/metrics"
    code, out, err = resolve(tmp_path, endpoints)
    assert code == 1
    live = json.loads(out)["quotas"][P]["live"]
    assert live["throttled"] is None
    assert live["client"]["agreement"] is None
    assert "no agreement is claimed" in live["client"]["sentence"]


def test_lint_metrics_runs_the_live_rules(tmp_path, cluster):
    endpoints = cluster({"1": "", "2": THROTTLED + telemetry(0.0, 0.0), "3": ""})
    store = sandbox_with(tmp_path / "q.sqlite", QUOTAS)
    code, out, err = run("lint", "--sandbox", store, "--metrics", endpoints, "--output", "json")
    assert code == 2, err
    found = [f for f in json.loads(out) if f["rule"] == "client-ignores-throttle"]
    assert [(f["entity"], f["key"], f["severity"]) for f in found] == [
        ({"user": "alice"}, P, "warning")]
    assert "ran client-ignores-throttle on --metrics (3 endpoints read)" in err
    # Without the plugin on any endpoint: one info finding, named.
    endpoints = cluster({"1": "", "2": THROTTLED, "3": ""})
    code, out, err = run("lint", "--sandbox", store, "--metrics", endpoints, "--output", "json",
                         "--fail-on", "info")
    assert code == 2, err
    assert [(f["rule"], f["entity"]) for f in json.loads(out)
            if f["rule"] == "no-telemetry-subscription"] == [
        ("no-telemetry-subscription", None)]


def test_the_collector_keeps_the_client_reported_throttle_per_sample(tmp_path):
    """The usage samples carry client_throttle_ms (what the bucket's clients report), written
    to Parquet; a file written before the column existed stays readable."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from quota_core.lint.history_files import read_usage
    from quota_core.telemetry.collector import Collector, parse_endpoints
    from quota_core.telemetry.parse import parse_metrics
    from quota_core.telemetry.sinks import ParquetSink

    bodies = {"1": 'kafka_server_app_info_start_time_ms{node_id="1"} 1.0\n' +
              telemetry(480.0, 950.0),  # the client pushes to broker 1 ...
              "2": 'kafka_server_app_info_start_time_ms{node_id="2"} 1.0\n' + THROTTLED}
    endpoints = parse_endpoints(",".join(f"{b}=http://127.0.0.1:1/{b}" for b in bodies))
    sink = ParquetSink(tmp_path / "h")
    collector = Collector(endpoints, lambda: QUOTAS, sink,
                          lambda url, label, timeout: parse_metrics(bodies[url[-1]], label),
                          log=lambda line: None)
    import time
    now = time.time()
    collector.snapshot(now)
    collector.scrape_all(now)
    assert collector.flush()
    table = pq.read_table(tmp_path / "h" / "usage").to_pandas()
    row = table[table["user"] == "alice"].iloc[0]
    # ... and is throttled by broker 2: its sample there carries what the client reports.
    assert (row["broker"], row["throttle_ms"], row["client_throttle_ms"]) == ("2", 480.0, 480.0)

    # An old file without the column: lint's reader still reads the history.
    old = table.drop(columns=["client_throttle_ms", "date"])
    folder = tmp_path / "h" / "usage" / f"date={row['ts'].date().isoformat()}"
    pq.write_table(pa.Table.from_pandas(old, preserve_index=False), folder / "part-old.parquet")
    assert len(read_usage(tmp_path / "h", 7)) == 2 * len(old)
