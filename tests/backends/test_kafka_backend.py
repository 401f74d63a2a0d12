"""KafkaBackend against a real Kafka 4.3 broker (tests.kafka_fixtures), plus its pure parts:
the properties parser, the JAAS parser and the client-config checks.

Names are made unique per test (the session broker is shared), default entities are
cleaned up after each test, and filter results are compared with ``filter_quotas`` over a
describe-everything snapshot, so other tests' quotas cannot make these fail.
"""
from __future__ import annotations

import logging
import math
import re
import socket
import time
import uuid
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from quota_core.backends.sandbox import host_resolves
from quota_core import (Alteration, AuthenticationFailed, ConfigError, ConnectionFailed, Entity,
                        EntityFilter, FilterComponent, FilterError, MatchType, NotAuthorized, Op,
                        QuotaError, UnsupportedBroker, broker_rejection, filter_quotas)
from quota_core.backends.kafka_config import (client_config, load_command_config, parse_jaas_config,
                                              parse_properties)

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
PBR, CBR, RP = "producer_byte_rate", "consumer_byte_rate", "request_percentage"
CCR = "connection_creation_rate"
AWKWARD = ["ünïcødé-名前-💡", "a,b", "k=v", "100%", "%3Cdefault%3E", "back\\slash",
           "with space", " leading", "<default>", "CN=x,OU=y", "*", "a+b~c"]


def _sasl_props(user: str, password: str, mechanism: str = "SCRAM-SHA-256") -> dict[str, str]:
    module = PLAIN if mechanism == "PLAIN" else SCRAM
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
            "sasl.jaas.config": f'{module} required username="{user}" password="{password}";'}


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- fixtures -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def backend(kafka_broker):
    from quota_core.backends.kafka import KafkaBackend

    b = KafkaBackend(kafka_broker.bootstrap, timeout_s=10)
    yield b
    b.close()


@pytest.fixture
def uniq() -> str:
    return uuid.uuid4().hex[:8]


@pytest.fixture
def cleanup(backend):
    """Entities a test touches; every key they have is removed afterwards."""
    touched: list[Entity] = []
    yield touched
    current = backend.describe()
    removals = [Alteration(e, tuple(Op.remove(k) for k in current[e]))
                for e in dict.fromkeys(touched) if e in current]
    if removals:
        assert backend.alter(removals).ok


def _apply(backend, cleanup, mapping, validate_only=False):
    alterations = [Alteration.of(e, q) for e, q in mapping.items()]
    cleanup.extend(mapping)
    outcome = backend.alter(alterations, validate_only=validate_only)
    assert outcome.ok, outcome.failed
    return outcome


# -- round trips ------------------------------------------------------------------------------
@pytest.mark.kafka
@pytest.mark.parametrize("name", AWKWARD)
def test_awkward_names_round_trip(backend, cleanup, uniq, name):
    name = f"{name}-{uniq}" if name != "<default>" else name
    entities = {Entity.of(user=name): {PBR: 1024.0},
                Entity.of(client_id=name): {CBR: 2048.0, RP: 56.25},
                Entity.of(user=name, client_id=None): {RP: 12.5}}
    _apply(backend, cleanup, entities)
    for entity, quotas in entities.items():
        assert backend.describe_entity(entity) == quotas
    got = backend.describe(EntityFilter.contains([FilterComponent.exact("user", name)]))
    assert got == {e: q for e, q in entities.items() if e.has("user")}


@pytest.mark.kafka
def test_literal_default_user_is_not_the_default(backend, cleanup):
    literal, default = Entity.of(user="<default>"), Entity.of(user=None)
    _apply(backend, cleanup, {literal: {PBR: 111.0}, default: {PBR: 222.0}})
    assert backend.describe_entity(literal) == {PBR: 111.0}
    assert backend.describe_entity(default) == {PBR: 222.0}
    only_default = backend.describe(EntityFilter.contains_only([FilterComponent.default("user")]))
    assert only_default == {default: {PBR: 222.0}}
    exact = backend.describe(EntityFilter.contains_only([FilterComponent.exact("user",
                                                                                "<default>")]))
    assert exact == {literal: {PBR: 111.0}}


# -- filters: the broker against quota_core's model of it ---------------------------------------
def _filters(u: str, c: str) -> list[EntityFilter]:
    E, D, A = FilterComponent.exact, FilterComponent.default, FilterComponent.any
    combos = [
        [], [E("user", u)], [D("user")], [A("user")], [E("client-id", c)], [D("client-id")],
        [A("client-id")], [E("user", u), D("client-id")], [E("user", u), A("client-id")],
        [D("user"), E("client-id", c)], [D("user"), D("client-id")], [A("user"), A("client-id")],
        [A("user"), E("client-id", c)], [E("user", "<default>")], [A("ip")], [D("ip")],
        [E("ip", "10.11.12.13")], [E("user", f"{u}-nobody")],
    ]
    return [EntityFilter(tuple(cs), strict) for cs in combos for strict in (False, True)]


