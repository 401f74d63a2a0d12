"""scripts/demo_load.py's logs when the broker stops (issue 15): at most a line per client per
``--log-every`` seconds, with a count of the lines held back. Before: librdkafka printed each
failed reconnect, about 3,800 lines in 90 s."""
from __future__ import annotations

import importlib.util
import io
import socket
import time
from pathlib import Path

import pytest

from tests import ROOT

SCRIPT = ROOT / "scripts" / "demo_load.py"
spec = importlib.util.spec_from_file_location("demo_load", SCRIPT)
demo_load = importlib.util.module_from_spec(spec)
spec.loader.exec_module(demo_load)


def test_one_line_per_interval_with_a_count_of_the_rest():
    out, now = io.StringIO(), [0.0]
    quiet = demo_load.QuietLog("alice/app", every_s=30, out=out, clock=lambda: now[0])
    for t in range(0, 90):  # a line a second for 90 s
        now[0] = float(t)
        quiet(f"Connect to ipv4#127.0.0.1:9092 failed ({t})")
    lines = out.getvalue().splitlines()
    assert len(lines) == 3  # at 0, 30 and 60 s
    assert lines[0] == "demo_load: alice/app: Connect to ipv4#127.0.0.1:9092 failed (0)"
    assert lines[1].endswith("failed (30) (29 more lines held back)")
    assert lines[2].endswith("(29 more lines held back)")


def test_a_real_client_against_a_stopped_broker_stays_quiet(capfd):
    pytest.importorskip("confluent_kafka")
    from confluent_kafka import Producer

    with socket.socket() as s:  # a port nothing listens on: the broker has stopped
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = io.StringIO()
    quiet = demo_load.QuietLog("bob/app-a", every_s=30, out=out)
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "client.id": "app-a",
                         "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 100,
                         "log_level": 7, **quiet.config()})
    end = time.monotonic() + 4
    while time.monotonic() < end:
        producer.produce("t", b"x")
        producer.poll(0.1)
    producer.flush(0.5)
    lines = out.getvalue().splitlines()
    assert 1 <= len(lines) <= 2, lines  # librdkafka logged many more than that
    assert quiet.held > 10  # ... and they were counted
    assert "127.0.0.1" not in capfd.readouterr().err  # nothing went to stderr behind our back


# ------------------------------------------------------------------ the story on three brokers
# (issue 18) The demo load's clients, the demo quotas and the topics' placement, added up per
# broker and bucket as Kafka enforces them: who is throttled where follows from the data.
from collections import defaultdict  # noqa: E402

from localkafka.demo import (DEMO_PRODUCERS, ONE_BROKER_TOPIC, PARTITIONS,  # noqa: E402
                             SPREAD_TOPIC, demo_quotas, hot_node, leaders, replica_assignment)
from quota_core.domain.ladder import rung  # noqa: E402
from quota_core.domain.resolution import resolve_values  # noqa: E402


def per_broker_use(node_ids):
    """{(user, client id of the bucket, quota): {node: offered bytes/s}} for the producers."""
    quotas, use = demo_quotas(), defaultdict(lambda: defaultdict(float))
    for p in DEMO_PRODUCERS:
        value, level = resolve_values(quotas, p.user, p.client_id, ("producer_byte_rate",))[
            "producer_byte_rate"]
        r = rung(level)
        bucket = (p.user if r.uses_user else None, p.client_id if r.uses_client_id else None,
                  value)
        on = leaders(p.topic, node_ids)
        for node in on:
            use[bucket][node] += p.rate / len(on)
    return use


def test_on_three_brokers_two_buckets_are_throttled_on_broker_2_only_and_one_nowhere():
    use = per_broker_use([1, 2, 3])
    throttled = {(u, c): sorted(n for n, rate in nodes.items() if rate > q)
                 for (u, c, q), nodes in use.items()}
    assert throttled == {("alice", "checkout-api"): [], ("alice", None): [2], ("bob", None): [2],
                         ("carol", None): [], ("svc-reports", None): []}
    # svc-reports: over its quota in total, under it on every broker (each sees a third).
    ((quota, nodes),) = [(q, n) for (u, _, q), n in use.items() if u == "svc-reports"]
    assert sum(nodes.values()) > quota and sorted(nodes) == [1, 2, 3]
    assert all(rate < 0.9 * quota for rate in nodes.values())
    # alice's and bob's traffic: brokers 1 and 3 see none of it.
    assert all(set(nodes) == {2} for (u, _, _), nodes in use.items() if u in ("alice", "bob"))


def test_on_one_broker_svc_reports_is_throttled_too():
    use = per_broker_use([1])
    assert {u for (u, c, q), nodes in use.items() if nodes[1] > q} == {"alice", "bob",
                                                                       "svc-reports"}


@pytest.mark.parametrize("producer", DEMO_PRODUCERS, ids=lambda p: f"{p.user}/{p.client_id}")
def test_each_producer_offers_the_rate_it_is_given(producer):
    """Ten seconds of ticks carry the rate asked, to a message (before: each tick sent a whole
    number of messages, rounded down, so carol's 0.3 MiB/s was 0.16)."""
    size, gen = 16 * 1024, demo_load.ticks(producer.rate, 16 * 1024)
    sent = sum(next(gen) for _ in range(100))
    assert abs(sent * size - producer.rate * 10) <= size


@pytest.mark.parametrize("nodes, one, spread", [
    ([1, 2, 3], [[2]] * PARTITIONS, [[1], [2], [3]]),
    ([1], [[1]] * PARTITIONS, [[1]]),
    ([1, 2, 3, 4, 5], [[3]] * PARTITIONS, [[1], [2], [3], [4], [5]]),
])
def test_replica_assignments(nodes, one, spread):
    assert replica_assignment(ONE_BROKER_TOPIC, nodes) == one
    assert replica_assignment(SPREAD_TOPIC, nodes) == spread
    assert leaders(ONE_BROKER_TOPIC, nodes) == (hot_node(nodes),)


def test_the_demo_topics_get_their_leaders_on_a_real_cluster(kafka_cluster):
    """The explicit replica assignment holds on the shared 3-broker cluster: every leader of
    the one-broker topic on node 2, one leader per node for the spread topic (read back
    from the cluster's metadata), and the line the demo prints says so."""
    admin = kafka_cluster.admin()
    try:
        placed = demo_load.ensure_topics(admin)
        assert placed[ONE_BROKER_TOPIC] == {p: 2 for p in range(PARTITIONS)}
        assert sorted(placed[SPREAD_TOPIC].values()) == kafka_cluster.node_ids == [1, 2, 3]
        assert demo_load.placement_line(placed) == (
            f"{ONE_BROKER_TOPIC}: every leader on broker 2; "
            f"{SPREAD_TOPIC}: leaders on brokers 1, 2, 3")
        assert demo_load.ensure_topics(admin) == placed  # a second run leaves them as they are
    finally:  # the shared cluster is left as it was
        for future in admin.delete_topics([ONE_BROKER_TOPIC, SPREAD_TOPIC]).values():
            try:
                future.result(30)
            except Exception as exc:  # noqa: BLE001 - never created: nothing to delete
                if "UNKNOWN_TOPIC" not in str(exc):
                    raise
