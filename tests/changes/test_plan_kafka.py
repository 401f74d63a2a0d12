"""export, edit, plan, apply on a real broker, as real processes; the audit log records it."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from quota_core.changes.audit import AuditLog

pytestmark = pytest.mark.kafka


def test_export_edit_plan_apply_on_a_broker(kafka_broker, tmp_path):
    log = tmp_path / "audit.jsonl"
    env = {**os.environ, "QUOTA_AUDIT_LOG": str(log)}
    bs = ["--bootstrap-server", kafka_broker.bootstrap]

    def cli(*args: str) -> subprocess.CompletedProcess:
        done = subprocess.run([sys.executable, "-m", "quota_core", *args], capture_output=True,
                              text=True, timeout=90, env=env)
        assert "Traceback" not in done.stderr
        return done

    a, b = "plan e2e,a", "plan-e2e-b"
    assert cli(*bs, "--alter", "--user", a, "--add", "producer_byte_rate=1MiB",
               "--actor", "setup").returncode == 0
    export = cli(*bs, "--export", "json")
    assert export.returncode == 0
    doc = json.loads(export.stdout)
    for entry in doc["entries"]:
        if entry["entity"] == {"user": a}:
            entry["quotas"] = {"producer_byte_rate": 2097152, "request_percentage": 25}
    doc["entries"].append({"entity": {"user": b, "client-id": None},
                           "quotas": {"consumer_byte_rate": 4000000}})
    desired = tmp_path / "desired.json"
    desired.write_text(json.dumps(doc, indent=2))

    plan_file = tmp_path / "plan.json"
    planned = cli("plan", str(desired), *bs, "--out", str(plan_file))
    assert planned.returncode == 2, planned.stderr
    assert "~ change {user=plan%20e2e%2Ca}" in planned.stdout
    assert "+ add {user=plan-e2e-b, client-id=<default>}" in planned.stdout
    base = json.loads(plan_file.read_text())["base"]["hash"]

    applied = cli("apply", str(plan_file), *bs, "--actor", "jdoe")
    assert applied.returncode == 0, applied.stderr
    assert applied.stdout.splitlines() == [
        "applied {user=plan%20e2e%2Ca}: producer_byte_rate 1048576 (1 MiB/s) → 2097152 (2 MiB/s); "
        "request_percentage (not set) → 25% of a thread",
        "applied {user=plan-e2e-b, client-id=<default>}: consumer_byte_rate (not set) → "
        "4000000 (4 MB/s)"]
    records = [r for r in AuditLog(log).read() if r.actor == "jdoe"]
    assert [(r.action, r.entity, r.after) for r in records] == [
        ("apply", {"user": a}, {"producer_byte_rate": 2097152, "request_percentage": 25}),
        ("apply", {"user": b, "client-id": None}, {"consumer_byte_rate": 4000000})]
    assert records[0].cluster["kind"] == "kafka" and records[0].cluster["cluster_id"]
    assert records[0].before == {"producer_byte_rate": 1048576}

    again = cli("plan", str(desired), *bs)
    assert again.returncode == 0, again.stdout + again.stderr

    # A plan made, then the cluster moves: apply refuses and names the difference.
    doc["entries"][-1]["quotas"] = {"consumer_byte_rate": 5000000}
    desired.write_text(json.dumps(doc))
    assert cli("plan", str(desired), *bs, "--out", str(plan_file)).returncode == 2
    assert json.loads(plan_file.read_text())["base"]["hash"] != base
    assert cli(*bs, "--alter", "--user", a, "--add", "producer_byte_rate=3MiB").returncode == 0
    refused = cli("apply", str(plan_file), *bs)
    assert (refused.returncode, refused.stdout) == (1, "")
    assert ("{user=plan%20e2e%2Ca}: producer_byte_rate 2097152 (2 MiB/s) → 3145728 (3 MiB/s)"
            in refused.stderr)
    assert "4000000" in cli(*bs, "--describe", "--user", b, "--defaults", "client-id").stdout

    for flags in (["--user", a, "--delete", "producer_byte_rate,request_percentage"],
                  ["--user", b, "--defaults", "client-id", "--delete", "consumer_byte_rate"]):
        assert cli(*bs, "--alter", *flags).returncode == 0