@pytest.mark.kafka
def test_every_filter_kind_matches_the_model(backend, cleanup, uniq):
    u, c = f"fu-{uniq}", f"fc-{uniq}"
    _apply(backend, cleanup, {
        Entity.of(user=u): {PBR: 1.0}, Entity.of(user=u, client_id=c): {PBR: 2.0},
        Entity.of(user=u, client_id=None): {PBR: 3.0},
        Entity.of(user=None, client_id=c): {CBR: 4.0},
        Entity.of(user=None): {CBR: 5.0}, Entity.of(client_id=c): {RP: 6.0},
        Entity.of(client_id=None): {RP: 7.0}, Entity.of(user="<default>"): {PBR: 8.0},
        Entity.of(ip="10.11.12.13"): {CCR: 9.0}, Entity.of(ip=None): {CCR: 10.0},
        Entity.of(user=None, client_id=None): {RP: 11.0},
    })
    snapshot = backend.describe()
    for flt in _filters(u, c):
        assert backend.describe(flt) == filter_quotas(snapshot, flt), str(flt)
    # A few by hand, so the model itself is checked too.
    strict_user = backend.describe(EntityFilter.contains_only([FilterComponent.exact("user", u)]))
    assert strict_user == {Entity.of(user=u): {PBR: 1.0}}
    loose_user = backend.describe(EntityFilter.contains([FilterComponent.exact("user", u)]))
    assert set(loose_user) == {Entity.of(user=u), Entity.of(user=u, client_id=c),
                               Entity.of(user=u, client_id=None)}
    any_ip = backend.describe(EntityFilter.contains([FilterComponent.any("ip")]))
    assert {Entity.of(ip="10.11.12.13"), Entity.of(ip=None)} <= set(any_ip)
    assert backend.describe(EntityFilter.contains_only([])) == {}


@pytest.mark.kafka
@pytest.mark.parametrize("components, message", [
    ([FilterComponent.any("user"), FilterComponent.exact("user", "a")],
     "Entity type user cannot appear more than once in the filter."),
    ([FilterComponent.any("ip"), FilterComponent.any("user")],
     "Invalid entity filter component combination. IP filter component should not be used "
     "with user or clientId filter component."),
    ([FilterComponent.any("nope")], "Unsupported entity type nope"),
    ([FilterComponent("", MatchType.ANY)], "Invalid empty entity type."),
    ([FilterComponent("user", MatchType.EXACT, None)],
     "Request specified MATCH_TYPE_EXACT, but set match string to null."),
    ([FilterComponent("user", MatchType.DEFAULT, "x")],
     "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."),
    ([FilterComponent("user", MatchType.ANY, "x")],
     "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."),
])
def test_filters_the_broker_refuses(backend, components, message):
    with pytest.raises(FilterError) as info:
        backend.describe(EntityFilter.contains(components))
    assert info.value.context["broker_message"] == message
    assert message in str(info.value)
    with pytest.raises(FilterError):  # quota_core refuses the same filters client-side
        EntityFilter.contains(components).validate()


# -- alter ------------------------------------------------------------------------------------
@pytest.mark.kafka
def test_removing_the_last_key_removes_the_entity(backend, cleanup, uniq):
    entity = Entity.of(user=f"last-{uniq}", client_id=None)
    _apply(backend, cleanup, {entity: {PBR: 10.0, CBR: 20.0}})
    assert backend.alter([Alteration.of(entity, remove=[PBR])]).ok
    assert backend.describe_entity(entity) == {CBR: 20.0}
    assert backend.alter([Alteration.of(entity, remove=[CBR])]).ok
    assert entity not in backend.describe()
    assert backend.describe(EntityFilter.for_entity(entity)) == {}


@pytest.mark.kafka
def test_removing_an_unset_key_is_accepted(backend, cleanup, uniq):
    entity, ghost = Entity.of(user=f"unset-{uniq}"), Entity.of(client_id=f"ghost-{uniq}")
    _apply(backend, cleanup, {entity: {PBR: 10.0}})
    outcome = backend.alter([Alteration.of(entity, remove=[CBR, "not_a_key"]),
                             Alteration.of(ghost, remove=[PBR])])
    assert outcome.ok
    assert backend.describe_entity(entity) == {PBR: 10.0}
    assert ghost not in backend.describe()


