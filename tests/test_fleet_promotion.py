"""``plan --from-cluster A --cluster B``: the plan that makes B's quota set A's, bound to B;
``apply`` applies it on B only, and the audit log names the cluster. Sandbox clusters of a
fleet file (tests/test_fleet_promotion_kafka.py runs one promotion between the two real
clusters)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from quota_core import Entity
from quota_core.changes.audit import AuditLog
from tests.cli_steps import run, sandbox_with, state

E = Entity.of
MiB = 1024 * 1024
STAGING = {E(user="alice"): {"producer_byte_rate": MiB},
           E(user="ünï 名", client_id=None): {"request_percentage": 12.5}}
PROD = {E(user="alice"): {"producer_byte_rate": 2 * MiB, "request_percentage": 50.0},
        E(user="old"): {"consumer_byte_rate": 1e6}}


@pytest.fixture
def fleet(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("QUOTA_AUDIT_LOG", str(tmp_path / "audit.jsonl"))
    monkeypatch.delenv("QUOTA_PLAN_KEY", raising=False)
    sandbox_with(tmp_path / "staging.sqlite", STAGING)
    sandbox_with(tmp_path / "prod.sqlite", PROD)
    cfg = tmp_path / "fleet.toml"
    cfg.write_text('[clusters.staging]\nsandbox = "staging.sqlite"\n\n'
                   '[clusters.prod]\nsandbox = "prod.sqlite"\n', encoding="utf-8")
    return cfg


def _plan(fleet: Path, *extra: str) -> tuple[int, str, str]:
    return run("plan", "--config", str(fleet), "--from-cluster", "staging", "--cluster", "prod",
               *extra)


def test_a_pruned_promotion_makes_the_target_equal_the_source(fleet, tmp_path):
    plan_file = tmp_path / "plan.json"
    code, out, err = _plan(fleet, "--prune", "--out", str(plan_file))
    assert code == 2, err
    assert out.startswith("Plan for cluster staging against cluster 'prod' (sandbox ")
    assert "Promotion: cluster 'staging' (a sandbox, no brokers) → cluster 'prod'" in out
    assert f"apply {plan_file} --config {fleet} --cluster prod" in err
    doc = json.loads(plan_file.read_text(encoding="utf-8"))
    assert doc["source"] == "cluster staging" and doc["cluster"]["name"] == "prod"
    assert doc["promotion"]["from"]["name"] == "staging" and doc["promotion"]["notes"] == []
    assert doc["summary"] == {"add": 1, "change": 1, "remove": 1, "unmanaged": 0}

    code, out, err = run("apply", str(plan_file), "--config", str(fleet), "--cluster", "prod")
    assert code == 0, err
    assert state(str(tmp_path / "prod.sqlite")) == STAGING
    assert run("diff", "--config", str(fleet), "--cluster", "staging",
               "--against", "prod")[0] == 0
    records = AuditLog(tmp_path / "audit.jsonl").read()
    assert records and {r.cluster["name"] for r in records} == {"prod"}
    assert {r.extra.get("promoted_from") for r in records} == {"staging"}


def test_without_prune_the_target_keeps_what_the_source_lacks(fleet, tmp_path):
    code, out, _ = _plan(fleet, "--output", "json")
    doc = json.loads(out)
    assert code == 2 and doc["unmanaged"] == [{"entity": {"user": "old"},
                                               "quotas": {"consumer_byte_rate": 1000000}}]


def test_a_promotion_plan_is_refused_on_the_source_naming_both_clusters(fleet, tmp_path):
    plan_file = tmp_path / "plan.json"
    _plan(fleet, "--out", str(plan_file))
    staging_id = json.loads(_plan(fleet, "--output", "json")[1])["promotion"]["from"][
        "cluster_id"]
    prod_id = json.loads(plan_file.read_text())["cluster"]["cluster_id"]
    code, out, err = run("apply", str(plan_file), "--config", str(fleet), "--cluster", "staging")
    assert code == 1 and out == ""
    assert (f"was made on cluster {prod_id} ('prod', " in err
            and f"this is cluster {staging_id} ('staging', sandbox " in err
            and "Nothing was applied" in err), err
    assert state(str(tmp_path / "staging.sqlite")) == STAGING
    assert state(str(tmp_path / "prod.sqlite")) == PROD


@pytest.mark.parametrize("argv, words", [
    (["--from-cluster", "staging"], "pick one with --cluster NAME"),
    (["--from-cluster", "prod", "--cluster", "prod"], "a promotion goes from one cluster"),
    (["--from-cluster", "stagin", "--cluster", "prod"], "unknown cluster 'stagin'"),
    (["want.yaml", "--from-cluster", "staging", "--cluster", "prod"], "not both"),
])
def test_promotion_flags_are_usage_errors_exit_1(fleet, argv, words):
    code, out, err = run("plan", "--config", str(fleet), *argv)
    assert code == 1 and out == "" and words in err, err


def test_a_source_that_cannot_be_read_is_named(fleet, tmp_path):
    (tmp_path / "staging.sqlite").unlink()
    code, out, err = _plan(fleet)
    assert code == 1 and out == ""
    assert err.startswith("kafka-client-quotas plan: error: cluster staging: No sandbox file"), err


def test_a_promotion_refused_on_drift_says_how_to_make_it_again(fleet, tmp_path):
    plan_file = tmp_path / "plan.json"
    _plan(fleet, "--out", str(plan_file))
    run("--sandbox", str(tmp_path / "prod.sqlite"), "--alter", "--user", "new",
        "--add", "producer_byte_rate=1000")  # prod moves after the plan
    code, _, err = run("apply", str(plan_file), "--config", str(fleet), "--cluster", "prod")
    assert code == 1 and "refused: the quota set changed since" in err
    assert (f"plan --from-cluster staging --config {fleet} --cluster prod --out {plan_file}"
            in err), err
