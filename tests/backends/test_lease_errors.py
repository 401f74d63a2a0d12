"""Which librdkafka errors the write lease asks again after, and which it reports at once.

The classification is on librdkafka's own error objects: a dropped broker handle (a CI run
saw ``_DESTROY_BROKER`` on the lease's first request, once the bootstrap handle was replaced
by the brokers that metadata named) is asked again; a refusal is never.
"""
from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from quota_core.backends.kafka_lease import _refusal, _transient


@pytest.mark.parametrize("code", [KafkaError._DESTROY_BROKER, KafkaError._TRANSPORT,
                                  KafkaError._TIMED_OUT])
def test_a_dropped_handle_a_lost_connection_or_a_timeout_is_asked_again(code):
    assert _transient(KafkaException(KafkaError(code)))


def test_an_error_the_broker_calls_retriable_is_asked_again():
    moved = KafkaError(KafkaError.LEADER_NOT_AVAILABLE, retriable=True)
    assert _transient(KafkaException(moved))


@pytest.mark.parametrize("code", [KafkaError.TOPIC_AUTHORIZATION_FAILED,
                                  KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                  KafkaError._DESTROY, KafkaError.INVALID_CONFIG])
def test_a_refusal_or_a_client_being_closed_is_reported_at_once(code):
    assert not _transient(KafkaException(KafkaError(code)))


def test_a_refusal_names_the_acl_to_grant():
    refusal = _refusal(KafkaException(KafkaError(
        KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)), "alice")
    assert refusal is not None and "User:alice" in str(refusal)
