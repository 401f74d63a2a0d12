"""Questions over the analysed history (quota_core.analysis.history): hand-checked small tables."""
from __future__ import annotations

from datetime import datetime, timedelta

import pandas as pd
import pytest

from quota_core import Entity
from quota_core.analysis.history import duration_text, throttle_heatmap, what_if

T0 = datetime(2025, 1, 6)
MiB = 1024 * 1024


def windows(rows):
    return pd.DataFrame([{"ts": T0 + timedelta(minutes=m), "broker": b, "quota_type": "produce",
                          "key": "producer_byte_rate", "user": u, "client_id": c, "rate": r,
                          "interval_s": 60.0, "over_quota": over}
                         for m, b, u, c, r, over in rows])


W = windows([
    (0, "b1", "alice", None, 1.5 * MiB, True),    # over 1 MiB/s, under 2 MiB/s
    (1, "b1", "alice", None, 0.5 * MiB, False),
    (0, "b2", "alice", None, 1.5 * MiB, True),    # per broker: counted on its own
    (0, "b1", "bob", None, 3.0 * MiB, False),     # under bob's old 4 MiB/s
    (0, "b1", None, "mobile", 100.0, False),       # a client-id bucket
])
BEFORE = {Entity.of(user="alice"): {"producer_byte_rate": 1 * MiB},
          Entity.of(user=None): {"producer_byte_rate": 4 * MiB}}


def test_raising_a_quota_frees_and_lowering_one_throttles():
    after = {Entity.of(user="alice"): {"producer_byte_rate": 2 * MiB},
             Entity.of(user=None): {"producer_byte_rate": 2 * MiB}}
    impact = what_if(W, BEFORE, after)
    per = impact.per_bucket.set_index(["user"])
    assert per.loc["alice", "throttled_s_before"] == 120.0   # two broker-minutes
    assert per.loc["alice", "throttled_s_after"] == 0.0
    assert per.loc["bob", "throttled_s_before"] == 0.0 and per.loc["bob", "throttled_s_after"] == 60.0
    assert list(impact.freed["user"]) == ["alice"] and list(impact.newly_throttled["user"]) == ["bob"]
    assert impact.span_s == 120.0
    assert impact.sentence() == (
        "Over the recorded 2 min: 2 clients would have been throttled for 1 min in total "
        "instead of 2 min; 1 newly throttled; 1 freed (broker-seconds over quota, today's "
        "quotas vs the change).")


def test_a_change_that_moves_nobody_says_so():
    impact = what_if(W, BEFORE, {**BEFORE, Entity.of(client_id="other"): {"producer_byte_rate": 1.0}})
    assert impact.changed.empty and "would not have changed" in impact.sentence()


def test_bucket_tags_narrow_the_ladder():
    # {client-id=mobile} cannot limit a bucket keyed by user: only client-id buckets see it.
    after = {**BEFORE, Entity.of(client_id="mobile"): {"producer_byte_rate": 50.0}}
    per = what_if(W, BEFORE, after).per_bucket
    mobile = per[per["client_id"] == "mobile"].iloc[0]
    assert (mobile["quota_before"] != mobile["quota_before"]) and mobile["quota_after"] == 50.0
    assert mobile["throttled_s_after"] == 60.0


def test_heatmap_by_hour_and_client():
    table = throttle_heatmap(W)
    assert list(table.index) == ["alice · any client id"]
    assert table.iloc[0].sum() == 120.0


@pytest.mark.parametrize("seconds, text", [(45, "45 s"), (600, "10 min"), (7800, "2 h 10 min"),
                                           (3 * 86400 + 3600, "3 d 1 h")])
def test_duration_text(seconds, text):
    assert duration_text(seconds) == text


def test_a_bucket_nobody_is_in_after_the_change_is_not_judged():
    """Membership (issue 15): with {user=alice} and {user=<default>} gone and a client-id
    default in their place, alice's and bob's user buckets hold nobody: their clients move to
    client-id buckets. Their recorded rates are no client's, so neither "freed" nor counted."""
    after = {Entity.of(client_id=None): {"producer_byte_rate": 1 * MiB}}
    impact = what_if(W, BEFORE, after)
    assert set(impact.moved["user"]) == {"alice", "bob"}
    assert impact.freed.empty and impact.newly_throttled.empty
    assert "2 buckets would hold nobody after the change" in impact.sentence()
