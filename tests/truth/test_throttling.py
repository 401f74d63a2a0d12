"""The resolver names what really throttles: real confluent-kafka clients on a real SASL
broker (real user principals), above and below the quotas the resolver reports.

A broker measures a bucket's rate over at least 10 s, so a burst of B bytes sent within the
first second reads as B / 10 s: bursts are sized against that. Throttling is observed from
the client side (librdkafka's ``throttle_cb``). Figures land in
``artifacts/throttle_observations.json`` for the closing note.
"""
from __future__ import annotations

import json
import threading
import time
import uuid
from pathlib import Path

import pytest

from quota_core import Alteration, Entity, Op, resolve
from quota_core.backends.base import checked_alter

from tests import ROOT

pytestmark = pytest.mark.kafka

KiB = 1024
QUOTA = 200 * KiB                # bytes/s, per broker
CHUNK = 10 * KiB
UNDER = 1200 * KiB               # reads as 120 KiB/s over the 10 s window: under QUOTA
OVER = 3000 * KiB                # reads as 300 KiB/s: over QUOTA
OBSERVATIONS: dict[str, object] = {}
ARTIFACTS = ROOT / "artifacts"


@pytest.fixture(scope="module")
def admin_backend(kafka_sasl_broker, tmp_path_factory):
    from quota_core.backends.kafka import KafkaBackend

    props = kafka_sasl_broker.write_command_config(
        tmp_path_factory.mktemp("throttle") / "admin.properties", "admin")
    backend = KafkaBackend.from_command_config(kafka_sasl_broker.bootstrap, props)
    yield backend
    backend.close()
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "throttle_observations.json").write_text(json.dumps(OBSERVATIONS, indent=2))


@pytest.fixture(scope="module")
def topic(kafka_sasl_broker):
    from confluent_kafka.admin import NewTopic

    name = f"throttle-{uuid.uuid4().hex[:8]}"
    admin = kafka_sasl_broker.admin("admin")
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    return name


def _set(backend, entity: Entity, **quotas: float) -> None:
    outcome = checked_alter(backend, [Alteration(entity, tuple(
        Op.set(k, v) for k, v in quotas.items()))])
    assert outcome.ok, outcome.failed


def _remove(backend, entity: Entity, *keys: str) -> None:
    outcome = checked_alter(backend, [Alteration(entity, tuple(Op.remove(k) for k in keys))])
    assert outcome.ok, outcome.failed


