"""Reruns that redo only what changed (issue 19, item 3): the work a rerun keeps from the last
one is counted here, never timed (benchmarks/bench_browser.py has the figures)."""
from __future__ import annotations

import random

import pytest

from quota_core.entities import Entity
from quota_core.membership import Membership
from ui.browse import ALL_KEYS
from ui.membership import SharedMembership

E = Entity.of


def random_set(seed: int, n: int = 400) -> dict:
    """Every ladder shape, a few names (so many entries share them), an ip or two, and
    keys held by mixed shapes."""
    rnd = random.Random(seed)
    users = ["alice", "bob", "carol", "<default>", "svc-1", "svc-2"]
    clients = ["app", "api", "batch", "<default>", "", "x=1,y"]
    makers = [lambda u, c: E(user=u, client_id=c), lambda u, c: E(user=u, client_id=None),
              lambda u, c: E(user=u), lambda u, c: E(user=None, client_id=c),
              lambda u, c: E(user=None, client_id=None), lambda u, c: E(user=None),
              lambda u, c: E(client_id=c), lambda u, c: E(client_id=None),
              lambda u, c: E(ip=f"10.0.0.{rnd.randrange(9)}")]
    quotas: dict = {}
    for _ in range(n):
        entity = rnd.choice(makers)(rnd.choice(users) + str(rnd.randrange(8)),
                                    rnd.choice(clients) + str(rnd.randrange(8)))
        keys = rnd.sample(ALL_KEYS[:3], rnd.randrange(1, 3))
        quotas[entity] = {k: float(rnd.randrange(1, 9) * 1024) for k in keys}
    return quotas


@pytest.mark.parametrize("seed", range(6))
def test_shared_membership_names_the_same_buckets_as_the_core(seed):
    quotas = random_set(seed)
    core, shared = Membership(quotas), SharedMembership(quotas)
    shared.warm(ALL_KEYS)
    users = {e.name("user") for e in quotas if e.has("user")} - {None}
    clients = {e.name("client-id") for e in quotas if e.has("client-id")} - {None}
    asked = 0
    for key in ALL_KEYS:
        for tags in ([(u, None) for u in users | {"nobody"}]
                     + [(None, c) for c in clients | {"no-such-app"}]
                     + [("alice1", "app1"), (None, None)]):
            assert shared.excepted(key, tags) == core.excepted(key, tags), (key, tags)
            assert shared.sharers(key, tags) == core.sharers(key, tags)
            asked += bool(core.excepted(key, tags))
    assert asked  # some buckets do have names taken out of them


def test_a_long_list_of_names_taken_out_of_a_bucket_is_cut_short():
    # {user=<default>, client-id=app-N} takes app-N out of alice's {user=<default>} bucket:
    # 25 of them are counted, 10 named (a 100,000-entry set named 29,000 on every keystroke).
    quotas = {E(user=None): {"producer_byte_rate": 1024.0}}
    quotas |= {E(user=None, client_id=f"app-{i:02d}"): {"producer_byte_rate": 2048.0}
               for i in range(25)}
    for members in (Membership(quotas), SharedMembership(quotas)):
        text = members.sharers("producer_byte_rate", ("alice", None))
        assert text == ("every client id of user 'alice' except "
                        + ", ".join(f"'app-{i:02d}'" for i in range(10))
                        + " and 15 more (in a bucket of their own)")
    from quota_core import explain_key, resolve

    sentence = explain_key(resolve(quotas, "alice", "web"), "producer_byte_rate", quotas)
    assert "'app-09' and 15 more, in a bucket of their own" in sentence
    assert "'app-10'" not in sentence
