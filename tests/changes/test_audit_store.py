"""Issue 27, item 4: audit records and "quota changed" marks belong to their store.

A record carries the store's identity (Kafka's cluster id, or a sandbox's stored id and its
absolute path); the marks on Throttled now and the Audit page match only the store shown; a
record without one (an older log) reads as "unknown store" and matches none. The default log
lives in the user's state directory, never inside the package."""
from __future__ import annotations

import json
import os
import re
from io import StringIO
from pathlib import Path

import pytest

import quota_core
from localkafka.demo import demo_quotas
from quota_core.changes.audit import (UNKNOWN_STORE, AuditLog, default_audit_path, same_store,
                                      state_audit_path, store_text)
from tests.app_steps import run_app
from tests.cli_steps import run, sandbox_with
from tests.pages.test_app import env, sandbox  # noqa: F401  (fixtures)
from tests.pages.test_app_live import _wait_for, endpoint  # noqa: F401  (fixture)

KAFKA = {"kind": "kafka", "label": "prod", "location": "b1:9092", "cluster_id": "Kq1"}
BOX = {"kind": "sandbox", "label": None, "location": "/data/q.sqlite", "cluster_id": "sbx-1"}


@pytest.mark.parametrize("env_, expected", [
    ({"XDG_STATE_HOME": "/s", "HOME": "/h"}, "/s/quota-console/audit.jsonl"),
    ({"HOME": "/h"}, "/h/.local/state/quota-console/audit.jsonl"),
    ({"XDG_STATE_HOME": "rel/dir", "HOME": "/h"}, "/h/.local/state/quota-console/audit.jsonl"),
])
def test_the_default_log_is_in_the_users_state_directory(env_, expected):
    assert state_audit_path(env_) == default_audit_path(env_) == Path(expected)
    package = Path(quota_core.__file__).resolve().parent
    assert package not in default_audit_path(dict(os.environ, QUOTA_AUDIT_LOG="")).parents
    assert default_audit_path({**env_, "QUOTA_AUDIT_LOG": "/x.jsonl"}) == Path("/x.jsonl")


@pytest.mark.parametrize("recorded, here, same", [
    (KAFKA, KAFKA, True),
    ({**KAFKA, "label": "other name", "location": "b2:9092"}, KAFKA, True),  # the id decides
    ({**KAFKA, "cluster_id": "Kq2"}, KAFKA, False),
    ({**KAFKA, "cluster_id": None}, KAFKA, False),             # an older record: no identity
    ({**KAFKA, "cluster_id": None}, {**KAFKA, "cluster_id": None}, False),
    ({}, KAFKA, False),
    (BOX, BOX, True),
    ({**BOX, "location": "/data/copy.sqlite"}, BOX, False),    # a copied sandbox keeps its id
    (BOX, {**KAFKA, "cluster_id": "sbx-1"}, False),            # a sandbox is no cluster
])
def test_same_store(recorded, here, same):
    assert same_store(recorded, here) is same


def test_store_text():
    assert store_text(KAFKA) == "prod" and store_text(BOX) == "/data/q.sqlite"
    assert store_text({"location": "b1:9092"}) == UNKNOWN_STORE == "unknown store"


def _legacy_record(log: Path, user: str) -> None:
    """A line as logs before issue 27 could hold: no cluster id."""
    from datetime import datetime, timezone

    ts = datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    with open(log, "a", encoding="utf-8") as f:
        f.write(json.dumps({"id": "old1", "ts": ts, "actor": "old", "cluster": {
            "kind": None, "label": None, "location": None, "cluster_id": None},
            "entity": {"user": user}, "entity_text": f"{{user={user}}}", "action": "alter",
            "ops": [{"key": "producer_byte_rate", "value": 1}], "before": {},
            "after": {"producer_byte_rate": 1}}) + "\n")


def test_a_write_elsewhere_puts_no_mark_on_this_clusters_throttled_now(sandbox, endpoint,
                                                                       tmp_path):
    log = Path(os.environ["QUOTA_AUDIT_LOG"])
    # alice changed on another sandbox file (the reported case), and by an old record
    other = sandbox_with(tmp_path / "other.sqlite", demo_quotas())
    assert run("--sandbox", other, "--alter", "--user", "alice", "--add",
               "producer_byte_rate=4MiB")[0] == 0
    _legacy_record(log, "alice")
    page = run_app("pages/throttled.py")
    _wait_for(page, lambda a: a.dataframe)
    shown = page.dataframe[0].value
    marks = dict(zip(zip(shown["user"], shown["client id"]), shown["quota changed"]))
    assert marks[("alice", "")] == "", marks
    # the same change on the store shown: marked
    assert run("--sandbox", str(sandbox), "--alter", "--user", "alice", "--add",
               "producer_byte_rate=4MiB")[0] == 0
    page.run()
    shown = page.dataframe[0].value
    marks = dict(zip(zip(shown["user"], shown["client id"]), shown["quota changed"]))
    assert re.fullmatch(r"\d+ s ago", marks[("alice", "")]), marks


