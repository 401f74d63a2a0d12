"""Every CLI writer (--alter, --import, apply) appends to the same audit log as the dashboard:
who, when, cluster, entity, before and after. --validate-only writes nothing."""
from __future__ import annotations

import getpass
import json
import os
from pathlib import Path

import pytest

from quota_core import Entity
from quota_core.changes.audit import AuditLog, default_audit_path, state_audit_path
from quota_core.backends.sandbox import SandboxBackend
from tests.cli_steps import run, sandbox_with

E = Entity.of


@pytest.fixture
def log(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "audit.jsonl"
    monkeypatch.setenv("QUOTA_AUDIT_LOG", str(path))
    return path


@pytest.fixture
def store(tmp_path) -> str:
    return sandbox_with(tmp_path / "q.sqlite", {E(user="alice"): {"producer_byte_rate": 1e6}})


def test_default_path_is_shared_with_the_dashboard(tmp_path):
    from ui.settings import audit_path

    env = {"HOME": str(tmp_path)}
    assert default_audit_path(env) == state_audit_path(env) == audit_path(env, {}) == \
        tmp_path / ".local" / "state" / "quota-console" / "audit.jsonl"
    assert default_audit_path({"QUOTA_AUDIT_LOG": "/y.jsonl"}) == Path("/y.jsonl")
    assert default_audit_path({}, {"audit": {"path": "/x.jsonl"}}) == Path("/x.jsonl")


def test_alter_records_who_when_cluster_entity_before_after(store, log):
    assert run("--sandbox", store, "--alter", "--user", "alice", "--add",
               "producer_byte_rate=2MB", "--actor", "jdoe") == (0, "", "")
    assert run("--sandbox", store, "--alter", "--user", "alice", "--delete",
               "producer_byte_rate")[0] == 0
    first, second = AuditLog(log).read()
    assert (first.actor, first.action, first.entity, first.before, first.after) == (
        "jdoe", "alter", {"user": "alice"}, {"producer_byte_rate": 1000000},
        {"producer_byte_rate": 2000000})
    assert first.cluster["kind"] == "sandbox" and first.cluster["cluster_id"]
    # the store's identity: the sandbox's stored id and its absolute path
    with SandboxBackend(store) as backend:
        assert first.cluster["cluster_id"] == backend.identity()
    assert first.cluster["location"] == os.path.realpath(store)
    assert first.ts.endswith("Z") and first.extra == {"via": "cli alter"}
    # Without --actor: the OS user. Emptying the entity is recorded as a delete.
    assert (second.actor, second.action, second.after) == (getpass.getuser(), "delete", {})


def test_import_records_each_entity(store, log, tmp_path):
    doc = tmp_path / "q.json"
    doc.write_text(json.dumps({"entries": [
        {"entity": {"user": "alice"}, "quotas": {"producer_byte_rate": 5}},
        {"entity": {"client-id": None}, "quotas": {"consumer_byte_rate": 7}}]}))
    code, _, err = run("--sandbox", store, "--import", str(doc), "--actor", "ci-bot")
    assert code == 0 and err == "Applied 2 of 2 entity changes.\n"
    records = AuditLog(log).read()
    assert [(r.actor, r.action, r.entity_text, r.before, r.after) for r in records] == [
        ("ci-bot", "import", "{user=alice}", {"producer_byte_rate": 1000000},
         {"producer_byte_rate": 5}),
        ("ci-bot", "import", "{client-id=<default>}", {}, {"consumer_byte_rate": 7})]


def test_validate_only_writes_nothing(store, log, tmp_path):
    assert run("--sandbox", store, "--alter", "--user", "bob", "--add", "producer_byte_rate=1",
               "--validate-only")[0] == 0
    doc = tmp_path / "q.json"
    doc.write_text(json.dumps({"entries": [{"entity": {"user": "x"},
                                            "quotas": {"producer_byte_rate": 5}}]}))
    assert run("--sandbox", store, "--import", str(doc), "--validate-only")[0] == 0
    assert not log.exists()


def test_audit_log_flag_overrides_the_environment(store, log, tmp_path):
    other = tmp_path / "elsewhere" / "a.jsonl"
    assert run("--sandbox", store, "--alter", "--user", "bob", "--add", "producer_byte_rate=1",
               "--audit-log", str(other))[0] == 0
    assert len(AuditLog(other).read()) == 1 and not log.exists()


def test_unwritable_audit_log_applies_nothing(store, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    code, out, err = run("--sandbox", store, "--alter", "--user", "bob", "--add",
                         "producer_byte_rate=1", "--audit-log", str(blocker / "a.jsonl"))
    assert (code, out) == (1, "")
    assert len(err.splitlines()) == 1 and "Cannot open the audit log" in err
    with SandboxBackend(store) as backend:
        assert E(user="bob") not in backend.describe()


@pytest.mark.parametrize("argv", [["--describe", "--actor", "x"],
                                  ["--describe", "--audit-log", "a.jsonl"]])
def test_audit_flags_go_with_writers(store, argv):
    code, _, err = run("--sandbox", store, *argv)
    assert code == 2 and "goes with --alter or --import" in err


def test_audit_file_is_not_world_readable(tmp_path, log):
    path = str(tmp_path / "q.sqlite")
    code, _, err = run("--sandbox", path, "--alter", "--ip", "10.0.0.1", "--add",
                       "connection_creation_rate=3")
    assert code == 0
    assert [r.entity_text for r in AuditLog(log).read()] == ["{ip=10.0.0.1}"]
    assert os.stat(log).st_mode & 0o077 in (0, 0o040)  # not world-readable
