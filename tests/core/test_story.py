"""Resolve's story (quota_core.throttling.verdict + quota_core.throttling.story): every combination of the level
that sets the quota (1-8, none) × this client throttled or not × another bucket under the same
user throttled or not, with own and shared buckets. Each sentence is parsed back and checked
against the verdict and against the ground truth the case was built from, so two sentences
that contradict each other (finding 2 of issue 15) fail here."""
from __future__ import annotations

import re
from dataclasses import dataclass

import pytest

from quota_core import Entity, explain_key, resolve
from quota_core.domain import ladder
from quota_core.throttling.live import join_usage
from quota_core.domain.membership import Membership
from quota_core.domain.shadows import shadow_notes
from quota_core.throttling.story import (bucket_details, client_story, others_story, set_back_story,
                                         story)
from quota_core.throttling.throttle import QuotaWindow
from quota_core.throttling.verdict import key_verdict, tags_entity

MiB = 1024 * 1024
P = "producer_byte_rate"
USER, CLIENT = "alice", "app"
SIBLING = Entity.of(user=USER, client_id="batch-export")  # another bucket of the same user


@dataclass(frozen=True)
class S:
    broker: str
    quota_type: str
    attribute: str
    user: str | None
    client_id: str | None
    value: float


def case(level: int | None, mixed: bool = True):
    """A quota set where (alice, app) resolves at ``level`` and every lower level holds the
    key too (set back), with alice's batch-export in a bucket of its own."""
    quotas: dict[Entity, dict[str, float]] = {SIBLING: {P: 1 * MiB}}
    if level is not None:
        for r in ladder.LADDER:
            if r.level >= level:
                quotas[r.entity_for(USER, CLIENT)] = {P: float(r.level) * MiB}
    elif mixed:
        quotas[Entity.of(client_id="someone-else")] = {P: 1 * MiB}
    return quotas


def sparse_case(level: int | None):
    """(alice, app) resolves at ``level``; {user=alice} and {client-id=<default>} are added
    where they do not win for it, so alice's other client ids or app's other users may share
    a bucket of a shape that *could* hold alice/app (the trap of finding 1)."""
    quotas: dict[Entity, dict[str, float]] = {SIBLING: {P: 1 * MiB}}
    if level is not None:
        quotas[ladder.rung(level).entity_for(USER, CLIENT)] = {P: float(level) * MiB}
    if level is not None and level < 3:
        quotas[Entity.of(user=USER)] = {P: 3.0 * MiB}
    if level is not None and level < 8:
        quotas[Entity.of(client_id=None)] = {P: 8.0 * MiB}
    return quotas


def shared_other(quotas) -> tuple | None:
    """A bucket that shares alice's user or app's client id, holds somebody, and is not
    alice/app's: {user=alice} or {client-id=app}."""
    m = Membership(quotas)
    own = m.tags(P, USER, CLIENT)
    for tags in ((USER, None), (None, CLIENT)):
        if tags != own and m.current(P, tags):
            return tags
    return None


def series(quotas, own_hot: bool | None, other_hot: bool, other_tags=(USER, "batch-export")):
    tags = Membership(quotas).tags(P, USER, CLIENT)
    limit = resolve(quotas, USER, CLIENT).keys[P].value
    out = []
    if own_hot is not None:
        rate = (limit or 1 * MiB) * (2.0 if own_hot else 0.4)
        out.append(S("b1", "produce", "byte-rate", *tags, rate))
        if own_hot:
            out.append(S("b1", "produce", "throttle-time", *tags, 700.0))
    rate = 1 * MiB * (30.0 if other_hot else 0.01)
    out.append(S("b1", "produce", "byte-rate", *other_tags, rate))
    if other_hot:
        out.append(S("b1", "produce", "throttle-time", *other_tags, 900.0))
    return out


CLIENT_NAME = f"Client id {CLIENT!r} of user {USER!r}"
STATUS_RE = re.compile(rf"^{re.escape(CLIENT_NAME)} is (not )?throttled")
OTHER_RE = re.compile(r"^For \w+, another bucket, (\{.*?\}), .*; it is (not )?throttled.*"
                      rf"{re.escape(CLIENT_NAME)} is not in it for \w+\.$")
LEVELS = list(range(1, 9)) + [None]
CASES = [(level, own_hot, other_hot, other)
         for level in LEVELS for own_hot in (True, False) for other_hot in (True, False)
         for other in ("own entry", "shared")
         if not (level is None and own_hot)  # an unlimited bucket is never throttled
         and (other == "own entry" or shared_other(sparse_case(level)) is not None)]


