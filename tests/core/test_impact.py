"""quota_core.planning.impact: per-key diffs, known clients, which clients a change moves, conflicts."""
from __future__ import annotations

import pytest

from quota_core import Alteration, Entity, Op
from localkafka.demo import demo_quotas
from quota_core.errors import ConcurrentChange, ParseError
from quota_core.planning.impact import (ANY_OTHER, KeyChange, apply_alteration, client_impact,
                                        client_label, clients_from_entries, could_affect,
                                        ensure_unchanged, entity_diff, ip_impact, parse_clients_csv)
from quota_core.domain.keys import CLIENT_KEYS
from quota_core.domain.resolution import ANONYMOUS, resolve_values

E = Entity.of
MiB = 1024 * 1024


@pytest.mark.parametrize("before, after, expected", [
    ({}, {"producer_byte_rate": 1.0}, [("producer_byte_rate", "set")]),
    ({"producer_byte_rate": 1.0}, {}, [("producer_byte_rate", "removed")]),
    ({"producer_byte_rate": 1.0}, {"producer_byte_rate": 2.0}, [("producer_byte_rate", "changed")]),
    ({"producer_byte_rate": 1.0, "request_percentage": 5.0},
     {"producer_byte_rate": 1.0, "consumer_byte_rate": 3.0},
     [("consumer_byte_rate", "set"), ("producer_byte_rate", "unchanged"),
      ("request_percentage", "removed")]),
])
def test_entity_diff(before, after, expected):
    assert [(c.key, c.change) for c in entity_diff(before, after)] == expected


@pytest.mark.parametrize("change, text", [
    (KeyChange("producer_byte_rate", None, 1048576.0), "producer_byte_rate: set to 1 MiB/s (was not set)"),
    (KeyChange("producer_byte_rate", 1048576.0, None), "producer_byte_rate: removed (was 1 MiB/s)"),
    (KeyChange("request_percentage", 50.0, 25.0), "request_percentage: 50% of a thread → 25% of a thread"),
])
def test_key_change_describe(change, text):
    assert change.describe() == text


def test_apply_alteration_copies_and_removes_empty_entities():
    quotas = demo_quotas()
    alice = E(user="alice")
    gone = apply_alteration(quotas, Alteration.of(alice, remove=["producer_byte_rate",
                                                                 "consumer_byte_rate",
                                                                 "request_percentage"]))
    assert alice not in gone and alice in quotas
    new = apply_alteration(quotas, Alteration.of(E(user="zed"), set={"producer_byte_rate": 5}))
    assert new[E(user="zed")] == {"producer_byte_rate": 5.0}
    assert E(user="zed") not in quotas


def test_clients_from_entries():
    clients = clients_from_entries(demo_quotas())
    assert ("alice", "checkout-api") in clients       # named pair
    assert ("alice", ANY_OTHER) in clients            # alice, any other client id
    assert (ANY_OTHER, "reports") in clients          # any other user, client id reports
    assert ("<default>", ANY_OTHER) in clients        # the literal name is a name
    assert (ANY_OTHER, ANY_OTHER) in clients
    assert len(clients) == len(set(clients))
    assert not any(c == "10.0.0.12" or u == "10.0.0.12" for u, c in clients)


@pytest.mark.parametrize("user, client_id, label", [
    ("alice", "app", "alice · app"),
    (ANY_OTHER, "app", "any other user · app"),
    ("alice", ANY_OTHER, "alice · any other client id"),
    ("alice", "", "alice · (empty client id)"),
])
def test_client_label(user, client_id, label):
    assert client_label(user, client_id) == label


@pytest.mark.parametrize("text, expected", [
    ("user,client_id\nalice,app\n", [("alice", "app")]),
    ("user,client-id\nalice,app\n", [("alice", "app")]),
    ("alice,app\nbob\n,legacy\n\n", [("alice", "app"), ("bob", ""), (ANONYMOUS, "legacy")]),
    ('"CN=etl,OU=data",loader\n', [("CN=etl,OU=data", "loader")]),
    (" alice , app \n", [("alice", "app")]),
])
def test_parse_clients_csv(text, expected):
    assert parse_clients_csv(text) == expected


def test_parse_clients_csv_too_many_columns():
    with pytest.raises(ParseError, match="Line 2 of the clients file has 3 columns"):
        parse_clients_csv("alice,app\nCN=etl,OU=data,loader\n")


@pytest.mark.parametrize("entity, client, affected", [
    (E(user="alice", client_id="app"), ("alice", "app"), True),
    (E(user="alice", client_id="app"), ("alice", "other"), False),
    (E(user="alice", client_id=None), ("alice", "other"), True),
    (E(user="alice", client_id=None), ("bob", "other"), False),
    (E(user="alice"), ("alice", "x"), True),
    (E(user=None, client_id="app"), ("bob", "app"), True),
    (E(user=None, client_id="app"), ("bob", "x"), False),
    (E(user=None), ("anyone", "x"), True),
    (E(client_id="app"), ("anyone", "app"), True),
    (E(client_id=None), ("anyone", "x"), True),
    (E(ip="10.0.0.1"), ("anyone", "x"), False),
])
def test_could_affect(entity, client, affected):
    assert could_affect(entity, *client) is affected


