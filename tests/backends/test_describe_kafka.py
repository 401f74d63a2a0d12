"""Describe on a real broker: the bytes-to-QuotaSet decoder (quota_core.backends.kafka_decode)
gives what kafka-python's decoder gives for the same question, in both protocol versions, and
``--describe --output json`` prints what ``json.dumps`` printed, for hard names."""
from __future__ import annotations

import io
import json
import uuid

import pytest

from quota_core import Alteration, Entity, Op
from quota_core.cli.main import main
from quota_core.domain.keys import json_number

pytestmark = pytest.mark.kafka

HARD = ["ünïcødé-名前-💡", "a=b", "a,b", "100%", "with space", "<b>x</b>&amp;", 'q"uote',
        "back\\slash", "<default>"]


@pytest.fixture(scope="module")
def seeded(kafka_broker):
    from quota_core.backends.kafka import KafkaBackend

    tag = uuid.uuid4().hex[:8]
    entities = {Entity.of(user=None): {"consumer_byte_rate": 4096.0},
                Entity.of(user="<default>", client_id=f"app-{tag}"): {"request_percentage": 12.5}}
    for i, name in enumerate(HARD):
        n = name if name == "<default>" else f"{name}-{tag}"
        entities[Entity.of(user=n)] = {"producer_byte_rate": 1024.0 + i, "request_percentage": 0.5}
        entities[Entity.of(user=n, client_id=n)] = {"request_percentage": 1e-05}
        entities[Entity.of(client_id=n)] = {"request_percentage": 1e20}
    backend = KafkaBackend(kafka_broker.bootstrap, timeout_s=15)
    before = backend.describe()
    outcome = backend.alter([Alteration(e, tuple(Op.set(k, v) for k, v in q.items()))
                             for e, q in entities.items()])
    assert outcome.ok, outcome.failed
    yield backend, entities
    # Put back what was there (the session broker is shared: the default user may be set).
    assert backend.alter([Alteration(e, tuple(Op.set(k, before[e][k]) if k in before.get(e, {})
                                              else Op.remove(k) for k in q))
                          for e, q in entities.items()]).ok
    backend.close()


def _kafka_python_quotas(backend, max_version):
    """Describe everything as before: kafka-python's request and decoder, entities by
    Entity.from_pairs."""
    from quota_core.backends.kafka_wire import DescribeClientQuotasRequest

    response = backend._call(lambda: DescribeClientQuotasRequest(
        components=[], strict=False, max_version=max_version), "describing (reference)")
    assert response.error_code == 0
    quotas = {}
    for entry in response.entries or ():
        values = {v.key: float(v.value) for v in entry.values}
        if values:
            quotas[Entity.from_pairs((e.entity_type, e.entity_name) for e in entry.entity)] = values
    return quotas


def _our_quotas(backend, max_version):
    from quota_core.backends.kafka_wire import RawDescribeClientQuotasRequest

    answer = backend._call(lambda: RawDescribeClientQuotasRequest(
        components=[], strict=False, max_version=max_version), "describing (ours)")
    assert answer.error_code == 0 and answer.flexible == (max_version >= 1)
    return answer.quotas()


@pytest.mark.parametrize("max_version", [0, 1])
def test_our_decoder_reads_what_kafka_pythons_reads(seeded, max_version):
    backend, entities = seeded
    ours, theirs = _our_quotas(backend, max_version), _kafka_python_quotas(backend, max_version)
    assert ours == theirs
    for entity, quotas in entities.items():
        assert ours[entity] == quotas


def test_describe_is_the_decoded_answer(seeded):
    backend, entities = seeded
    everything = backend.describe()
    assert {e: everything[e] for e in entities} == entities


def test_describe_json_on_a_broker_is_what_json_dumps_printed(seeded, kafka_broker):
    backend, _ = seeded
    out, err = io.StringIO(), io.StringIO()
    assert main(["--bootstrap-server", kafka_broker.bootstrap, "--describe", "--output", "json"],
                out, err) == 0, err.getvalue()
    quotas = backend.describe()
    expected = json.dumps([{"entity": e.as_dict(),
                            "quotas": {k: json_number(v) for k, v in sorted(quotas[e].items())}}
                           for e in sorted(quotas, key=Entity.sort_key)],
                          ensure_ascii=False, indent=2) + "\n"
    assert out.getvalue() == expected
    assert '"user": "<default>"' in expected and '"user": null' in expected
    assert '"request_percentage": 1e-05' in expected  # orjson alone would print 1e-5
