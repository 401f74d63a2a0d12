"""The write path (issue 16) on a real broker: the cluster's write lease is exclusive, names
its holder or the missing ACL, and frees itself when its holder is killed; two concurrent
`apply` runs never both succeed; plans are refused on another cluster."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from quota_core import Entity
from quota_core.domain.alterations import Alteration
from quota_core.changes.audit import AuditLog
from quota_core.errors import LeaseUnavailable
from quota_core.backends.kafka import KafkaBackend
from quota_core.planning.plan import read_plan
from tests import ROOT
from tests.cli_steps import run, sandbox_with

E = Entity.of


def _env(**extra: str) -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT), **extra}


def _reset(backend: KafkaBackend, entity: Entity, quotas: dict) -> None:
    extra = [k for k in backend.describe_entity(entity) if k not in quotas]
    backend.alter([Alteration.of(entity, quotas, remove=extra)])


@pytest.mark.kafka
def test_the_lease_is_exclusive_and_names_its_holder(kafka_broker):
    with KafkaBackend(kafka_broker.bootstrap, timeout_s=10) as a, \
            KafkaBackend(kafka_broker.bootstrap, timeout_s=10) as b:
        with a.write_lease("writer-A", 10):
            with pytest.raises(LeaseUnavailable) as refused:
                with b.write_lease("writer-B", 1.5):
                    pytest.fail("two holders at once")
            assert "held by writer-A (pid " in str(refused.value)
            assert "nothing was written" in str(refused.value)
        with b.write_lease("writer-B", 10) as lease:  # free again once A released it
            assert lease.remaining() > 30


_HOLD_AND_HANG = """
import sys, time
from quota_core.backends.kafka import KafkaBackend
b = KafkaBackend(sys.argv[1], timeout_s=10)
with b.write_lease("doomed writer", 10):
    print("held", flush=True)
    time.sleep(600)
"""


@pytest.mark.kafka
def test_a_killed_holder_blocks_nobody_for_long(kafka_broker):
    proc = subprocess.Popen([sys.executable, "-c", _HOLD_AND_HANG, kafka_broker.bootstrap],
                            env=_env(QUOTA_LEASE_SECONDS="2"), stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        proc.stdout.close()
    started = time.monotonic()
    with KafkaBackend(kafka_broker.bootstrap, timeout_s=10) as b:
        # its transaction times out after 10 + 2 s; the coordinator checks every 10 s
        with b.write_lease("next writer", 40):
            assert time.monotonic() - started < 40


@pytest.mark.kafka
def test_a_writer_without_the_lease_acls_is_told_which_to_grant(kafka_sasl_broker):
    props = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
             "sasl.username": "alice", "sasl.password": kafka_sasl_broker.users["alice"]}
    with KafkaBackend(kafka_sasl_broker.bootstrap, props, timeout_s=10) as b:
        with pytest.raises(LeaseUnavailable) as refused:
            with b.write_lease("alice", 5):
                pytest.fail("the lease without its ACL")
    text = str(refused.value)
    assert "User:alice" in text and "--transactional-id quota-console-lease-" in text
    assert kafka_sasl_broker.users["alice"] not in text


PLAN_A = "entries:\n- entity: {user: w-alice}\n  quotas: {producer_byte_rate: 2, consumer_byte_rate: 2}\n"
PLAN_B = "entries:\n- entity: {user: w-alice}\n  quotas: {producer_byte_rate: 3, consumer_byte_rate: 1}\n"


@pytest.mark.kafka
def test_two_concurrent_applies_on_a_broker_never_both_succeed(kafka_broker, tmp_path):
    where = ("--bootstrap-server", kafka_broker.bootstrap)
    base = {E(user="w-alice"): {"producer_byte_rate": 1.0, "consumer_byte_rate": 1.0}}
    for round_ in range(3):
        with KafkaBackend(kafka_broker.bootstrap, timeout_s=10) as b:
            _reset(b, E(user="w-alice"), base[E(user="w-alice")])
        plans = []
        for name, desired in (("a", PLAN_A), ("b", PLAN_B)):
            (tmp_path / f"{name}.yaml").write_text(desired)
            out = tmp_path / f"{name}{round_}.json"
            code, _, err = run("plan", str(tmp_path / f"{name}.yaml"), *where, "--out", str(out))
            assert code == 2, err
            plans.append(out)
        log = tmp_path / f"audit{round_}.jsonl"
        procs = [subprocess.Popen([sys.executable, "-m", "quota_core", "apply", str(p), *where,
                                   "--timeout", "30"], env=_env(QUOTA_AUDIT_LOG=str(log)),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                 for p in plans]
        codes = [p.wait(90) for p in procs]
        errs = [p.stderr.read() for p in procs]
        assert sorted(codes) == [0, 1], (codes, errs)
        winner = read_plan(json.loads(plans[codes.index(0)].read_text()))
        with KafkaBackend(kafka_broker.bootstrap, timeout_s=10) as b:
            assert b.describe_entity(E(user="w-alice")) == winner.after[E(user="w-alice")]
        assert [r.outcome for r in AuditLog(log).read()] == ["applied"]


@pytest.mark.kafka
def test_a_sandbox_plan_is_refused_on_the_broker_naming_both(kafka_broker, tmp_path,
                                                             monkeypatch):
    monkeypatch.setenv("QUOTA_AUDIT_LOG", str(tmp_path / "audit.jsonl"))
    store = sandbox_with(tmp_path / "q.sqlite", {})
    (tmp_path / "d.yaml").write_text(PLAN_A)
    assert run("plan", str(tmp_path / "d.yaml"), "--sandbox", store, "--out",
               str(tmp_path / "p.json"))[0] == 2
    code, _, err = run("apply", str(tmp_path / "p.json"), "--bootstrap-server",
                       kafka_broker.bootstrap)
    made_on = json.loads((tmp_path / "p.json").read_text())["cluster"]["cluster_id"]
    assert code == 1 and made_on in err and kafka_broker.cluster_id in err, err