def _produce(broker, topic: str, user: str, client_id: str, total: int,
             seconds: float = 4.0) -> list[int]:
    """Send ``total`` bytes as fast as possible, then listen ``seconds`` for throttle events;
    return the throttle times (ms) the broker reported to this client."""
    from confluent_kafka import Producer

    throttles: list[int] = []  # librdkafka reports seconds; kept in ms like the broker
    conf = {**broker.client_config(user), "client.id": client_id, "linger.ms": 5,
            "acks": 1, "throttle_cb": lambda event: throttles.append(round(event.throttle_time * 1000))}
    producer = Producer(conf)
    payload = b"x" * CHUNK
    try:
        for _ in range(total // CHUNK):
            while True:
                try:
                    producer.produce(topic, payload)
                    break
                except BufferError:
                    producer.poll(0.05)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            producer.poll(0.1)
    finally:
        producer.purge()
        producer.flush(0)
    return [t for t in throttles if t > 0]


def _produce_together(broker, topic, user, client_ids, total_each) -> dict[str, list[int]]:
    results: dict[str, list[int]] = {}

    def run(cid: str) -> None:
        results[cid] = _produce(broker, topic, user, cid, total_each)

    threads = [threading.Thread(target=run, args=(cid,)) for cid in client_ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return results


def test_limited_clients_are_throttled_and_the_unlimited_one_is_not(
        kafka_sasl_broker, admin_backend, topic):
    alice, carol_reports = Entity.of(user="alice"), Entity.of(user=None, client_id="reports")
    _set(admin_backend, alice, producer_byte_rate=QUOTA)            # rung 3
    _set(admin_backend, carol_reports, producer_byte_rate=QUOTA)    # rung 4
    try:
        quotas = admin_backend.describe()
        said = {who: resolve(quotas, *who).keys["producer_byte_rate"]
                for who in [("alice", "app-1"), ("carol", "reports"), ("bob", "free")]}
        assert (said[("alice", "app-1")].level, said[("alice", "app-1")].source) == (3, alice)
        assert (said[("carol", "reports")].level,
                said[("carol", "reports")].source) == (4, carol_reports)
        assert said[("bob", "free")].unlimited

        seen = {who: _produce(kafka_sasl_broker, topic, *who, OVER) for who in said}
        OBSERVATIONS["limited_vs_unlimited"] = {f"{u}/{c}": t for (u, c), t in seen.items()}
        assert seen[("alice", "app-1")], "alice/app-1 is limited by {user=alice} but was not throttled"
        assert seen[("carol", "reports")], "carol/reports is limited by rung 4 but was not throttled"
        assert seen[("bob", "free")] == [], "bob/free is unlimited but was throttled"
    finally:
        _remove(admin_backend, alice, "producer_byte_rate")
        _remove(admin_backend, carol_reports, "producer_byte_rate")


def test_removing_the_named_source_stops_the_throttling(kafka_sasl_broker, admin_backend, topic):
    source = Entity.of(user="carol")
    _set(admin_backend, source, producer_byte_rate=QUOTA)
    kr = resolve(admin_backend.describe(), "carol", "etl").keys["producer_byte_rate"]
    assert kr.source == source
    before = _produce(kafka_sasl_broker, topic, "carol", "etl", OVER)
    _remove(admin_backend, kr.source, "producer_byte_rate")
    assert resolve(admin_backend.describe(), "carol", "etl").keys["producer_byte_rate"].unlimited
    time.sleep(1)  # let the previous throttle window pass before measuring again
    after = _produce(kafka_sasl_broker, topic, "carol", "etl", OVER)
    OBSERVATIONS["remove_source"] = {"before": before, "after": after}
    assert before, "carol/etl was not throttled while {user=carol} was set"
    assert after == [], "carol/etl was still throttled after its source entry was removed"


def test_client_ids_sharing_a_user_bucket_are_throttled_on_their_combined_rate(
        kafka_sasl_broker, admin_backend, topic):
    bob, svc = Entity.of(user="bob"), Entity.of(user="svc-reports")
    _set(admin_backend, bob, producer_byte_rate=QUOTA)
    _set(admin_backend, svc, producer_byte_rate=QUOTA)
    try:
        quotas = admin_backend.describe()
        for cid in ("a", "b"):
            bucket = resolve(quotas, "bob", cid).keys["producer_byte_rate"].bucket
            assert bucket.kind == "user" and dict(bucket.tags) == {"user": "bob", "client-id": ""}
        # One client alone, UNDER the quota: not throttled.
        alone = _produce(kafka_sasl_broker, topic, "svc-reports", "solo", UNDER)
        # Two of bob's client ids, each sending UNDER, together over: throttled.
        together = _produce_together(kafka_sasl_broker, topic, "bob", ["a", "b"], UNDER)
        OBSERVATIONS["shared_bucket"] = {"alone": alone, "together": together}
        assert alone == [], "one client under the quota was throttled"
        assert together["a"] or together["b"], (
            "two client ids of bob together exceed {user=bob} but neither was throttled")
    finally:
        _remove(admin_backend, bob, "producer_byte_rate")
        _remove(admin_backend, svc, "producer_byte_rate")


def test_consumer_over_its_fetch_quota_is_throttled(kafka_sasl_broker, admin_backend, topic):
    from confluent_kafka import Consumer

    _produce(kafka_sasl_broker, topic, "admin", "filler", OVER, seconds=0.5)
    entity = Entity.of(user="alice", client_id="reader")
    _set(admin_backend, entity, consumer_byte_rate=QUOTA)
    try:
        kr = resolve(admin_backend.describe(), "alice", "reader").keys["consumer_byte_rate"]
        assert (kr.level, kr.source) == (1, entity)
        throttles: list[int] = []
        consumer = Consumer({**kafka_sasl_broker.client_config("alice"), "client.id": "reader",
                             "group.id": f"g-{uuid.uuid4().hex[:6]}",
                             "auto.offset.reset": "earliest",
                             "throttle_cb": lambda e: throttles.append(round(e.throttle_time * 1000))})
        consumer.subscribe([topic])
        deadline = time.monotonic() + 12
        while time.monotonic() < deadline and not any(throttles):
            consumer.poll(0.2)
        consumer.close()
        OBSERVATIONS["consumer"] = [t for t in throttles if t > 0]
        assert any(t > 0 for t in throttles), "alice/reader fetched over its quota unthrottled"
    finally:
        _remove(admin_backend, entity, "consumer_byte_rate")


def _produce_kafka_python(broker, topic: str, user: str, client_id: str, total: int) -> float:
    """Like _produce, with kafka-python, which (unlike librdkafka, whose empty client.id
    becomes "rdkafka") really sends an empty client id. Returns the largest produce throttle
    time (ms) the broker reported."""
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap, client_id=client_id, linger_ms=5, acks=1,
        security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256",
        sasl_plain_username=user, sasl_plain_password=broker.users[user])
    try:
        for _ in range(total // CHUNK):
            producer.send(topic, b"x" * CHUNK)
        producer.flush(60)
        return max((v for group in producer.metrics().values() for name, v in group.items()
                    if name == "throttle-time-max" and v == v), default=0.0)
    finally:
        producer.close(0)


def test_an_empty_client_id_skips_the_client_id_rungs(kafka_sasl_broker, admin_backend, topic):
    """Kafka consults {client-id=<default>} only for a non-empty client id: the resolver
    says so, and the broker agrees."""
    default_client = Entity.of(client_id=None)
    _set(admin_backend, default_client, producer_byte_rate=QUOTA)  # rung 8
    try:
        quotas = admin_backend.describe()
        named = resolve(quotas, "carol", "named").keys["producer_byte_rate"]
        empty = resolve(quotas, "carol", "").keys["producer_byte_rate"]
        assert (named.level, named.source) == (8, default_client)
        assert empty.unlimited
        seen_named = _produce_kafka_python(kafka_sasl_broker, topic, "carol", "named", OVER)
        seen_empty = _produce_kafka_python(kafka_sasl_broker, topic, "carol", "", OVER)
        OBSERVATIONS["empty_client_id_max_ms"] = {"named": seen_named, "empty": seen_empty}
        assert seen_named > 0, "carol/named is limited by {client-id=<default>} but was not throttled"
        assert seen_empty == 0, "an empty client id was throttled by {client-id=<default>}"
    finally:
        _remove(admin_backend, default_client, "producer_byte_rate")
