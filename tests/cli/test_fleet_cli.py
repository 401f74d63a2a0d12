"""The CLI over the fleet (issue 29): --config / --cluster on the commands, --all-clusters on
the reads, read_only clusters refused, the cluster in the audit log. Two sandbox clusters in
one config file; one short case on the two real clusters of the session."""
from __future__ import annotations

import json
import time
from io import StringIO
from pathlib import Path

import pytest

from quota_core.cli.fleet_run import _tag_list
from quota_core.cli.main import main
from quota_core.domain.entities import Entity

from tests.cli_steps import run, sandbox_with, state

ALICE = Entity.from_pairs([("user", "alice"), ("client-id", "app")])
#: A name that holds what the JSON splice looks for: it must stay inside its string.
ODD = Entity.from_pairs([("user", '\n  {\n "x"')])
DEFAULT_USER = Entity.from_pairs([("user", None)])


@pytest.fixture
def fleet(tmp_path: Path) -> Path:
    """``staging`` (alice 1 MB/s, and an odd name) and ``prod`` (alice 2 MB/s, read-only,
    its own audit log), and ``lab``, sandboxes in one fleet file."""
    sandbox_with(tmp_path / "staging.sqlite", {ALICE: {"producer_byte_rate": 1e6},
                                               ODD: {"consumer_byte_rate": 5e5}})
    sandbox_with(tmp_path / "prod.sqlite", {ALICE: {"producer_byte_rate": 2e6}})
    sandbox_with(tmp_path / "lab.sqlite", {DEFAULT_USER: {"producer_byte_rate": 100.0}})
    config = tmp_path / "fleet.toml"
    config.write_text(
        '[clusters.staging]\nsandbox = "staging.sqlite"\n\n'
        '[clusters.prod]\nsandbox = "prod.sqlite"\nread_only = true\n'
        'audit_log = "prod-audit.jsonl"\n\n'
        '[clusters.lab]\nsandbox = "lab.sqlite"\naudit_log = "lab-audit.jsonl"\n')
    return config


def test_describe_all_clusters_json_is_one_list_with_the_cluster_on_every_row(fleet):
    code, out, err = run("--config", str(fleet), "--describe", "--all-clusters",
                         "--output", "json")
    assert (code, err) == (0, "")
    rows = json.loads(out)
    assert [list(r)[0] for r in rows] == ["cluster"] * 4  # "cluster" first
    got = {(r["cluster"], json.dumps(r["entity"]), json.dumps(r["quotas"])) for r in rows}
    assert got == {
        ("staging", '{"user": "alice", "client-id": "app"}', '{"producer_byte_rate": 1000000}'),
        ("staging", json.dumps({"user": '\n  {\n "x"'}), '{"consumer_byte_rate": 500000}'),
        ("prod", '{"user": "alice", "client-id": "app"}', '{"producer_byte_rate": 2000000}'),
        ("lab", '{"user": null}', '{"producer_byte_rate": 100}')}
    assert [r["cluster"] for r in rows] == ["staging", "staging", "prod", "lab"]  # file order


def test_describe_all_clusters_text_is_grouped_by_cluster(fleet):
    code, out, _ = run("--config", str(fleet), "--describe", "--all-clusters", "--user", "alice",
                       "--client-id", "app")
    assert code == 0
    assert out.index("--- cluster staging ---") < out.index("producer_byte_rate=1000000") \
        < out.index("--- cluster prod ---") < out.index("producer_byte_rate=2000000") \
        < out.index("--- cluster lab ---")


def test_a_cluster_that_cannot_be_read_is_named_and_the_others_still_print(fleet, tmp_path):
    fleet.write_text(fleet.read_text() + '\n[clusters.gone]\nsandbox = "missing.sqlite"\n')
    code, out, err = run("--config", str(fleet), "--describe", "--all-clusters",
                         "--output", "json")
    assert code == 1
    assert {r["cluster"] for r in json.loads(out)} == {"staging", "prod", "lab"}
    assert "cluster gone: " in err and "missing.sqlite" in err
    assert "cluster staging" not in err
    assert not (tmp_path / "missing.sqlite").exists()  # a read never creates a sandbox


