"""The quota window in the throttle arithmetic, and after a change: when throttling should
end (quota_core.throttling.settle) and which buckets changed within the last window."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

import pytest

from quota_core import Alteration, Entity, Op
from quota_core.changes.audit import AuditLog, new_record
from quota_core.backends.sandbox import SandboxBackend
from quota_core.throttling.settle import (changed_lately, recent_changes, settle_text,
                                          throttling_ends)
from quota_core.throttling.throttle import DEFAULT_WINDOW, QuotaWindow, estimate_throttle

MiB = 1024 * 1024
P = "producer_byte_rate"


@pytest.mark.parametrize("window, expected", [
    (None, 10_000),                              # Kafka's defaults: (11 - 1) × 1 s
    (QuotaWindow(11, 1), 10_000),
    (QuotaWindow(21, 2), 40_000),                # (21 - 1) × 2 s
    (QuotaWindow(3, 5), 10_000),                 # (3 - 1) × 5 s
])
def test_the_throttle_uses_the_clusters_window(window, expected):
    # Twice the quota: the delay is one measured window.
    assert estimate_throttle(P, 2 * MiB, 1 * MiB, window=window).throttle_ms == expected


def test_request_throttles_are_capped_at_one_sample_of_the_window():
    est = estimate_throttle("request_percentage", 500.0, 10.0, window=QuotaWindow(11, 3))
    assert est.capped and est.throttle_ms == 3000


def test_the_sandbox_says_it_uses_kafkas_defaults(tmp_path):
    with SandboxBackend(tmp_path / "q.sqlite") as backend:
        window = backend.quota_window()
    assert (window.samples, window.sample_s) == (11, 1)
    assert "Kafka's defaults" in window.source and "sandbox" in window.source


def test_throttling_ends_within_the_window_plus_the_last_delay():
    end = throttling_ends(1000.0, QuotaWindow(11, 1), last_throttle_ms=8000)
    assert (end.earliest, end.latest) == (1000.0, 1000.0 + 11 + 8)
    assert throttling_ends(0.0, QuotaWindow(30, 2)).seconds == 60
    text = settle_text(throttling_ends(0.0, DEFAULT_WINDOW, 2500), 2500)
    assert text.startswith("Throttling should end within about 14 s")
    assert "11 × 1 s (Kafka's defaults)" in text and "2.5 s delay" in text


@dataclass(frozen=True)
class Row:  # the fields changed_lately reads of a quota_core.throttling.live.BucketUsage
    key: str
    user: str | None
    client_id: str | None
    level: int | None


def test_buckets_whose_quota_changed_in_the_last_window(tmp_path):
    log = AuditLog(tmp_path / "audit.jsonl")
    now = datetime(2026, 11, 25, 12, 0, 30, tzinfo=timezone.utc)
    alice = Entity.of(user="alice")
    for entity, at in ((alice, now.replace(second=25)),                       # 5 s ago
                       (Entity.of(user="bob"), now.replace(second=0))):      # 30 s ago
        log.append(new_record(actor="t", cluster={}, alteration=Alteration(
            entity, (Op.set(P, 3 * MiB),)), before={}, after={P: 3 * MiB}, now=at))
    changes = recent_changes(log.read(), now.timestamp(), DEFAULT_WINDOW)
    assert [c.entity for c in changes] == [alice]  # bob's change is older than 11 s
    rows = [Row(P, "alice", None, 3),                 # {user=alice} sets it: changed
            Row("consumer_byte_rate", "alice", None, 3),  # another key: not changed
            Row(P, "alice", "checkout-api", 1),       # a pair bucket: {user=alice} not on it
            Row(P, "carol", None, 6)]                 # another user
    assert set(changed_lately(rows, changes)) == {0}
    # A longer delay in force widens the span: bob's change counts too.
    assert len(recent_changes(log.read(), now.timestamp(), DEFAULT_WINDOW,
                              last_throttle_ms=25_000)) == 2
    # From the quota set's change times, without an audit log.
    mine = recent_changes([{"entity": Entity.of(user=None), "keys": [P],
                            "ts": now.timestamp() - 2}], now.timestamp())
    assert set(changed_lately([Row(P, "dave", None, 6), Row(P, "alice", None, 3)], mine)) == {0}


@dataclass(frozen=True)
class LiveRow(Row):
    throttle_ms: float | None = None


def test_after_a_change_the_edit_result_counts_the_delay_in_force():
    from quota_core.throttling.settle import after_change

    rows = [LiveRow(P, "alice", None, 3, 7400.0),       # {user=alice}: the delay in force
            LiveRow(P, "bob", None, 6, 20_000.0)]       # another user's: not counted
    settle, text = after_change(Entity.of(user="alice"), [P], rows, QuotaWindow(11, 1),
                                changed_at=100.0)
    assert settle.latest == 100.0 + 11 + 7.4
    assert text.startswith("Throttling should end within about 18 s") and "7.4 s" in text
    settle, text = after_change(Entity.of(user="carol"), [P], rows, changed_at=0.0)
    assert settle.seconds == 11 and "delay" not in text
