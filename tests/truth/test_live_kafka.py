"""Live throttling on a real broker, with clients nobody here wrote.

Kafka's own ProducerPerformance (alice) and a confluent-kafka producer (bob) run against
quotas at the user and client-id levels on the SASL broker; the console, reading the broker's
Prometheus endpoint, must name the entry that really throttles, and its figures must agree
with what the clients report. Removing the throttling entry ends the throttling; removing a
shadowed entry changes nothing. Figures land in ``artifacts/live_agreement.json``.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from localkafka import tool_argv
from quota_core import Alteration, Entity, Op
from quota_core.backends.base import checked_alter
from quota_core.throttling.live import join_usage
from quota_core.telemetry import scrape

from tests import ROOT

pytestmark = pytest.mark.kafka

KiB = 1024
ARTIFACTS = ROOT / "artifacts"
REPO = ROOT
ALICE = Entity.of(user="alice")            # level 3: alice's client ids share it
DEFAULT_USER = Entity.of(user=None)        # level 6: every user their own
MOBILE = Entity.of(client_id="mobile")     # level 7: shadowed by level 6 for every user
FIGURES: dict[str, object] = {}


@pytest.fixture(scope="module")
def setup(kafka_sasl_broker, tmp_path_factory):
    from confluent_kafka.admin import NewTopic
    from quota_core.backends.kafka import KafkaBackend

    tmp = tmp_path_factory.mktemp("live")
    admin_props = kafka_sasl_broker.write_command_config(tmp / "admin.properties", "admin")
    backend = KafkaBackend.from_command_config(kafka_sasl_broker.bootstrap, admin_props)
    topic = f"live-{uuid.uuid4().hex[:8]}"
    admin = kafka_sasl_broker.admin("admin")  # kept: the futures need the client alive
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    # The broker is shared by the session: start from no quotas, and put back what was there.
    found = backend.describe()
    make_exactly(backend, {})
    entries = {ALICE: 100 * KiB, DEFAULT_USER: 400 * KiB, MOBILE: 20 * KiB}
    assert checked_alter(backend, [Alteration(e, (Op.set("producer_byte_rate", v),))
                                   for e, v in entries.items()]).ok
    yield kafka_sasl_broker, backend, topic, tmp
    make_exactly(backend, found)
    backend.close()
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "live_agreement.json").write_text(json.dumps(FIGURES, indent=2))


def make_exactly(backend, target: dict) -> None:
    from quota_core import diff_alteration

    current = backend.describe()
    changes = [diff_alteration(e, current.get(e, {}), target.get(e, {}))
               for e in set(current) | set(target)]
    changes = [c for c in changes if c.ops]
    if changes:
        assert backend.alter(changes).ok


def perf_producer(broker, tmp: Path, topic: str, user: str, client_id: str, rate_kib: int,
                  seconds: int) -> subprocess.Popen:
    """Kafka's own ProducerPerformance, as ``user``, with --print-metrics."""
    props = broker.write_command_config(tmp / f"{user}-{client_id}.properties", user)
    records = rate_kib * seconds
    return subprocess.Popen(tool_argv(
        "org.apache.kafka.tools.ProducerPerformance", "--topic", topic,
        "--num-records", str(records), "--record-size", "1024", "--throughput", str(rate_kib),
        "--producer.config", str(props), "--producer-props",
        f"bootstrap.servers={broker.bootstrap}", f"client.id={client_id}", "acks=1",
        "--print-metrics"), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def confluent_producer(broker, topic: str, user: str, client_id: str, rate_kib: int,
                       seconds: float, throttles: list[float]) -> threading.Thread:
    """A librdkafka producer at ``rate_kib`` KiB/s, recording its throttle events (ms)."""
    from confluent_kafka import Producer

    conf = {**broker.client_config(user), "client.id": client_id, "linger.ms": 5,
            "throttle_cb": lambda event: throttles.append(event.throttle_time * 1000)}

    def run() -> None:
        producer = Producer(conf)
        payload, end = b"x" * 1024, time.monotonic() + seconds
        while time.monotonic() < end:
            started = time.monotonic()
            for _ in range(rate_kib // 10):
                try:
                    producer.produce(topic, payload)
                except BufferError:
                    break
            producer.poll(0)
            time.sleep(max(0.0, 0.1 - (time.monotonic() - started)))
        producer.flush(10)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def live_rows(broker, backend):
    return join_usage(scrape(broker.metrics_url, "b1"), backend.describe())


def bucket(rows, user):
    """The user's produce bucket this test's clients send in: the busiest. The session's
    broker still reports the buckets earlier tests' clients used (other client ids of the same
    user), at a rate near 0, until its quota sensors expire."""
    found = [r for r in rows if r.quota_type == "produce" and r.user == user]
    assert found, f"no produce bucket for {user!r} in {[(r.user, r.client_id) for r in rows]}"
    return max(found, key=lambda r: r.rate or 0.0)


def client_metric(output: str, name: str, client_id: str) -> float:
    match = re.search(rf"producer-metrics:{name}:\{{client-id={re.escape(client_id)}\}}\s*:\s*"
                      rf"([0-9.E+-]+|NaN)", output)
    assert match, f"{name} not in ProducerPerformance's output:\n{output[-2000:]}"
    return float(match.group(1))


def test_the_console_names_the_entry_that_throttles_and_agrees_with_the_clients(setup):
    broker, backend, topic, tmp = setup
    bob_throttles: list[float] = []
    alice = perf_producer(broker, tmp, topic, "alice", "perf-a", rate_kib=300, seconds=16)
    bob = confluent_producer(broker, topic, "bob", "mobile", rate_kib=100, seconds=16,
                             throttles=bob_throttles)
    time.sleep(13)  # past the broker's 10 s rate window
    rows = live_rows(broker, backend)
    for _ in range(6):  # a read as the rate window rolls over can catch a dip (issue 27)
        if alice.poll() is not None or bucket(rows, "alice").throttled:
            break
        time.sleep(1)
        rows = live_rows(broker, backend)
    out, _ = alice.communicate(timeout=120)
    bob.join(30)
    assert alice.returncode == 0, out[-2000:]

    a, b = bucket(rows, "alice"), bucket(rows, "bob")
    # alice: her client ids share {user=alice} (level 3), and she is throttled.
    assert (a.client_id, a.level, a.source, a.quota) == (None, 3, ALICE, 100 * KiB)
    # Throttled now, or (a read as the broker's rate window rolls over can catch her rate
    # far under the quota for a moment: issue 27) recently, with the broker's throttle time.
    assert (a.throttled or a.recent) and a.throttle_ms and a.throttle_ms > 0
    # bob's "mobile" client: {client-id=mobile} (level 7) is shadowed by {user=<default>}
    # (level 6), which gives bob 400 KiB/s of his own: not throttled.
    assert (b.level, b.source, b.quota) == (6, DEFAULT_USER, 400 * KiB)
    assert not b.over_quota and not b.throttle_ms and not bob_throttles

    client_avg = client_metric(out, "produce-throttle-time-avg", "perf-a")
    client_max = client_metric(out, "produce-throttle-time-max", "perf-a")
    FIGURES["alice_perf"] = {"broker_throttle_ms": a.throttle_ms, "client_avg_ms": client_avg,
                             "client_max_ms": client_max, "broker_rate": a.rate,
                             "quota": a.quota, "console_estimate_ms": a.estimated_throttle_ms}
    # The broker averages its throttles over throttled responses only; the client's average
    # counts every response of the whole run (most unthrottled), so it is lower. Its maximum
    # is one throttled response: the same order as the broker's average.
    assert 0 < client_avg < a.throttle_ms
    # (a fresh-clone run saw 2,892 ms against 703 ms: 4.1x; the bound is the order, 10x)
    assert 0.1 <= client_max / a.throttle_ms <= 10.0, FIGURES["alice_perf"]
    # Kafka's arithmetic on the rate read now, against the broker's average of its recent
    # throttles: the same order. The two cover different moments: the broker computes each
    # throttle on the rate *including* the request it just recorded, while a scrape reads the
    # rate between requests, after the throttling has pulled it back to about the quota. So
    # the estimate runs low when the client is held at its quota (a fresh clone saw 188 ms
    # against 906 ms at 1.9 % over quota; a CI run saw 8 ms against 705 ms at 0.08 % over) and
    # high while the rate still climbs (3.1x). A wrong window or a wrong formula (seconds for
    # milliseconds, the sample for the window) would leave these bounds by far.
    if a.throttled and a.rate >= 1.05 * a.quota:
        assert 0.1 <= a.estimated_throttle_ms / a.throttle_ms <= 4.0, FIGURES["alice_perf"]
    elif a.throttled:  # held at about her quota: Kafka's arithmetic gives little, never more
        assert 0 <= a.estimated_throttle_ms <= 4.0 * a.throttle_ms, FIGURES["alice_perf"]
    else:  # every read caught a dip: Kafka's arithmetic on a rate under the quota is no throttle
        assert a.rate < a.quota and a.estimated_throttle_ms == 0, FIGURES["alice_perf"]


def test_removing_the_shadowed_entry_changes_nothing_and_removing_the_source_ends_it(setup):
    broker, backend, topic, tmp = setup
    assert checked_alter(backend, [Alteration(MOBILE, (Op.remove("producer_byte_rate"),))]).ok
    bob_throttles: list[float] = []
    bob = confluent_producer(broker, topic, "bob", "mobile", rate_kib=100, seconds=8,
                             throttles=bob_throttles)
    # {user=alice} goes: alice falls to {user=<default>}'s 400 KiB/s, above her 300 KiB/s.
    assert checked_alter(backend, [Alteration(ALICE, (Op.remove("producer_byte_rate"),))]).ok
    alice = perf_producer(broker, tmp, topic, "alice", "perf-b", rate_kib=300, seconds=14)
    time.sleep(12)
    rows = live_rows(broker, backend)
    out, _ = alice.communicate(timeout=120)
    bob.join(30)
    a, b = bucket(rows, "alice"), bucket(rows, "bob")
    assert (b.level, b.source) == (6, DEFAULT_USER) and not bob_throttles
    assert (a.level, a.source, a.quota) == (6, DEFAULT_USER, 400 * KiB)
    assert not a.over_quota
    client_max = client_metric(out, "produce-throttle-time-max", "perf-b")
    FIGURES["alice_after_removal"] = {"client_max_ms": client_max, "broker_rate": a.rate}
    assert client_max == 0.0


def test_cli_throttled_and_resolve_with_metrics(setup):
    broker, backend, topic, tmp = setup
    assert checked_alter(backend, [Alteration(Entity.of(user="carol"),
                                              (Op.set("producer_byte_rate", 50 * KiB),))]).ok
    carol_throttles: list[float] = []
    carol = confluent_producer(broker, topic, "carol", "cli-proof", rate_kib=150, seconds=14,
                               throttles=carol_throttles)
    time.sleep(12)
    props = str(tmp / "admin.properties")
    base = [sys.executable, "-m", "quota_core", "--bootstrap-server", broker.bootstrap,
            "--command-config", props, "--output", "json"]
    throttled = subprocess.run(base + ["--throttled", "--metrics", f"b1={broker.metrics_url}"],
                               capture_output=True, text=True, timeout=60, cwd=REPO)
    resolved = subprocess.run(base + ["--resolve", "--user", "carol", "--client-id",
                                      "cli-proof", "--metrics", f"b1={broker.metrics_url},"
                                      "down=http://127.0.0.1:9/metrics"],
                              capture_output=True, text=True, timeout=60, cwd=REPO)
    carol.join(30)
    assert throttled.returncode == 0, throttled.stderr
    rows = json.loads(throttled.stdout)
    mine = [r for r in rows if r["bucket"] == {"user": "carol", "client-id": None}]
    assert mine and mine[0]["source"] == {"user": "carol"} and mine[0]["level"] == 3
    assert mine[0]["throttle_ms"] > 0 and carol_throttles
    # One endpoint down: one clear line naming it, exit 1, the other still answers.
    assert resolved.returncode == 1
    assert "http://127.0.0.1:9/metrics" in resolved.stderr and "Traceback" not in resolved.stderr
    live = json.loads(resolved.stdout)["quotas"]["producer_byte_rate"]["live"]
    assert live["throttled"] is True
    assert live["brokers"][0]["broker"] == "b1" and live["brokers"][0]["quota"] == 50 * KiB
    # librdkafka reports each throttled response (throttle_cb): its mean over the throttled
    # ones is what the broker's throttle-time averages.
    nonzero = [t for t in carol_throttles if t > 0]
    FIGURES["carol_cli"] = {"broker_throttle_ms": mine[0]["throttle_ms"],
                            "librdkafka_mean_ms": sum(nonzero) / len(nonzero),
                            "librdkafka_events": len(nonzero)}
    ratio = FIGURES["carol_cli"]["librdkafka_mean_ms"] / mine[0]["throttle_ms"]
    assert 0.25 <= ratio <= 4.0, FIGURES["carol_cli"]  # the same order (see alice's)
