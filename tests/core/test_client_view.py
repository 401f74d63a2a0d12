"""The client's own side (KIP-714, issue 30): the pure join of what the clients of a bucket
report with the broker's live verdict. One table of agreement cases, and the sentences."""
from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from quota_core.domain import wording
from quota_core.throttling.client_view import (AGREE, BROKER_NOT_THROTTLED, CLIENT_NOT_THROTTLED,
                                               NO_TELEMETRY, client_view, user_of_principal)
from quota_core.domain.entities import Entity
from quota_core.domain.membership import Membership

MiB = 1024 * 1024
QUOTAS = {Entity.of(user="alice"): {"producer_byte_rate": 2 * MiB, "consumer_byte_rate": 4 * MiB,
                                    "request_percentage": 50.0},
          Entity.of(user="alice", client_id="checkout-api"): {"producer_byte_rate": 8 * MiB}}
MEMBERS = Membership(QUOTAS)
ALICE = ("alice", None)


@dataclass(frozen=True)
class Report:  # the shape of quota_core.telemetry.client_reports.ClientReport
    instance_id: str = "i-1"
    client_id: str = "batch-export"
    principal: str | None = "User:alice"
    software_name: str | None = "confluent-kafka-python"
    software_version: str | None = "2.6.0"
    node_id: int = 2
    last_push_age_s: float | None = 4.0
    produce_throttle_ms_avg: float | None = 480.0
    produce_throttle_ms_max: float | None = 900.0
    fetch_throttle_ms_avg: float | None = 0.0
    fetch_throttle_ms_max: float | None = 0.0
    request_latency_ms_avg: dict = field(default_factory=lambda: {2: 510.0, 1: 3.0})


@dataclass(frozen=True)
class Fig:
    broker: str
    throttled: bool


ON_2 = [Fig("1", False), Fig("2", True), Fig("3", False)]
NOWHERE = [Fig("1", False), Fig("2", False), Fig("3", False)]
ZERO = Report(produce_throttle_ms_avg=0.0, produce_throttle_ms_max=0.0)
SILENT = Report(produce_throttle_ms_avg=None, produce_throttle_ms_max=None,
                fetch_throttle_ms_avg=None, fetch_throttle_ms_max=None)


@pytest.mark.parametrize("verdict, brokers, reports, recent, agreement, words", [
    (True, ON_2, [Report()], False, AGREE,
     "the broker throttles this bucket on broker 2, and the client reports waiting 480 ms "
     "per request there (at most 900 ms)"),
    (True, ON_2, [ZERO], False, CLIENT_NOT_THROTTLED,
     "the broker throttles this bucket on broker 2, but the client reports no throttle time: "
     "it may ignore throttling (clients before KIP-219 do)"),
    (False, NOWHERE, [Report()], False, BROKER_NOT_THROTTLED,
     "the client reports throttle time (480 ms per request), but no client quota bucket of it "
     "is throttled: look at other quotas (replication, controller mutation, connection rate)"),
    (False, NOWHERE, [ZERO], False, AGREE,
     "the broker does not throttle this bucket, and the client reports no throttle time"),
    (False, NOWHERE, [Report()], True, AGREE,
     "the broker throttled this bucket recently, not now, and the client reports waiting "
     "480 ms per request over its last pushes"),
    (True, ON_2, [], False, NO_TELEMETRY, wording.NO_TELEMETRY_TEXT),
    (False, NOWHERE, [], False, NO_TELEMETRY, wording.NO_TELEMETRY_TEXT),
    (None, NOWHERE[:2], [], False, NO_TELEMETRY, wording.NO_TELEMETRY_TEXT),
    # The broker side unknown (a broker not read): never an agreement.
    (None, NOWHERE[:2], [Report()], False, None,
     "the client reports waiting 480 ms per request, but whether the broker throttles this "
     "bucket is unknown (a broker was not read): no agreement is claimed"),
    (None, NOWHERE[:2], [ZERO], False, None,
     "the client reports no throttle time, but whether the broker throttles this bucket is "
     "unknown (a broker was not read): no agreement is claimed"),
    # An instance that pushes no throttle metric is not "not throttled".
    (True, ON_2, [SILENT], False, NO_TELEMETRY,
     "the clients push telemetry but no throttle time: add the throttle metrics to the "
     "subscription (`telemetry subscribe`)"),
])
def test_agreement_and_its_sentence(verdict, brokers, reports, recent, agreement, words):
    view = client_view("producer_byte_rate", verdict, brokers, ALICE, reports, MEMBERS,
                       recent=recent)
    assert view.agreement == agreement
    assert view.sentence == words
    assert view.as_dict()["agreement"] == agreement


