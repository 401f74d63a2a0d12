"""Which brokers the console watches, on a real 3-broker cluster: each broker enforces on its own,
so a broker without a metrics endpoint is named (never silently left out), and every endpoint's
figures carry the node id the broker itself reports."""
from __future__ import annotations

import json
import time
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from quota_core.throttling.coverage import (endpoint_address, endpoints_from_template, unwatched,
                                            unwatched_sentence)
from quota_core.errors import ParseError
from tests.cli_steps import run
from tests.pages.test_app import env  # noqa: F401  (fixture)


# -- pure -------------------------------------------------------------------------------------
def test_unwatched_brokers_in_the_clusters_order():
    assert unwatched(["1", "2", "3", "10"], ["3", "1"]) == ["2", "10"]
    assert unwatched(["1"], ["1", "127.0.0.1:7071"]) == []
    assert unwatched_sentence("3") == "broker 3: no metrics endpoint given: its throttling is not visible"
    assert "not answering: 10.0.0.3:7071" in unwatched_sentence("3", ["10.0.0.3:7071"])


def test_a_template_gives_one_endpoint_per_broker():
    text = endpoints_from_template("http://{host}:7071/metrics?node={id}", ["1", "2"],
                                   ["kafka-a.example", "fe80::1"])
    assert text == ("http://kafka-a.example:7071/metrics?node=1,"
                    "http://[fe80::1]:7071/metrics?node=2")
    assert endpoint_address("http://[fe80::1]:7071/metrics") == "fe80::1:7071"


@pytest.mark.parametrize("template,says", [
    ("http://{hostname}:7071/metrics", "has {hostname}: use {host}"),
    ("http://kafka:7071/metrics", "has no placeholder"),
    ("http://{host:7071/metrics", "write placeholders as {host} and {id}"),
    ("ftp://{host}:7071/metrics", "give an http(s) URL"),
])
def test_a_malformed_template_is_refused_naming_it(template, says):
    with pytest.raises(ParseError, match=None) as info:
        endpoints_from_template(template, ["1"], ["h"])
    assert says in str(info.value) and repr(template) in str(info.value)


def test_the_cli_refuses_a_template_without_a_cluster(tmp_path):
    code, _, err = run("--sandbox", str(tmp_path / "s.db"), "--throttled",
                       "--metrics-template", "http://{host}:7071/metrics")
    assert code == 2 and "--metrics-template needs --bootstrap-server" in err
    code, _, err = run("--bootstrap-server", "127.0.0.1:1", "--throttled",
                       "--metrics-template", "http://{nope}:7071/metrics")
    assert code == 2 and "{nope}" in err


# -- the real cluster -------------------------------------------------------------------------
@pytest.fixture
def traffic_on_every_broker(kafka_cluster):
    """A client id with a quota, producing to one partition led by each broker."""
    client = f"cov-{uuid.uuid4().hex[:8]}"
    admin = kafka_cluster.admin()
    topic = f"{client}-t"
    admin.create_topics([NewTopic(topic, num_partitions=3, replica_assignment=[[1], [2], [3]])])[topic].result(30)
    code, _, err = run("--bootstrap-server", kafka_cluster.bootstrap, "--alter", "--client-id",
                       client, "--add", "producer_byte_rate=50MB")
    assert code == 0, err
    producer = Producer({"bootstrap.servers": kafka_cluster.bootstrap, "client.id": client})
    for _ in range(3):  # a partition may have no leader for a moment right after creation
        for partition in range(3):
            producer.produce(topic, b"x" * 1000, partition=partition)
        producer.flush(30)
    yield client
    run("--bootstrap-server", kafka_cluster.bootstrap, "--alter", "--client-id", client,
        "--delete", "producer_byte_rate")
    admin.delete_topics([topic])


def _resolve(cluster, client, metrics):
    return run("--bootstrap-server", cluster.bootstrap, "--resolve", "--client-id", client,
               "--metrics", metrics, "--output", "json")