def test_resolve_all_clusters_gives_one_object_per_cluster(fleet):
    code, out, _ = run("--config", str(fleet), "--resolve", "--all-clusters", "--user", "alice",
                       "--client-id", "app", "--output", "json")
    assert code == 0
    docs = json.loads(out)
    assert [d["cluster"] for d in docs] == ["staging", "prod", "lab"]
    values = [d["quotas"]["producer_byte_rate"]["value"] for d in docs]
    assert values == [1000000, 2000000, 100]


def test_a_usage_error_every_cluster_shares_is_said_once_with_exit_2(fleet):
    code, out, err = run("--config", str(fleet), "--resolve", "--all-clusters")
    assert (code, out) == (2, "")
    assert err.count("Name the client to resolve") == 1 and "cluster" not in err


@pytest.mark.parametrize("extra, words", [
    (["--alter", "--user", "x", "--add", "producer_byte_rate=1"], "goes with --describe"),
    (["--describe", "--cluster", "prod"], "drop --cluster"),
    (["--describe", "--sandbox", "x.sqlite"], "drop --sandbox"),
    (["--throttled", "--metrics", "http://127.0.0.1:1/m"], "drop --metrics"),
])
def test_all_clusters_refuses_what_names_one_store(fleet, extra, words):
    code, out, err = run("--config", str(fleet), "--all-clusters", *extra)
    assert code == 2 and out == "" and words in err


def test_cluster_selects_one_and_unknown_or_missing_names_are_usage_errors(fleet):
    code, out, _ = run("--config", str(fleet), "--cluster", "prod", "--describe",
                       "--output", "json")
    assert code == 0 and json.loads(out)[0]["quotas"] == {"producer_byte_rate": 2000000}
    code, _, err = run("--config", str(fleet), "--cluster", "prd", "--describe")
    assert code == 2
    assert "unknown cluster 'prd'; known: staging, prod, lab" in err and "'prod'" in err
    code, _, err = run("--config", str(fleet), "--describe")
    assert code == 2 and "--cluster NAME" in err and "staging, prod, lab" in err
    code, _, err = run("--config", str(fleet), "--cluster", "prod", "--sandbox", "x.sqlite",
                       "--describe")
    assert code == 2 and "--cluster and --sandbox" in err


def test_quota_config_names_the_file_and_a_bad_file_is_a_usage_error(fleet, tmp_path,
                                                                     monkeypatch):
    monkeypatch.setenv("QUOTA_CONFIG", str(fleet))
    code, out, _ = run("--cluster", "lab", "--describe", "--output", "json")
    assert code == 0 and json.loads(out)[0]["entity"] == {"user": None}
    # the flags of today still win over $QUOTA_CONFIG
    code, out, _ = run("--sandbox", str(tmp_path / "prod.sqlite"), "--describe")
    assert code == 0 and "2000000" in out
    bad = tmp_path / "bad.toml"
    bad.write_text('[clusters.a]\nsandbox = "a.sqlite"\nbootstrap_server = "k:1"\n')
    code, _, err = run("--config", str(bad), "--cluster", "a", "--describe")
    assert code == 2
    assert "line 3" in err and "'bootstrap_server'" in err and "bootstrap_servers" in err


@pytest.mark.parametrize("argv", [
    ["--alter", "--user", "alice", "--client-id", "app", "--add", "producer_byte_rate=9"],
    ["--alter", "--user", "alice", "--client-id", "app", "--delete", "producer_byte_rate"],
    ["--import", "{quotas}"],
    ["--init"],
])
def test_read_only_cluster_refuses_every_write_and_writes_nothing(fleet, tmp_path, argv):
    quotas = tmp_path / "q.json"
    quotas.write_text(json.dumps({"format": "quota-console/1", "entries": []}))
    argv = [a.format(quotas=quotas) for a in argv]
    before = state(str(tmp_path / "prod.sqlite"))
    code, out, err = run("--config", str(fleet), "--cluster", "prod", *argv)
    assert code == 1, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "cluster 'prod' is read-only" in lines[0]
    assert str(fleet) in lines[0]
    assert state(str(tmp_path / "prod.sqlite")) == before
    assert not (tmp_path / "prod-audit.jsonl").exists()


