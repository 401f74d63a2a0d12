"""Joining broker quota metrics with the ladder (quota_core.throttling.live): hand-checked cases."""
from __future__ import annotations

import math
from dataclasses import dataclass

import pytest

from quota_core import Entity
from quota_core.throttling.live import client_buckets, join_usage, throttled_rows

MiB = 1024 * 1024


@dataclass(frozen=True)
class S:  # the shape of quota_core.telemetry.QuotaSeries
    broker: str
    quota_type: str
    attribute: str
    user: str | None
    client_id: str | None
    value: float
    ip: str | None = None


QUOTAS = {
    Entity.of(user="alice"): {"producer_byte_rate": 1 * MiB},                    # level 3
    Entity.of(user=None): {"producer_byte_rate": 4 * MiB,                        # level 6
                           "controller_mutation_rate": 10.0},
    Entity.of(client_id="mobile-gateway"): {"producer_byte_rate": 512 * 1024},   # level 7, shadowed
    Entity.of(user="bob", client_id="etl"): {"consumer_byte_rate": 2 * MiB},     # level 1
    Entity.of(user="<default>"): {"request_percentage": 50.0},                   # a real name
}


def by(rows, broker, quota_type, user, client_id):
    [row] = [r for r in rows if (r.broker, r.quota_type, r.user, r.client_id) ==
             (broker, quota_type, user, client_id)]
    return row


def test_user_bucket_over_its_shared_quota():
    rows = join_usage([S("b1", "produce", "byte-rate", "alice", None, 1.8 * MiB),
                       S("b1", "produce", "throttle-time", "alice", None, 8000.0)], QUOTAS)
    r = by(rows, "b1", "produce", "alice", None)
    assert (r.quota, r.level, r.source) == (1 * MiB, 3, Entity.of(user="alice"))
    assert r.utilisation == pytest.approx(1.8)
    assert r.throttled and r.over_quota and r.throttle_ms == 8000.0
    assert r.estimated_throttle_ms == 8000  # (1.8 - 1) / 1 × 10 s
    assert r.shared_by == "every client id of user 'alice' together"


def test_default_user_bucket_gets_its_own_allowance_and_shadows_the_client_id_entry():
    # dave's bucket is keyed by user only: {user=<default>} (level 6) is its limit, and
    # {client-id=mobile-gateway} (level 7) never applies to it.
    rows = join_usage([S("b1", "produce", "byte-rate", "dave", None, 3 * MiB),
                       S("b1", "produce", "throttle-time", "dave", None, math.nan)], QUOTAS)
    r = by(rows, "b1", "produce", "dave", None)
    assert (r.quota, r.level, r.source) == (4 * MiB, 6, Entity.of(user=None))
    assert r.throttle_ms is None and not r.throttled  # NaN: nobody throttled lately


def test_pair_bucket_only_consults_pair_levels():
    rows = join_usage([S("b1", "fetch", "byte-rate", "bob", "etl", 1.0 * MiB),
                       S("b1", "fetch", "byte-rate", "bob", "other", 1.0 * MiB)], QUOTAS)
    assert by(rows, "b1", "fetch", "bob", "etl").level == 1
    # A pair bucket without a pair entry for the key: unlimited, whatever {user=...} holds.
    assert by(rows, "b1", "fetch", "bob", "other").quota is None


def test_client_id_bucket_and_a_user_named_default():
    rows = join_usage([S("b1", "produce", "byte-rate", None, "mobile-gateway", 600 * 1024),
                       S("b1", "request", "request-time", "<default>", None, 75.0)], QUOTAS)
    r = by(rows, "b1", "produce", None, "mobile-gateway")
    assert (r.level, r.quota) == (7, 512 * 1024) and r.over_quota
    named = by(rows, "b1", "request", "<default>", None)
    assert (named.level, named.source) == (3, Entity.of(user="<default>"))
    assert named.utilisation == pytest.approx(1.5)


def test_per_broker_never_summed():
    rows = join_usage([S("b1", "produce", "byte-rate", "alice", None, 0.6 * MiB),
                       S("b2", "produce", "byte-rate", "alice", None, 0.6 * MiB)], QUOTAS)
    assert len(rows) == 2 and not any(r.over_quota for r in rows)  # 1.2 MiB/s in total is fine