def test_each_broker_is_labelled_by_its_node_id_and_an_unwatched_one_is_named(
        kafka_cluster, traffic_on_every_broker):
    urls = kafka_cluster.metrics_urls
    code, out, err = _resolve(kafka_cluster, traffic_on_every_broker, ",".join(urls))
    assert code == 0, err
    assert "broker" not in err  # all three watched: no line
    brokers = {b["broker"] for b in json.loads(out)["quotas"]["producer_byte_rate"]["live"]["brokers"]}
    assert brokers == {"1", "2", "3"}
    # Broker 2's endpoint left out: named on stderr, with why, and the exit stays 0.
    code, out, err = _resolve(kafka_cluster, traffic_on_every_broker, f"{urls[0]},{urls[2]}")
    assert code == 0
    assert err.splitlines() == [
        "kafka-client-quotas: broker 2: no metrics endpoint given: its throttling is not visible"]
    assert {b["broker"] for b in json.loads(out)["quotas"]["producer_byte_rate"]["live"]["brokers"]} == {"1", "3"}
    # A label the user gives stays the user's; the endpoint still counts as broker 1's.
    code, out, err = _resolve(kafka_cluster, traffic_on_every_broker,
                              f"east={urls[0]},{urls[1]},{urls[2]}")
    assert code == 0 and "broker" not in err, err
    assert {b["broker"] for b in json.loads(out)["quotas"]["producer_byte_rate"]["live"]["brokers"]} == {"east", "2", "3"}


def test_throttled_now_names_the_broker_it_cannot_see_and_gives_no_all_clear(
        kafka_cluster, env):
    from tests.app_steps import run_app, texts

    urls = kafka_cluster.metrics_urls
    env.setenv("QUOTA_BOOTSTRAP_SERVERS", kafka_cluster.bootstrap)
    env.setenv("QUOTA_METRICS", f"{urls[0]},{urls[1]}")
    env.setenv("QUOTA_LIVE_EVERY", "0.5")
    at = run_app("pages/throttled.py")
    deadline = time.monotonic() + 30
    while not any("Broker 3" in w for w in texts(at.warning)):
        assert time.monotonic() < deadline, texts(at.warning) + texts(at.info)
        time.sleep(0.5)
        at.run()
    assert [w for w in texts(at.warning) if "Broker" in w] == [
        "Broker 3: no metrics endpoint given: its throttling is not visible."]
    assert not at.main.success  # never green while a broker is not watched


def test_the_connection_card_turns_amber_while_a_broker_is_out_and_green_once_it_is_back(
        kafka_cluster, env):
    """A real stopped broker: KRaft drops it from the metadata at once (a SIGKILLed one once
    its session expires, ~11 s here); the cluster still answers, so only the card can say it."""
    from tests.app_steps import run_app, texts

    env.setenv("QUOTA_BOOTSTRAP_SERVERS", kafka_cluster.bootstrap)
    env.setenv("QUOTA_WATCH_EVERY", "0.5")
    at = run_app("pages/browse.py")
    assert any("3 brokers" in t for t in texts(at.sidebar.success)), texts(at.sidebar.success)

    def card_until(says: str, where) -> str:
        deadline = time.monotonic() + 30
        while True:
            at.run()
            found = [t for t in texts(where(at)) if says in t]
            if found:
                return found[0]
            assert time.monotonic() < deadline, texts(at.sidebar.success) + texts(at.sidebar.warning)
            time.sleep(0.5)

    from ui.registry import registry

    spec = at.session_state["_quota_page_context"].spec
    try:
        kafka_cluster.node(3).stop(30)
        try:
            card = card_until("missing from the cluster's metadata",
                              lambda a: a.sidebar.warning)
            assert "broker 3 is missing" in card and "2 brokers (of 3)" in card, card
            assert not any("3 brokers" in t for t in texts(at.sidebar.success))
        finally:
            kafka_cluster.restart(3)
        card = card_until("3 brokers", lambda a: a.sidebar.success)
        assert "missing" not in card
    finally:
        # Close the connection: the watch then asks nothing (it would poll the session's
        # cluster every 0.5 s for the rest of this worker, and log its stop at the end).
        registry().drop(spec)
