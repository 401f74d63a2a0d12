"""Reads and writes on a real 3-broker cluster (issue 18, item 5).

Each broker answers describe, and enforces quotas, from its own copy of the metadata, which
follows the controller a little later on some brokers than on others: right after an alter's
answer, a describe asked of another broker showed the old value 17 times in 90 on this
cluster (measured before the fix). So an alter reads back from every broker until they all
show it, and only then reports the change; a broker still behind at ``--timeout`` makes the
outcome unknown, naming it. A killed broker: see ``tests/cluster_kills.py``.
"""
from __future__ import annotations

import io
import json
import time

import pytest

from quota_core import Alteration, Entity, Op
from quota_core.backends.kafka import KafkaBackend
from quota_core.backends.kafka_lease import LEASE_TOPIC
from quota_core.changes.audit import AuditLog
from quota_core.changes.workflow import apply_changes
from quota_core.cli.main import main
from quota_core.errors import OutcomeUnknown, QuotaError

from tests.cluster_kills import kill_round

PBR = "producer_byte_rate"


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return main(list(argv), out=out, err=err), out.getvalue(), err.getvalue()


def _on_each(backend: KafkaBackend, entity: Entity) -> dict[int, dict]:
    """What each broker of the cluster answers for ``entity``, asked directly."""
    return {node: backend._describe(node=node).get(entity, {})
            for node, _ in backend.brokers()}


def test_the_backend_lists_every_broker_and_can_ask_each(kafka_cluster):
    with KafkaBackend(kafka_cluster.bootstrap, timeout_s=20) as b:
        assert b.brokers() == [(n.node_id, n.bootstrap) for n in kafka_cluster.nodes]
        assert b.info().broker_count == 3


def test_an_alter_returns_only_once_every_broker_shows_it(kafka_cluster):
    """Right after each alter, every broker (asked directly) already shows the new value.
    Waiting for the broker in use only (the code before) left 5 of 120 such reads stale on
    this cluster; every broker: 0 of 120 (40 alters; here 20, 60 reads)."""
    stale = []
    with KafkaBackend(kafka_cluster.bootstrap, timeout_s=20) as b:
        entity = Entity.of(user="read-back-everywhere")
        try:
            for i in range(20):
                value = 1000.0 + i
                assert b.alter([Alteration(entity, (Op.set(PBR, value),))]).ok
                assert set(b.read_back) == {1, 2, 3}
                assert set(b.read_back.values()) == {"shows the change"}
                seen = _on_each(b, entity)
                stale += [(i, n) for n, q in seen.items() if q.get(PBR) != value]
        finally:
            b.alter([Alteration(entity, (Op.remove(PBR),))])
        assert _on_each(b, entity) == {1: {}, 2: {}, 3: {}}  # the removal too
    assert stale == []


def test_the_cli_alter_then_describe_on_each_broker_is_never_stale(kafka_cluster, tmp_path):
    audit = str(tmp_path / "audit.jsonl")
    stale = []
    for i in range(3):
        value = 2000 + i
        code, _, err = _cli("--bootstrap-server", kafka_cluster.bootstrap, "--alter",
                            "--user", "cli-everywhere", "--add", f"{PBR}={value}",
                            "--audit-log", audit)
        assert code == 0, err
        for node in kafka_cluster.nodes:  # a new process, bootstrapped from one broker
            code, out, err = _cli("--bootstrap-server", node.bootstrap, "--describe",
                                  "--user", "cli-everywhere", "--output", "json")
            assert code == 0, err
            got = json.loads(out)
            if got[0]["quotas"].get(PBR) != value:
                stale.append((i, node.node_id, got))
    assert stale == []
    assert _cli("--bootstrap-server", kafka_cluster.bootstrap, "--alter", "--user",
                "cli-everywhere", "--delete", PBR, "--audit-log", audit)[0] == 0


def test_edits_read_back_on_the_cluster_is_what_every_broker_holds(kafka_cluster, tmp_path):
    """Edit's Apply (apply_change: guard read, alter, one read-back) on three brokers: each
    change is settled (never a false conflict from a broker behind), and what it reports as
    the entity's new quotas is what every broker answers at once afterwards."""
    from quota_core.changes.workflow import apply_change

    entity = Entity.of(user="edit-on-cluster", client_id="ed")
    audit = AuditLog(tmp_path / "audit.jsonl")
    before: dict = {}
    with KafkaBackend(kafka_cluster.bootstrap, timeout_s=20) as b:
        for value in (1024.0, 2048.0, None, 4096.0, None):
            op = Op.remove(PBR) if value is None else Op.set(PBR, value)
            done = apply_change(b, Alteration(entity, (op,)), before, actor="test",
                                cluster={"bootstrap": kafka_cluster.bootstrap}, audit=audit)
            assert done.settled and done.after == ({} if value is None else {PBR: value})
            assert _on_each(b, entity) == {1: done.after, 2: done.after, 3: done.after}
            before = done.after
    assert [r.outcome for r in audit.read()] == ["applied"] * 5


class _OneBrokerBehind(KafkaBackend):
    """Broker 3 keeps answering with the values from before the alter (a broker that stopped
    following the metadata log: a fault a real broker cannot be made to show on demand).
    Everything else is the real cluster."""

    frozen: dict = {}

    def _current(self, alterations, deadline, *, node=None, wait_refused=True):
        got = super()._current(alterations, deadline, node=node, wait_refused=wait_refused)
        if node == 3:
            return {e: dict(self.frozen.get(e, {})) for e in got}
        return got


