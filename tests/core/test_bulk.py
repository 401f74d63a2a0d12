"""bulk_resolve gives the answers of resolve_values, pair for pair."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quota_core import ANONYMOUS, CLIENT_KEYS, Entity, resolve_values
from quota_core.domain.bulk import BulkResolution, bulk_resolve

E = Entity.of

# A small alphabet so that generated quota sets and pairs collide often. "<default>" is a
# real name; "ANONYMOUS" is what a None user becomes.
USERS = ["alice", "bob", "<default>", ANONYMOUS]
CLIENTS = ["app", "web", "<default>", "alice"]
# The eight rung shapes: (user part, client part); "N" a name, "D" the default, "-" absent.
SHAPES = [("N", "N"), ("N", "D"), ("N", "-"), ("D", "N"), ("D", "D"), ("D", "-"),
          ("-", "N"), ("-", "D")]

VALUES = st.one_of(st.integers(1, 10**12).map(float),
                   st.floats(min_value=1e-3, max_value=1e9, allow_nan=False),
                   st.just(math.nan))


@st.composite
def entities(draw):
    u_shape, c_shape = draw(st.sampled_from(SHAPES))
    kwargs = {}
    if u_shape != "-":
        kwargs["user"] = draw(st.sampled_from(USERS)) if u_shape == "N" else None
    if c_shape != "-":
        kwargs["client_id"] = draw(st.sampled_from(CLIENTS)) if c_shape == "N" else None
    return E(**kwargs)


QUOTA_SETS = st.dictionaries(
    entities(),
    st.dictionaries(st.sampled_from(CLIENT_KEYS), VALUES, min_size=1),
    max_size=25)
PAIR_USERS = st.sampled_from(USERS + [None, "", "zed"])
PAIR_CLIENTS = st.sampled_from(CLIENTS + [None, "", "zzz"])
PAIRS = st.lists(st.tuples(PAIR_USERS, PAIR_CLIENTS), max_size=40)


def assert_agrees(quotas, pairs, result: BulkResolution) -> None:
    assert len(result) == len(pairs)
    for i, (u, c) in enumerate(pairs):
        assert result.users[i] == (ANONYMOUS if u is None else u)
        assert result.client_ids[i] == ("" if c is None else c)
        expected = resolve_values(quotas, u, c)
        for key in CLIENT_KEYS:
            value, level = result.values[key][i], int(result.levels[key][i])
            if expected[key] is None:
                assert (level, math.isnan(value)) == (0, True), (u, c, key)
            else:
                want_value, want_level = expected[key]
                assert level == want_level, (u, c, key)
                assert value == want_value or (math.isnan(value) and math.isnan(want_value)), \
                    (u, c, key)


@settings(max_examples=150, deadline=None)
@given(quotas=QUOTA_SETS, pairs=PAIRS)
def test_bulk_agrees_with_resolve_values(quotas, pairs):
    users = [u for u, _ in pairs]
    clients = [c for _, c in pairs]
    assert_agrees(quotas, pairs, bulk_resolve(quotas, users, clients))


# Every rung set for every key, values encode the rung, so each pair shows which rung won.
FULL = {
    E(user="alice", client_id="app"): {"producer_byte_rate": 1.0},
    E(user="alice", client_id=None): {"producer_byte_rate": 2.0, "consumer_byte_rate": 2.0},
    E(user="alice"): {"producer_byte_rate": 3.0, "consumer_byte_rate": 3.0,
                      "request_percentage": 3.0},
    E(user=None, client_id="app"): {"producer_byte_rate": 4.0, "consumer_byte_rate": 4.0,
                                    "request_percentage": 4.0},
    E(user=None, client_id=None): {"request_percentage": 5.0},
    E(user=None): {"controller_mutation_rate": 6.0},
    E(client_id="app"): {"controller_mutation_rate": 7.0},
    E(client_id=None): {"controller_mutation_rate": 8.0, "producer_byte_rate": 8.0},
    E(user="<default>"): {"controller_mutation_rate": 99.0},
}


@pytest.mark.parametrize("user, client_id, expected", [
    ("alice", "app", {"producer_byte_rate": 1, "consumer_byte_rate": 2, "request_percentage": 3,
                      "controller_mutation_rate": 6}),
    ("alice", "web", {"producer_byte_rate": 2, "consumer_byte_rate": 2, "request_percentage": 3,
                      "controller_mutation_rate": 6}),
    ("bob", "app", {"producer_byte_rate": 4, "consumer_byte_rate": 4, "request_percentage": 4,
                    "controller_mutation_rate": 6}),
    ("bob", "web", {"producer_byte_rate": 8, "consumer_byte_rate": None,
                    "request_percentage": 5, "controller_mutation_rate": 6}),
    # A user literally named <default> is a name: rung 3 for it, not the default rungs' names.
    ("<default>", "web", {"producer_byte_rate": 8, "consumer_byte_rate": None,
                          "request_percentage": 5, "controller_mutation_rate": 3}),
    # ANONYMOUS with the empty client id: Kafka consults only rungs 3 and 6.
    (None, None, {"producer_byte_rate": None, "consumer_byte_rate": None,
                  "request_percentage": None, "controller_mutation_rate": 6}),
])
def test_bulk_table(user, client_id, expected):
    result = bulk_resolve(FULL, [user], [client_id])
    for key, level in expected.items():
        assert int(result.levels[key][0]) == (level or 0), key
        if level is None:
            assert math.isnan(result.values[key][0])
        elif key == "controller_mutation_rate" and level == 3:
            assert result.values[key][0] == 99.0
        else:
            assert result.values[key][0] == float(level)
    assert_agrees(FULL, [(user, client_id)], result)


def test_only_client_rungs_and_no_quotas():
    quotas = {E(client_id="app"): {"producer_byte_rate": 7.0},
              E(client_id=None): {"producer_byte_rate": 8.0}}
    pairs = [("u", "app"), ("u", "other"), (None, None), ("u", "")]
    result = bulk_resolve(quotas, [u for u, _ in pairs], [c for _, c in pairs])
    # An empty client id never reaches the client-id rungs.
    assert result.levels["producer_byte_rate"].tolist() == [7, 8, 0, 0]
    assert result.levels["consumer_byte_rate"].tolist() == [0, 0, 0, 0]
    assert_agrees(quotas, pairs, result)
    empty = bulk_resolve({}, ["a", None], ["b", None])
    assert all((empty.levels[k] == 0).all() and np.isnan(empty.values[k]).all()
               for k in CLIENT_KEYS)


def test_nan_valued_quotas_keep_their_level():
    """A NaN quota (the broker accepts it) still wins its rung: level set, value NaN."""
    quotas = {E(user="alice"): {"producer_byte_rate": math.nan},
              E(user=None, client_id=None): {"producer_byte_rate": 5.0,
                                             "consumer_byte_rate": math.nan},
              E(user="alice", client_id="app"): {"request_percentage": math.nan},
              E(client_id=None): {"controller_mutation_rate": math.nan}}
    pairs = [("alice", "app"), ("bob", "app"), ("alice", None), (None, "x")]
    result = bulk_resolve(quotas, [u for u, _ in pairs], [c for _, c in pairs])
    assert result.levels["producer_byte_rate"].tolist() == [3, 5, 3, 5]
    assert np.isnan(result.values["producer_byte_rate"][[0, 2]]).all()
    assert result.values["producer_byte_rate"][1] == 5.0
    assert result.levels["consumer_byte_rate"].tolist() == [5, 5, 0, 5]  # ("alice", ""): 3/6 only
    assert result.levels["request_percentage"].tolist() == [1, 0, 0, 0]
    assert result.levels["controller_mutation_rate"].tolist() == [8, 8, 0, 8]
    assert_agrees(quotas, pairs, result)


def test_ip_entities_are_ignored_and_keys_can_be_chosen():
    quotas = {E(ip=None): {"connection_creation_rate": 5.0},
              E(user="a"): {"producer_byte_rate": 1.0, "consumer_byte_rate": 2.0}}
    result = bulk_resolve(quotas, ["a"], ["c"], keys=("consumer_byte_rate",))
    assert list(result.values) == list(result.levels) == ["consumer_byte_rate"]
    assert result.values["consumer_byte_rate"].tolist() == [2.0]


def test_to_pandas():
    result = bulk_resolve(FULL, ["alice", None], ["app", "web"])
    frame = result.to_pandas()
    assert list(frame.columns[:2]) == ["user", "client_id"]
    assert frame["user"].tolist() == ["alice", ANONYMOUS]
    assert frame["producer_byte_rate"].tolist()[0] == 1.0
    assert frame["producer_byte_rate_level"].tolist() == [1, 8]
    assert len(frame.columns) == 2 + 2 * len(CLIENT_KEYS)


def test_empty_input():
    result = bulk_resolve(FULL, [], [])
    assert len(result) == 0
    assert all(len(result.values[k]) == 0 for k in CLIENT_KEYS)


def test_length_mismatch_is_an_error():
    with pytest.raises(ValueError, match=r"users and client_ids differ in length \(2 vs 1\)"):
        bulk_resolve(FULL, ["a", "b"], ["c"])