def test_no_telemetry_is_never_not_throttled():
    view = client_view("producer_byte_rate", True, ON_2, ALICE, [], MEMBERS)
    assert view.reported is False and view.instances == ()
    assert "not throttled" not in view.sentence and view.agreement == NO_TELEMETRY


def test_a_cluster_without_the_plugin_is_named():
    view = client_view("producer_byte_rate", True, ON_2, ALICE, [], MEMBERS, collected=False)
    assert view.agreement == NO_TELEMETRY
    assert view.sentence.startswith("client telemetry is not collected on this cluster")


def test_only_the_bucket_s_instances_count():
    # checkout-api has its own pair bucket for producer_byte_rate: not in {user=alice}.
    other = Report(instance_id="i-2", client_id="checkout-api", produce_throttle_ms_avg=0.0)
    bob = Report(instance_id="i-3", principal="User:bob")
    view = client_view("producer_byte_rate", True, ON_2, ALICE, [Report(), other, bob], MEMBERS)
    assert [i.instance_id for i in view.instances] == ["i-1"]
    # For consumer_byte_rate checkout-api shares {user=alice}: both are in it.
    view = client_view("consumer_byte_rate", True, ON_2, ALICE, [Report(), other], MEMBERS)
    assert [i.client_id for i in view.instances] == ["batch-export", "checkout-api"]


@pytest.mark.parametrize("key, avg, mx", [
    ("producer_byte_rate", 480.0, 900.0),
    ("consumer_byte_rate", 30.0, 70.0),
    ("request_percentage", 480.0, 900.0),   # both directions: the larger
    ("controller_mutation_rate", None, None),
])
def test_the_key_picks_the_direction(key, avg, mx):
    r = Report(fetch_throttle_ms_avg=30.0, fetch_throttle_ms_max=70.0)
    bucket = MEMBERS.tags(key, "alice", "batch-export")
    (inst,) = client_view(key, True, ON_2, bucket, [r], MEMBERS).instances
    assert (inst.throttle_ms_avg, inst.throttle_ms_max) == (avg, mx)


def test_the_freshest_push_of_an_instance_wins_and_the_shape_holds():
    old = Report(node_id=1, last_push_age_s=50.0, produce_throttle_ms_avg=10.0)
    view = client_view("producer_byte_rate", True, ON_2, ALICE, [old, Report()], MEMBERS)
    doc = view.as_dict()
    assert set(doc) == {"reported", "instances", "agreement", "sentence"}
    (inst,) = doc["instances"]
    assert inst == {"instance_id": "i-1", "client_id": "batch-export",
                    "software_name": "confluent-kafka-python", "software_version": "2.6.0",
                    "throttle_ms_avg": 480.0, "throttle_ms_max": 900.0, "last_push_age_s": 4.0,
                    "brokers": {"1": {"request_latency_ms_avg": 3.0},
                                "2": {"request_latency_ms_avg": 510.0}}}
    assert doc["reported"] is True


def test_several_instances_are_counted_in_the_sentence():
    a, b = Report(instance_id="a"), Report(instance_id="b", produce_throttle_ms_avg=0.0,
                                          produce_throttle_ms_max=0.0)
    view = client_view("producer_byte_rate", True, ON_2, ALICE, [a, b], MEMBERS)
    assert view.agreement == AGREE
    assert view.sentence.startswith("the broker throttles this bucket on broker 2, and 1 of its "
                                    "2 client instances report waiting 480 ms")


@pytest.mark.parametrize("principal, user", [("User:alice", "alice"), (None, ""),
                                             ("User:CN=etl,OU=data", "CN=etl,OU=data"),
                                             ("alice", "alice")])
def test_principal_to_quota_user(principal, user):
    assert user_of_principal(principal) == user


def test_names_stay_raw_in_the_view():
    odd = Report(client_id="<b>x</b>", principal="User:<i>u</i>")
    view = client_view("producer_byte_rate", True, [Fig("2", True)], ("<i>u</i>", None), [odd],
                       Membership({Entity.of(user="<i>u</i>"): {"producer_byte_rate": 1.0}}))
    assert view.instances[0].client_id == "<b>x</b>"


