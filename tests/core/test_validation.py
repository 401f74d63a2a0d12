"""Client-side validation (exact messages) and the broker's own rules that the sandbox mirrors."""
import math

import pytest

from quota_core.backends.sandbox import host_resolves
from quota_core import (Alteration, AlterationError, Entity, EntityError, Op, alteration_problems,
                        broker_rejection, validate_alterations)

E = Entity.of
ALICE = E(user="alice")


@pytest.mark.parametrize("entity, ops, message", [
    (ALICE, [Op("producer_byte_rate", math.nan)],
     "producer_byte_rate for {user=alice}: NaN is not a quota. Give a number greater than 0."),
    (ALICE, [Op("request_percentage", math.inf)],
     "request_percentage for {user=alice}: infinity is not a quota. To make it unlimited, "
     "delete the key (--delete request_percentage)."),
    (ALICE, [Op("producer_byte_rate", 0.0)],
     "producer_byte_rate for {user=alice}: 0 is not allowed; a quota must be greater than 0. "
     "To make it unlimited, delete the key (--delete producer_byte_rate)."),
    (ALICE, [Op("consumer_byte_rate", -5.0)],
     "consumer_byte_rate for {user=alice}: -5 is not allowed; a quota must be greater than 0. "
     "To make it unlimited, delete the key (--delete consumer_byte_rate)."),
    (ALICE, [Op("producer_byte_rate", 1.5)],
     "producer_byte_rate for {user=alice}: 1.5 has a fraction, but producer_byte_rate is a "
     "whole number (bytes/s). Round it to 2."),
    (ALICE, [Op("producer_byte_rate", 2.0**64)],
     "producer_byte_rate for {user=alice}: 18446744073709551616 is too large for a LONG (at most "
     "9223372036854775807). Give a smaller value."),
    (E(ip="10.0.0.1"), [Op("connection_creation_rate", 2.0**31)],
     "connection_creation_rate for {ip=10.0.0.1}: 2147483648 is too large for an INT (at most "
     "2147483647). Give a smaller value."),
    (ALICE, [Op("connection_creation_rate", 5.0)],
     "{user=alice}: unknown quota key 'connection_creation_rate' for a user/client-id entity. "
     "Valid keys: consumer_byte_rate, controller_mutation_rate, producer_byte_rate, "
     "request_percentage."),
    (E(ip=None), [Op("producer_byte_rate", 5.0)],
     "{ip=<default>}: unknown quota key 'producer_byte_rate' for an ip entity. Valid keys: "
     "connection_creation_rate."),
    (ALICE, [Op("bogus", None)],
     "{user=alice}: unknown quota key 'bogus' for a user/client-id entity. Valid keys: "
     "consumer_byte_rate, controller_mutation_rate, producer_byte_rate, request_percentage."),
    (ALICE, [Op("producer_byte_rate", 5.0), Op("producer_byte_rate", None)],
     "producer_byte_rate for {user=alice} is both set and removed. Keep one: --add "
     "producer_byte_rate=VALUE or --delete producer_byte_rate."),
    (ALICE, [Op("producer_byte_rate", 5.0), Op("producer_byte_rate", 6.0)],
     "producer_byte_rate for {user=alice} is given twice. Give each key once."),
    (ALICE, [], "{user=alice}: nothing to change. Give --add key=value or --delete key."),
])
def test_client_side_messages(entity, ops, message):
    problems = alteration_problems(Alteration(entity, tuple(ops)))
    assert [p.message for p in problems] == [message]
    assert problems[0].entity == entity


def test_ip_host_name_is_refused_with_an_explanation():
    [problem] = alteration_problems(Alteration(E(ip="localhost"),
                                               (Op("connection_creation_rate", 5.0),)))
    assert "'localhost' is not an IP address" in problem.message
    assert "resolves the name once" in problem.message


@pytest.mark.parametrize("ip", ["10.0.0.1", "::1", "2001:db8::7"])
def test_ip_addresses_pass(ip):
    assert alteration_problems(Alteration(E(ip=ip), (Op("connection_creation_rate", 5.0),))) == []


def test_every_problem_is_reported_and_nothing_passes():
    alts = [Alteration(ALICE, (Op("producer_byte_rate", -1.0),)),
            Alteration(E(user="bob"), (Op("request_percentage", math.nan),)),
            Alteration(ALICE, (Op("consumer_byte_rate", 5.0),))]
    with pytest.raises(AlterationError) as info:
        validate_alterations(alts)
    assert len(info.value.problems) == 3
    assert "appears twice in one request" in info.value.problems[2].message
    assert info.value.message.startswith("3 problems, nothing was sent:")


