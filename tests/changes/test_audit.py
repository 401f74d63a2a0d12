"""quota_core.changes.audit: the append-only JSON-lines audit log."""
from __future__ import annotations

import csv
import io
import json
import math
import multiprocessing
import os
from datetime import datetime, timezone

import pytest

from quota_core import Alteration, Entity
from quota_core.changes.audit import AuditLog, AuditRecord, new_record, records_csv, records_jsonl
from quota_core.errors import ConfigError

CLUSTER = {"kind": "sandbox", "label": "test", "location": "/tmp/x.sqlite",
           "cluster_id": "sandbox-abc"}


def _record(actor="jdoe", entity=None, before=None, after=None, **kw):
    entity = entity or Entity.of(user="alice", client_id=None)
    alteration = Alteration.of(entity, set={"producer_byte_rate": 2048},
                               remove=["consumer_byte_rate"])
    return new_record(actor=actor, cluster=CLUSTER, alteration=alteration,
                      before=before if before is not None else {"consumer_byte_rate": 1e6},
                      after=after if after is not None else {"producer_byte_rate": 2048.0},
                      **kw)


def test_record_fields():
    when = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=timezone.utc)
    r = _record(now=when)
    assert r.ts == "2026-01-02T03:04:05.678Z"
    assert r.actor == "jdoe" and r.action == "alter" and r.outcome == "applied"
    assert r.entity == {"user": "alice", "client-id": None}
    assert r.entity_text == "{user=alice, client-id=<default>}"
    assert r.entity_obj() == Entity.of(user="alice", client_id=None)
    assert r.ops == [{"key": "producer_byte_rate", "value": 2048},
                     {"key": "consumer_byte_rate", "value": None}]
    assert r.before == {"consumer_byte_rate": 1000000}
    assert r.after == {"producer_byte_rate": 2048}
    assert r.cluster == CLUSTER
    assert len(r.id) == 32


def test_append_and_read_back(tmp_path):
    log = AuditLog(tmp_path / "sub" / "audit.jsonl")
    assert log.read() == []
    first, second = _record(actor="a"), _record(actor="b", entity=Entity.of(ip="10.0.0.1"))
    log.append(first)
    log.append(second)
    assert log.read() == [first, second]
    lines = (tmp_path / "sub" / "audit.jsonl").read_text().splitlines()
    assert len(lines) == 2 and json.loads(lines[0])["actor"] == "a"


def test_names_round_trip(tmp_path):
    log = AuditLog(tmp_path / "a.jsonl")
    odd = Entity.of(user="<default>", client_id="CN=x, ü/%")
    log.append(_record(entity=odd))
    (back,) = log.read()
    assert back.entity_obj() == odd
    assert back.entity_text == str(odd)


def test_non_finite_values_are_stored_as_java_prints_them(tmp_path):
    log = AuditLog(tmp_path / "a.jsonl")
    log.append(_record(before={"request_percentage": math.nan,
                               "controller_mutation_rate": math.inf}))
    (back,) = log.read()
    assert back.before == {"controller_mutation_rate": "Infinity", "request_percentage": "NaN"}
    json.loads((tmp_path / "a.jsonl").read_text())  # strict JSON, no bare NaN


def test_torn_last_line_is_skipped_and_not_glued(tmp_path):
    path = tmp_path / "a.jsonl"
    log = AuditLog(path)
    log.append(_record(actor="before-crash"))
    with open(path, "a") as f:
        f.write('{"id": "torn", "ts": "2026-')  # a crash mid-write
    assert [r.actor for r in log.read()] == ["before-crash"]
    assert log.skipped == 1
    log.append(_record(actor="after-crash"))
    assert [r.actor for r in log.read()] == ["before-crash", "after-crash"]
    assert log.skipped == 1


def test_unknown_fields_are_ignored(tmp_path):
    path = tmp_path / "a.jsonl"
    d = json.loads(_record().to_json())
    d["from_the_future"] = 1
    path.write_text(json.dumps(d) + "\n")
    assert len(AuditLog(path).read()) == 1


def test_unwritable_path_names_the_fix(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ConfigError, match="Cannot open the audit log .* QUOTA_AUDIT_LOG"):
        AuditLog(blocker / "audit.jsonl").append(_record())


def _append_many(path: str, actor: str, n: int) -> None:
    log = AuditLog(path)
    for _ in range(n):
        log.append(_record(actor=actor))


def test_concurrent_appends_from_processes(tmp_path):
    path = str(tmp_path / "a.jsonl")
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_append_many, args=(path, f"p{i}", 50)) for i in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    log = AuditLog(path)
    records = log.read()
    assert log.skipped == 0
    assert len(records) == 200
    assert {r.actor for r in records} == {"p0", "p1", "p2", "p3"}
    assert len({r.id for r in records}) == 200


def test_file_is_not_world_readable(tmp_path):
    path = tmp_path / "a.jsonl"
    AuditLog(path).append(_record())
    assert os.stat(path).st_mode & 0o007 == 0


def test_exports():
    records = [_record(actor="a"), _record(actor="b")]
    jsonl = records_jsonl(records)
    assert [AuditRecord.from_dict(json.loads(line)) for line in jsonl.splitlines()] == records
    rows = list(csv.DictReader(io.StringIO(records_csv(records))))
    assert [r["actor"] for r in rows] == ["a", "b"]
    assert rows[0]["entity"] == "{user=alice, client-id=<default>}"
    assert rows[0]["ops"] == "producer_byte_rate=2048, -consumer_byte_rate"
    assert rows[0]["before"] == "consumer_byte_rate=1000000"
    assert rows[0]["cluster"] == "sandbox-abc"