@pytest.mark.kafka
def test_validate_only_writes_nothing(backend, cleanup, uniq):
    kept, fresh = Entity.of(user=f"vo-{uniq}"), Entity.of(client_id=f"vo-{uniq}")
    _apply(backend, cleanup, {kept: {PBR: 10.0}})
    cleanup.append(fresh)
    before = backend.describe()
    outcome = backend.alter([Alteration.of(kept, {PBR: 99.0}, remove=[]),
                             Alteration.of(fresh, {CBR: 5.0}),
                             Alteration.of(Entity.of(user=f"vo-bad-{uniq}"), {PBR: 0.0})],
                            validate_only=True)
    assert outcome.validate_only
    assert [r.ok for r in outcome.results] == [True, True, False]
    assert outcome.results[2].error == "Quota producer_byte_rate must be greater than 0"
    assert backend.describe() == before
    removal = backend.alter([Alteration.of(kept, remove=[PBR])], validate_only=True)
    assert removal.ok and backend.describe_entity(kept) == {PBR: 10.0}


@pytest.mark.kafka
def test_all_or_nothing_per_entity(backend, cleanup, uniq):
    good, bad, other = (Entity.of(user=f"ok-{uniq}"), Entity.of(user=f"bad-{uniq}"),
                        Entity.of(client_id=f"ok-{uniq}"))
    cleanup.extend([good, bad, other])
    _apply(backend, cleanup, {bad: {CBR: 7.0}})
    outcome = backend.alter([
        Alteration.of(good, {PBR: 100.0, CBR: 200.0}),
        Alteration(bad, (Op.set(PBR, 100.0), Op.remove(CBR), Op.set(RP, -1.0))),
        Alteration.of(other, {RP: 50.0}),
    ])
    assert [r.entity for r in outcome.results] == [good, bad, other]  # request order
    assert [r.ok for r in outcome.results] == [True, False, True]
    assert outcome.results[1].error == "Quota request_percentage must be greater than 0"
    assert outcome.results[1].error_code == "INVALID_REQUEST"
    assert backend.describe_entity(good) == {PBR: 100.0, CBR: 200.0}
    assert backend.describe_entity(bad) == {CBR: 7.0}  # untouched: not even the good ops
    assert backend.describe_entity(other) == {RP: 50.0}


REJECTIONS = [
    (Entity.of(user="r"), [Op.set(PBR, 0.0)], "Quota producer_byte_rate must be greater than 0"),
    (Entity.of(user="r"), [Op.set(RP, -1.0)], "Quota request_percentage must be greater than 0"),
    (Entity.of(user="r"), [Op.set(PBR, 1.5)], "producer_byte_rate cannot be a fractional value."),
    (Entity.of(ip="10.1.1.1"), [Op.set(CCR, 2.5)],
     "connection_creation_rate cannot be a fractional value."),
    (Entity.of(user="r"), [Op.set("foo", 1.0)], "Invalid configuration key foo"),
    (Entity.of(user="r"), [Op.set(CCR, 1.0)], "Invalid configuration key connection_creation_rate"),
    (Entity.of(ip="10.1.1.1"), [Op.set(PBR, 1.0)], "Invalid configuration key producer_byte_rate"),
    (Entity.of(user="r"), [Op.set(PBR, 2.0**64)],
     "Proposed value for producer_byte_rate is too large for a LONG."),
    (Entity.of(user="r"), [Op.set(PBR, math.inf)],
     "Proposed value for producer_byte_rate is too large for a LONG."),
    (Entity.of(ip="10.1.1.1"), [Op.set(CCR, 2.0**31)],
     "Proposed value for connection_creation_rate is too large for an INT."),
    (Entity.of(ip="no-such-host.invalid"), [Op.set(CCR, 1.0)],
     "no-such-host.invalid is not a valid IP or resolvable host."),
    # The entity is checked even when the only op is a remove of an unset key:
    (Entity.of(ip="no-such-host.invalid"), [Op.remove(CCR)],
     "no-such-host.invalid is not a valid IP or resolvable host."),
    (Entity.of(user="r"), [Op.set(PBR, 1.0), Op.remove(PBR)],
     "Ignoring duplicate entity ClientQuotaEntity(entries={user=r})"),
]


@pytest.mark.kafka
@pytest.mark.parametrize("validate_only", [True, False])
@pytest.mark.parametrize("entity, ops, message", REJECTIONS,
                         ids=[f"{e}-{m[:30]}" for e, _, m in REJECTIONS])
