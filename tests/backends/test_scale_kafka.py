"""A large quota set on a real broker (issue 10, items 1-3), and the same limits in the sandbox.

* 30,000 entries: a DescribeClientQuotas answer of about 1.3 MB, over kafka-python's default
  receive limit of 1,000,000 bytes (its parser dropped the frame, and describe waited for
  nothing until "No answer ... check that the brokers are running").
* One alter of 30,000 entities: a broker takes at most 10,000 changed keys per request
  (QuorumController.MAX_RECORDS_PER_USER_OP) and refuses a larger one whole with
  POLICY_VIOLATION, so the backends split it.
* Names: at most 32,767 bytes of UTF-8 (a protocol STRING); a broker closes the connection
  on a longer one, so both backends refuse it before sending.

The 100,000-entry figures are in benchmarks/bench_large_describe.py.
"""
from __future__ import annotations

import io
import json
import time

import pytest

from localkafka import LocalBroker
from quota_core import Alteration, Entity, EntityError, Op
from quota_core.cli.main import main
from quota_core.domain.limits import (MAX_RECORDS_PER_REQUEST, POLICY_VIOLATION_MESSAGE,
                                      request_batches)
from quota_core.backends.sandbox import SandboxBackend

PBR = "producer_byte_rate"
SEEDED = 30_000


def _users(prefix: str, n: int, value: float = 1024.0) -> list[Alteration]:
    return [Alteration(Entity.of(user=f"{prefix}-{i:06d}"), (Op.set(PBR, value),))
            for i in range(n)]


@pytest.fixture(scope="module")
def big_broker(tmp_path_factory):
    """A broker of its own: 30,000 entries would slow every other test's describe."""
    broker = LocalBroker(tmp_path_factory.mktemp("scale"))
    broker.start(timeout=120)
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="module")
def seeded(big_broker):
    from quota_core.backends.kafka import KafkaBackend

    with KafkaBackend(big_broker.bootstrap, timeout_s=60) as backend:
        started = time.monotonic()
        outcome = backend.alter(_users("u", SEEDED))  # one call: three requests
        elapsed = time.monotonic() - started
    assert outcome.ok, outcome.failed[:3]
    assert len(outcome.results) == SEEDED
    return big_broker, elapsed


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.kafka
def test_one_alter_of_30000_entities_is_split_and_applied(seeded):
    _, elapsed = seeded
    assert elapsed < 120, f"seeding 30,000 entries took {elapsed:.1f} s"  # speed: benchmarks/


@pytest.mark.kafka
def test_describe_resolve_and_export_of_30000_entries(seeded):
    from quota_core.backends.kafka import KafkaBackend

    broker, _ = seeded
    with KafkaBackend(broker.bootstrap, timeout_s=60) as backend:
        quotas = backend.describe()  # one answer of 30,000 entries within the timeout
    assert len(quotas) == SEEDED
    assert quotas[Entity.of(user="u-012345")] == {PBR: 1024.0}
    code, out, err = _cli("--bootstrap-server", broker.bootstrap, "--describe", "--output",
                          "json")
    assert (code, err) == (0, "")
    assert len(json.loads(out)) == SEEDED
    code, out, err = _cli("--bootstrap-server", broker.bootstrap, "--resolve", "--user",
                          "u-029999", "--client-id", "app", "--output", "json")
    assert code == 0, err
    assert "u-029999" in out and "1024" in out
    code, out, err = _cli("--bootstrap-server", broker.bootstrap, "--export", "json")
    assert code == 0, err
    assert len(json.loads(out)["entries"]) == SEEDED


@pytest.mark.kafka
def test_the_broker_refuses_one_request_over_10000_changed_keys_and_so_does_the_sandbox(
        seeded, tmp_path):
    from quota_core.backends.kafka import KafkaBackend

    broker, _ = seeded
    over = _users("over", MAX_RECORDS_PER_REQUEST + 1)
    sandbox = SandboxBackend(tmp_path / "s.sqlite")
    with KafkaBackend(broker.bootstrap, timeout_s=20) as backend:
        for b in (backend, sandbox):
            for validate_only in (True, False):
                outcome = b.alter_request(over, validate_only=validate_only)
                assert {(r.error_code, r.error) for r in outcome.results} == {
                    ("POLICY_VIOLATION", POLICY_VIOLATION_MESSAGE)}, (b, validate_only)
                assert len(outcome.results) == len(over)
        assert backend.describe_entity(over[0].entity) == {}
        # Exactly at the limit is accepted, and keys that do not change make no records.
        at = over[:MAX_RECORDS_PER_REQUEST]
        unchanged = _users("u", 5)  # already set to these values: no records
        for b in (backend, sandbox):
            b.alter(unchanged)
            outcome = b.alter_request(at + unchanged, validate_only=True)
            assert outcome.ok, (b, outcome.failed[:2])
    sandbox.close()


