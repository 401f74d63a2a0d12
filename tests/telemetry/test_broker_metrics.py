"""The metrics a live view reads, end to end on a real broker: a quota set through quota_core,
a real producer over it, the broker's JMX exporter endpoint scraped and parsed.

Names come back raw although Kafka writes them encoded: the client id ``CN=etl,OU=data`` is
JMX-quoted in the MBean name, and the SASL user ``CN=etl,OU=data`` is Sanitizer-encoded.
Quotas are pair-level or user-level so the bucket's tags do not depend on what other tests
left on the shared session broker; every quota set here is removed again.
"""
from __future__ import annotations

import math
import time
import uuid
from collections.abc import Iterator

import pytest

from quota_core import Alteration, Entity, Op
from quota_core.backends.base import checked_alter
from quota_core.telemetry import QuotaSeries, scrape

pytestmark = pytest.mark.kafka

QUOTA = 50_000           # bytes/s per broker
BURST = 150 * 10_240     # ~1.5 MB at once: reads as ~150 kB/s over the 10 s window, 3x the quota


def _alter(backend, entity: Entity, **keys: float | None) -> None:
    ops = tuple(Op.remove(k) if v is None else Op.set(k, v) for k, v in keys.items())
    outcome = checked_alter(backend, [Alteration(entity, ops)])
    assert outcome.ok, outcome.failed


def _burst(config: dict, client_id: str, topic: str) -> object:
    """A producer that has handed BURST bytes to the broker (it is then throttled; not flushed)."""
    from confluent_kafka import Producer

    producer = Producer({**config, "client.id": client_id, "linger.ms": 5, "acks": 1})
    payload = b"x" * 10_240
    for _ in range(BURST // len(payload)):
        while True:
            try:
                producer.produce(topic, payload)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    return producer


def _discard(producer) -> None:
    producer.purge()  # do not wait out a throttle: the test has what it came for
    producer.flush(0)


def _wait_for(url: str, broker: str, wanted, timeout: float = 20) -> list[QuotaSeries]:
    """Scrape until ``wanted(series)`` holds (the broker records a throttle at the response)."""
    deadline = time.monotonic() + timeout
    while True:
        series = scrape(url, broker)
        if wanted(series) or time.monotonic() > deadline:
            return series
        time.sleep(0.5)


def _one(series: list[QuotaSeries], **match) -> QuotaSeries:
    found = [s for s in series if all(getattr(s, k) == v for k, v in match.items())]
    assert len(found) == 1, (match, found)
    return found[0]


@pytest.fixture(scope="module")
def backend(kafka_broker) -> Iterator[object]:
    from quota_core.backends.kafka import KafkaBackend

    with KafkaBackend(kafka_broker.bootstrap, timeout_s=10) as b:
        yield b


def test_a_throttled_bucket_shows_rate_and_throttle_with_raw_names(kafka_broker, backend):
    assert kafka_broker.metrics_url == f"http://127.0.0.1:{kafka_broker.metrics_port}/metrics"
    topic = f"metrics-{uuid.uuid4().hex[:8]}"
    tight = Entity.of(user="ANONYMOUS", client_id="CN=etl,OU=data")   # level 1: pair tags
    roomy = Entity.of(user="ANONYMOUS", client_id="weird:client*1")
    _alter(backend, tight, producer_byte_rate=QUOTA)
    _alter(backend, roomy, producer_byte_rate=1e9)
    producers = []
    try:
        producers = [_burst(kafka_broker.client_config(), cid, topic)
                     for cid in ("CN=etl,OU=data", "weird:client*1")]

        def throttled(series):
            return any(s.client_id == "CN=etl,OU=data" and s.attribute == "throttle-time"
                       and s.value > 0 for s in series)

        series = _wait_for(kafka_broker.metrics_url, "local", throttled)
    finally:
        for p in producers:
            _discard(p)
        _alter(backend, tight, producer_byte_rate=None)
        _alter(backend, roomy, producer_byte_rate=None)

    bucket = dict(quota_type="produce", user="ANONYMOUS", client_id="CN=etl,OU=data", broker="local")
    rate = _one(series, attribute="byte-rate", **bucket)
    throttle = _one(series, attribute="throttle-time", **bucket)
    assert rate.value > QUOTA  # the burst is over the quota...
    assert throttle.value > 0  # ...so the broker throttles it (ms)
    # The roomy bucket took the same burst: a byte rate, and NaN throttle ("not throttled").
    roomy_rate = _one(series, attribute="byte-rate", quota_type="produce", user="ANONYMOUS",
                      client_id="weird:client*1")
    roomy_throttle = _one(series, attribute="throttle-time", quota_type="produce", user="ANONYMOUS",
                          client_id="weird:client*1")
    assert roomy_rate.value > 0 and math.isnan(roomy_throttle.value)
    assert all(s.ip is None for s in series if s.quota_type != "connection")


def test_a_sasl_user_with_a_dn_name_comes_back_raw(kafka_sasl_broker):
    """A SCRAM user named like a certificate DN: the ``user`` tag is ``CN%3Detl%2COU%3Ddata``."""
    from confluent_kafka.admin import (ScramCredentialInfo, ScramMechanism,
                                       UserScramCredentialDeletion, UserScramCredentialUpsertion)

    from quota_core.backends.kafka import KafkaBackend

    user, password = "CN=etl,OU=data", uuid.uuid4().hex
    admin = kafka_sasl_broker.admin()
    for future in admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), password.encode())]).values():
        future.result()
    kafka_sasl_broker.grant_all(user)
    props = kafka_sasl_broker.write_command_config(kafka_sasl_broker.workdir / "metrics-admin.properties")
    entity = Entity.of(user=user)  # level 3: user-only tags, shared by all of the user's client ids
    config = {**kafka_sasl_broker.client_config(), "sasl.username": user, "sasl.password": password}
    with KafkaBackend.from_command_config(kafka_sasl_broker.bootstrap, props, timeout_s=10) as backend:
        _alter(backend, entity, producer_byte_rate=QUOTA)
        producer = None
        try:
            producer = _burst(config, "etl-loader", f"metrics-{uuid.uuid4().hex[:8]}")
            series = _wait_for(kafka_sasl_broker.metrics_url, "sasl", lambda found: any(
                s.user == user and s.attribute == "throttle-time" and s.value > 0 for s in found))
        finally:
            if producer is not None:
                _discard(producer)
            _alter(backend, entity, producer_byte_rate=None)
            for future in admin.alter_user_scram_credentials([UserScramCredentialDeletion(
                    user, ScramMechanism.SCRAM_SHA_256)]).values():
                future.result()
    rate = _one(series, quota_type="produce", attribute="byte-rate", user=user)
    throttle = _one(series, quota_type="produce", attribute="throttle-time", user=user)
    assert rate.client_id is None and throttle.client_id is None  # not keyed by client id
    assert rate.value > QUOTA and throttle.value > 0