def test_broker_rejection_messages(backend, entity, ops, message, validate_only):
    alteration = Alteration(entity, tuple(ops))
    result = backend.alter([alteration], validate_only=validate_only).results[0]
    assert (result.error, result.error_code) == (message, "INVALID_REQUEST")
    assert broker_rejection(alteration, resolvable=host_resolves) == message  # the sandbox's model agrees
    assert entity not in backend.describe()


@pytest.mark.kafka
@pytest.mark.parametrize("op", [Op.set(RP, math.inf), Op.set(RP, math.nan), Op.set(PBR, math.nan),
                                Op.set(PBR, 2.0**63), Op.set(PBR, 1.0000001)],
                         ids=["inf-double", "nan-double", "nan-long", "2^63-long", "1e-7-fraction"])
def test_values_the_broker_accepts_but_quota_core_refuses(backend, uniq, op):
    """QUOTA_SEMANTICS: the broker accepts NaN and +inf for doubles (and 2**63 passes the
    LONG check): only client-side validation stops them, so never call alter unchecked."""
    alteration = Alteration(Entity.of(user=f"lax-{uniq}"), (op,))
    assert backend.alter([alteration], validate_only=True).ok
    assert broker_rejection(alteration, resolvable=host_resolves) is None


@pytest.mark.kafka
def test_the_same_entity_twice_is_answered_as_the_broker_does(backend, cleanup, uniq):
    # As the sandbox (test_sandbox.py): the first alteration is applied and the entity's one
    # result carries the broker's error.
    entity, other = Entity.of(user=f"twice-{uniq}"), Entity.of(user=f"once-{uniq}")
    cleanup.extend([entity, other])
    outcome = backend.alter([Alteration.of(entity, {PBR: 1.0}), Alteration.of(other, {PBR: 9.0}),
                             Alteration.of(entity, {CBR: 1.0})])
    assert [(r.entity, r.ok) for r in outcome.results] == [(entity, False), (other, True)]
    assert outcome.results[0].error == \
        f"Ignoring duplicate entity ClientQuotaEntity(entries={{user=twice-{uniq}}})"
    assert backend.describe_entity(entity) == {PBR: 1.0}


@pytest.mark.kafka
def test_an_alter_is_visible_to_the_next_describe(backend, cleanup, uniq):
    entity = Entity.of(user=f"ryw-{uniq}", client_id=f"ryw-{uniq}")
    cleanup.append(entity)
    for i in range(1, 21):
        assert backend.alter([Alteration.of(entity, {PBR: 1000.0 + i})]).ok
        assert backend.describe_entity(entity) == {PBR: 1000.0 + i}
        assert backend.alter([Alteration.of(entity, remove=[PBR])]).ok
        assert entity not in backend.describe(EntityFilter.for_entity(entity))


@pytest.mark.kafka
def test_info_and_close(kafka_broker):
    from quota_core.backends.kafka import KafkaBackend

    with KafkaBackend(kafka_broker.bootstrap, timeout_s=5) as b:
        info = b.info()
        assert (info.kind, info.location, info.broker_count) == ("kafka", kafka_broker.bootstrap, 1)
        assert info.cluster_id == kafka_broker.cluster_id
    with pytest.raises(ConnectionFailed, match="is closed"):
        b.describe()
    b.close()  # twice is fine


# -- SASL, ACLs, unreachable brokers --------------------------------------------------------
@pytest.mark.kafka
def test_sasl_admin_from_command_config(kafka_sasl_broker, tmp_path, uniq):
    from quota_core.backends.kafka import KafkaBackend

    path = kafka_sasl_broker.write_command_config(tmp_path / "admin.properties", "admin")
    entity = Entity.of(user=f"alice-{uniq}")
    with KafkaBackend.from_command_config(kafka_sasl_broker.bootstrap, path, timeout_s=10) as b:
        assert b.config.username == "admin" and b.config.sasl_mechanism == "SCRAM-SHA-256"
        assert b.alter([Alteration.of(entity, {PBR: 4096.0})]).ok
        assert b.describe_entity(entity) == {PBR: 4096.0}
        assert b.alter([Alteration.of(entity, remove=[PBR])]).ok
        assert b.info().broker_count == 1
        assert kafka_sasl_broker.users["admin"] not in repr(b)


@pytest.mark.kafka
def test_wrong_password_names_the_user_not_the_password(kafka_sasl_broker, tmp_path):
    from quota_core.backends.kafka import KafkaBackend

    secret = f"wrong-{uuid.uuid4().hex}"
    path = tmp_path / "alice.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in _sasl_props("alice", secret).items()))
    started = time.monotonic()
    with pytest.raises(AuthenticationFailed) as info:
        KafkaBackend.from_command_config(kafka_sasl_broker.bootstrap, path, timeout_s=60)
    assert time.monotonic() - started < 20  # refused credentials are not retried
    message = str(info.value)
    assert message.startswith(f"Authentication failed for user 'alice' (SCRAM-SHA-256) at "
                              f"{kafka_sasl_broker.bootstrap}: check the username and password "
                              f"in {path}")
    assert secret not in message


