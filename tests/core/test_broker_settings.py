"""The broker-settings model (quota_core.throttling.brokers): pure, a table of clusters."""
from __future__ import annotations

import pytest

from quota_core.backends.sandbox import SandboxBackend
from quota_core.throttling.brokers import (DEFAULT_CALLBACK, KAFKA_DEFAULTS, SETTINGS,
                                           BrokerSettings, ClusterSettings, read_settings)
from quota_core.domain.entities import Entity
from quota_core.errors import ConnectionFailed
from quota_core.throttling.throttle import estimate_throttle
from quota_core.throttling.verdict import read_window

CB = "io.strimzi.kafka.quotas.StaticQuotaCallback"


def broker(node: str, **values: str | None) -> BrokerSettings:
    base = dict(KAFKA_DEFAULTS)
    base.update({k.replace("_", "."): v for k, v in values.items()})
    return BrokerSettings(node, base)


def cluster(*brokers: BrokerSettings) -> ClusterSettings:
    return ClusterSettings(tuple(brokers), f"the cluster's brokers ({len(brokers)})")


UNREPORTED = ("Kafka's defaults: broker 1 reported no usable quota.window.num and "
              "quota.window.size.seconds")
WINDOWS = [
    # (brokers, expected window (samples, size), source)
    ([broker("1"), broker("2"), broker("3")], (11, 1), "brokers 1, 2 and 3"),
    ([broker("1", quota_window_num="5")], (5, 1), "broker 1"),
    # a rolling change half done: the most brokers win, the others are said to differ
    ([broker("1", quota_window_num="5"), broker("2", quota_window_num="5"), broker("3")],
     (5, 1), "brokers 1 and 2 (of 3 read: the others differ)"),
    # a tie: the lowest node id's
    ([broker("1"), broker("2", quota_window_num="5")], (11, 1),
     "broker 1 (of 2 read: the others differ)"),
    ([broker("1", quota_window_size_seconds="2", quota_window_num="5")], (5, 2), "broker 1"),
    # unreadable values: Kafka's defaults, saying so
    ([broker("1", quota_window_num="x")], (11, 1), UNREPORTED),
    ([broker("1", quota_window_num=None)], (11, 1), UNREPORTED),
    ([BrokerSettings("1", error="connection refused")], (11, 1),
     "Kafka's defaults: no broker's settings could be read"),
]


@pytest.mark.parametrize("brokers, expected, source", WINDOWS)
def test_the_window_the_arithmetic_uses(brokers, expected, source):
    window = cluster(*brokers).window()
    assert (window.samples, window.sample_s) == expected
    assert window.source == source


def test_the_arithmetic_follows_the_window_read():
    """Twice the quota: one measured window of delay, (samples - 1) × size."""
    five = cluster(broker("1", quota_window_num="5")).window()
    eleven = cluster(broker("1")).window()
    assert estimate_throttle("producer_byte_rate", 2.0, 1.0, window=five).throttle_ms == 4_000
    assert estimate_throttle("producer_byte_rate", 2.0, 1.0, window=eleven).throttle_ms == 10_000


def test_the_controller_window_is_its_own():
    s = cluster(broker("1", controller_quota_window_num="30", quota_window_num="5"))
    assert (s.controller_window().samples, s.window().samples) == (30, 5)


DISAGREEMENTS = [
    ([broker("1"), broker("2"), broker("3")], []),
    ([broker("1"), broker("2", quota_window_num="5"), broker("3")],
     [("quota.window.num", ("2",), "quota.window.num: 11 on brokers 1 and 3, 5 on broker 2")]),
    ([broker("1", num_io_threads="3"), broker("2"), broker("3")],
     [("num.io.threads", ("1",), "num.io.threads: 8 on brokers 2 and 3, 3 on broker 1")]),
    ([broker("1", client_quota_callback_class=CB), broker("2"), broker("3")],
     [("client.quota.callback.class", ("1",),
       f"client.quota.callback.class: not set on brokers 2 and 3, {CB} on broker 1")]),
    # an unread broker is not a disagreement (it is named apart)
    ([broker("1"), BrokerSettings("2", error="connection refused")], []),
]


@pytest.mark.parametrize("brokers, expected", DISAGREEMENTS)
def test_brokers_that_disagree_are_named(brokers, expected):
    found = cluster(*brokers).disagreements()
    assert [(d.name, d.brokers, d.text()) for d in found] == expected


