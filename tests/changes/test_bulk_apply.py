"""Large writes (issue 32, findings 1 and 10), on the sandbox: the apply path does no
per-entity scan (an operation counter, not a clock), every intent of a bulk import gets its
outcome line however the apply ends, a long apply says its progress on stderr, and a byte copy
of a sandbox is not the sandbox a plan was made on."""
from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path

import pytest

from quota_core import Entity
from quota_core.domain.alterations import AlterOutcome, Alteration, EntityResult, Op
from quota_core.backends.base import WriteLease
from quota_core.backends.sandbox import SandboxBackend
from quota_core.changes.audit import AuditLog
from quota_core.changes.progress import ApplyProgress
from quota_core.changes.workflow import apply_changes
from quota_core.errors import LeaseUnavailable
from quota_core.planning.impact import client_impact
from quota_core.domain.ladder import on_any_ladder, on_ladder
from quota_core.domain.serialization import dumps
from tests import ROOT
from tests.cli_steps import run, sandbox_with, state

E = Entity.of
#: Big enough that a scan per entity (N²/2 comparisons) is thousands of times the dict's N.
N = 3000


@pytest.fixture(autouse=True)
def audit_log(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "audit.jsonl"
    monkeypatch.setenv("QUOTA_AUDIT_LOG", str(path))
    monkeypatch.delenv("QUOTA_PLAN_KEY", raising=False)
    return path


def bulk(n: int = N) -> dict:
    return {E(user=f"user-{i:05d}"): {"producer_byte_rate": 1000.0 + i} for i in range(n)}


def alterations(quotas: dict) -> list[Alteration]:
    return [Alteration(e, tuple(Op.set(k, v) for k, v in q.items())) for e, q in quotas.items()]


@pytest.fixture
def equality_counter(monkeypatch) -> dict:
    """Counts Entity comparisons: a linear scan for an entity compares it with every entity
    before it, a dict lookup with one (when the hashes match)."""
    calls = {"eq": 0}
    real = Entity.__eq__

    def counting(self, other):
        calls["eq"] += 1
        return real(self, other)

    monkeypatch.setattr(Entity, "__eq__", counting)
    return calls


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def open_intents(path: Path) -> list[dict]:
    records = lines(path)
    closed = {r["ref"] for r in records if r["phase"] == "outcome"}
    return [r for r in records if r["phase"] == "intent" and r["id"] not in closed]


# -- 1. linear: no scan per entity ---------------------------------------------------------------
def test_an_outcome_looks_its_entities_up_in_a_dict(equality_counter):
    results = tuple(EntityResult(E(user=f"user-{i:05d}")) for i in range(N))
    outcome = AlterOutcome(results)
    asked = [E(user=f"user-{i:05d}") for i in range(N)]  # equal, not the same objects
    equality_counter["eq"] = 0
    assert all(outcome.for_entity(e).ok for e in asked)
    assert equality_counter["eq"] <= 2 * N  # a scan: N * (N + 1) / 2 = 4.5 million
    with pytest.raises(KeyError):
        outcome.for_entity(E(user="nobody"))


def test_a_bulk_apply_compares_each_entity_a_bounded_number_of_times(tmp_path, audit_log,
                                                                     equality_counter):
    store = SandboxBackend(tmp_path / "s.sqlite")
    store.init()
    wanted = bulk()
    changes = alterations(wanted)
    equality_counter["eq"] = 0
    done = apply_changes(store, changes, {}, actor="bench", cluster={}, audit=AuditLog(audit_log))
    assert len(done.applied) == N and done.ok
    # Before issue 32: 4.5 million (AlterOutcome.for_entity scanned once per entity).
    assert equality_counter["eq"] <= 20 * N, equality_counter
    store.close()
    assert state(str(tmp_path / "s.sqlite")) == wanted


def test_on_any_ladder_is_any_on_ladder():
    """The plan's impact finds the touched clients with one set lookup per rung."""
    shapes = []
    for user in (None, "a", "b"):  # empty names are refused as entities
        for cid in (None, "a", "b"):
            shapes += [E(user=user), E(client_id=cid), E(user=user, client_id=cid)]
    shapes += [E(ip="192.0.2.1"), E(ip=None)]
    clients = [(u, c) for u in ("a", "b", "", "x") for c in ("a", "b", "", "x")]
    for i in range(len(shapes)):
        for picked in (shapes[i:i + 1], shapes[i:i + 4], shapes[::i + 2]):
            test = on_any_ladder(picked)
            for u, c in clients:
                assert test(u, c) == any(on_ladder(e)(u, c) for e in picked), (picked, u, c)


def test_the_impact_of_a_whole_set_does_not_test_every_client_against_every_entity(
        monkeypatch):
    from quota_core.domain import ladder

    calls = {"rung": 0}
    real = ladder.consulted

    def counting(*args):
        calls["rung"] += 1
        return real(*args)

    monkeypatch.setattr(ladder, "consulted", counting)
    before = bulk()
    after = {e: {"producer_byte_rate": q["producer_byte_rate"] * 2} for e, q in before.items()}
    clients = [(e.name("user"), "app") for e in before]
    changes = client_impact(before, after, clients, list(before))
    assert len(changes) == N
    # Before issue 32: every client against every changed entity, 9 million rung tests.
    assert calls["rung"] <= 8 * N, calls


# -- 2. every intent gets an outcome -------------------------------------------------------------
def test_every_intent_of_a_bulk_import_has_its_outcome(tmp_path, audit_log):
    wanted = bulk()
    wanted[E(user="bad-window")] = {"request_percentage": 1e9}  # refused by the broker's rules
    src = tmp_path / "big.json"
    src.write_text(dumps(wanted))
    code, out, err = run("--sandbox", str(tmp_path / "new.sqlite"), "--import", str(src))
    assert code in (0, 1), err
    records = lines(audit_log)
    intents = [r for r in records if r["phase"] == "intent"]
    outcomes = {r["ref"]: r["outcome"] for r in records if r["phase"] == "outcome"}
    assert len(intents) == len(outcomes) == len(state(str(tmp_path / "new.sqlite"))) + \
        list(outcomes.values()).count("refused")
    assert open_intents(audit_log) == []


class _Stops(SandboxBackend):
    """A sandbox whose alter raises ``exc`` (an interrupt, a bug in a layer below)."""

    exc: BaseException = KeyboardInterrupt()

    def alter(self, alterations, validate_only=False):
        if not validate_only:
            raise self.exc
        return super().alter(alterations, validate_only)


@pytest.mark.parametrize("exc", [KeyboardInterrupt(), RuntimeError("a bug below")],
                         ids=["interrupt", "bug"])
def test_an_apply_stopped_after_its_intents_still_closes_them(tmp_path, audit_log, exc):
    path = tmp_path / "s.sqlite"
    sandbox_with(path, {})
    store = _Stops(path)
    store.exc = exc
    with pytest.raises(type(exc)):
        apply_changes(store, alterations(bulk(50)), {}, actor="t", cluster={},
                      audit=AuditLog(audit_log))
    store.close()
    outcomes = [r for r in lines(audit_log) if r["phase"] == "outcome"]
    assert open_intents(audit_log) == [] and len(outcomes) == 50
    assert {r["outcome"] for r in outcomes} == {"unknown"}
    assert type(exc).__name__ in outcomes[0]["note"]
    assert state(str(path)) == {}  # the sandbox's lease rolled back: nothing applied


def test_a_lease_that_runs_out_before_sending_closes_the_intents_as_not_sent(
        tmp_path, audit_log, monkeypatch):
    def short(self, need_s):
        raise LeaseUnavailable("The write lease has 0.0 s left: nothing was sent.")

    monkeypatch.setattr(WriteLease, "ensure", short)
    path = sandbox_with(tmp_path / "s.sqlite", {})
    with pytest.raises(LeaseUnavailable):
        apply_changes(SandboxBackend(path), alterations(bulk(20)), {}, actor="t", cluster={},
                      audit=AuditLog(audit_log))
    outcomes = [r for r in lines(audit_log) if r["phase"] == "outcome"]
    assert open_intents(audit_log) == [] and {r["outcome"] for r in outcomes} == {"not sent"}
    assert AuditLog(audit_log).read() == []  # attempts that changed nothing are not changes


# -- 3. progress on stderr -----------------------------------------------------------------------
def test_a_long_import_says_its_steps_on_stderr_and_a_short_one_does_not(tmp_path):
    big, small = tmp_path / "big.json", tmp_path / "small.json"
    big.write_text(dumps(bulk(1200)))
    small.write_text(dumps(bulk(10)))
    code, out, err = run("--sandbox", str(tmp_path / "a.sqlite"), "--import", str(big))
    assert code == 0 and out == ""
    progress = [line for line in err.splitlines() if "1,200 entity changes" in line]
    assert progress[0].startswith("kafka-client-quotas: applying 1,200 entity changes: ")
    assert any("sending the changes" in line for line in progress), err
    assert progress[-1].startswith("kafka-client-quotas: applied 1,200 entity changes: "
                                   "1,200 applied, 0 refused in ")
    assert err.splitlines()[-1] == "Applied 1200 of 1200 entity changes."
    code, out, err = run("--sandbox", str(tmp_path / "b.sqlite"), "--import", str(small))
    assert code == 0 and err == "Applied 10 of 10 entity changes.\n"


def test_a_step_that_lasts_is_repeated_until_it_ends():
    seen: list[str] = []
    repeated = threading.Event()

    def emit(line: str) -> None:
        seen.append(line)
        if "still sending" in line:
            repeated.set()

    with ApplyProgress(emit, 5000, every_s=0.01) as progress:
        progress.step("sending the changes")
        assert repeated.wait(10), seen  # the step "lasts" until the timer has said it again
        progress.done("5,000 applied, 0 refused")
    after = len(seen)
    assert seen[0].startswith("applying 5,000 entity changes: sending the changes (")
    assert seen[-1].startswith("applied 5,000 entity changes: 5,000 applied, 0 refused in ")
    threading.Event().wait(0.05)
    assert len(seen) == after  # the timer stopped with the apply
    quiet: list[str] = []
    with ApplyProgress(quiet.append, 999) as progress:
        progress.step("sending the changes")
    assert quiet == []


# -- 4. finding 10: a byte copy of a sandbox -----------------------------------------------------
def _plan(tmp_path: Path, store: Path) -> Path:
    src, out = tmp_path / "want.yaml", tmp_path / "plan.json"
    src.write_text("entries:\n- entity: {user: alice}\n  quotas: {producer_byte_rate: 2000}\n")
    code, _, err = run("plan", str(src), "--sandbox", str(store), "--out", str(out))
    assert code == 2, err
    return out


def test_a_plan_made_on_a_sandbox_is_refused_on_its_byte_copy(tmp_path):
    a, b = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    sandbox_with(a, {E(user="alice"): {"producer_byte_rate": 1000.0}})
    plan = _plan(tmp_path, a)
    shutil.copyfile(a, b)
    code, out, err = run("apply", str(plan), "--sandbox", str(b))
    assert code == 1 and out == "", err
    assert "Nothing was applied" in err and str(b) in err
    assert state(str(b)) == {E(user="alice"): {"producer_byte_rate": 1000.0}}
    assert SandboxBackend(b).identity() != SandboxBackend(a).identity()
    code, out, err = run("apply", str(plan), "--sandbox", str(a))
    assert code == 0, err
    assert state(str(a)) == {E(user="alice"): {"producer_byte_rate": 2000.0}}


def test_a_renamed_sandbox_keeps_its_id_and_an_older_file_adopts_its_own(tmp_path):
    a, moved = tmp_path / "a.sqlite", tmp_path / "moved.sqlite"
    sandbox_with(a, {E(user="alice"): {"producer_byte_rate": 1000.0}})
    first = SandboxBackend(a).identity()
    plan = _plan(tmp_path, a)
    a.rename(moved)  # the same file (inode): the same sandbox
    assert SandboxBackend(moved).identity() == first
    assert run("apply", str(plan), "--sandbox", str(moved))[0] == 0
    # A file written before ids were tied to their file has no inode recorded: it adopts the
    # one it is in at its next identity check, and keeps its id.
    import sqlite3

    with sqlite3.connect(moved) as conn:
        conn.execute("DELETE FROM meta WHERE name='file'")
    conn.close()
    adopted = SandboxBackend(moved)
    assert adopted.identity() == first
    adopted.close()  # its WAL checkpointed: the byte copy below holds the adopted inode
    shutil.copyfile(moved, tmp_path / "copy.sqlite")
    assert SandboxBackend(tmp_path / "copy.sqlite").identity() not in (first, None)


_PAUSE_IN_ALTER = """
import sys, time
from quota_core.backends import sandbox
real = sandbox.SandboxBackend.alter
def slow(self, alterations, validate_only=False):
    if not validate_only:
        print("sending", flush=True); time.sleep(60)
    return real(self, alterations, validate_only)
sandbox.SandboxBackend.alter = slow
from quota_core.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def test_a_sigterm_mid_import_closes_every_intent(tmp_path, audit_log):
    """``timeout 600 kafka-client-quotas --import ...`` (SIGTERM): the intents get their
    outcome lines before the process ends; the sandbox's transaction is rolled back."""
    import os
    import signal
    import subprocess
    import sys

    root = ROOT
    src = tmp_path / "big.json"
    src.write_text(dumps(bulk(200)))
    store = sandbox_with(tmp_path / "s.sqlite", {})
    proc = subprocess.Popen([sys.executable, "-c", _PAUSE_IN_ALTER, "--sandbox", store,
                             "--import", str(src)],
                            env={**os.environ, "PYTHONPATH": str(root)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "sending"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 143, err
    assert err.strip().endswith("stopped by SIGTERM; the audit log says what was sent."), err
    outcomes = [r for r in lines(audit_log) if r["phase"] == "outcome"]
    assert open_intents(audit_log) == [] and len(outcomes) == 200
    assert {r["outcome"] for r in outcomes} == {"unknown"}
    assert "SIGTERM" in outcomes[0]["note"]
    assert state(store) == {}


def test_a_bigger_write_asks_for_a_longer_lease(tmp_path, audit_log, monkeypatch):
    """Kafka's lease expires (its transaction times out): a write of many entities asks for
    it long enough, and checks before sending that enough of it is left."""
    from quota_core.changes import workflow

    asked: list[tuple[float, float]] = []
    needs: list[float] = []

    class Recording(SandboxBackend):
        def write_lease(self, holder, wait_s, hold_s=None):
            asked.append(hold_s)
            return super().write_lease(holder, wait_s, hold_s)

    real = WriteLease.ensure
    monkeypatch.setattr(WriteLease, "ensure",
                        lambda self, need_s: needs.append(need_s) or real(self, need_s))
    for n in (1, N):
        path = tmp_path / f"s{n}.sqlite"
        sandbox_with(path, {})
        apply_changes(Recording(path), alterations(bulk(n)), {}, actor="t", cluster={},
                      audit=AuditLog(audit_log))
    per = workflow.LEASE_S_PER_1000 * (N - 1) / 1000
    assert needs[1] - needs[0] == pytest.approx(per)
    assert asked[1] - asked[0] == pytest.approx(2 * per) and asked[1] > needs[1]