@pytest.mark.kafka
def test_a_user_without_cluster_acls_is_told_which_acl_to_grant(kafka_sasl_broker):
    from quota_core.backends.kafka import KafkaBackend

    props = _sasl_props("alice", kafka_sasl_broker.users["alice"])
    with KafkaBackend(kafka_sasl_broker.bootstrap, props, timeout_s=10) as b:
        with pytest.raises(NotAuthorized) as describe:
            b.describe()
        assert str(describe.value) == (
            "User 'alice' is not allowed to DESCRIBE_CONFIGS on the cluster (needed to describe "
            "quotas): grant it with kafka-acls.sh --add --allow-principal User:alice "
            "--operation DescribeConfigs --cluster")
        for validate_only in (True, False):
            with pytest.raises(NotAuthorized) as alter:
                b.alter([Alteration.of(Entity.of(user="alice"), {PBR: 1.0})], validate_only)
            assert "not allowed to ALTER_CONFIGS on the cluster (needed to alter quotas)" in \
                str(alter.value)
            assert "--operation AlterConfigs --cluster" in str(alter.value)


@pytest.mark.kafka
def test_plaintext_client_on_a_sasl_listener(kafka_sasl_broker):
    from quota_core.backends.kafka import KafkaBackend

    with pytest.raises(AuthenticationFailed, match="requires SASL authentication"):
        KafkaBackend(kafka_sasl_broker.bootstrap, timeout_s=5)


@pytest.mark.kafka
def test_sasl_client_on_a_plaintext_listener(kafka_broker):
    from quota_core.backends.kafka import KafkaBackend

    with pytest.raises(ConfigError, match="does not use SASL"):
        KafkaBackend(kafka_broker.bootstrap, _sasl_props("alice", "pw"), timeout_s=5)


def test_unreachable_address_fails_within_the_timeout():
    from quota_core.backends.kafka import KafkaBackend

    where = f"127.0.0.1:{_closed_port()}"
    started = time.monotonic()
    with pytest.raises(ConnectionFailed) as info:
        KafkaBackend(where, timeout_s=60.0)
    assert time.monotonic() - started < 20  # refused: fail fast, not after the timeout (issue 10)
    assert re.fullmatch(
        rf"Cannot reach the Kafka cluster at {re.escape(where)}: connection refused \(\d+ "
        rf"tries in 1\.\d s; nothing listens at {re.escape(where)}\)\. Check the bootstrap "
        rf"address and that the broker is running\.", str(info.value)), str(info.value)


def test_a_broker_without_the_quota_apis_is_unsupported():
    from kafka.protocol.broker_version_data import BrokerVersionData

    from quota_core.backends.kafka import check_quota_apis

    check_quota_apis(BrokerVersionData(broker_version=(2, 6)), "b:9092")
    with pytest.raises(UnsupportedBroker) as info:
        check_quota_apis(BrokerVersionData(broker_version=(2, 5)), "b:9092")
    assert str(info.value).startswith("The broker at b:9092 does not support the client-quota "
                                      "APIs (Kafka 2.6+ needed")


@pytest.mark.kafka
def test_a_broker_that_goes_away_fails_within_the_timeout(tmp_path):
    from localkafka import LocalBroker

    from quota_core.backends.kafka import KafkaBackend

    broker = LocalBroker(tmp_path / "doomed")
    broker.start(timeout=120)
    try:
        backend = KafkaBackend(broker.bootstrap, timeout_s=60)
        assert backend.describe() == {}
        broker.stop()
        started = time.monotonic()
        with pytest.raises(ConnectionFailed, match="while describing quotas: connection refused"):
            backend.describe()
        assert time.monotonic() - started < 20  # refused: not the whole timeout (issue 10)
        backend.close()
    finally:
        broker.stop()