def test_controller_mutation_is_a_token_bucket():
    rows = join_usage([S("c1", "controller_mutation", "mutation-rate", "erin", None, 12.0),
                       S("c1", "controller_mutation", "tokens", "erin", None, -5.0)], QUOTAS)
    r = by(rows, "c1", "controller_mutation", "erin", None)
    assert r.over_quota and r.estimated_throttle_ms == 500  # 5 tokens owed at 10/s


def test_throttled_rows_worst_first_and_above_threshold():
    rows = join_usage([S("b1", "produce", "byte-rate", "alice", None, 1.5 * MiB),
                       S("b1", "produce", "throttle-time", "alice", None, 5000.0),
                       S("b1", "produce", "byte-rate", None, "mobile-gateway", 1024 * 1024),
                       S("b1", "produce", "throttle-time", None, "mobile-gateway", 9000.0),
                       S("b1", "produce", "byte-rate", "dave", None, 3.5 * MiB)], QUOTAS)
    assert [(r.user, r.client_id) for r in throttled_rows(rows)] == \
        [(None, "mobile-gateway"), ("alice", None)]
    assert ("dave", None) in [(r.user, r.client_id) for r in throttled_rows(rows, above=80)]


def test_client_buckets_finds_every_shape_holding_the_client():
    rows = join_usage([S("b1", "produce", "byte-rate", "alice", None, 1.0),
                       S("b1", "fetch", "byte-rate", "alice", "app", 1.0),
                       S("b1", "request", "request-time", None, "app", 1.0),
                       S("b1", "produce", "byte-rate", "bob", None, 1.0)], QUOTAS)
    assert {(r.quota_type, r.user, r.client_id) for r in client_buckets(rows, "alice", "app")} \
        == {("produce", "alice", None), ("fetch", "alice", "app"), ("request", None, "app")}


def test_sentences_from_live_figures():
    rows = join_usage([S("broker 1", "produce", "byte-rate", "alice", None, 1.8 * MiB),
                       S("broker 1", "produce", "throttle-time", "alice", None, 8000.0),
                       S("broker 1", "fetch", "byte-rate", "bob", "etl", 1.0 * MiB)], QUOTAS)
    assert by(rows, "broker 1", "produce", "alice", None).sentence() == (
        "The client ids of user 'alice' share 1 MiB/s, set for {user=alice} (level 3); together "
        "they send 1.8 MiB/s on broker 1, so each request waits ≈ 8.0 s as the broker reports.")
    assert by(rows, "broker 1", "fetch", "bob", "etl").sentence() == (
        "Client id 'etl' of user 'bob' has 2 MiB/s to itself, set for "
        "{user=bob, client-id=etl} (level 1); sends 1 MiB/s on broker 1 (50% of it): not "
        "throttled.")


def test_traffic_impact_at_todays_rates():
    from quota_core.throttling.live import traffic_impact

    series = [S("b1", "produce", "byte-rate", "alice", None, 1.5 * MiB),
              S("b1", "produce", "byte-rate", "dave", None, 3 * MiB),
              S("b1", "produce", "byte-rate", None, "mobile-gateway", 100.0)]
    after = dict(QUOTAS)
    after[Entity.of(user="alice")] = {"producer_byte_rate": 2 * MiB}    # frees alice
    after[Entity.of(user=None)] = {"producer_byte_rate": 2 * MiB,        # throttles dave
                                   "controller_mutation_rate": 10.0}
    changes = traffic_impact(QUOTAS, after, series)
    assert [(c.after.user, c.verdict) for c in changes] == [("dave", "newly throttled"),
                                                            ("alice", "freed")]
    from ui.render import traffic_rows  # the table the Edit and Plan previews show

    dave = traffic_rows(changes)[0]
    assert (dave["broker"], dave["bucket"], dave["verdict"]) == ("b1", "user=dave",
                                                                 "newly throttled")
    assert dave["quota before → after"].endswith("→ 2 MiB/s")