@pytest.mark.parametrize("pairs, message", [
    ([("user", "")], "Empty user not supported: give a non-empty user name, or use the default "
                     "user (--defaults user)."),
    ([("client-id", "")], "Empty client-id not supported: give a non-empty client id name, or "
                          "use the default client id (--defaults client-id)."),
    ([("ip", "10.0.0.1"), ("user", "a")], "An ip entity cannot be combined with user or "
     "client-id: ip quotas (connection_creation_rate) stand alone; alter them in a separate entity."),
    ([("group", "x")], "Unknown entity type 'group': use one of user, client-id, ip."),
    ([], "An empty entity is not a quota entity: name a user, a client id, or an ip (or the "
         "default of one of them)."),
])
def test_entity_rules(pairs, message):
    with pytest.raises(EntityError) as info:
        Entity.from_pairs(pairs)
    assert str(info.value) == message


# What a KRaft controller answers (ClientQuotaControlManager), mirrored by the sandbox.
@pytest.mark.parametrize("entity, ops, error", [
    (ALICE, [Op("producer_byte_rate", 1024.0)], None),
    (ALICE, [Op("producer_byte_rate", math.nan)], None),          # brokers accept NaN
    (ALICE, [Op("request_percentage", math.inf)], None),          # and +inf for doubles
    (ALICE, [Op("producer_byte_rate", math.inf)],
     "Proposed value for producer_byte_rate is too large for a LONG."),
    (ALICE, [Op("producer_byte_rate", 2.0**63)], None),           # Java's double compare
    (ALICE, [Op("producer_byte_rate", 0.0)], "Quota producer_byte_rate must be greater than 0"),
    (ALICE, [Op("producer_byte_rate", 1.5)], "producer_byte_rate cannot be a fractional value."),
    (ALICE, [Op("producer_byte_rate", 1.0000001)], None),          # within 1e-6
    (ALICE, [Op("request_percentage", 1e9)], None),                # no upper bound
    (ALICE, [Op("bogus", 1.0)], "Invalid configuration key bogus"),
    (ALICE, [Op("bogus", None)], None),                            # removals are not validated
    (E(ip="10.0.0.1"), [Op("connection_creation_rate", 1.5)],
     "connection_creation_rate cannot be a fractional value."),
    (E(ip="10.0.0.1"), [Op("connection_creation_rate", 2.0**31)],
     "Proposed value for connection_creation_rate is too large for an INT."),
    (E(ip="no-such-host.invalid"), [Op("connection_creation_rate", 1.0)],
     "no-such-host.invalid is not a valid IP or resolvable host."),
])
def test_broker_rules(entity, ops, error):
    assert broker_rejection(Alteration(entity, tuple(ops)), resolvable=host_resolves) == error


def test_broker_rejects_duplicate_keys():
    assert broker_rejection(Alteration(ALICE, (Op("producer_byte_rate", 1.0),
                                               Op("producer_byte_rate", None))),
                            resolvable=host_resolves) is not None


def test_long_max_as_typed_is_accepted():
    # 9223372036854775807 becomes the double 2**63 on the wire; the broker accepts it.
    assert alteration_problems(Alteration(ALICE, (Op("producer_byte_rate",
                                                     float(9223372036854775807)),))) == []


@pytest.mark.parametrize("ip, message", [
    ("0:0:0:0:0:0:0:1", "write the address '0:0:0:0:0:0:0:1' as '::1'"),
    ("2001:DB8::1", "write the address '2001:DB8::1' as '2001:db8::1'"),
    ("fe80::1%eth0", "'fe80::1%eth0' is not an IP address"),
])
def test_ip_spelling(ip, message):
    [problem] = alteration_problems(Alteration(E(ip=ip), (Op("connection_creation_rate", 5.0),)))
    assert message in problem.message


def test_resolve_ip_matches_any_spelling_of_the_address():
    from quota_core import resolve_ip

    quotas = {E(ip="::1"): {"connection_creation_rate": 5.0}}
    assert resolve_ip(quotas, "0:0:0:0:0:0:0:1").keys["connection_creation_rate"].level == 1