# -- TLS: a broker with an extra SSL listener and a self-signed certificate ------------------
@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory):
    import subprocess

    from localkafka import LocalBroker, free_port

    work = tmp_path_factory.mktemp("tls")
    cert, key, keystore = work / "cert.pem", work / "key.pem", work / "broker.p12"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-subj", "/CN=quota-console-test", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    subprocess.run(["openssl", "pkcs12", "-export", "-in", str(cert), "-inkey", str(key),
                    "-out", str(keystore), "-passout", "pass:changeit", "-name", "broker"],
                   check=True, capture_output=True)

    class TlsBroker(LocalBroker):
        tls_port = free_port()

        def server_properties(self):
            props = super().server_properties()
            endpoint = f",SSL://127.0.0.1:{self.tls_port}"
            props["listeners"] += endpoint
            props["advertised.listeners"] += endpoint
            props["listener.security.protocol.map"] += ",SSL:SSL"
            props.update({f"listener.name.ssl.ssl.{k}": v for k, v in {
                "keystore.location": str(keystore), "keystore.type": "PKCS12",
                "keystore.password": "changeit", "key.password": "changeit"}.items()})
            return props

    broker = TlsBroker(work / "broker")
    broker.start(timeout=120)
    broker.ca = cert
    yield broker
    broker.stop()


@pytest.mark.kafka
@pytest.mark.parametrize("props", [
    {"ssl.ca.location": "CA"},
    {"ssl.truststore.type": "PEM", "ssl.truststore.location": "CA"},
], ids=["ssl.ca.location", "pem-truststore"])
def test_tls_with_a_pem_ca(tls_broker, uniq, props):
    from quota_core.backends.kafka import KafkaBackend

    props = {"security.protocol": "SSL",
             **{k: str(tls_broker.ca) if v == "CA" else v for k, v in props.items()}}
    entity = Entity.of(client_id=f"tls-{uniq}")
    with KafkaBackend(f"127.0.0.1:{tls_broker.tls_port}", props, timeout_s=10) as b:
        assert b.info().cluster_id == tls_broker.cluster_id
        assert b.alter([Alteration.of(entity, {CBR: 10.0})]).ok
        assert b.describe_entity(entity) == {CBR: 10.0}
        assert b.alter([Alteration.of(entity, remove=[CBR])]).ok


@pytest.mark.kafka
def test_tls_failures_are_explained(tls_broker):
    from quota_core.backends.kafka import KafkaBackend

    tls = {"security.protocol": "SSL", "ssl.ca.location": str(tls_broker.ca)}
    port = tls_broker.tls_port
    started = time.monotonic()
    with pytest.raises(ConnectionFailed) as unknown_ca:  # the system CAs do not know it
        KafkaBackend(f"127.0.0.1:{port}", {"security.protocol": "SSL"}, timeout_s=60)
    assert time.monotonic() - started < 20  # hopeless, so no retrying until the timeout
    assert str(unknown_ca.value).startswith(f"The TLS handshake with 127.0.0.1:{port} failed:")
    assert "certificate verify failed" in str(unknown_ca.value)
    # The certificate names 127.0.0.1 only: "localhost" fails the host name check ...
    with pytest.raises(ConnectionFailed, match="certificate verify failed"):
        KafkaBackend(f"localhost:{port}", tls, timeout_s=10)
    # ... unless ssl.endpoint.identification.algorithm is empty, as in Java.
    with KafkaBackend(f"localhost:{port}",
                      {**tls, "ssl.endpoint.identification.algorithm": ""}, timeout_s=10) as b:
        assert b.info().broker_count == 1
    # A plaintext client gets a TLS alert (not a Kafka frame) or, when kafka-python drops
    # the alert that arrives together with the close, just the close:
    with pytest.raises(ConnectionFailed) as plaintext:
        KafkaBackend(f"127.0.0.1:{port}", timeout_s=5)
    assert str(plaintext.value) in (
        f"The broker at 127.0.0.1:{port} does not answer in the Kafka protocol over "
        f"plaintext: its listener most likely uses TLS. Set security.protocol=SSL (or SASL_SSL) "
        f"and ssl.ca.location in the client properties.",
        f"Cannot reach the Kafka cluster at 127.0.0.1:{port} after 5.0 s: the broker closed "
        f"the connection (if its listener uses TLS or SASL, set security.protocol in the "
        f"client properties). Check the bootstrap address and that the broker is running.")


def _chain(exc: BaseException):
    while exc is not None:
        yield exc
        exc = exc.__cause__ or exc.__context__


