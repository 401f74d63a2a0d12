"""The precedence ladder as one table: which entry decides each key, and the bucket it gives."""
import math

import pytest

from quota_core import ANONYMOUS, Entity, explain_key, resolve, resolve_ip

E = Entity.of
MiB = 2**20

# One quota set in which every rung holds something, with keys spread so that each rung
# wins for some client and key.
QUOTAS = {
    E(user="alice", client_id="app"): {"producer_byte_rate": 1.0},                  # 1
    E(user="alice", client_id=None): {"producer_byte_rate": 2.0, "consumer_byte_rate": 2.0},  # 2
    E(user="alice"): {"producer_byte_rate": 3.0, "consumer_byte_rate": 3.0,
                      "request_percentage": 3.0},                                      # 3
    E(user=None, client_id="app"): {"producer_byte_rate": 4.0, "controller_mutation_rate": 4.0},  # 4
    E(user=None, client_id=None): {"producer_byte_rate": 5.0, "consumer_byte_rate": 5.0},  # 5
    E(user=None): {"producer_byte_rate": 6.0, "request_percentage": 6.0},             # 6
    E(client_id="app"): {"producer_byte_rate": 7.0, "consumer_byte_rate": 7.0},       # 7
    E(client_id=None): {"producer_byte_rate": 8.0, "controller_mutation_rate": 8.0},  # 8
    E(user="<default>"): {"producer_byte_rate": 99.0},  # a user literally named <default>
}
ONLY_CLIENT_IDS = {E(client_id="app"): {"producer_byte_rate": 7.0},
                   E(client_id=None): {"producer_byte_rate": 8.0}}
ONLY_DEFAULT_USER = {E(user=None): {"consumer_byte_rate": 6.0}}
U_C, U, C = "user+client-id", "user", "client-id"


@pytest.mark.parametrize(
    "quotas, user, client_id, key, value, level, source, bucket",
    [
        # Each rung wins for some client and key.
        (QUOTAS, "alice", "app", "producer_byte_rate", 1.0, 1, E(user="alice", client_id="app"), U_C),
        (QUOTAS, "alice", "other", "producer_byte_rate", 2.0, 2, E(user="alice", client_id=None), U_C),
        (QUOTAS, "alice", "app", "consumer_byte_rate", 2.0, 2, E(user="alice", client_id=None), U_C),
        (QUOTAS, "alice", "app", "request_percentage", 3.0, 3, E(user="alice"), U),
        (QUOTAS, "bob", "app", "producer_byte_rate", 4.0, 4, E(user=None, client_id="app"), U_C),
        (QUOTAS, "alice", "app", "controller_mutation_rate", 4.0, 4, E(user=None, client_id="app"), U_C),
        (QUOTAS, "bob", "other", "producer_byte_rate", 5.0, 5, E(user=None, client_id=None), U_C),
        (QUOTAS, "bob", "app", "request_percentage", 6.0, 6, E(user=None), U),
        (ONLY_DEFAULT_USER, "bob", "x", "consumer_byte_rate", 6.0, 6, E(user=None), U),
        (ONLY_CLIENT_IDS, "bob", "app", "producer_byte_rate", 7.0, 7, E(client_id="app"), C),
        (ONLY_CLIENT_IDS, "bob", "zzz", "producer_byte_rate", 8.0, 8, E(client_id=None), C),
        (QUOTAS, "bob", "other", "controller_mutation_rate", 8.0, 8, E(client_id=None), C),
        # A key set nowhere on the ladder is unlimited.
        (ONLY_CLIENT_IDS, "bob", "app", "consumer_byte_rate", None, None, None, C),
        # The literal name <default> is a user like any other, not the default.
        (QUOTAS, "<default>", "x", "producer_byte_rate", 99.0, 3, E(user="<default>"), U),
        (QUOTAS, "<default>", "x", "request_percentage", 6.0, 6, E(user=None), U),
        # No user: an unauthenticated client is ANONYMOUS, which the default user covers.
        (QUOTAS, None, "other", "producer_byte_rate", 5.0, 5, E(user=None, client_id=None), U_C),
        (ONLY_DEFAULT_USER, None, None, "consumer_byte_rate", 6.0, 6, E(user=None), U),
        # No client id: the empty client id, for which Kafka consults only {user=U} and
        # {user=<default>} (findQuota needs both names for the pair rungs, a client id for 7/8).
        (ONLY_CLIENT_IDS, "bob", None, "producer_byte_rate", None, None, None, C),
        (QUOTAS, "alice", None, "producer_byte_rate", 3.0, 3, E(user="alice"), U),
        (QUOTAS, "alice", None, "consumer_byte_rate", 3.0, 3, E(user="alice"), U),
        (QUOTAS, "bob", None, "producer_byte_rate", 6.0, 6, E(user=None), U),
        (QUOTAS, "bob", None, "consumer_byte_rate", None, None, None, C),
        # An empty user consults only the client-id rungs.
        (QUOTAS, "", "app", "producer_byte_rate", 7.0, 7, E(client_id="app"), C),
        (QUOTAS, "", "zzz", "controller_mutation_rate", 8.0, 8, E(client_id=None), C),
        # A user named ANONYMOUS is the unauthenticated principal.
        (QUOTAS | {E(user=ANONYMOUS): {"request_percentage": 42.0}}, None, "app",
         "request_percentage", 42.0, 3, E(user=ANONYMOUS), U),
    ],
)
def test_ladder(quotas, user, client_id, key, value, level, source, bucket):
    kr = resolve(quotas, user, client_id).keys[key]
    assert (kr.value, kr.level, kr.source, kr.bucket.kind) == (value, level, source, bucket)