def test_the_cases_cover_own_and_shared_buckets_beside_each_other():
    kinds = {(level, other) for level, _, _, other in CASES}
    assert {level for level, other in kinds if other == "shared"} >= {1, 3, 5}
    assert len(CASES) >= 50


@pytest.mark.parametrize("level, own_hot, other_hot, other", CASES)
def test_every_sentence_agrees_with_the_verdict_and_the_others(level, own_hot, other_hot,
                                                               other):
    """``other``: the other bucket under the same user / client id is alice's batch-export
    with an entry of its own, or a shared bucket ({user=alice} / {client-id=app})."""
    quotas = sparse_case(level)
    other_tags = (USER, "batch-export") if other == "own entry" else shared_other(quotas)
    resolution = resolve(quotas, USER, CLIENT)
    rows = join_usage(series(quotas, own_hot, other_hot, other_tags), quotas)
    window = QuotaWindow(11, 1, "test")
    v = key_verdict(resolution, P, quotas, rows, window)
    own_bucket = tags_entity(v.bucket).display()

    # The verdict: the level that resolved, its bucket, throttled from its own bucket only.
    assert v.level == level == resolution.keys[P].level
    assert v.throttled is own_hot
    assert v.shared is (level not in (1, 2, 4, 5) and not (level is None and
                                                           v.bucket[0] and v.bucket[1]))
    sentences = story(v)
    texts = [s.text for s in sentences]

    # 1. Exactly one status sentence about this client, saying what the verdict says.
    statuses = [t for t in texts if STATUS_RE.match(t)]
    assert len(statuses) == 1, texts
    assert (STATUS_RE.match(statuses[0]).group(1) is None) is own_hot
    assert own_bucket in statuses[0]

    # 2. The broker's figures for its bucket: a wait only when throttled, in its own bucket.
    for s in bucket_details(v):
        assert ("waits ≈" in s.text) is own_hot, s.text
        assert s.claims["bucket"] == v.bucket

    # 3. Other buckets are labelled as such, never the client's, and say their own state.
    others = others_story(v)
    assert len(others) == 1, [s.text for s in others]
    m = OTHER_RE.match(others[0].text)
    assert m, others[0].text
    assert m.group(1) != own_bucket and m.group(1) == tags_entity(other_tags).display()
    # A bucket no quota limits any more, whose broker still reports a throttle, was
    # throttled recently, not now (issue 27): "now" needs a quota to be over.
    other_now = other_hot and v.others[0].limit is not None
    assert (m.group(2) is None) is other_now

    # 4. Only status, bucket figures and other buckets speak of throttling.
    for s in client_story(v):
        if s.kind != "status":
            assert "throttled" not in s.text and "waits" not in s.text, s.text

    # 5. The entry, level and bucket agree with the plain-words sentence and each other.
    [entry] = [s for s in client_story(v) if s.kind == "entry"]
    plain = explain_key(resolution, P)
    if level is None:
        assert "unlimited" in entry.text and "unlimited" in plain
    else:
        assert f"(level {level})" in entry.text and f"(ladder level {level})" in plain
        assert v.entry.display() in entry.text
    [share] = [s for s in client_story(v) if s.kind == "share"]
    assert own_bucket in share.text
    assert ("to itself" in share.text) is (not v.shared)
    if level is not None:
        assert ("to itself" in plain) is (not v.shared)
    # Who is taken out of a shared bucket: the same names in both sentences, or none.
    own = Membership(quotas).excepted(P, v.bucket)
    plain = explain_key(resolution, P, quotas)
    for name in own:
        assert repr(name) in share.text and repr(name) in plain, (share.text, plain)
    assert ("except" in share.text) is bool(own) and ("except" in plain) is bool(own and level)

    # 6. Every claim about this client agrees with the verdict; nothing says both.
    claimed = {s.claims["throttled"] for s in sentences
               if s.claims.get("subject") == "client" and "throttled" in s.claims}
    assert claimed == {own_hot}
    for s in sentences:
        if s.claims.get("subject") == "client" and "bucket" in s.claims:
            assert s.claims["bucket"] == v.bucket