def _brute_force(before, after, clients, keys=CLIENT_KEYS):
    out = set()
    for u, c in clients:
        b, a = resolve_values(before, u, c, keys), resolve_values(after, u, c, keys)
        for k in keys:
            if b[k] != a[k]:
                out.add((u, c, k))
    return out


CHANGES = [
    Alteration.of(E(user="alice"), set={"producer_byte_rate": 3 * MiB}),     # shadowed for checkout-api
    Alteration.of(E(user="alice", client_id="checkout-api"), remove=["producer_byte_rate"]),
    Alteration.of(E(user=None), set={"request_percentage": 10.0}),
    Alteration.of(E(client_id=None), set={"producer_byte_rate": 1000.0}),
    Alteration.of(E(user=None, client_id="reports"), remove=["consumer_byte_rate"]),
    Alteration.of(E(client_id="legacy-app"), set={"consumer_byte_rate": 1000.0}),
    Alteration.of(E(user="<default>"), set={"producer_byte_rate": 7.0}),
]


@pytest.mark.parametrize("alteration", CHANGES, ids=[str(a.entity) for a in CHANGES])
def test_client_impact_matches_brute_force(alteration):
    before = demo_quotas()
    after = apply_alteration(before, alteration)
    clients = clients_from_entries(before) + [("bob", "checkout-api"), (ANONYMOUS, "legacy-app"),
                                              ("carol", "reports"), ("dave", "mobile-gateway")]
    changes = client_impact(before, after, clients, [alteration.entity])
    assert {(c.user, c.client_id, c.key) for c in changes} == _brute_force(before, after, clients)


def test_client_impact_values_and_levels():
    before = demo_quotas()
    alteration = Alteration.of(E(user="alice", client_id="checkout-api"),
                               remove=["producer_byte_rate"])
    changes = client_impact(before, apply_alteration(before, alteration),
                            [("alice", "checkout-api")], [alteration.entity])
    assert len(changes) == 1
    c = changes[0]
    assert (c.key, c.before, c.before_level, c.after, c.after_level) == \
        ("producer_byte_rate", 8 * MiB, 1, 2 * MiB, 3)
    assert c.describe() == "8 MiB/s (level 1) → 2 MiB/s (level 3)"
    assert c.label == "alice · checkout-api"


def test_a_shadowed_change_moves_nobody():
    before = demo_quotas()
    # {client-id=<default>} producer is shadowed for every client that has a user-level entry,
    # and {user=<default>} sets producer_byte_rate for every user: level 8 is never reached.
    alteration = Alteration.of(E(client_id=None), set={"producer_byte_rate": 1.0})
    clients = clients_from_entries(before)
    assert client_impact(before, apply_alteration(before, alteration), clients,
                         [alteration.entity]) == []


def test_ip_impact():
    before = demo_quotas()
    default = Alteration.of(E(ip=None), set={"connection_creation_rate": 5.0})
    changes = ip_impact(before, apply_alteration(before, default), default.entity)
    assert [(c.label, c.before, c.after) for c in changes] == [("any other ip", 100.0, 5.0)]
    own = Alteration.of(E(ip="10.0.0.12"), remove=["connection_creation_rate"])
    changes = ip_impact(before, apply_alteration(before, own), own.entity)
    assert [(c.label, c.before, c.before_level, c.after, c.after_level) for c in changes] == \
        [("10.0.0.12", 20.0, 1, 100.0, 2)]
    assert ip_impact(before, before, E(user="alice")) == []


def test_ensure_unchanged():
    alice = E(user="alice")
    ensure_unchanged(alice, {"producer_byte_rate": 1.0}, {"producer_byte_rate": 1.0})
    with pytest.raises(ConcurrentChange) as info:
        ensure_unchanged(alice, {"producer_byte_rate": 1.0},
                         {"producer_byte_rate": 2.0, "request_percentage": 9.0})
    message = str(info.value)
    assert message.startswith("{user=alice} changed since this form was loaded (")
    assert "producer_byte_rate: 1 B/s → 2 B/s" in message
    assert "request_percentage: set to 9% of a thread (was not set)" in message
    assert "Nothing was applied" in message
    assert [c.key for c in info.value.context["changes"]] == ["producer_byte_rate",
                                                             "request_percentage"]


def test_client_impact_scales():
    import time

    before = {E(user=f"u{i}", client_id=f"c{i}"): {"producer_byte_rate": 1000.0}
              for i in range(100_000)}
    before[E(user=None)] = {"producer_byte_rate": 500.0}
    alteration = Alteration(E(user=None), (Op.set("producer_byte_rate", 600.0),))
    clients = clients_from_entries(before)
    started = time.perf_counter()
    changes = client_impact(before, apply_alteration(before, alteration), clients,
                            [alteration.entity])
    assert time.perf_counter() - started < 20  # ~4 s here: 300k clients, 200k changes
    # Everyone but the named pairs resolves through {user=<default>}: each user with any
    # other client id, any other user with each client id, and any other pair.
    assert len(changes) == 100_000 + 100_000 + 1
