"""Issue 27 item 7/8: the Quick start's demo paragraph (docs/quickstart.md, once the README's)
says what the demo shows. It promised two
throttled buckets (alice's and bob's) while carol's fetch is throttled too, so a newcomer saw
three. Here the demo's own data (localkafka.demo: its quotas, producers, consumers and where
their partitions lead) decides which buckets go over their quota, by the ladder and the
broker's bucket rules, and the Quick start's paragraph must name exactly those."""
from __future__ import annotations

import re
from pathlib import Path

from quota_core import resolve
from quota_core.domain.membership import Membership
from localkafka.demo import (DEMO_CONSUMERS, DEMO_PRODUCERS, ONE_BROKER_TOPIC, SPREAD_TOPIC,
                             demo_quotas, leaders)

from tests import ROOT

QUICKSTART = ROOT / "docs" / "quickstart.md"
P, C = "producer_byte_rate", "consumer_byte_rate"
WORDS = {2: "two", 3: "three", 4: "four", 5: "five"}


def throttled_buckets(brokers: int) -> set[tuple[str, str]]:
    """(quota type, user) of every bucket the demo load puts over its quota on some broker."""
    quotas = demo_quotas()
    members = Membership(quotas)
    offered: dict[tuple, float] = {}  # (key, tags, broker) -> bytes/s offered
    nodes = list(range(1, brokers + 1))
    for p in DEMO_PRODUCERS:
        where = leaders(p.topic, nodes)
        for node in where:
            tags = members.tags(P, p.user, p.client_id)
            offered[(P, tags, node)] = offered.get((P, tags, node), 0.0) + p.rate / len(where)

    def limit(key, user, client_id):
        return resolve(quotas, user, client_id).keys[key].value

    # What gets through to the one-broker topic: each producer bucket at most its quota.
    one = leaders(ONE_BROKER_TOPIC, nodes)
    assert len(one) == 1
    through = 0.0
    for (key, tags, node), rate in offered.items():
        if node == one[0] and key == P:
            users = [p for p in DEMO_PRODUCERS if p.topic == ONE_BROKER_TOPIC
                     and members.tags(P, p.user, p.client_id) == tags]
            if users:
                share = sum(p.rate for p in users) / len(leaders(ONE_BROKER_TOPIC, nodes))
                q = limit(P, users[0].user, users[0].client_id)
                through += min(share, q) if q else share
    for user, client_id in DEMO_CONSUMERS:
        tags = members.tags(C, user, client_id)
        offered[(C, tags, one[0])] = offered.get((C, tags, one[0]), 0.0) + through
    out = set()
    for (key, tags, node), rate in offered.items():
        q = limit(key, tags[0], tags[1] if tags[1] is not None else "any-client")
        if q is not None and rate > q:
            out.add(("produce" if key == P else "fetch", tags[0]))
    return out


def test_the_demo_throttles_alice_bob_and_carol_on_three_brokers():
    assert throttled_buckets(3) == {("produce", "alice"), ("produce", "bob"),
                                    ("fetch", "carol")}
    assert throttled_buckets(1) == {("produce", "alice"), ("produce", "bob"),
                                    ("fetch", "carol"), ("produce", "svc-reports")}
    assert SPREAD_TOPIC  # svc-reports' spread topic: under its quota on each of 3 brokers


def test_the_quick_start_demo_paragraph_names_every_throttled_bucket():
    text = " ".join(QUICKSTART.read_text().split())
    m = re.search(r"Within a minute the \*\*Throttled now\*\* page shows (\w+) buckets throttled "
                  r"on broker 2: (.*?)\((\w+) on one broker, where (.*?)\)", text)
    assert m, "the Quick start's demo paragraph no longer says what Throttled now shows"
    three, one = throttled_buckets(3), throttled_buckets(1)
    assert m.group(1) == WORDS[len(three)] and m.group(3) == WORDS[len(one)]
    for kind, user in three:
        assert f"{user}'s" in m.group(2) and kind in m.group(2), (kind, user, m.group(2))
    for kind, user in one - three:
        assert f"{user}' {kind}" in m.group(4) or f"{user}'s {kind}" in m.group(4)