def test_keys_resolve_independently_from_different_levels():
    r = resolve(QUOTAS, "alice", "app")
    assert {k: kr.level for k, kr in r.keys.items()} == {
        "producer_byte_rate": 1, "consumer_byte_rate": 2,
        "request_percentage": 3, "controller_mutation_rate": 4}


def test_ladder_steps_show_winners_and_shadowed_entries():
    r = resolve(QUOTAS, "alice", "app")
    assert [s.level for s in r.ladder] == list(range(1, 9))
    assert [str(s.entity) for s in r.ladder] == [
        "{user=alice, client-id=app}", "{user=alice, client-id=<default>}", "{user=alice}",
        "{user=<default>, client-id=app}", "{user=<default>, client-id=<default>}",
        "{user=<default>}", "{client-id=app}", "{client-id=<default>}"]
    step3 = r.ladder[2]
    assert step3.wins == ("request_percentage",)
    assert step3.shadowed == ("consumer_byte_rate", "producer_byte_rate")
    assert r.ladder[0].wins == ("producer_byte_rate",) and r.ladder[0].shadowed == ()
    assert r.ladder[7].wins == () and set(r.ladder[7].shadowed) == {
        "controller_mutation_rate", "producer_byte_rate"}


@pytest.mark.parametrize("level_entity, tags", [
    (E(user="alice", client_id="app"), {"user": "alice", "client-id": "app"}),
    (E(user="alice"), {"user": "alice", "client-id": ""}),
    (E(user=None), {"user": "alice", "client-id": ""}),
    (E(client_id=None), {"user": "", "client-id": "app"}),
])
def test_bucket_metric_tags(level_entity, tags):
    kr = resolve({level_entity: {"producer_byte_rate": 1.0}}, "alice", "app").keys[
        "producer_byte_rate"]
    assert dict(kr.bucket.tags) == tags


def test_assumptions_are_recorded():
    r = resolve(QUOTAS, None, None)
    assert (r.client.user, r.client.client_id) == (ANONYMOUS, "")
    notes = r.client.assumptions()
    assert any("ANONYMOUS" in n for n in notes) and any("empty client id" in n for n in notes)
    assert resolve(QUOTAS, "a", "b").client.assumptions() == []


def test_nan_quota_still_wins_its_rung():
    r = resolve({E(user="a"): {"producer_byte_rate": math.nan},
                 E(client_id=None): {"producer_byte_rate": 5.0}}, "a", "x")
    kr = r.keys["producer_byte_rate"]
    assert kr.level == 3 and math.isnan(kr.value)


@pytest.mark.parametrize("quotas, ip, value, level", [
    ({E(ip="10.0.0.1"): {"connection_creation_rate": 5.0},
      E(ip=None): {"connection_creation_rate": 50.0}}, "10.0.0.1", 5.0, 1),
    ({E(ip="10.0.0.1"): {"connection_creation_rate": 5.0},
      E(ip=None): {"connection_creation_rate": 50.0}}, "10.0.0.2", 50.0, 2),
    ({E(ip="10.0.0.1"): {"connection_creation_rate": 5.0}}, "10.0.0.2", None, None),
])
def test_ip_resolution(quotas, ip, value, level):
    kr = resolve_ip(quotas, ip).keys["connection_creation_rate"]
    assert (kr.value, kr.level) == (value, level)


@pytest.mark.parametrize("user, client_id, key, sentence", [
    ("alice", "app", "request_percentage",
     "All client ids of user 'alice' share 3% of a thread on each broker, set for "
     "{user=alice} (ladder level 3)."),
    ("bob", "app", "request_percentage",
     "Each user gets 6% of a thread on each broker of their own; all client ids of user "
     "'bob' share it, set for {user=<default>} (ladder level 6)."),
    ("alice", "app", "producer_byte_rate",
     "Client id 'app' of user 'alice' gets 1 B/s on each broker to itself, set for "
     "{user=alice, client-id=app} (ladder level 1)."),
])
def test_plain_words(user, client_id, key, sentence):
    assert explain_key(resolve(QUOTAS, user, client_id), key) == sentence


def test_plain_words_for_shared_client_id_and_unlimited():
    r = resolve({E(client_id="app"): {"producer_byte_rate": float(MiB)}}, "bob", "app")
    assert explain_key(r, "producer_byte_rate") == (
        "All users of client id 'app' share 1 MiB/s on each broker, set for "
        "{client-id=app} (ladder level 7).")
    assert "unlimited" in explain_key(r, "consumer_byte_rate")


def test_empty_client_id_marks_skipped_rungs_and_says_why():
    r = resolve(QUOTAS, "bob", None)
    assert [s.level for s in r.ladder if s.applies] == [3, 6]
    assert r.ladder[4].shadowed == ()  # level 5 is not shadowed: Kafka never looks at it
    assert explain_key(r, "consumer_byte_rate") == (
        "No entry on the ladder sets consumer_byte_rate for user 'bob' with client id '': "
        "unlimited. Level 5 sets it, but Kafka never applies that level to an empty "
        "client id.")
