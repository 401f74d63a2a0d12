"""plan / apply of a desired quota file: the pure plan, the strict file reader (line numbers),
the CLI on a sandbox file, and the dashboard's Plan page (AppTest)."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from quota_core import Entity
from quota_core.changes.audit import AuditLog
from quota_core.errors import AlterationError, ParseError
from quota_core.plan import (PLAN_FORMAT, make_plan, plan_document, plan_impact, quota_set_hash,
                             read_plan)
from quota_core.backends.sandbox import SandboxBackend
from tests.cli_steps import run, sandbox_with, state
from quota_core.serialization import dumps, read_quota_file

E = Entity.of
MiB = 1024 * 1024
CURRENT = {
    E(user="alice"): {"producer_byte_rate": 2 * MiB, "request_percentage": 50.0},
    E(user="old"): {"consumer_byte_rate": 1e6},
    E(user=None): {"producer_byte_rate": 1e6},
    E(ip="10.0.0.1"): {"connection_creation_rate": 5.0},
}


@pytest.fixture(autouse=True)
def audit_log(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "audit.jsonl"
    monkeypatch.setenv("QUOTA_AUDIT_LOG", str(path))
    return path


@pytest.fixture
def store(tmp_path) -> str:
    return sandbox_with(tmp_path / "q.sqlite", CURRENT)


# -- the pure plan ---------------------------------------------------------------------------
DESIRED = ("entries:\n"
           "- entity: {user: alice}\n"
           "  quotas: {producer_byte_rate: 3145728}\n"       # change one key, drop another
           "- entity: {user: carol}\n"
           "  quotas: {producer_byte_rate: 1048576}\n"       # add
           "- entity: {user: null}\n"
           "  quotas: {producer_byte_rate: 1000000}\n")      # unchanged


@pytest.mark.parametrize("prune, expected, unmanaged", [
    (False, [("{user=alice}", "change", [("producer_byte_rate", "change"),
                                         ("request_percentage", "remove")]),
             ("{user=carol}", "add", [("producer_byte_rate", "add")])],
     ["{user=old}", "{ip=10.0.0.1}"]),
    (True, [("{user=alice}", "change", [("producer_byte_rate", "change"),
                                        ("request_percentage", "remove")]),
            ("{user=old}", "remove", [("consumer_byte_rate", "remove")]),
            ("{user=carol}", "add", [("producer_byte_rate", "add")]),
            ("{ip=10.0.0.1}", "remove", [("connection_creation_rate", "remove")])], []),
])
def test_plan_changes_per_entity_and_key(prune, expected, unmanaged):
    from quota_core.plan import change_kind

    plan = make_plan(CURRENT, read_quota_file(DESIRED, "yaml", "want.yaml"), prune=prune)
    got = [(str(c.entity), c.action, [(k.key, change_kind(k)) for k in c.keys])
           for c in plan.changes]
    assert sorted(got) == sorted(expected)
    assert sorted(str(e) for e in plan.unmanaged) == sorted(unmanaged)
    after = plan.after
    assert after[E(user="alice")] == {"producer_byte_rate": 3 * MiB}
    assert (E(user="old") in after) is not prune
    assert make_plan(after, read_quota_file(DESIRED, "yaml"), prune=prune).changes == ()


def test_plan_impact_names_who_gets_a_different_quota():
    plan = make_plan(CURRENT, read_quota_file(DESIRED, "yaml"))
    impact = plan_impact(plan)
    moved = {(c.label, c.key): c.describe() for c in impact.clients}
    assert moved[("carol · any other client id", "producer_byte_rate")] == \
        "1 MB/s (level 6) → 1 MiB/s (level 3)"
    assert moved[("alice · any other client id", "request_percentage")] == \
        "50% of a thread (level 3) → unlimited"


def test_values_that_would_be_sent_are_validated_with_line_numbers():
    text = ("entries:\n- entity: {user: a}\n  quotas:\n    producer_byte_rate: 0\n"
            "    request_percentage: 12.5\n- entity: {user: b}\n  quotas:\n"
            "    request_percentage: .nan\n")
    # The file is refused as it is read, at its first bad value, as every reader does
    # (issue 32): lint, plan, --import, analyze and the Plan page.
    with pytest.raises(ParseError, match=r"^w.yaml, line 4 \(entry 1\): producer_byte_rate "
                                         r"for \{user=a\}: 0 is not allowed"):
        read_quota_file(text, "yaml", "w.yaml")
    # A desired set given as values (no file) is checked by make_plan, every problem listed.
    desired = {E(user="a"): {"producer_byte_rate": 0.0, "request_percentage": 12.5},
               E(user="b"): {"request_percentage": math.nan}}
    with pytest.raises(AlterationError) as info:
        make_plan({}, desired)
    assert [p.key for p in info.value.problems] == ["producer_byte_rate", "request_percentage"]
    # A NaN the cluster already holds is no change, so no problem (a file may not hold one).
    held = {E(user="n"): {"request_percentage": math.nan}}
    assert make_plan(held, held).changes == ()


def test_hash_is_canonical_and_the_document_round_trips():
    assert quota_set_hash(CURRENT) == quota_set_hash(dict(reversed(list(CURRENT.items()))))
    assert quota_set_hash(CURRENT) != quota_set_hash({**CURRENT, E(user="x"): {"producer_byte_rate": 1.0}})
    plan = make_plan(CURRENT, read_quota_file(DESIRED, "yaml"), prune=True)
    doc = json.loads(json.dumps(plan_document(plan, plan_impact(plan))))
    assert doc["format"] == PLAN_FORMAT and doc["base"]["hash"] == quota_set_hash(CURRENT)
    again = read_plan(doc, "p.json")
    assert again.changes == plan.changes and again.base == plan.base


@pytest.mark.parametrize("tamper, message", [
    (lambda d: d["base"]["entries"].pop(), "its base quota set does not match its hash"),
    (lambda d: d["changes"][0]["ops"][0].update(value=7), "do not lead to the set it recorded"),
    (lambda d: d["changes"].append(d["changes"][0]), "do not follow from the base set|twice"),
    (lambda d: d.update(format="x"), "is not a plan file"),
    (lambda d: d.pop("changes"), "is not a complete plan file"),
])
def test_an_edited_plan_is_refused(tamper, message):
    doc = json.loads(json.dumps(plan_document(make_plan(CURRENT, read_quota_file(DESIRED, "yaml")))))
    tamper(doc)
    with pytest.raises(ParseError, match=message):
        read_plan(doc, "p.json")


# -- the strict reader ---------------------------------------------------------------------------
@pytest.mark.parametrize("text, fmt, message", [
    ("entries:\n- entity: {user: a}\n  quotas: {producer_byte_rate: 5}\n"
     "- entity: {user: a}\n  quotas: {producer_byte_rate: 6}\n", "yaml",
     "w, line 4 (entry 2): {user=a} appears twice (first at line 2)"),
    ("entries:\n- entity: {user: a}\n  quotas:\n    producer_byte_rate: 5\n"
     "    producer_byte_rate: 6\n", "yaml",
     "w, line 5: 'producer_byte_rate' appears twice in one mapping (first at line 4)"),
    ("entries:\n- entity: &a {user: a}\n  quotas: {producer_byte_rate: 5}\n"
     "- entity: *a\n  quotas: {producer_byte_rate: 6}\n", "yaml",
     "w, line 2: the anchor &a is not allowed"),
    ("defaults: {producer_byte_rate: 5}\nentries:\n- entity: {user: a}\n  quotas:\n"
     "    <<: {producer_byte_rate: 5}\n", "yaml", "w, line 5: a merge key (<<) is not allowed"),
    ("entries:\n- entity: {user: a}\n  quotas:\n    prodcer_byte_rate: 5\n", "yaml",
     "w, line 4 (entry 1): {user=a}: unknown quota key 'prodcer_byte_rate' for a user/client-id "
     "entity, did you mean producer_byte_rate?"),
    ("entries:\n- entity: {ip: 10.0.0.1}\n  quotas:\n    producer_byte_rate: 5\n", "yaml",
     "w, line 4 (entry 1): {ip=10.0.0.1}: unknown quota key 'producer_byte_rate' for an ip "
     "entity. Valid keys: connection_creation_rate."),
    ("entries:\n- entity: {user: a}\n  quota: {producer_byte_rate: 5}\n", "yaml",
     "w, line 3 (entry 1): unknown field 'quota', did you mean quotas?"),
    ("entries:\n- entity: {user: a}\n  quotas:\n    producer_byte_rate: fast\n", "yaml",
     "w, line 4 (entry 1): producer_byte_rate='fast' is not a number."),
    ('{"entries": [\n  {"entity": {"user": "a"},\n   "quotas": {"producer_byte_rate": 1,\n'
     '              "producer_byte_rate": 2}}]}', "json",
     "w, line 4: 'producer_byte_rate' appears twice in one object (first at line 3)"),
    ('{"entries": [\n  {"entity": {"user": "a"}, "quotas": {}},\n'
     '  {"entity": {"user": "a"}, "quotas": {}}]}', "json",
     "w, line 3 (entry 2): {user=a} appears twice (first at line 2)"),
    ('{"entries": [\n  {"entity": {"user": "a"},\n   "quotas": {"consumer_byterate": 1}}]}',
     "json", "w, line 3 (entry 1): {user=a}: unknown quota key 'consumer_byterate' for a "
             "user/client-id entity, did you mean consumer_byte_rate?"),
    ('{"entries": [', "json", "w is not valid json"),
])
def test_strict_reader_refuses_with_the_line(text, fmt, message):
    with pytest.raises(ParseError) as info:
        read_quota_file(text, fmt, "w")
    assert message in str(info.value)


# -- the CLI on a sandbox file -----------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_export_edit_plan_apply_round_trip(store, tmp_path, audit_log, fmt):
    code, text, _ = run("--sandbox", store, "--export", fmt)
    desired = tmp_path / f"want.{fmt}"
    desired.write_text(text, encoding="utf-8")
    # The export itself is a valid plan input, with nothing to do.
    assert run("plan", str(desired), "--sandbox", store)[0] == 0
    doc = json.loads(run("--sandbox", store, "--export", "json")[1])
    doc["entries"][0]["quotas"]["producer_byte_rate"] = 4 * MiB      # {user=<default>}
    doc["entries"].append({"entity": {"user": "carol"}, "quotas": {"consumer_byte_rate": MiB}})
    desired.write_text(dumps(read_quota_file(json.dumps(doc), "json").quotas, fmt))
    plan_file = tmp_path / "plan.json"
    code, out, err = run("plan", str(desired), "--sandbox", store, "--out", str(plan_file))
    assert code == 2, err
    assert "~ change {user=<default>}" in out and "+ add {user=carol}" in out
    assert f"Plan written to {plan_file}" in err
    code, out, err = run("apply", str(plan_file), "--sandbox", store, "--actor", "jdoe")
    assert code == 0, err
    assert out.splitlines() == [
        "applied {user=<default>}: producer_byte_rate 1000000 (1 MB/s) → 4194304 (4 MiB/s)",
        "applied {user=carol}: consumer_byte_rate (not set) → 1048576 (1 MiB/s)"]
    assert state(store)[E(user="carol")] == {"consumer_byte_rate": MiB}
    records = AuditLog(audit_log).read()
    assert [(r.actor, r.action, r.entity_text) for r in records] == [
        ("jdoe", "apply", "{user=<default>}"), ("jdoe", "apply", "{user=carol}")]
    assert records[0].before == {"producer_byte_rate": 1000000}
    assert records[0].after == {"producer_byte_rate": 4 * MiB}
    assert run("plan", str(desired), "--sandbox", store)[0] == 0
    # Applying the same plan again: the cluster already holds its result.
    code, _, err = run("apply", str(plan_file), "--sandbox", store)
    assert code == 0 and "applied already" in err


def test_apply_refuses_when_the_set_moved_and_names_what_changed(store, tmp_path, audit_log):
    desired = tmp_path / "want.yaml"
    desired.write_text(DESIRED)
    plan_file = tmp_path / "plan.json"
    assert run("plan", str(desired), "--sandbox", store, "--out", str(plan_file))[0] == 2
    # Someone changes an *unmanaged* entry meanwhile: any change refuses the plan.
    assert run("--sandbox", store, "--alter", "--user", "old", "--add",
               "consumer_byte_rate=2MB")[0] == 0
    before = state(store)
    n_records = len(AuditLog(audit_log).read())
    code, out, err = run("apply", str(plan_file), "--sandbox", store)
    assert (code, out) == (1, "")
    assert "refused: the quota set changed since" in err
    assert "  {user=old}: consumer_byte_rate 1000000 (1 MB/s) → 2000000 (2 MB/s)" in err
    assert state(store) == before and len(AuditLog(audit_log).read()) == n_records


def test_partial_failure_says_what_was_applied(store, tmp_path, audit_log, monkeypatch):
    desired = tmp_path / "want.yaml"
    desired.write_text(DESIRED)
    plan_file = tmp_path / "plan.json"
    assert run("plan", str(desired), "--sandbox", store, "--out", str(plan_file))[0] == 2
    from quota_core.alterations import AlterOutcome, EntityResult

    real_alter = SandboxBackend.alter

    def refuse_carol(self, alterations, validate_only=False):
        keep = [a for a in alterations if a.entity != E(user="carol")]
        outcome = real_alter(self, keep, validate_only)
        return AlterOutcome(outcome.results + (EntityResult(
            E(user="carol"), "not authorised", "CLUSTER_AUTHORIZATION_FAILED"),), validate_only)

    monkeypatch.setattr(SandboxBackend, "alter", refuse_carol)
    code, out, err = run("apply", str(plan_file), "--sandbox", store)
    assert code == 1
    assert "applied {user=alice}: " in out
    assert "refused {user=carol}: not authorised (not applied)" in out
    assert "applied 1 of 2 entity changes; 1 refused and not applied: {user=carol}" in err
    assert [r.entity_text for r in AuditLog(audit_log).read()] == ["{user=alice}"]


@pytest.mark.parametrize("argv, code, message", [
    (["plan", "{dir}/want.yaml"], 1, "Say where the quotas live"),
    (["plan", "--sandbox", "{store}"], 1, "Give the desired quota set: a FILE"),
    (["plan", "{dir}/missing.yaml", "--sandbox", "{store}"], 1, "Cannot read"),
    (["plan", "{dir}/dup.yaml", "--sandbox", "{store}"], 1, "line 4 (entry 2)"),
    (["plan", "{dir}/want.yaml", "--sandbox", "{store}", "--out", "{dir}/want.yaml"], 1,
     "is the desired file itself"),
    (["apply", "{dir}/want.yaml", "--sandbox", "{store}"], 2, "is not a plan file"),
    (["apply", "{dir}/plan.json"], 2, "Say where the quotas live"),
    (["plan", "--help"], 0, ""),
])
def test_plan_and_apply_errors(store, tmp_path, argv, code, message):
    (tmp_path / "want.yaml").write_text(DESIRED)
    (tmp_path / "dup.yaml").write_text("entries:\n- entity: {user: a}\n  quotas: {}\n"
                                       "- entity: {user: a}\n  quotas: {}\n")
    got, out, err = run(*[a.format(dir=tmp_path, store=store) for a in argv])
    assert got == code and message in err + out
    assert len(err.strip().splitlines()) <= 1 or err.startswith("usage:")


def test_plan_json_output_is_the_plan_document(store, tmp_path):
    desired = tmp_path / "want.yaml"
    desired.write_text(DESIRED)
    code, out, _ = run("plan", str(desired), "--sandbox", store, "--output", "json", "--prune")
    doc = json.loads(out)
    assert code == 2 and doc["summary"] == {"add": 1, "change": 1, "remove": 2, "unmanaged": 0}
    assert doc["impact"]["clients_checked"] > 0


# -- the dashboard's Plan page ------------------------------------------------------------------
def test_plan_page_diff_impact_apply_and_audit(tmp_path, monkeypatch, store, audit_log):
    from streamlit.testing.v1 import AppTest

    for var in ("QUOTA_BOOTSTRAP_SERVERS", "QUOTA_READ_ONLY", "QUOTA_EDITORS",
                "QUOTA_USER_HEADER", "QUOTA_METRICS", "QUOTA_TRUST_PROXY_HEADER",
                "QUOTA_IDENTITY_CLAIM"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("QUOTA_SANDBOX", store)
    monkeypatch.setenv("QUOTA_LOCAL_MODE", "1")  # a typed name, as tests/test_app.py does
    at = AppTest.from_file(str(Path(__file__).resolve().parent.parent / "app.py"),
                           default_timeout=60)
    at.secrets.update({"_tests": "isolated"})
    at.session_state["operator_name"] = "jdoe"
    at.run()
    at.switch_page("pages/plan.py").run()
    assert not at.exception, [e.value for e in at.exception]
    at.text_area(key="pl_text").input(DESIRED).run()
    at.button(key="pl_plan_btn").click().run()
    assert not at.exception, [e.value for e in at.exception]
    def frame(column):  # AppTest gives dataframes no key: find each by a column it has
        return next(d.value for d in at.dataframe if column in d.value.columns)

    diff = frame("key change")
    assert set(zip(diff["entity"], diff["key"], diff["key change"])) == {
        ("{user=alice}", "producer_byte_rate", "change"),
        ("{user=alice}", "request_percentage", "remove"),
        ("{user=carol}", "producer_byte_rate", "add")}
    assert "carol · any other client id" in list(frame("client")["client"])
    assert at.button(key="pl_apply").disabled
    at.checkbox(key="pl_confirm").check().run()
    at.button(key="pl_apply").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("Applied 2 entity changes by jdoe" in s.value for s in at.success)
    assert state(store)[E(user="carol")] == {"producer_byte_rate": MiB}
    assert sorted(r.entity_text for r in AuditLog(audit_log).read()) == ["{user=alice}",
                                                                         "{user=carol}"]
    # A plan made before someone else's change is refused, nothing applied.
    at.text_area(key="pl_text").input(DESIRED.replace("1048576", "2097152")).run()
    at.button(key="pl_plan_btn").click().run()
    with SandboxBackend(store) as backend:
        backend.replace_all({**state(store), E(user="zed"): {"producer_byte_rate": 1.0}})
    at.checkbox(key="pl_confirm").check().run()
    at.button(key="pl_apply").click().run()
    assert any("The quota set changed since this plan was made" in e.value for e in at.error)
    assert state(store)[E(user="carol")] == {"producer_byte_rate": MiB}


# -- --metrics: who would be throttled at today's rates -----------------------------------------
def test_plan_with_metrics_judges_todays_traffic(tmp_path):
    import http.server
    import threading

    body = (Path(__file__).parent / "fixtures" / "metrics" / "ours.txt").read_bytes()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            self.send_response(200 if self.path == "/metrics" else 404)
            self.end_headers()
            self.wfile.write(body if self.path == "/metrics" else b"no")

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}"
        path = tmp_path / "q.sqlite"
        with SandboxBackend(path) as backend:
            backend.replace_all({E(user="someone"): {"producer_byte_rate": 1.0}})
        desired = tmp_path / "want.yaml"
        desired.write_text("entries:\n- entity: {client-id: plain-client}\n"
                           "  quotas: {producer_byte_rate: 10000}\n")
        code, out, err = run("plan", str(desired), "--sandbox", str(path), "--metrics",
                             f"b1={url}/metrics,down={url}/gone")
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert code == 1, err  # an endpoint given that could not be read is an error (issue 27)
    assert "1 newly throttled" in out
    assert err.count("\n") == 1 and f"{url}/gone" in err and "unknown" in err
    # A broker not read: no bucket is "not throttled" or "freed" at today's rates (issue 27).
    dead = f"127.0.0.1:{httpd.server_address[1]}"
    assert f"5 unknown (broker {dead} could not be read)" in out
    assert ": not throttled" not in out and ": freed" not in out
    assert f"unlimited: unknown: broker {dead} could not be read" in out


def test_plan_json_verdict_is_null_while_a_broker_is_unread():
    from quota_core.live import traffic_impact
    from quota_core.telemetry.parse import parse_metrics
    from quota_core.plan import plan_document, plan_impact

    body = (Path(__file__).parent / "fixtures" / "metrics" / "ours.txt").read_text()
    series = list(parse_metrics(body, "b1"))
    before = {E(user="someone"): {"producer_byte_rate": 1.0}}
    desired = {**before, E(client_id="plain-client"): {"producer_byte_rate": 10000.0}}
    plan = make_plan(before, desired)
    for unread, expect in (((), False), (("2",), None)):
        doc = plan_document(plan, plan_impact(plan, series, unread=unread))
        rows = {r["bucket"].get("client-id"): r for r in doc["impact"]["traffic"]}
        assert rows["plain-client"]["throttled"] is True
        assert rows["only:client*"]["throttled"] is expect
        assert rows["only:client*"]["unread"] == list(unread)
    assert all(t.throttled is None for t in traffic_impact(before, desired, series, ("2",))
               if not t.after.over_quota and t.verdict.startswith("unknown"))


# -- one drift check: apply and the Plan page (issue 17) ----------------------------------------
def test_since_plan_tells_unchanged_applied_and_moved_apart():
    from quota_core.plan import since_plan

    plan = make_plan(CURRENT, read_quota_file(DESIRED, "yaml"))
    assert since_plan(plan, CURRENT).state == "unchanged"
    assert since_plan(plan, plan.after).state == "applied"
    moved = {**CURRENT, E(user="zed"): {"producer_byte_rate": 1.0}}
    since = since_plan(plan, moved)
    assert since.state == "moved"
    assert [(str(e), c.key, c.before, c.after) for e, c in since.drift] == [
        ("{user=zed}", "producer_byte_rate", None, 1.0)]
    empty = make_plan(CURRENT, read_quota_file(dumps(CURRENT, "yaml"), "yaml"))
    assert not empty.changes and since_plan(empty, CURRENT).state == "unchanged"


def test_plan_page_says_a_plan_applied_already_and_writes_nothing(monkeypatch, store, audit_log):
    from streamlit.testing.v1 import AppTest

    for var in ("QUOTA_BOOTSTRAP_SERVERS", "QUOTA_READ_ONLY", "QUOTA_EDITORS",
                "QUOTA_USER_HEADER", "QUOTA_METRICS", "QUOTA_TRUST_PROXY_HEADER",
                "QUOTA_IDENTITY_CLAIM"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("QUOTA_SANDBOX", store)
    monkeypatch.setenv("QUOTA_LOCAL_MODE", "1")
    at = AppTest.from_file(str(Path(__file__).resolve().parent.parent / "app.py"),
                           default_timeout=60)
    at.secrets.update({"_tests": "isolated"})
    at.session_state["operator_name"] = "jdoe"
    at.run()
    at.switch_page("pages/plan.py").run()
    at.text_area(key="pl_text").input(DESIRED).run()
    at.button(key="pl_plan_btn").click().run()
    # Someone else brings the cluster to the desired set before this Apply.
    after = make_plan(state(store), read_quota_file(DESIRED, "yaml")).after
    with SandboxBackend(store) as backend:
        backend.replace_all(after)
    at.checkbox(key="pl_confirm").check().run()
    at.button(key="pl_apply").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    assert any("applied already" in s.value for s in at.success)
    assert state(store) == after
    assert not audit_log.exists() or AuditLog(audit_log).read() == []