@pytest.mark.parametrize("level", [l for l in LEVELS if l is not None])
def test_set_back_is_per_client_and_key(level):
    """An entry set back for (alice, app) that still decides the key for alice's other client
    ids is never said to "never apply to alice"."""
    quotas = case(level)
    resolution = resolve(quotas, USER, CLIENT)
    other = resolve(quotas, USER, "some-other-client").keys[P].source  # truth, by resolving
    notes = shadow_notes(resolution)
    v = key_verdict(resolution, P, quotas)
    assert len(notes) == len(set_back_story(v)) == len([r for r in ladder.LADDER
                                                         if r.level > level])
    for note in notes:
        entity = re.match(r"^`(.*?)`", note).group(1)
        if other is not None and entity == other.display():
            assert "does not apply to client id 'app' of alice" in note
            assert "still sets producer_byte_rate for alice's other client ids" in note
        else:
            assert "never applies to alice:" in note, note
    for s in set_back_story(v):
        assert (s.text.startswith(other.display() + " ") if other is not None else False) \
            is s.claims["elsewhere"], s.text


def test_the_issue_case_checkout_api_beside_throttled_batch_export():
    """Finding 2: checkout-api at 11 % of its own 8 MiB/s; {user=alice} 2 MiB/s throttled."""
    quotas = {Entity.of(user="alice", client_id="checkout-api"): {P: 8 * MiB},
              Entity.of(user="alice"): {P: 2 * MiB}}
    rows = join_usage([S("b1", "produce", "byte-rate", "alice", "checkout-api", 0.9 * MiB),
                       S("b1", "produce", "byte-rate", "alice", None, 2.4 * MiB),
                       S("b1", "produce", "throttle-time", "alice", None, 200.0)], quotas)
    v = key_verdict(resolve(quotas, "alice", "checkout-api"), P, quotas, rows)
    texts = [s.text for s in story(v)]
    assert texts[0] == ("Client id 'checkout-api' of user 'alice' is not throttled on "
                        "producer_byte_rate: its bucket {user=alice, client-id=checkout-api} "
                        "runs at 922 KiB/s of 8 MiB/s (11%) on b1.")
    [other] = [t for t in texts if t.startswith("For producer_byte_rate, another bucket")]
    assert other == ("For producer_byte_rate, another bucket, {user=alice}, is shared by the client ids of user "
                     "'alice': any client id without an entry of its own (2 MiB/s set by "
                     "{user=alice} (level 3)); it is throttled: 2.4 MiB/s of 2 MiB/s (120%) on "
                     "b1. Client id 'checkout-api' of user 'alice' is not in it for "
                     "producer_byte_rate.")
    [note] = [n for n in shadow_notes(resolve(quotas, "alice", "checkout-api"))
              if n.startswith("`{user=alice}`")]
    assert "never applies" not in note and "still sets producer_byte_rate" in note
    # batch-export's own story: throttled in {user=alice}, with checkout-api apart.
    rows_be = key_verdict(resolve(quotas, "alice", "batch-export"), P, quotas, rows)
    assert rows_be.throttled is True and rows_be.bucket == ("alice", None)
    assert "except 'checkout-api'" in rows_be.sharers
    assert explain_key(resolve(quotas, "alice", "batch-export"), P, quotas) == (
        "All client ids of user 'alice' (except client ids 'checkout-api', in a bucket of its "
        "own) share 2 MiB/s on each broker, set for {user=alice} (ladder level 3).")


def test_other_buckets_name_only_the_client_ids_known_to_be_in_them():
    """{user=alice}'s members: client ids the console knows *alice* runs (here, from the
    usage history) and that are in it, not every client id some entry names."""
    quotas = {Entity.of(user="alice", client_id="checkout-api"): {P: 8 * MiB},
              Entity.of(user="alice"): {P: 2 * MiB},
              Entity.of(client_id="mobile-gateway"): {P: 1 * MiB}}   # not alice's
    rows = join_usage([S("b1", "produce", "byte-rate", "alice", None, 2.4 * MiB)], quotas)
    resolution = resolve(quotas, "alice", "checkout-api")
    [other] = key_verdict(resolution, P, quotas, rows).others
    assert other.members == ("shared by the client ids of user 'alice': any client id "
                             "without an entry of its own")
    [other] = key_verdict(resolution, P, quotas, rows,
                          known=[("alice", "batch-export"), ("bob", "etl")]).others
    assert other.members == ("shared by the client ids of user 'alice': 'batch-export', any "
                             "client id without an entry of its own")