@pytest.mark.kafka
def test_secrets_never_appear_in_errors_reprs_or_logs(kafka_broker, kafka_sasl_broker,
                                                      tmp_path, caplog):
    from quota_core.backends.kafka import _REDACTOR, KafkaBackend

    caplog.set_level(logging.DEBUG)  # kafka-python logs whole requests at DEBUG
    secret = f"S3cr3t-{uuid.uuid4().hex}"
    sasl = kafka_sasl_broker.bootstrap
    errors: list[QuotaError] = []

    def provoke(fn, *args, **kwargs):
        with pytest.raises(QuotaError) as info:
            fn(*args, **kwargs)
        errors.append(info.value)

    provoke(KafkaBackend, sasl, _sasl_props("alice", secret), timeout_s=5)
    provoke(KafkaBackend, sasl, _sasl_props("alice", secret, "SCRAM-SHA-512"), timeout_s=5)
    provoke(KafkaBackend, sasl, _sasl_props("alice", secret, "PLAIN"), timeout_s=5)
    provoke(KafkaBackend, kafka_broker.bootstrap, _sasl_props("alice", secret), timeout_s=5)
    provoke(KafkaBackend, f"127.0.0.1:{_closed_port()}", _sasl_props("alice", secret),
            timeout_s=1)
    provoke(KafkaBackend, sasl, {**_sasl_props("alice", secret), "sasl.mechansim": "PLAIN"})
    provoke(KafkaBackend, sasl, {"security.protocol": "SASL_PLAINTEXT",
                                 "sasl.mechanism": "SCRAM-SHA-256",
                                 "sasl.jaas.config": f'{SCRAM} required password="{secret}"'})
    provoke(KafkaBackend, sasl, {"security.protocol": "SASL_PLAINTEXT",
                                 "sasl.mechanism": "SCRAM-SHA-256",
                                 "sasl.jaas.config": f'{PLAIN} required username="a" '
                                                     f'password="{secret}";'})
    provoke(KafkaBackend, sasl, {"security.protocol": "PLAINTEXT",
                                 "sasl.jaas.config": f'{SCRAM} required username="a" '
                                                     f'password="{secret}";'})
    path = tmp_path / "bad.properties"
    path.write_text("\n".join(f"{k}={v}" for k, v in _sasl_props("alice", secret).items())
                    + f"\nssl.keystore.password={secret}\nunknown.key={secret}\n")
    provoke(KafkaBackend.from_command_config, sasl, path)
    # alice's own (right) password, refused by the ACLs instead:
    alice_pw = kafka_sasl_broker.users["alice"]
    with KafkaBackend(sasl, _sasl_props("alice", alice_pw), timeout_s=5) as alice:
        assert alice_pw not in repr(alice) and alice_pw not in repr(alice.config)
        provoke(alice.describe)
        provoke(alice.alter, [Alteration.of(Entity.of(user="x"), {PBR: 1.0})])
    assert {type(e).__name__ for e in errors} >= {"AuthenticationFailed", "ConfigError",
                                                   "ConnectionFailed", "NotAuthorized"}
    for error in errors:
        for exc in _chain(error):
            for text in (str(exc), repr(exc), repr(getattr(exc, "context", ""))):
                assert secret not in text and alice_pw not in text, text
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "SaslAuthenticateRequest" in logged  # the DEBUG records really were captured
    assert secret not in logged and alice_pw not in logged
    # SASL/PLAIN sends the password inside the auth bytes, which kafka-python logs at DEBUG:
    _REDACTOR.add([secret])
    try:
        logging.getLogger("kafka.protocol.parser").debug(
            "Send: %r", b"\x00alice\x00" + secret.encode())
    finally:
        _REDACTOR.remove([secret])
    assert secret not in caplog.records[-1].getMessage()
    assert "***" in caplog.records[-1].getMessage()


# -- client properties (pure) ---------------------------------------------------------------
@pytest.mark.parametrize("text, expected", [
    ("a=b", {"a": "b"}),
    ("a = b ", {"a": "b "}),
    ("a: b", {"a": "b"}),
    ("a b", {"a": "b"}),
    ("a", {"a": ""}),
    ("# comment\n! also\n\n  a=b", {"a": "b"}),
    ("a=b=c", {"a": "b=c"}),
    ("a\\=b=c", {"a=b": "c"}),
    ("a\\ b=c", {"a b": "c"}),
    ("long=one \\\n    two", {"long": "one two"}),
    ("x=ends\\\\\ny=z", {"x": "ends\\", "y": "z"}),
    ("u=caf\\u00e9\\tx", {"u": "café\tx"}),
    ("a=1\na=2", {"a": "2"}),
    ("a=#not a comment", {"a": "#not a comment"}),
])
def test_parse_properties(text, expected):
    assert parse_properties(text) == expected


_KEY = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12)
_VALUE = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)


def _escape(text: str, key: bool) -> str:
    """Java's Properties.store escaping (without its \\uXXXX for non-ASCII)."""
    out = []
    for i, ch in enumerate(text):
        if ch in "\n\r\t\f":
            out.append({"\n": "\\n", "\r": "\\r", "\t": "\\t", "\f": "\\f"}[ch])
        elif ch == "\\" or ch in "=:#!" or (ch == " " and (key or i == 0)):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