def test_the_notes_name_the_callback_class_and_the_brokers():
    s = cluster(broker("1", client_quota_callback_class=CB),
                broker("2", client_quota_callback_class=CB), broker("3"))
    notes = {n.kind: n for n in s.notes()}
    assert set(notes) == {"callback", "disagree"}
    assert CB in notes["callback"].text and "Brokers 1 and 2 run" in notes["callback"].text
    assert "does not decide enforcement" in notes["callback"].text
    assert notes["callback"].brokers == ("1", "2")
    assert notes["disagree"].brokers == ("3",)
    assert s.custom_callback and s.callback_label == CB
    assert CB in s.ladder_label() and s.ladder_label().startswith(DEFAULT_CALLBACK)


def test_every_broker_with_the_callback_says_every_broker():
    s = cluster(broker("1", client_quota_callback_class=CB),
                broker("2", client_quota_callback_class=CB))
    [note] = s.notes()
    assert note.text.startswith(f"Every broker runs a custom quota callback, "
                                f"client.quota.callback.class={CB}")


def test_a_default_cluster_has_nothing_to_say():
    s = cluster(broker("1"), broker("2"))
    assert s.notes() == [] and not s.custom_callback
    assert s.callback_label == DEFAULT_CALLBACK
    assert s.ladder_label() == f"{DEFAULT_CALLBACK}: the brokers use this ladder."
    # a blank class name is Kafka's default too
    assert not cluster(broker("1", client_quota_callback_class=" ")).custom_callback


def test_an_unread_broker_is_named_apart():
    s = cluster(broker("1"), BrokerSettings("2", error="connection refused"))
    [note] = s.notes()
    assert note.kind == "unread" and note.brokers == ("2",) and "connection refused" in note.text
    assert s.window().source == "broker 1"


def test_each_broker_is_estimated_with_its_own_window():
    """A rolling change half done: broker 2 already has 5 windows. The verdict's per-broker
    estimate for broker 2 uses 5 (4 s for twice the quota), broker 1's the cluster's 11."""
    from quota_core import resolve
    from quota_core.throttling.live import BucketUsage
    from quota_core.throttling.verdict import key_verdict

    s = cluster(broker("1"), broker("2", quota_window_num="5"), broker("3"))
    window = s.window()
    assert (window.samples, window.differing) == (11, (("2", 5, 1),))
    assert window.for_broker("2").samples == 5 and window.for_broker("1") is window
    assert window.for_broker("broker-a") is window        # a user's label: the cluster's
    entity = Entity.of(user="alice", client_id="app")
    quotas = {entity: {"producer_byte_rate": 1000.0}}
    rows = [BucketUsage(b, "produce", "producer_byte_rate", "alice", "app", 2000.0, None,
                        1000.0, 1, entity) for b in ("1", "2")]
    v = key_verdict(resolve(quotas, "alice", "app"), "producer_byte_rate", quotas, rows, window)
    assert {b.broker: b.estimated_ms for b in v.brokers} == {"1": 10_000, "2": 4_000}


def test_rows_and_json_carry_every_setting_per_broker():
    s = cluster(broker("1"), broker("2", num_io_threads="3"))
    rows = s.rows()
    assert [r["setting"] for r in rows] == list(SETTINGS)
    assert {r["setting"]: r["broker 2"] for r in rows}["num.io.threads"] == "3"
    doc = s.as_dict()
    assert doc["disagreements"] == [{"setting": "num.io.threads", "values": [
        {"value": "8", "brokers": ["1"]}, {"value": "3", "brokers": ["2"]}]}]
    assert [b["broker"] for b in doc["brokers"]] == ["1", "2"]


def test_the_sandbox_has_kafkas_defaults_and_says_so(tmp_path):
    with SandboxBackend(tmp_path / "q.sqlite") as sandbox:
        s = read_settings(sandbox)
        assert s.brokers == () and "the sandbox has no brokers" in s.source
        window = read_window(sandbox)
    assert (window.samples, window.sample_s) == (11, 1)
    assert window.source == "Kafka's defaults: the sandbox has no brokers"
    assert s.notes() == []


def test_settings_that_cannot_be_read_fall_back_saying_why():
    class Gone:
        def broker_settings(self):
            raise ConnectionFailed("no broker answers")

    s = read_settings(Gone())
    assert s.window().source == ("Kafka's defaults: the brokers' settings could not be read "
                                 "(no broker answers)")
    assert read_window(Gone()).samples == 11


def test_a_broker_wide_connection_cap_is_said_only_when_set():
    assert cluster(broker("1"), broker("2")).connection_cap() is None
    s = cluster(broker("1", max_connection_creation_rate="50"), broker("2"),
                broker("3", max_connection_creation_rate="50"))
    note = s.connection_cap()
    assert note.brokers == ("1", "3")
    assert "max.connection.creation.rate): 50/s on brokers 1 and 3" in note.text