def test_apply_and_the_configs_dialect_refuse_a_read_only_cluster(fleet, tmp_path):
    desired = tmp_path / "desired.json"
    desired.write_text(json.dumps({"format": "quota-console/1", "entries": [
        {"entity": {"user": "bob"}, "quotas": {"producer_byte_rate": 1000}}]}))
    plan = tmp_path / "plan.json"
    code, _, err = run("plan", str(desired), "--config", str(fleet), "--cluster", "prod",
                       "--out", str(plan))
    assert code == 2, err  # planning reads: allowed
    code, _, err = run("apply", str(plan), "--config", str(fleet), "--cluster", "prod")
    assert code == 1 and "cluster 'prod' is read-only" in err
    code, _, err = run("configs", "--config", str(fleet), "--cluster", "prod", "--alter",
                       "--entity-type", "users", "--entity-name", "bob", "--add-config",
                       "producer_byte_rate=5")
    assert code == 1 and "cluster 'prod' is read-only" in err
    assert Entity.from_pairs([("user", "bob")]) not in state(str(tmp_path / "prod.sqlite"))
    code, out, _ = run("configs", "--config", str(fleet), "--cluster", "prod", "--describe",
                       "--entity-type", "users", "--entity-name", "alice")
    assert code == 0


def test_audit_records_name_the_cluster_in_its_own_log(fleet, tmp_path):
    code, _, err = run("--config", str(fleet), "--cluster", "lab", "--alter", "--user", "carol",
                       "--add", "producer_byte_rate=2MB")
    assert code == 0, err
    records = [json.loads(line) for line in
               (tmp_path / "lab-audit.jsonl").read_text().splitlines()]
    # the contract: "cluster": NAME; the store's identity beside it
    assert records and all(r["cluster"] == "lab" and r["store"]["kind"] == "sandbox"
                           for r in records)
    assert state(str(tmp_path / "lab.sqlite"))[Entity.from_pairs([("user", "carol")])] == \
        {"producer_byte_rate": 2e6}


def test_lint_all_clusters_tags_findings_and_exits_2(fleet):
    code, out, err = run("lint", "--config", str(fleet), "--all-clusters", "--output", "json")
    assert code == 2, err
    findings = json.loads(out)
    assert findings and {f["cluster"] for f in findings} == {"lab"}
    assert {f["rule"] for f in findings} == {"too-small"}
    assert "cluster staging: lint: 0 findings" in err


def test_a_clusters_metrics_fill_in_metrics(tmp_path):
    sandbox_with(tmp_path / "a.sqlite", {ALICE: {"producer_byte_rate": 1e6}})
    config = tmp_path / "f.toml"
    config.write_text('[clusters.a]\nsandbox = "a.sqlite"\n'
                      'metrics = ["b1=http://127.0.0.1:9/metrics"]\n')
    code, _, err = run("--config", str(config), "--throttled", "--timeout", "2")
    assert code == 1 and "127.0.0.1:9" in err  # the cluster's endpoint was scraped


def test_throttled_all_clusters_names_each_clusters_dead_endpoint(tmp_path):
    for name in ("a", "b"):
        sandbox_with(tmp_path / f"{name}.sqlite", {ALICE: {"producer_byte_rate": 1e6}})
    config = tmp_path / "f.toml"
    config.write_text('[clusters.a]\nsandbox = "a.sqlite"\nmetrics = ["http://127.0.0.1:9/m"]\n'
                      '[clusters.b]\nsandbox = "b.sqlite"\n')
    code, out, err = run("--config", str(config), "--throttled", "--all-clusters",
                         "--output", "json", "--timeout", "2")
    assert code == 1 and json.loads(out) == []
    assert "cluster a: " in err and "127.0.0.1:9" in err
    assert "cluster b: error: --throttled needs --metrics" in err  # b has no endpoints


@pytest.mark.parametrize("sub", [["serve-metrics"], ["collect", "--to", "{tmp}/h"],
                                 ["plan", "{tmp}/q.json"], ["lint"], ["--export", "json"]])
