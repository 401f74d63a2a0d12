"""The ladder is defined once (quota_core.domain.ladder): every resolver follows an edit made there.

Each test edits only ``quota_core.domain.ladder`` (a reordered table, a changed narrowing rule) and
checks that per-pair resolution, the lean resolver, bulk resolution, bucket resolution,
browse's level and impact's "is it on this client's ladder" all follow, by comparing them
with a plain reading of the (edited) table.
"""
from __future__ import annotations

import random

import pytest

from quota_core.domain import ladder
from ui.browse import entity_level
from quota_core.domain.bulk import bulk_resolve, bulk_resolve_buckets
from quota_core.domain.entities import Entity
from quota_core.planning.impact import could_affect
from quota_core.domain.keys import CLIENT_KEYS
from quota_core.domain.ladder import ABSENT, DEFAULT, NAME, Rung
from quota_core.domain.resolution import resolve, resolve_values

USERS = ["alice", "bob", "", "<default>", "ANONYMOUS"]
CLIENTS = ["app", "cli", "", "x=y,z"]


def random_quotas(seed: int) -> dict[Entity, dict[str, float]]:
    rnd = random.Random(seed)
    out: dict[Entity, dict[str, float]] = {}
    for r in ladder.LADDER:
        for u in USERS:
            for c in CLIENTS:
                if not (u and c) or rnd.random() < 0.6:
                    continue
                entity = r.entity_for(u, c)
                out[entity] = {k: float(rnd.randint(1, 9) * 1000 + r.level)
                               for k in CLIENT_KEYS if rnd.random() < 0.5}
    return {e: q for e, q in out.items() if q}


def reference(quotas, user: str, client_id: str, key: str):
    """The table read plainly: the first consulted rung holding the key."""
    for r in ladder.LADDER:
        if ladder.consulted(r, bool(user), bool(client_id)):
            q = quotas.get(r.entity_for(user, client_id), {})
            if key in q:
                return q[key], r.level
    return None


def reference_bucket(quotas, user: str | None, client_id: str | None, key: str):
    allowed = ladder.levels_for_tags(bool(user), bool(client_id))
    for r in ladder.LADDER:
        if r.level in allowed:
            q = quotas.get(r.entity_for(user or "", client_id or ""), {})
            if key in q:
                return q[key], r.level
    return None


def check_all_resolvers_follow_the_table():
    quotas = random_quotas(7)
    pairs = [(u, c) for u in USERS for c in CLIENTS]
    bulk = bulk_resolve(quotas, [u for u, _ in pairs], [c for _, c in pairs])
    for i, (u, c) in enumerate(pairs):
        full, lean = resolve(quotas, u, c), resolve_values(quotas, u, c)
        for key in CLIENT_KEYS:
            want = reference(quotas, u, c, key)
            assert lean[key] == want, (u, c, key)
            got = full.keys[key]
            assert (None if got.level is None else (got.value, got.level)) == want
            level = int(bulk.levels[key][i])
            assert (None if level == 0 else (float(bulk.values[key][i]), level)) == want
    buckets = [(u or None, c or None) for u, c in pairs]
    by_tags = bulk_resolve_buckets(quotas, [u for u, _ in buckets], [c for _, c in buckets])
    for i, (u, c) in enumerate(buckets):
        for key in CLIENT_KEYS:
            want = reference_bucket(quotas, u, c, key)
            level = int(by_tags.levels[key][i])
            assert (None if level == 0 else (float(by_tags.values[key][i]), level)) == want
    for entity in quotas:
        level = ladder.level_of(entity)
        assert entity_level(entity) == str(level)
        for u, c in pairs:
            on = ladder.consulted(ladder.rung(level), bool(u), bool(c)) and \
                ladder.rung(level).entity_for(u, c) == entity
            assert could_affect(entity, u, c) is on


def test_resolvers_agree_with_the_table_as_shipped():
    check_all_resolvers_follow_the_table()


def test_a_reordered_table_is_followed_everywhere(monkeypatch):
    # A hypothetical Kafka that consults {user=<default>, client-id=C} before {user=U}.
    reordered = (Rung(1, NAME, NAME), Rung(2, NAME, DEFAULT), Rung(3, DEFAULT, NAME),
                 Rung(4, NAME, ABSENT), Rung(5, DEFAULT, DEFAULT), Rung(6, DEFAULT, ABSENT),
                 Rung(7, ABSENT, NAME), Rung(8, ABSENT, DEFAULT))
    monkeypatch.setattr(ladder, "LADDER", reordered)
    quotas = {Entity.of(user="alice"): {"producer_byte_rate": 1.0},
              Entity.of(user=None, client_id="app"): {"producer_byte_rate": 2.0}}
    assert resolve_values(quotas, "alice", "app")["producer_byte_rate"] == (2.0, 3)
    check_all_resolvers_follow_the_table()


def test_a_changed_narrowing_rule_is_followed_everywhere(monkeypatch):
    # A hypothetical Kafka that consults every rung, even for an empty client id.
    monkeypatch.setattr(ladder, "consulted", lambda r, has_user, has_client: True)
    quotas = {Entity.of(client_id=None): {"producer_byte_rate": 5.0}}
    assert resolve_values(quotas, "alice", "")["producer_byte_rate"] == (5.0, 8)
    check_all_resolvers_follow_the_table()


@pytest.mark.parametrize("has_user, has_client, levels", [
    (True, True, {1, 2, 4, 5}), (True, False, {3, 6}), (False, True, {7, 8}),
    (False, False, set()),
])
def test_levels_for_tags(has_user, has_client, levels):
    assert ladder.levels_for_tags(has_user, has_client) == levels


@pytest.mark.parametrize("user, client_id, levels", [
    ("u", "c", set(range(1, 9))), ("u", "", {3, 6}), ("", "c", {7, 8}), ("", "", set()),
])
def test_active_levels(user, client_id, levels):
    assert ladder.active_levels(user, client_id) == levels