# -- the two lint rules ---------------------------------------------------------------------
def _lint(views, telemetry=True, instances=1):
    from quota_core.lint import LintInput, run_lint

    report = run_lint(LintInput(QUOTAS, "test", clients=views, telemetry=telemetry,
                                client_instances=instances, live_source="--metrics (test)"))
    return [f for f in report.findings
            if f.rule in ("client-ignores-throttle", "no-telemetry-subscription")], report


def _views(*cases):
    return [(("producer_byte_rate", "alice", None),
             client_view("producer_byte_rate", verdict, brokers, ALICE, reports, MEMBERS))
            for verdict, brokers, reports in cases]


def test_lint_client_ignores_throttle():
    found, report = _lint(_views((True, ON_2, [ZERO])))
    assert [(f.rule, f.severity, f.entity, f.key) for f in found] == [
        ("client-ignores-throttle", "warning", Entity.of(user="alice"), "producer_byte_rate")]
    assert "it may ignore throttling" in found[0].evidence
    assert "'batch-export' (confluent-kafka-python 2.6.0)" in found[0].evidence
    assert found[0].fix_quotas == {}
    # Agreeing, blind or silent buckets are no finding of this rule.
    for case in [(True, ON_2, [Report()]), (None, NOWHERE[:2], [ZERO]), (False, NOWHERE, [ZERO])]:
        found, _ = _lint(_views(case))
        assert [f.rule for f in found] == []


def test_lint_no_telemetry_subscription():
    found, _ = _lint(_views((True, ON_2, [])), telemetry=False, instances=0)
    assert [(f.rule, f.severity, f.entity) for f in found] == [
        ("no-telemetry-subscription", "info", None)]
    assert found[0].evidence.startswith("client telemetry is not collected on this cluster")
    found, _ = _lint(_views((True, ON_2, [])), telemetry=True, instances=0)
    assert "no client pushes" in found[0].evidence
    # The plugin is there, some clients push: each throttled bucket none of whose push.
    found, _ = _lint(_views((True, ON_2, []), (False, NOWHERE, [])), instances=3)
    assert [(f.rule, f.entity, f.key) for f in found] == [
        ("no-telemetry-subscription", Entity.of(user="alice"), "producer_byte_rate")]


def test_lint_without_live_figures_names_the_live_rules_as_not_run():
    from quota_core.lint import LintInput, run_lint

    skipped = dict(run_lint(LintInput(QUOTAS, "test")).skipped)
    assert "--metrics" in skipped["client-ignores-throttle"]
    assert "--metrics" in skipped["no-telemetry-subscription"]



def test_a_wait_from_another_key_is_named_as_its_not_as_other_quotas():
    """The demo (alice / batch-export): producer_byte_rate throttles on broker 2; the client's
    produce throttle time also shows under request_percentage, whose bucket is not throttled.
    That wait is producer_byte_rate's, not "look at other quotas"."""
    from quota_core.throttling.client_view import throttled_elsewhere

    assert throttled_elsewhere("request_percentage", {"producer_byte_rate": True,
                                                      "request_percentage": False}) == \
        ("producer_byte_rate",)
    assert throttled_elsewhere("consumer_byte_rate", {"producer_byte_rate": True}) == ()
    report = Report(produce_throttle_ms_avg=78.0, produce_throttle_ms_max=1050.0)
    view = client_view("request_percentage", False, NOWHERE, ALICE, [report], MEMBERS,
                       elsewhere=("producer_byte_rate",))
    assert view.agreement == AGREE
    assert view.sentence == ("the client reports waiting 78 ms per request, from its "
                             "producer_byte_rate quota, which the broker throttles now; this "
                             "key does not throttle it")
    # without the other key throttled, it is still "look at other quotas"
    assert client_view("request_percentage", False, NOWHERE, ALICE, [report],
                       MEMBERS).agreement == BROKER_NOT_THROTTLED


def test_a_producer_in_a_consumer_bucket_is_not_told_to_fix_its_subscription():
    producer = Report(fetch_throttle_ms_avg=None, fetch_throttle_ms_max=None)
    view = client_view("consumer_byte_rate", False, NOWHERE, ALICE, [producer], MEMBERS)
    assert view.agreement == NO_TELEMETRY
    assert view.sentence == ("the clients push produce throttle times but none for fetch: "
                             "they do not fetch here")