@given(st.dictionaries(_KEY, _VALUE, max_size=6))
def test_properties_round_trip(props):
    text = "\n".join(f"{_escape(k, True)}={_escape(v, False)}" for k, v in props.items())
    assert parse_properties(text) == props


@pytest.mark.parametrize("jaas, expected", [
    (f'{SCRAM} required username="alice" password="pw";', {"username": "alice", "password": "pw"}),
    (f"{SCRAM} required\n  username=alice\n  password=pw;",
     {"username": "alice", "password": "pw"}),
    (f'{PLAIN} required username="a b" password="p\\"w;=";',
     {"username": "a b", "password": 'p"w;='}),
])
def test_parse_jaas_config(jaas, expected):
    assert parse_jaas_config(jaas)[2] == expected


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


@given(st.text(min_size=1, max_size=20), st.text(min_size=1, max_size=20))
def test_jaas_round_trip(user, password):
    text = f"{SCRAM} required username={_quote(user)} password={_quote(password)};"
    assert parse_jaas_config(text) == (SCRAM, "required",
                                       {"username": user, "password": password})


@given(st.text(max_size=30), st.text(max_size=30))
def test_jaas_errors_never_show_the_password(before, after):
    secret = "Pa55-w0rd-XYZ"
    text = f"{before}password={secret}{after}"
    try:
        parse_jaas_config(text)
    except ConfigError as exc:
        assert secret not in str(exc) and secret not in repr(exc.context)


def test_client_config_maps_sasl_and_ssl(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    cfg = client_config({"security.protocol": "sasl_ssl", "sasl.mechanism": "SCRAM-SHA-512",
                         "sasl.jaas.config": f'{SCRAM} required username="bob" password="xyzzy";',
                         "ssl.ca.location": str(ca), "ssl.endpoint.identification.algorithm": "",
                         "ssl.truststore.location": "/etc/kafka/truststore.jks",
                         "client.id": "ops", "request.timeout.ms": "5000", "retries": "3"})
    kw = cfg.kafka_python_kwargs()
    assert kw["security_protocol"] == "SASL_SSL" and kw["sasl_mechanism"] == "SCRAM-SHA-512"
    assert (kw["sasl_plain_username"], kw["sasl_plain_password"]) == ("bob", "xyzzy")
    assert kw["ssl_cafile"] == str(ca) and kw["ssl_check_hostname"] is False
    assert kw["client_id"] == "ops" and cfg.request_timeout_ms == 5000
    assert cfg.ignored == ("retries", "ssl.truststore.location")
    assert "xyzzy" not in repr(cfg) and "xyzzy" not in str(cfg)


@pytest.mark.parametrize("props, message", [
    ({"sasl.mechansim": "PLAIN", "bootstrap.server": "x"},
     "Unknown Kafka client properties (from the client properties): bootstrap.server, "
     "sasl.mechansim."),
    ({"security.protocol": "SASL_PLAINTEXT"}, "sasl.mechanism is not set"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI"},
     "sasl.mechanism=GSSAPI is not supported"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"},
     "needs sasl.jaas.config"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
      "sasl.jaas.config": f'{SCRAM} required username="a" password="b";'},
     "uses the login module"),
    ({"sasl.mechanism": "PLAIN"}, "security.protocol=PLAINTEXT, so no SASL"),
    ({"security.protocol": "TLS"}, "security.protocol=TLS is not supported"),
    ({"security.protocol": "SSL", "ssl.truststore.location": "/x/truststore.jks"},
     "ssl.truststore.location is a JKS truststore, which Python cannot read. Export it to PEM"),
    ({"security.protocol": "SSL", "ssl.keystore.location": "/x/k.p12",
      "ssl.keystore.type": "PKCS12"}, "is a PKCS12 keystore, which Python cannot read"),
    ({"security.protocol": "SSL", "ssl.ca.location": "/no/such/ca.pem"},
     "The CA certificate file /no/such/ca.pem (from the client properties) does not exist"),
    ({"request.timeout.ms": "soon"}, "request.timeout.ms=soon is not a positive whole number"),
])
def test_client_config_errors(props, message):
    with pytest.raises(ConfigError) as info:
        client_config(props)
    assert message in str(info.value)


def test_command_config_file_errors(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_command_config(tmp_path / "missing.properties")
    path = tmp_path / "latin1.properties"
    path.write_bytes(b"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                     b'sasl.jaas.config=' + PLAIN.encode() + b' required username="Jos\xe9" '
                     b'password="p";\n')
    assert load_command_config(path).username == "José"
    assert load_command_config(path).source == str(path)
    assert str(Path(path)) in repr(load_command_config(path))
