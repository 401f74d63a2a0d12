"""``kafka-client-quotas lint`` in-process: a desired file with no cluster (every format plan
reads), a sandbox, a small real history in the collector's layout; exit codes, the JSON
shape, opaque names, and every fix accepted by ``plan`` (and, applied, gone on the next lint)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.demo_history import HistorySpec, generate, quota_sets, write_history
from quota_core import Entity
from quota_core.domain.serialization import dumps
from tests import ROOT
from tests.cli_steps import run, sandbox_with, state

E = Entity.of
REPO = ROOT
#: Every rule that needs no history fires once here.
QUOTAS = {
    E(user=None): {"producer_byte_rate": 50_000.0, "request_percentage": 5_000.0},
    E(client_id="x"): {"producer_byte_rate": 1e6},
    E(user="<default>"): {"consumer_byte_rate": 2e6},        # a user literally named <default>
    E(user="CN=etl,OU=data", client_id="ünï 100% <b>x</b>"): {"consumer_byte_rate": 3e6},
}


@pytest.fixture(autouse=True)
def audit_log(tmp_path, monkeypatch):
    monkeypatch.setenv("QUOTA_AUDIT_LOG", str(tmp_path / "audit.jsonl"))
    monkeypatch.delenv("QUOTA_LINT_PROTECTED", raising=False)


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> Path:
    """A 48 h demo history (the collector's Parquet layout), written without Spark."""
    out = tmp_path_factory.mktemp("lint-history") / "history"
    write_history(generate(HistorySpec(hours=48, clients=3, step_s=600)), out)
    return out


def findings(*argv: str) -> tuple[int, list[dict], str]:
    code, out, err = run("lint", *argv, "--output", "json")
    return code, json.loads(out) if out.strip() else None, err


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_a_desired_file_is_linted_without_a_cluster(tmp_path, fmt):
    path = tmp_path / f"quotas.{fmt}"
    path.write_text(dumps(QUOTAS, fmt), encoding="utf-8")  # the quota-console/1 export
    code, found, err = findings(str(path), "--protected", "<default>")
    assert code == 2
    assert all(set(f) == {"rule", "severity", "entity", "key", "evidence", "fix"} for f in found)
    got = {(f["rule"], json.dumps(f["entity"], ensure_ascii=False), f["key"]) for f in found}
    assert got == {
        ("protected-under-default", '{"user": null}', "producer_byte_rate"),
        ("protected-under-default", '{"user": null}', "request_percentage"),
        ("never-binds", '{"client-id": "x"}', "producer_byte_rate"),
        ("too-small", '{"user": null}', "producer_byte_rate"),
        ("cannot-bind", '{"user": null}', "request_percentage"),
    }
    protected = next(f for f in found if f["rule"] == "protected-under-default")
    # the user named <default> is protected by name, never mistaken for the default
    assert protected["fix"]["entries"][0]["entity"] == {"user": "<default>"}
    too_small = next(f for f in found if f["rule"] == "too-small")
    assert "Kafka's defaults: a file has no brokers" in too_small["evidence"]
    assert "not run: stale: no usage history" in err and "ran never-binds on 4 entries" in err


def test_exit_codes(tmp_path):
    clean = tmp_path / "clean.yaml"
    clean.write_text(dumps({E(user="a"): {"producer_byte_rate": 1e7}}, "yaml"))
    assert run("lint", str(clean)) [0] == 0
    assert findings(str(clean)) [:2] == (0, [])
    warn = tmp_path / "warn.yaml"
    warn.write_text(dumps({E(user="a"): {"producer_byte_rate": 1e3}}, "yaml"))  # too-small
    assert run("lint", str(warn))[0] == 2
    assert run("lint", str(warn), "--fail-on", "error")[0] == 0
    assert run("lint", str(warn), "--fail-on", "info")[0] == 2
    bad = tmp_path / "bad.yaml"
    bad.write_text("entries:\n- entity: {user: a}\n  quotas: {producer_byte_rat: 1}\n")
    code, out, err = run("lint", str(bad))
    assert code == 1 and "line 3" in err and "producer_byte_rate" in err and out == ""
    for argv in (["--bogus"], [], [str(tmp_path / "missing.yaml")],
                 [str(clean), "--sandbox", str(tmp_path / "x.sqlite")],
                 [str(clean), "--stale-days", "0"], [str(clean), "--fail-on", "fatal"],
                 ["--history", str(tmp_path)]):
        code, _, err = run("lint", *argv)
        assert code == 1, (argv, err)
        assert err.strip() and "Traceback" not in err


def test_text_output_shows_raw_names(tmp_path):
    path = tmp_path / "q.yaml"
    path.write_text(dumps({E(user=None): {"producer_byte_rate": 1e6}}, "yaml"))
    code, out, _ = run("lint", str(path), "--protected", "CN=etl,OU=data")
    assert code == 2
    assert 'protected-under-default {user=<default>} producer_byte_rate' in out
    assert "'CN=etl,OU=data'" in out and "CN%3D" not in out


def test_config_protected_patterns(tmp_path, monkeypatch):
    path = tmp_path / "q.yaml"
    path.write_text(dumps({E(client_id=None): {"producer_byte_rate": 1e6},
                           E(user="u", client_id="connect-7"): {"consumer_byte_rate": 1.0}},
                          "yaml"))
    monkeypatch.setenv("QUOTA_LINT_PROTECTED", "client-id:connect-*")
    code, found, _ = findings(str(path))
    mine = [f for f in found if f["rule"] == "protected-under-default"]
    assert code == 2 and len(mine) == 1 and "QUOTA_LINT_PROTECTED" in mine[0]["evidence"]
    assert mine[0]["fix"]["entries"][0]["entity"] == {"user": None, "client-id": "connect-7"}


def test_every_fix_is_accepted_by_plan_and_applied_it_is_gone(tmp_path):
    """Each finding's fix, applied on its own to a sandbox holding the linted set with plan
    and apply, leaves a quota set on which lint no longer reports that finding."""
    export = tmp_path / "q.json"
    export.write_text(dumps(QUOTAS, "json"))
    _, found, _ = findings(str(export), "--protected", "<default>")
    assert len(found) == 5
    for i, f in enumerate(found):
        store = sandbox_with(tmp_path / f"s{i}.sqlite", QUOTAS)
        fix = tmp_path / f"fix{i}.json"
        fix.write_text(json.dumps(f["fix"], ensure_ascii=False))
        code, _, err = run("plan", str(fix), "--sandbox", store, "--out", str(tmp_path / "p"))
        assert code == 2, (f["rule"], err)  # changes pending: the plan was made
        assert run("apply", str(tmp_path / "p"), "--sandbox", store)[0] == 0
        code, after, _ = findings("--sandbox", store, "--protected", "<default>")
        assert not [g for g in after if (g["rule"], g["entity"], g["key"]) ==
                    (f["rule"], f["entity"], f["key"])], f["rule"]
        assert set(map(str, state(store))) >= {str(e) for e in QUOTAS} - {
            str(E(client_id="x"))}  # nothing else was removed


def test_history_rules_on_a_real_history(history, tmp_path):
    store = sandbox_with(tmp_path / "q.sqlite", quota_sets()[1])
    code, found, err = findings("--sandbox", store, "--history", str(history),
                                "--stale-days", "1")
    assert code == 2
    chronic = {(json.dumps(f["entity"]), f["key"]) for f in found if f["rule"] == "chronic"}
    # reporting's users (bob, carol) and etl are over their quotas much of the time
    assert ('{"user": null, "client-id": "reporting"}', "consumer_byte_rate") in chronic
    assert ('{"user": "etl"}', "producer_byte_rate") in chronic
    for f in found:
        if f["rule"] == "chronic":
            assert "the sizing hint" in f["evidence"] and f["fix"]["entries"]
    assert "ran stale on" in err and "ran chronic on" in err
    # alone, the history's newest snapshot is linted: the same quota set
    code2, alone, err2 = findings("--history", str(history), "--stale-days", "1")
    assert (code2, alone) == (code, found) and "quota snapshot of" in err2


def test_history_in_json_lines_and_no_spark(tmp_path):
    out = tmp_path / "h"
    write_history(generate(HistorySpec(hours=6, clients=1, step_s=600)), out, fmt="json")
    script = ("import sys; from quota_core.cli.main import main; "
              f"code = main(['lint', '--history', {str(out)!r}, '--output', 'json']); "
              "assert 'pyspark' not in sys.modules, 'lint imported Spark'; sys.exit(code)")
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode in (0, 2), done.stderr
    assert isinstance(json.loads(done.stdout), list) and "ran chronic on" in done.stderr


def test_a_damaged_history_is_one_error_line(tmp_path):
    day = tmp_path / "h" / "usage" / "date=2025-01-01"
    day.mkdir(parents=True)
    (day / "part-0.parquet").write_bytes(b"not parquet")
    code, _, err = run("lint", "--history", str(tmp_path / "h"))
    assert code == 1 and "part-0.parquet" in err and len(err.strip().splitlines()) == 1