def test_batches_keep_an_entity_together_and_stay_under_the_limits():
    alterations = _users("a", 25_001)
    alterations.insert(12_000, Alteration(Entity.of(user="a-000001"), (Op.set(PBR, 5.0),)))
    batches = request_batches(alterations)
    assert [len(b) for b in batches] == [10_000, 10_000, 5_002]  # a-000001 counts twice
    assert [a.entity for a in batches[0][:3]] == [Entity.of(user=f"a-00000{i}")
                                                  for i in (0, 1, 1)]
    long_names = [Alteration(Entity.of(user=f"{i:05d}" + "x" * 30_000), (Op.set(PBR, 1.0),))
                  for i in range(600)]
    assert all(sum(len(a.entity.name("user")) for a in b) < 8 * 1024 * 1024
               for b in request_batches(long_names))


def test_a_sandbox_alter_over_the_request_limit_applies_all(tmp_path):
    n = MAX_RECORDS_PER_REQUEST + 2_000
    with SandboxBackend(tmp_path / "big.sqlite") as sandbox:
        outcome = sandbox.alter(_users("s", n))
        assert outcome.ok and len(outcome.results) == n
        assert len(sandbox.describe()) == n


def test_delete_on_many_entities_reads_them_in_one_describe(tmp_path, monkeypatch):
    n = 300  # issue 10: 2,000 entities were 2,000 describes (4.3 s instead of 0.9 s)
    path = tmp_path / "q.sqlite"
    with SandboxBackend(path) as sandbox:
        sandbox.alter(_users("d", n))
    calls = []
    real = SandboxBackend.describe

    def counting(self, entity_filter=None):
        calls.append(entity_filter)
        return real(self, entity_filter)

    monkeypatch.setattr(SandboxBackend, "describe", counting)
    users = [arg for i in range(n) for arg in ("--user", f"d-{i:06d}")]
    code, _, err = _cli("--sandbox", str(path), "--alter", *users, "--delete", PBR,
                        "--audit-log", str(tmp_path / "audit.jsonl"))
    assert code == 0, err[-2000:]
    before_apply = calls[:1]
    assert len(before_apply) == 1 and before_apply[0].strict
    assert len(calls) <= 4, f"{len(calls)} describes for one --delete of {n} entities"
    with SandboxBackend(path) as sandbox:
        assert sandbox.describe() == {}


# -- names: at most 32,767 bytes of UTF-8 --------------------------------------------------
@pytest.mark.parametrize("name, ok", [
    ("a" * 32_767, True), ("a" * 32_768, False),
    ("é" * 16_383, True), ("é" * 16_384, False),  # 2 bytes each: 32,766 / 32,768
    ("💡" * 8_191, True), ("💡" * 8_192, False),  # 4 bytes each: 32,764 / 32,768
])
def test_names_longer_than_a_broker_holds_are_refused(name, ok):
    if ok:
        assert Entity.of(user=name).name("user") == name
        return
    with pytest.raises(EntityError) as info:
        Entity.of(client_id=name)
    message = str(info.value)
    assert f"is {len(name.encode()):,} bytes in UTF-8" in message
    assert "at most 32,767 bytes" in message
    assert len(message) < 300  # never the whole name


@pytest.mark.kafka
def test_the_longest_name_round_trips_and_a_longer_one_is_refused_on_both_backends(
        kafka_broker, tmp_path):
    from quota_core.backends.kafka import KafkaBackend

    longest = "é" * 16_383 + "a"  # 32,767 bytes
    with KafkaBackend(kafka_broker.bootstrap, timeout_s=5) as backend:
        entity = Entity.of(user=longest)
        assert backend.alter([Alteration(entity, (Op.set(PBR, 7.0),))]).ok
        assert backend.describe_entity(entity) == {PBR: 7.0}
        backend.alter([Alteration(entity, (Op.remove(PBR),))])
    too_long = longest + "a"
    for where in (("--bootstrap-server", kafka_broker.bootstrap),
                  ("--sandbox", str(tmp_path / "n.sqlite"))):
        started = time.monotonic()
        code, _, err = _cli(*where, "--alter", "--user", too_long, "--add", f"{PBR}=1024")
        assert code == 1, err
        assert "is 32,768 bytes in UTF-8 (16,385 characters); a Kafka broker holds names of " \
               "at most 32,767 bytes" in err
        assert time.monotonic() - started < 20  # refused before anything is sent
