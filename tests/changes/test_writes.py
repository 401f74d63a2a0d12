"""The write path (issue 16) on the sandbox: one write lease around re-read, alter and
read-back; audit intents before anything is sent; plans bound to their cluster and signed;
apply's exit codes (1 refused or conflict, 3 outcome unknown)."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from quota_core import Entity
from quota_core.changes.audit import WRITER_STOPPED, AuditLog, records_csv
from quota_core.errors import OutcomeUnknown
from quota_core.planning.plan import quota_set_hash, read_plan
from quota_core.backends.sandbox import SandboxBackend
from tests import ROOT
from tests.cli_steps import run, sandbox_with, state

E = Entity.of
BASE = {E(user="alice"): {"producer_byte_rate": 1.0, "consumer_byte_rate": 1.0},
        E(user="bob"): {"producer_byte_rate": 5.0}}
PLAN_A = "entries:\n- entity: {user: alice}\n  quotas: {producer_byte_rate: 2, consumer_byte_rate: 2}\n"
PLAN_B = "entries:\n- entity: {user: alice}\n  quotas: {producer_byte_rate: 3, consumer_byte_rate: 1}\n"


@pytest.fixture(autouse=True)
def audit_log(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "audit.jsonl"
    monkeypatch.setenv("QUOTA_AUDIT_LOG", str(path))
    monkeypatch.delenv("QUOTA_PLAN_KEY", raising=False)
    return path


@pytest.fixture
def store(tmp_path) -> str:
    return sandbox_with(tmp_path / "q.sqlite", BASE)


def make_plan_file(tmp_path: Path, store: str, desired: str, name: str, *where: str) -> Path:
    src, out = tmp_path / f"{name}.yaml", tmp_path / f"{name}.json"
    src.write_text(desired)
    code, _, err = run("plan", str(src), *(where or ("--sandbox", store)), "--out", str(out))
    assert code == 2, err
    return out


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


# -- 1. concurrent writers ---------------------------------------------------------------------
def test_apply_waits_for_the_lease_then_refuses_naming_the_holder(tmp_path, store, audit_log):
    plan = make_plan_file(tmp_path, store, PLAN_A, "a")
    with SandboxBackend(store).write_lease("jdoe on the Edit page", 5):
        code, _, err = run("apply", str(plan), "--sandbox", store, "--timeout", "0.5")
    assert code == 1
    assert err.count("\n") == 1 and "jdoe on the Edit page" in err, err
    assert "nothing was written" in err
    assert state(store) == BASE and AuditLog(audit_log).read(refused=True) == []


def test_the_dashboards_locked_connection_takes_the_stores_lease(tmp_path, store, audit_log):
    # The dashboard writes through quota_core.backends.locked.LockedBackend: its Edit and Plan pages must hold
    # the same lease as the CLI (the wrapper once fell back to the interface's no-op lease).
    from quota_core.backends.locked import LockedBackend

    plan = make_plan_file(tmp_path, store, PLAN_A, "a")
    dashboard = LockedBackend(SandboxBackend(store))
    with dashboard.write_lease("jdoe on the Edit page", 5):
        code, _, err = run("apply", str(plan), "--sandbox", store, "--timeout", "0.5")
    assert code == 1 and "jdoe on the Edit page" in err, err
    assert state(store) == BASE
    assert dashboard.identity() == SandboxBackend(store).identity()


def test_two_concurrent_applies_never_both_succeed_from_the_same_before(tmp_path, store,
                                                                        audit_log):
    """The issue's race: two plans from the same set, run at once, in separate processes."""
    for round_ in range(4):
        sandbox_with(Path(store), BASE)
        a = make_plan_file(tmp_path, store, PLAN_A, f"a{round_}")
        b = make_plan_file(tmp_path, store, PLAN_B, f"b{round_}")
        procs = [subprocess.Popen([sys.executable, "-m", "quota_core", "apply", str(p),
                                   "--sandbox", store, "--timeout", "20"], env=_env(),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                 for p in (a, b)]
        codes = [p.wait(60) for p in procs]
        for p in procs:
            p.stdout.close()
            p.stderr.close()
        assert sorted(codes) == [0, 1], codes
        winner = read_plan(json.loads((a if codes[0] == 0 else b).read_text()))
        assert state(store) == winner.after  # exactly one plan, never a mix of both


def test_alter_beside_apply_never_both_succeed_from_the_same_before(tmp_path, store,
                                                                    audit_log):
    for round_ in range(3):
        sandbox_with(Path(store), BASE)
        plan = make_plan_file(tmp_path, store, PLAN_A, f"a{round_}")
        log = tmp_path / f"audit{round_}.jsonl"
        procs = [subprocess.Popen([sys.executable, "-m", "quota_core", *argv],
                                  env={**_env(), "QUOTA_AUDIT_LOG": str(log)},
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                 for argv in (["apply", str(plan), "--sandbox", store, "--timeout", "20"],
                              ["--sandbox", store, "--alter", "--user", "alice", "--add",
                               "producer_byte_rate=3", "--timeout", "20"])]
        codes = [p.wait(60) for p in procs]
        applied = [json.dumps(r.before, sort_keys=True) for r in AuditLog(log).read()
                   if r.outcome == "applied"]
        assert len(applied) == len(set(applied)) == codes.count(0) >= 1, (codes, applied)


def test_a_read_back_that_is_not_what_was_written_is_a_conflict(tmp_path, store, audit_log,
                                                                monkeypatch):
    """A writer outside this tool changes the entity between the alter and the read-back."""
    plan = make_plan_file(tmp_path, store, PLAN_A, "a")
    real = SandboxBackend._alter

    def alter_then_someone_else_writes(self, requests, validate_only):
        outcome = real(self, requests, validate_only)
        if not validate_only:
            self._conn.execute("UPDATE quotas SET value='7.0' WHERE key='producer_byte_rate' "
                               "AND entity LIKE '%alice%'")
            self._cache = None
        return outcome

    monkeypatch.setattr(SandboxBackend, "_alter", alter_then_someone_else_writes)
    code, out, err = run("apply", str(plan), "--sandbox", store)
    assert code == 1
    assert "conflict {user=alice}" in out
    assert "it now holds {consumer_byte_rate=2, producer_byte_rate=7}" in err, err
    [record] = AuditLog(audit_log).read()
    assert record.outcome == "conflict" and record.after["producer_byte_rate"] == 7


# -- 2. audit before apply ---------------------------------------------------------------------
_PAUSE_BEFORE_OUTCOME = """
import sys, time
from quota_core.changes import audit
real = audit.AuditLog.append_many
def slow(self, records):
    records = list(records)
    if records and records[0].phase == "outcome":
        print("applied", flush=True); time.sleep(60)
    real(self, records)
audit.AuditLog.append_many = slow
from quota_core.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def test_a_writer_killed_after_applying_leaves_every_change_recorded(tmp_path, audit_log):
    """SIGKILL after the change is committed and before its outcome line: the intent is there
    (written before sending), and readers show the outcome as unknown (the writer stopped)."""
    big = {E(user=f"u{i}"): {"producer_byte_rate": 1.0} for i in range(300)}
    store = sandbox_with(tmp_path / "big.sqlite", big)
    desired = "entries:\n" + "".join(f"- entity: {{user: u{i}}}\n  quotas: "
                                     f"{{producer_byte_rate: 2}}\n" for i in range(300))
    plan = make_plan_file(tmp_path, store, desired, "big")
    proc = subprocess.Popen([sys.executable, "-c", _PAUSE_BEFORE_OUTCOME, "apply", str(plan),
                             "--sandbox", store], env=_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout.readline().strip() == "applied"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        proc.stdout.close()
    changed = {e for e, q in state(store).items() if q != big[e]}
    assert len(changed) == 300
    records = {r.entity_obj(): r for r in AuditLog(audit_log).read()}
    assert changed <= set(records)
    assert {r.note for r in records.values()} == {WRITER_STOPPED}
    assert {r.outcome for r in records.values()} == {"unknown"}
    assert WRITER_STOPPED in records_csv(records.values()).splitlines()[1]


def test_old_audit_logs_still_read(tmp_path):
    old = {"id": "1", "ts": "2025-01-01T00:00:00.000Z", "actor": "jdoe", "cluster": {},
           "entity": {"user": "alice"}, "entity_text": "{user=alice}", "action": "alter",
           "ops": [], "before": {}, "after": {"producer_byte_rate": 1}, "outcome": "applied",
           "note": "", "extra": {}}
    path = tmp_path / "old.jsonl"
    path.write_text(json.dumps(old) + "\n")
    [record] = AuditLog(path).read()
    assert (record.outcome, record.after, record.note) == ("applied", {"producer_byte_rate": 1}, "")


# -- 3. plans bound to their cluster, and signed ------------------------------------------------
def test_a_plan_is_refused_on_another_cluster_naming_both(tmp_path, store):
    plan = make_plan_file(tmp_path, store, PLAN_A, "a")
    other = sandbox_with(tmp_path / "other.sqlite", BASE)  # the same quotas, another store
    code, _, err = run("apply", str(plan), "--sandbox", other)
    made_on = json.loads(plan.read_text())["cluster"]["cluster_id"]
    here = SandboxBackend(other).info().cluster_id
    assert code == 1 and made_on and here and made_on != here
    assert made_on in err and here in err and "Nothing was applied" in err
    assert state(other) == BASE


def test_an_older_sandbox_gets_an_id_when_planned(tmp_path):
    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE quotas (entity TEXT NOT NULL, key TEXT NOT NULL, value TEXT "
                 "NOT NULL, PRIMARY KEY (entity, key)) WITHOUT ROWID")
    conn.execute("""INSERT INTO quotas VALUES ('{"user":"alice"}', 'producer_byte_rate', '1.0')""")
    conn.commit()
    conn.close()
    assert SandboxBackend(path).info().cluster_id is None
    plan = make_plan_file(tmp_path, str(path), PLAN_A, "a")
    made_on = json.loads(plan.read_text())["cluster"]["cluster_id"]
    assert made_on and made_on == SandboxBackend(path).info().cluster_id
    assert run("apply", str(plan), "--sandbox", str(path))[0] == 0


def _tamper(plan: Path) -> None:
    """Edit an op value and recompute the plain sha256 (after_hash), as the issue's attacker
    did: read_plan's own checks then pass."""
    from quota_core.domain.alterations import Op, apply_ops
    from quota_core.domain.serialization import from_document

    doc = json.loads(plan.read_text())
    doc["changes"][0]["ops"][0]["value"] = 999
    after = {e: dict(q) for e, q in from_document({"entries": doc["base"]["entries"]},
                                                    "base").items()}
    for c in doc["changes"]:
        e = Entity.from_mapping(c["entity"])
        after[e] = apply_ops(after.get(e, {}), [Op(o["key"], o["value"]) for o in c["ops"]])
    doc["after_hash"] = quota_set_hash({e: q for e, q in after.items() if q})
    plan.write_text(json.dumps(doc))
    read_plan(doc, "the edited plan")  # passes: only the key can tell


def test_an_edited_plan_with_recomputed_hashes_is_refused_when_a_key_is_set(tmp_path, store,
                                                                          monkeypatch):
    monkeypatch.setenv("QUOTA_PLAN_KEY", "k3y-for-plans")
    plan = make_plan_file(tmp_path, store, PLAN_A, "a")
    assert json.loads(plan.read_text())["signature"].startswith("hmac-sha256:")
    _tamper(plan)
    code, _, err = run("apply", str(plan), "--sandbox", store)
    assert code == 1 and "signature does not verify" in err, err
    assert state(store) == BASE
    # Without a key the same edit goes through: the plain hash catches accidents only.
    monkeypatch.delenv("QUOTA_PLAN_KEY")
    doc = json.loads(plan.read_text())
    doc.pop("signature")
    plan.write_text(json.dumps(doc))
    assert run("apply", str(plan), "--sandbox", store)[0] == 0
    assert 999 in state(store)[E(user="alice")].values()


def test_a_signed_plan_applies_with_its_key_and_not_without(tmp_path, store, monkeypatch):
    monkeypatch.setenv("QUOTA_PLAN_KEY", "k3y-for-plans")
    plan = make_plan_file(tmp_path, store, PLAN_A, "a")
    monkeypatch.setenv("QUOTA_PLAN_KEY", "another key")
    assert run("apply", str(plan), "--sandbox", store)[0] == 1
    monkeypatch.delenv("QUOTA_PLAN_KEY")
    code, _, err = run("apply", str(plan), "--sandbox", store)
    assert code == 1 and "no plan key is configured" in err
    monkeypatch.setenv("QUOTA_PLAN_KEY", "k3y-for-plans")
    assert run("apply", str(plan), "--sandbox", store)[0] == 0


# -- 4. exit codes -------------------------------------------------------------------------------
def test_apply_with_an_unknown_outcome_exits_3_and_records_it(tmp_path, store, audit_log,
                                                             monkeypatch):
    plan = make_plan_file(tmp_path, store, PLAN_A, "a")

    def lost(self, alterations, validate_only=False):
        raise OutcomeUnknown("Outcome unknown: the connection was lost after sending.",
                             unknown=[a.entity for a in alterations])

    monkeypatch.setattr(SandboxBackend, "alter", lost)
    code, _, err = run("apply", str(plan), "--sandbox", store)
    assert code == 3 and "Outcome unknown" in err
    [record] = AuditLog(audit_log).read()
    assert record.outcome == "unknown" and record.note != WRITER_STOPPED


# -- the pages: Audit shows a stopped writer; Edit shows a read-back conflict --------------------
@pytest.fixture
def app_env(monkeypatch, tmp_path, audit_log):
    from tests.pages.test_app import ENV_VARS

    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("QUOTA_AUDIT_LOG", str(audit_log))
    monkeypatch.setenv("QUOTA_LOCAL_MODE", "1")
    monkeypatch.setenv("QUOTA_SANDBOX", sandbox_with(tmp_path / "app.sqlite", BASE))
    return tmp_path / "app.sqlite"


def test_the_audit_page_shows_an_intent_without_outcome_as_writer_stopped(app_env, audit_log):
    from quota_core.domain.alterations import Alteration
    from quota_core.changes.audit import new_record, store_fields
    from tests.app_steps import run_app

    AuditLog(audit_log).append(new_record(  # a record of this page's store: it opens on it
        actor="jdoe", cluster=store_fields(SandboxBackend(app_env)), alteration=Alteration.of(E(user="alice"), {"producer_byte_rate": 9}),
        before={"producer_byte_rate": 1}, after={"producer_byte_rate": 9}, outcome="intent",
        phase="intent"))
    at = run_app("pages/audit.py")
    assert not at.exception
    assert list(at.dataframe[0].value["outcome"]) == [WRITER_STOPPED]


def test_the_edit_page_shows_a_read_back_conflict(app_env, audit_log, monkeypatch):
    from tests.app_steps import run_app, texts

    real = SandboxBackend._alter

    def alter_then_someone_else_writes(self, requests, validate_only):
        outcome = real(self, requests, validate_only)
        if not validate_only:
            self._conn.execute("UPDATE quotas SET value='7.0' WHERE key='producer_byte_rate' "
                               "AND entity LIKE '%alice%'")
            self._cache = None
        return outcome

    at = run_app("pages/edit.py", operator="jdoe")
    at.text_input(key="ed_user").input("alice").run()
    at.text_input(key="ed_val_producer_byte_rate").input("3").run()
    at.button(key="ed_preview_btn").click().run()
    at.checkbox(key="ed_confirm").check().run()
    monkeypatch.setattr(SandboxBackend, "_alter", alter_then_someone_else_writes)
    at.button(key="ed_apply").click().run()
    assert not at.exception
    assert any("it now holds {consumer_byte_rate=1, producer_byte_rate=7}" in t
               for t in texts(at.error)), texts(at.error)
    assert [r.outcome for r in AuditLog(audit_log).read()] == ["conflict"]