def test_a_broker_still_behind_at_the_timeout_is_named_and_the_outcome_is_unknown(
        kafka_cluster, tmp_path):
    entity = Entity.of(user="behind-on-3")
    audit = AuditLog(tmp_path / "audit.jsonl")
    with _OneBrokerBehind(kafka_cluster.bootstrap, timeout_s=2) as b:
        b.frozen = {entity: {}}
        with pytest.raises(OutcomeUnknown) as info:
            apply_changes(b, [Alteration(entity, (Op.set(PBR, 4096.0),))], {entity: {}},
                          actor="test", cluster={"bootstrap": kafka_cluster.bootstrap},
                          audit=audit)
        assert b.read_back[3] == "still shows other values for 1"
        assert b.read_back[1] == b.read_back[2] == "shows the change"
    exc = info.value
    assert str(exc).startswith("Outcome unknown: the cluster accepted the change, but broker 3 "
                               "still shows other values for 1 entity after 2 s "
                               "({user=behind-on-3}).")
    assert exc.unknown == (entity,) and exc.context["lagging"] == {3: [entity]}
    from quota_core.cli.main import _report_unknown  # what the CLI prints, then exit 3

    err = io.StringIO()
    _report_unknown(exc, err)
    assert err.getvalue().splitlines()[0] == ("kafka-client-quotas: {user=behind-on-3}: outcome "
                                              "unknown (accepted by the cluster, not yet shown "
                                              "by broker 3)")
    assert [(r.entity, r.outcome) for r in audit.read()] == [({"user": "behind-on-3"},
                                                              "unknown")]
    with KafkaBackend(kafka_cluster.bootstrap, timeout_s=10) as real:  # it was applied
        assert _on_each(real, entity) == {n: {PBR: 4096.0} for n in (1, 2, 3)}
        real.alter([Alteration(entity, (Op.remove(PBR),))])


def _lease_topic(cluster):
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import ConfigResource

    admin = cluster.admin()
    topic = admin.describe_topics(TopicCollection([LEASE_TOPIC]))[LEASE_TOPIC].result(20)
    config = admin.describe_configs([ConfigResource("topic", LEASE_TOPIC)])
    value = next(iter(config.values())).result(20)["min.insync.replicas"].value
    (p,) = topic.partitions
    return p.leader.id, sorted(r.id for r in p.replicas), value


def test_the_lease_topic_is_made_with_three_replicas_and_min_isr_2(kafka_cluster):
    """Made by the first writer, with its own settings: on this cluster (as on many) a
    metadata request naming a missing topic creates it, with the brokers' min ISR of 1."""
    from confluent_kafka import KafkaException

    try:  # bounds for a loaded machine: a deletion there took over 20 s (a CI run)
        kafka_cluster.admin().delete_topics([LEASE_TOPIC])[LEASE_TOPIC].result(90)
    except KafkaException:
        pass  # not there yet
    with KafkaBackend(kafka_cluster.bootstrap, timeout_s=20) as b:
        deadline = time.monotonic() + 60
        while True:  # a deletion takes a moment to reach every broker
            try:
                with b.write_lease("lease-check", 20):
                    break
            except QuotaError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    _, replicas, min_isr = _lease_topic(kafka_cluster)
    assert (replicas, min_isr) == ([1, 2, 3], "2")


def test_a_broker_killed_with_an_alter_in_flight_is_told_truthfully(kafka_cluster, tmp_path):
    """One round: the broker the alter went to is SIGKILLed as it leaves, and it is the
    leader of the lease topic; the console carries on with the other brokers (the same
    backend, one bootstrapped at the dead broker alone before it died, a new one whose
    bootstrap list starts at the dead broker, and a whole CLI alter, whose lease must move to
    another replica), and what it reported agrees with what every broker holds after the
    restart. ``scripts/faults.py --brokers 3`` runs many."""
    with KafkaBackend(kafka_cluster.bootstrap, timeout_s=20) as b, \
            b.write_lease("make-the-topic", 20):
        pass
    leader, _, _ = _lease_topic(kafka_cluster)
    row = kill_round(kafka_cluster, "cluster-kill", "sent-to", entities=200, delay=0.0,
                     timeout_s=15, audit_dir=tmp_path, send_to=leader)
    assert row["victim"].startswith(f"sent-to (node {leader};")
    print("kill:", row)
    assert row["wrong"] == [], row
    assert row["reported"] in ("applied", "unknown")  # never "refused": nothing was refused
    # and a whole CLI alter (its write lease included) works while that broker is down
    assert row["carried on"] == ["same backend", "backend bootstrapped there", "new backend",
                                 "cli alter"]
    assert kafka_cluster.answers()


@pytest.mark.parametrize("code, name, doubtful", [
    (7, "REQUEST_TIMED_OUT", True),      # the forwarding broker gave up on the controller
    (41, "NOT_CONTROLLER", True),        # the controller moved while the alter was on its way
    (13, "NETWORK_EXCEPTION", True),
    (-1, "UNKNOWN", True),               # UNKNOWN_SERVER_ERROR
    (42, "INVALID_REQUEST", False),      # validation: the entity was refused, nothing written
    (40, "INVALID_CONFIG", False),
    (44, "POLICY_VIOLATION", False),     # over 10,000 keys in one request
    (89, "THROTTLING_QUOTA_EXCEEDED", False),
])
def test_which_per_entity_errors_leave_the_outcome_open(code, name, doubtful):
    """A per-entity error that says nothing about the change is settled by describe (applied
    or unknown), never reported as "refused": on a cluster the broker that forwards the alter
    can lose the controller after it committed the change."""
    from kafka.errors import for_code

    from quota_core.backends.kafka import _doubtful

    assert for_code(code).message == name
    assert _doubtful(code) is doubtful