def test_every_command_takes_cluster_and_refuses_an_unknown_one(fleet, tmp_path, sub):
    sub = [a.format(tmp=tmp_path) for a in sub]
    code, _, err = run(*sub, "--config", str(fleet), "--cluster", "prd")
    assert code in (1, 2)  # plan and lint: 1 for any error
    assert "unknown cluster 'prd'; known: staging, prod, lab" in err


def test_export_and_configs_describe_read_the_named_cluster(fleet):
    code, out, _ = run("--config", str(fleet), "--cluster", "prod", "--export", "json")
    assert code == 0 and "2000000" in out and "1000000" not in out
    code, out, err = run("configs", "--config", str(fleet), "--cluster", "staging",
                         "--describe", "--entity-type", "users")
    assert code == 0, err
    assert "consumer_byte_rate=500000.0" in out  # the odd user that only staging has


def test_the_json_splice_only_touches_top_level_rows():
    text = '[\n  {\n    "a": {\n      "b": [\n        {\n          "c": 1\n        }\n' \
           '      ]\n    }\n  },\n  {\n    "s": "\\n  {\\n"\n  }\n]\n'
    body = _tag_list(text, 'x"y')
    doc = json.loads("[" + body + "]")
    assert doc == [{"cluster": 'x"y', "a": {"b": [{"c": 1}]}},
                   {"cluster": 'x"y', "s": "\n  {\n"}]
    assert _tag_list("[]\n", "x") == "" and _tag_list('{"a": 1}', "x") is None


@pytest.mark.kafka
def test_all_clusters_on_the_two_real_clusters_and_a_dead_one(kafka_broker, kafka_cluster,
                                                              tmp_path):
    """The session's single broker and 3-broker cluster as two clusters of one file, and a
    closed port as a third: rows of both, the dead one named, exit 1 within the timeout."""
    from localkafka import free_port

    config = tmp_path / "fleet.toml"
    config.write_text(f'[clusters.single]\nbootstrap_servers = "{kafka_broker.bootstrap}"\n'
                      f'[clusters.triple]\nbootstrap_servers = "{kafka_cluster.bootstrap}"\n'
                      f'[clusters.dead]\nbootstrap_servers = "127.0.0.1:{free_port()}"\n')
    for name in ("single", "triple"):
        code, _, err = run("--config", str(config), "--cluster", name, "--alter", "--user",
                           f"fleet-{name}", "--add", "producer_byte_rate=1MB",
                           "--audit-log", str(tmp_path / "audit.jsonl"))
        assert code == 0, err
    start = time.monotonic()
    code, out, err = run("--config", str(config), "--describe", "--all-clusters",
                         "--output", "json", "--timeout", "2")
    took = time.monotonic() - start
    assert code == 1
    rows = json.loads(out)
    users = {(r["cluster"], r["entity"].get("user")) for r in rows}
    assert ("single", "fleet-single") in users and ("triple", "fleet-triple") in users
    assert {r["cluster"] for r in rows} == {"single", "triple"}
    assert "cluster dead: " in err and "cluster single" not in err
    assert took < 2 + 5  # the dead one is bounded by --timeout, the others answer at once


def test_todays_single_settings_are_the_cluster_named_default(tmp_path, monkeypatch):
    path = sandbox_with(tmp_path / "one.sqlite", {ALICE: {"producer_byte_rate": 3e6}})
    for name in ("QUOTA_CONFIG", "QUOTA_BOOTSTRAP_SERVERS", "QUOTA_CONNECTION_LABEL"):
        monkeypatch.delenv(name, raising=False)
    code, _, err = run("--cluster", "default", "--describe")
    assert code == 2 and "unknown cluster 'default': no cluster is configured" in err
    monkeypatch.setenv("QUOTA_SANDBOX", path)
    code, out, err = run("--cluster", "default", "--describe", "--output", "json")
    assert code == 0 and json.loads(out)[0]["quotas"] == {"producer_byte_rate": 3000000}
    code, out, _ = run("--describe", "--all-clusters", "--output", "json")
    assert code == 0 and [r["cluster"] for r in json.loads(out)] == ["default"]
