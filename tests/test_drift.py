"""Drift between two quota sets (quota_core.drift): a table of cases, then the order."""
from __future__ import annotations

import dataclasses
import math

import pytest

from quota_core import Entity
from quota_core.drift import DriftRow, quota_drift

E = Entity.of


@pytest.mark.parametrize("a, b, expected", [
    ({}, {}, []),
    ({E(user="alice"): {"producer_byte_rate": 1024.0}},
     {E(user="alice"): {"producer_byte_rate": 1024.0}}, []),
    # a value that differs
    ({E(user="alice"): {"producer_byte_rate": 1024.0}},
     {E(user="alice"): {"producer_byte_rate": 2048.0}},
     [(E(user="alice"), "producer_byte_rate", 1024.0, 2048.0)]),
    # a key on one side only, then an entity on one side only (either side)
    ({E(user="alice"): {"producer_byte_rate": 1024.0, "request_percentage": 50.0}},
     {E(user="alice"): {"producer_byte_rate": 1024.0}},
     [(E(user="alice"), "request_percentage", 50.0, None)]),
    ({}, {E(client_id="app"): {"consumer_byte_rate": 1.0}},
     [(E(client_id="app"), "consumer_byte_rate", None, 1.0)]),
    # NaN equals NaN; NaN differs from a number
    ({E(user="n"): {"request_percentage": math.nan}},
     {E(user="n"): {"request_percentage": math.nan}}, []),
    # the default user and a user literally named <default> are two entities
    ({E(user=None): {"producer_byte_rate": 1.0}},
     {E(user="<default>"): {"producer_byte_rate": 1.0}},
     [(E(user=None), "producer_byte_rate", 1.0, None),
      (E(user="<default>"), "producer_byte_rate", None, 1.0)]),
])
def test_drift_cases(a, b, expected):
    rows = quota_drift("staging", a, "prod", b)
    assert [(r.entity, r.key, r.values["staging"], r.values["prod"]) for r in rows] == expected


def test_drift_order_is_the_entity_then_key_order():
    a = {E(ip="10.0.0.1"): {"connection_creation_rate": 5.0},
         E(user="bob", client_id="x"): {"producer_byte_rate": 2.0},
         E(client_id=None): {"consumer_byte_rate": 3.0},
         E(user="bob"): {"request_percentage": 1.0, "consumer_byte_rate": 4.0},
         E(user=None): {"producer_byte_rate": 5.0}}
    rows = quota_drift("a", a, "b", {})
    assert [(str(r.entity), r.key) for r in rows] == [
        ("{user=<default>}", "producer_byte_rate"),
        ("{user=bob}", "consumer_byte_rate"),
        ("{user=bob}", "request_percentage"),
        ("{user=bob, client-id=x}", "producer_byte_rate"),
        ("{client-id=<default>}", "consumer_byte_rate"),
        ("{ip=10.0.0.1}", "connection_creation_rate")]


def test_drift_row_is_frozen_and_names_must_differ():
    row = quota_drift("a", {E(user="é"): {"producer_byte_rate": 1.0}}, "b", {})[0]
    assert row == DriftRow(E(user="é"), "producer_byte_rate", {"a": 1.0, "b": None})
    with pytest.raises(dataclasses.FrozenInstanceError):
        row.key = "x"  # type: ignore[misc]
    with pytest.raises(ValueError, match="two names"):
        quota_drift("a", {}, "a", {})


@pytest.mark.parametrize("versions, callbacks, expected", [
    ({"staging": "4.1", "prod": "4.1"}, {}, []),
    ({"staging": None, "prod": "4.1"}, {}, []),  # a sandbox has no version to compare
    ({"staging": "4.1", "prod": "3.9"}, {},
     ["cluster 'staging' runs Kafka 4.1 and cluster 'prod' Kafka 3.9"]),
    ({"staging": "4.1", "prod": "4.1"}, {"prod": {"com.acme.Quotas": ("1", "3")}},
     ["cluster 'prod' runs a custom quota callback on brokers 1, 3, "
      "client.quota.callback.class=com.acme.Quotas"]),
    ({}, {"staging": {"a.B": ("2",)}, "prod": {"a.B": ("1",)}},
     ["cluster 'staging' runs a custom quota callback on broker 2", "cluster 'prod' runs"]),
])
def test_promotion_notes(versions, callbacks, expected):
    from quota_core.drift import promotion_notes

    notes = promotion_notes("staging", "prod", versions, callbacks)
    assert len(notes) == len(expected)
    for note, start in zip(notes, expected):
        assert note.startswith(start), note
