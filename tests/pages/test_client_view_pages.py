"""What the clients report (KIP-714, issue 30) on Resolve's live panel and Throttled now
(AppTest), against three real metrics endpoints (tiny ``http.server``s on 127.0.0.1, one per
broker) serving the quota series and the client-telemetry plugin's series: per client
instance its throttle time, latency per broker, software and last push, and the sentence;
names shown as text."""
from __future__ import annotations

import time

import pytest

from quota_core.backends.sandbox import SandboxBackend
from tests.app_steps import run_app, texts
from tests.pages.test_app import env  # noqa: F401  (fixture)
from tests.cli.test_client_view_cli import QUOTAS, THROTTLED, endpoints_of

ODD = "<b>x</b>](http://evil)"
LABELS = ('client_instance_id="AAAAAAAAAAAAAAAAAAAAAQ",client_id="batch-export",'
          'principal="User:alice",client_software_name="apache-kafka-java",'
          'client_software_version="4.3.1"')
ODD_LABELS = (f'client_instance_id="CCCCCCCCCCCCCCCCCCCCCQ",client_id="{ODD}",'
              'principal="User:alice",client_software_name="librdkafka",'
              'client_software_version="2.12.1"')


def _values(labels: str, avg: float, mx: float) -> str:
    metric = "org.apache.kafka.producer.produce.throttle.time"
    return (f"kafka_client_telemetry_push_age_seconds{{{labels}}} 3.5\n"
            f'kafka_client_telemetry_value{{metric="{metric}.avg",{labels}}} {avg}\n'
            f'kafka_client_telemetry_value{{metric="{metric}.max",{labels}}} {mx}\n'
            'kafka_client_telemetry_value{metric="org.apache.kafka.producer.node.request.'
            f'latency.avg",{labels},destination_node_id="node-2"}} 505.0\n')


BODY_2 = (THROTTLED + "kafka_client_telemetry_plugin_instances 2.0\n"
          + _values(LABELS, 480.0, 950.0) + _values(ODD_LABELS, 300.0, 600.0))
SENTENCE = ("the broker throttles this bucket on broker 2, and 2 of its 2 client instances "
            "report waiting 480 ms per request there (at most 950 ms)")


@pytest.fixture
def cluster(env, tmp_path):
    text, servers = endpoints_of({"1": "", "2": BODY_2, "3": ""})
    path = tmp_path / "quotas.sqlite"
    with SandboxBackend(path) as backend:
        backend.replace_all(QUOTAS)
    env.setenv("QUOTA_SANDBOX", str(path))
    env.setenv("QUOTA_METRICS", text)
    env.setenv("QUOTA_LIVE_EVERY", "0.5")
    yield text
    for s in servers:
        s.shutdown()
        s.server_close()


def _wait_for(at, what, seconds=20.0):
    deadline = time.monotonic() + seconds
    while True:
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        if what(at):
            return
        assert time.monotonic() < deadline, texts(at.error)
        time.sleep(0.5)


def clients(at):
    found = [d.value for d in at.dataframe if "throttle avg" in d.value.columns]
    return found[0] if found else None


def _check(at, label: str) -> None:
    table = clients(at).set_index("client id")
    assert sorted(table.index) == sorted(["batch-export", ODD])  # raw, as the client named it
    row = table.loc["batch-export"]
    assert (row["software"], row["throttle avg"], row["throttle max"]) == \
        ("apache-kafka-java 4.3.1", "480 ms", "950 ms")
    assert row["latency per broker"] == "2: 505 ms"
    assert row["last push"] == "4 s ago"  # 3.5 s, as the endpoint says
    said = texts(at.markdown)
    assert f"{label}: {SENTENCE}" in said
    assert any(t.startswith("As of ") and "last push" in t for t in texts(at.caption))


def test_throttled_now_shows_what_each_client_reports(cluster):
    at = run_app("pages/throttled.py")
    _wait_for(at, lambda a: clients(a) is not None)
    _check(at, "producer_byte_rate {user=alice}")


def test_resolve_live_panel_shows_what_each_client_reports(cluster):
    at = run_app("pages/resolve.py", query={"user": "alice", "client_id": "batch-export"})
    _wait_for(at, lambda a: clients(a) is not None)
    _check(at, "producer_byte_rate {user=alice}")