def test_the_audit_page_opens_on_this_cluster(sandbox, tmp_path):
    log = Path(os.environ["QUOTA_AUDIT_LOG"])
    other = sandbox_with(tmp_path / "other.sqlite", demo_quotas())
    assert run("--sandbox", other, "--alter", "--user", "elsewhere", "--add",
               "producer_byte_rate=1MB")[0] == 0
    assert run("--sandbox", str(sandbox), "--alter", "--user", "here", "--add",
               "producer_byte_rate=1MB")[0] == 0
    _legacy_record(log, "legacy")
    at = run_app("pages/audit.py")
    assert at.toggle(key="au_here").value is True
    table = at.dataframe[0].value
    assert list(table["entity"]) == ["{user=here}"]
    assert list(table["cluster"]) == [os.path.realpath(sandbox)]
    assert any(f"`{log}`" in c.value for c in at.caption)  # where the log is
    at.toggle(key="au_here").set_value(False).run()
    table = at.dataframe[0].value
    stores = dict(zip(table["entity"], table["cluster"]))
    assert stores == {"{user=legacy}": UNKNOWN_STORE,
                      "{user=here}": os.path.realpath(sandbox),
                      "{user=elsewhere}": os.path.realpath(other)}


def test_a_cli_write_at_a_terminal_says_where_it_is_recorded(tmp_path, monkeypatch):
    from quota_core.cli.main import main

    class Terminal(StringIO):
        def isatty(self):
            return True

    monkeypatch.delenv("QUOTA_AUDIT_LOG")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    store = sandbox_with(tmp_path / "q.sqlite", {})
    err = Terminal()
    assert main(["--sandbox", store, "--alter", "--user", "a", "--add",
                 "producer_byte_rate=1MB"], out=StringIO(), err=err) == 0
    where = tmp_path / "state" / "quota-console" / "audit.jsonl"
    assert err.getvalue().splitlines()[-1] == f"audit: {where}"
    (record,) = AuditLog(where).read()
    assert record.cluster["location"] == os.path.realpath(store) and record.cluster["cluster_id"]
    err = Terminal()  # the kafka-configs.sh dialect too
    assert main(["--sandbox", store, "--alter", "--entity-type", "users", "--entity-name", "b",
                 "--add-config", "producer_byte_rate=1000"], out=StringIO(), err=err) == 0
    assert err.getvalue().splitlines()[-1] == f"audit: {where}"
    err = Terminal()  # --validate-only writes nothing, and says nothing about the log
    assert main(["--sandbox", store, "--alter", "--user", "a", "--add", "producer_byte_rate=2MB",
                 "--validate-only"], out=StringIO(), err=err) == 0
    assert "audit:" not in err.getvalue()


def test_a_new_sandbox_file_gets_its_id_in_the_first_record(tmp_path, monkeypatch):
    log = tmp_path / "audit.jsonl"
    monkeypatch.setenv("QUOTA_AUDIT_LOG", str(log))
    store = str(tmp_path / "new.sqlite")
    assert run("--sandbox", store, "--alter", "--user", "a", "--add",
               "producer_byte_rate=1MB")[0] == 0
    (record,) = AuditLog(log).read()
    from quota_core.backends.sandbox import SandboxBackend

    with SandboxBackend(store) as backend:
        assert record.cluster["cluster_id"] == backend.identity() is not None


@pytest.mark.parametrize("page", ["edit", "plan"])
def test_the_writing_pages_say_where_the_log_is(sandbox, page):
    at = run_app(f"pages/{page}.py", operator="jdoe")
    assert any(f"`{os.environ['QUOTA_AUDIT_LOG']}`" in c.value for c in at.caption), \
        [c.value for c in at.caption]


def test_a_record_names_its_cluster_and_keeps_older_lines_readable(tmp_path):
    """The fleet contract: "cluster": NAME on every line, the store's identity under "store";
    a line written before (the store under "cluster") is read as it was."""
    import json

    from quota_core.changes.audit import AuditLog, AuditRecord, same_store

    store = {"kind": "kafka", "label": "Prod", "location": "b:9092", "cluster_id": "abc"}
    old = {"id": "1", "ts": "2026-01-01T00:00:00.000Z", "actor": "a", "cluster": store,
           "entity": {"user": "x"}, "entity_text": "user x", "action": "alter", "ops": [],
           "before": {}, "after": {}}
    line = json.loads(AuditRecord.from_dict({**old, "cluster": {**store, "name": "prod"}})
                      .to_json())
    assert (line["cluster"], line["store"]) == ("prod", store)
    log = tmp_path / "audit.jsonl"
    log.write_text(json.dumps(old) + "\n" + json.dumps(line) + "\n")
    older, newer = AuditLog(log).read_lines()
    assert same_store(older.cluster, store) and same_store(newer.cluster, store)
    assert (older.cluster.get("name"), newer.cluster["name"]) == (None, "prod")
