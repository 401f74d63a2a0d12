"""The dashboard's page logic, run in-process with streamlit.testing.v1.AppTest against a
sandbox file in tmp_path (the QUOTA_SANDBOX env var selects it)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from quota_core import Alteration, Entity
from quota_core.changes.audit import AuditLog
from localkafka.demo import demo_quotas
from quota_core.backends.sandbox import SandboxBackend
from tests.app_steps import APP, run_app, texts
from ui.settings import AccessPolicy, access_policy, audit_path, connections, redact

ENV_VARS = ("QUOTA_SANDBOX", "QUOTA_BOOTSTRAP_SERVERS", "QUOTA_COMMAND_CONFIG",
            "QUOTA_CONNECTION_LABEL", "QUOTA_READ_ONLY", "QUOTA_EDITORS", "QUOTA_USER_HEADER",
            "QUOTA_TRUST_PROXY_HEADER", "QUOTA_LOCAL_MODE", "QUOTA_IDENTITY_CLAIM",
            "QUOTA_AUDIT_LOG", "QUOTA_CACHE_TTL", "QUOTA_KAFKA_TIMEOUT", "QUOTA_METRICS",
            "QUOTA_METRICS_TEMPLATE")
MiB = 1024 * 1024
E = Entity.of
LOCAL_MODE = ("**Local mode: names are not verified.** Anyone who can open this page can type "
              "any name, and the audit log records what was typed.")


@pytest.fixture
def env(monkeypatch, tmp_path):
    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("QUOTA_AUDIT_LOG", str(tmp_path / "audit.jsonl"))
    # Explicit local mode: these tests type a name (sign-in is tests/pages/test_identity.py).
    monkeypatch.setenv("QUOTA_LOCAL_MODE", "1")
    return monkeypatch


@pytest.fixture
def sandbox(env, tmp_path) -> Path:
    path = tmp_path / "quotas.sqlite"
    with SandboxBackend(path) as backend:
        backend.replace_all(demo_quotas())
    env.setenv("QUOTA_SANDBOX", str(path))
    return path


def ladder(at) -> str:
    """The ladder table's HTML on the Resolve page."""
    (html,) = [h for h in texts(at.html) if 'class="qc-ladder"' in h]
    return html


def answers(at) -> dict[str, str]:
    """{key: effective quota as shown} from the Resolve page's answer cards."""
    (html,) = [h for h in texts(at.html) if 'class="qc-answers"' in h]
    return dict(re.findall(r'class="qc-answer" data-key="([a-z_]+)".*?'
                           r'class="qc-answer-value"[^>]*>([^<]*)</div>', html, re.S))


def winners(html: str) -> dict[str, int]:
    """{key: level} of the highlighted winner cells in the ladder HTML."""
    out = {}
    for level, row in re.findall(r'<tr class="qc-rung[^"]*" data-level="(\d+)">(.*?)</tr>',
                                 html, re.S):
        for key in re.findall(r'class="qc-win" data-key="([a-z_]+)"', row):
            out[key] = int(level)
    return out


def shadowed(html: str) -> set[tuple[int, str]]:
    out = set()
    for level, row in re.findall(r'<tr class="qc-rung[^"]*" data-level="(\d+)">(.*?)</tr>',
                                 html, re.S):
        out |= {(int(level), k) for k in re.findall(r'class="qc-shadowed" data-key="([a-z_]+)"',
                                                    row)}
    return out


# -- settings (plain functions) ----------------------------------------------------------------
def test_connections_precedence_and_redaction(tmp_path):
    secrets = {"kafka": {"bootstrap_servers": "b1:9092", "label": "prod",
                         "properties": {"security.protocol": "SASL_SSL",
                                        "sasl.username": "ops", "sasl.password": "hunter2",
                                        "sasl.jaas.config": "x password=\"hunter2\";"}}}
    env = {"QUOTA_SANDBOX": str(tmp_path / "s.sqlite"), "QUOTA_BOOTSTRAP_SERVERS": "local:1"}
    specs = connections(env, secrets)
    assert [(s.kind, s.source) for s in specs] == [("sandbox", "env"), ("kafka", "env"),
                                                   ("kafka", "secrets")]
    prod = specs[2]
    assert prod.label == "prod" and prod.location == "b1:9092"
    assert prod.public_properties() == {"sasl.jaas.config": "••••••",
                                        "sasl.password": "••••••",
                                        "sasl.username": "ops",
                                        "security.protocol": "SASL_SSL"}
    assert "hunter2" not in repr(prod)
    assert connections({}, {}) == []
    assert redact("ssl.key.password", "x") == "••••••"
    assert redact("ssl.keystore.location", "/a") == "/a"


@pytest.mark.parametrize("env, secrets, expected", [
    ({}, {}, AccessPolicy(False, None, None)),
    ({"QUOTA_READ_ONLY": "1"}, {}, AccessPolicy(True, None, None)),
    ({"QUOTA_READ_ONLY": "0"}, {"access": {"read_only": True}}, AccessPolicy(False, None, None)),
    ({}, {"access": {"read_only": True}}, AccessPolicy(True, None, None)),
    ({"QUOTA_EDITORS": "alice, bob"}, {}, AccessPolicy(False, frozenset({"alice", "bob"}), None)),
    ({}, {"access": {"editors": ["carol"], "user_header": "X-Forwarded-User"}},
     AccessPolicy(False, frozenset({"carol"}), "X-Forwarded-User")),
])
def test_access_policy(env, secrets, expected):
    assert access_policy(env, secrets) == expected


# may_edit and the identity modes: tests/pages/test_identity.py


def test_audit_path_default_and_override(tmp_path):
    assert audit_path({"HOME": "/h"}, {}) == Path("/h/.local/state/quota-console/audit.jsonl")
    assert audit_path({}, {"audit": {"path": "/x/a.jsonl"}}) == Path("/x/a.jsonl")
    assert audit_path({"QUOTA_AUDIT_LOG": "/y.jsonl"}, {"audit": {"path": "/x"}}) == Path("/y.jsonl")


# -- connection ----------------------------------------------------------------------------------
@pytest.mark.parametrize("page", [None, "pages/browse.py", "pages/edit.py", "pages/audit.py"])
def test_sidebar_shows_the_connection_on_every_page(sandbox, page):
    at = run_app(page)
    at.run()  # and again after a rerun
    sidebar = " ".join(texts(at.sidebar.success))
    cluster_id = SandboxBackend(sandbox).info().cluster_id
    assert "Sandbox file" in sidebar and str(sandbox) in sidebar
    assert cluster_id in sidebar and "1 broker" in sidebar and "13 quota entries" in sidebar


def test_no_cluster_configured_still_loads(env):
    at = run_app()
    assert "No cluster is configured" in texts(at.error)[0]
    assert "Not connected" in texts(at.info)[0]
    at.switch_page("pages/audit.py").run()
    assert not at.exception


def test_unreachable_cluster_banner_and_retry(env, tmp_path):
    env.setenv("QUOTA_BOOTSTRAP_SERVERS", "127.0.0.1:1")
    env.setenv("QUOTA_KAFKA_TIMEOUT", "2")
    at = run_app()
    banner = texts(at.error)
    assert any("Cannot read quotas from Kafka cluster (environment) (127.0.0.1:1)" in b
               for b in banner), banner
    assert at.button(key="retry_connection").label == "Retry"
    at.button(key="retry_connection").click().run()
    assert not at.exception
    assert any("127.0.0.1:1" in b for b in texts(at.error))
    assert "Not connected to a cluster" in texts(at.info)[0]


def test_broken_sandbox_path_banner(env, tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    env.setenv("QUOTA_SANDBOX", str(blocker / "q.sqlite"))
    at = run_app()
    assert any("Cannot read quotas from Sandbox file" in e for e in texts(at.error))
    at.switch_page("pages/browse.py").run()
    assert any("Cannot read quotas from Sandbox file" in e for e in texts(at.error))
    assert "Not connected to a cluster" in texts(at.info)[0]


# -- resolve -------------------------------------------------------------------------------------
def test_resolve_from_the_url(sandbox):
    at = run_app(query={"user": "alice", "client_id": "checkout-api"})
    metrics = answers(at)
    assert metrics == {"producer_byte_rate": "8 MiB/s", "consumer_byte_rate": "6 MiB/s",
                       "request_percentage": "50%", "controller_mutation_rate": "10/s"}
    html = ladder(at)
    assert winners(html) == {"producer_byte_rate": 1, "consumer_byte_rate": 2,
                             "request_percentage": 3, "controller_mutation_rate": 6}
    assert {(3, "producer_byte_rate"), (3, "consumer_byte_rate"), (5, "request_percentage"),
            (8, "producer_byte_rate")} <= shadowed(html)
    words = " ".join(texts(at.markdown))
    assert ("Client id 'checkout-api' of user 'alice' gets 8 MiB/s on each broker to itself, "
            "set for {user=alice, client-id=checkout-api} (ladder level 1).") in words
    assert not at.main.warning  # nothing assumed


def test_resolve_opens_on_an_example_from_the_data(sandbox):
    at = run_app()
    # The first client with an entry of its own, not the ANONYMOUS edge case.
    assert (at.text_input(key="rs_user").value, at.text_input(key="rs_client").value) == \
        ("alice", "checkout-api")


@pytest.mark.parametrize("field, typed, message", [
    ("rs_user", "User:alice", "Did you mean 'alice'?"),
    ("rs_client", "checkout-api ", "Did you mean 'checkout-api'?"),
])
def test_resolve_checks_typed_names(sandbox, field, typed, message):
    at = run_app()
    at.text_input(key=field).input(typed).run()
    assert any(message in w for w in texts(at.warning)), texts(at.warning)


def test_resolve_refuses_an_ip_that_is_not_one(sandbox):
    at = run_app()
    at.segmented_control(key="rs_mode").set_value("IP address").run()
    at.text_input(key="rs_ip").input("not-an-ip").run()
    assert "'not-an-ip' is not an IP address" in texts(at.error)[0]
    assert not at.html  # no ladder for it


def test_resolve_assumptions_for_an_anonymous_client(sandbox):
    at = run_app()
    at.text_input(key="rs_user").input("").run()
    at.text_input(key="rs_client").input("").run()
    warnings = " ".join(texts(at.warning))
    assert "ANONYMOUS" in warnings and "empty client id" in warnings
    # An empty client id: Kafka consults only levels 3 and 6, so {user=<default>,
    # client-id=<default>} (request_percentage 25) is not applied, and it says so.
    html = ladder(at)
    assert winners(html) == {"producer_byte_rate": 6, "consumer_byte_rate": 6,
                             "controller_mutation_rate": 6}
    assert 'class="qc-skipped" data-key="request_percentage"' in html


def test_resolve_updates_the_url(sandbox):
    at = run_app()
    at.text_input(key="rs_user").input("svc-reports").run()
    at.text_input(key="rs_client").input("reports").run()
    assert at.query_params == {"user": "svc-reports", "client_id": "reports"}
    assert winners(ladder(at))["consumer_byte_rate"] == 3


def test_resolve_literal_default_user_is_a_name(sandbox):
    at = run_app(query={"user": "<default>", "client_id": "x"})
    assert winners(ladder(at))["producer_byte_rate"] == 3  # {user=<default>} the name
    assert "&lt;default&gt;" in ladder(at)
    cards = next(h for h in texts(at.html) if 'class="qc-answers"' in h)
    assert "<code>user=&lt;default&gt;</code>" in cards  # the name, escaped
    assert answers(at)["producer_byte_rate"] == "100 KiB/s"


def test_resolve_ip(sandbox):
    at = run_app(query={"ip": "10.0.0.12"})
    assert answers(at) == {"connection_creation_rate": "20/s"}
    assert winners(ladder(at)) == {"connection_creation_rate": 1}


def test_resolve_throttle_estimate(sandbox):
    at = run_app(query={"user": "alice", "client_id": "checkout-api"})
    at.text_input(key="rs_obs_producer_byte_rate").input("16MiB").run()
    # (16 - 8) / 8 * 10 s window
    assert any("throttled ≈ 10,000 ms" in e for e in texts(at.error))


# -- browse --------------------------------------------------------------------------------------
def browse_rows(at):
    df = at.dataframe[0].value
    return list(zip(df["user"], df["client-id"], df["ip"]))


def test_browse_everything_and_default_label(sandbox):
    at = run_app("pages/browse.py")
    rows = browse_rows(at)
    assert len(rows) == 13
    assert ("<default>", "", "") in rows      # the literal name
    assert ("⟨default⟩", "", "") in rows      # the default user
    assert any("**13** of 13 entries" in t for t in texts(at.markdown))
    assert not at.dataframe[0].proto.arrow_data.HasField("styler")  # no look-alike name


def test_browse_styles_the_default_only_when_a_name_looks_the_same(sandbox):
    # The styler costs ~45 ms per 250 rows: only a real name spelled like the label needs it
    # (without one, test_browse_everything_and_default_label checks there is no styler).
    with SandboxBackend(sandbox) as backend:
        assert backend.alter([Alteration.of(Entity.of(user="⟨default⟩"),
                                            {"producer_byte_rate": 5.0})]).ok
    at = run_app("pages/browse.py")
    rows = browse_rows(at)
    assert rows.count(("⟨default⟩", "", "")) == 2  # the default user and the look-alike name
    styles = at.dataframe[0].proto.arrow_data.styler.styles
    defaults = sum(cell == "⟨default⟩" for row in rows for cell in row)
    assert "font-style: italic" in styles
    # every default cell is styled, the look-alike name is not
    assert styles.split("{")[0].count("#T_") == defaults - 1


def test_browse_flags_entries_that_never_apply(sandbox):
    # The demo's {client-id=mobile-gateway} producer_byte_rate is decided by {user=<default>}
    # (level 6) for every client, so it never applies.
    at = run_app("pages/browse.py")
    df = at.dataframe[0].value
    flagged = dict(zip(df["client-id"], df["never applies"]))
    assert flagged["mobile-gateway"] == "producer_byte_rate ({user=<default>} first)"
    at.checkbox(key="br_dead").check().run()
    rows = browse_rows(at)
    assert ("", "mobile-gateway", "") in rows and ("alice", "", "") not in rows
    assert at.query_params["never_applies"] == "1"


def test_browse_view_comes_from_the_url(sandbox):
    # A shared link opens Browse first, with the view in its query.
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.secrets.update({"_tests": "isolated"})
    at.switch_page("pages/browse.py")
    at.query_params.update({"user_mode": "exact", "user": "alice", "sort": "client-id"})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert set(browse_rows(at)) == {("alice", "checkout-api", ""), ("alice", "⟨default⟩", ""),
                                    ("alice", "", "")}
    at.text_input(key="br_search").input("check").run()
    assert at.query_params["q"] == "check" and at.query_params["user"] == "alice"


@pytest.mark.parametrize("settings, expected", [
    ({"br_user_mode": "exact", "br_user_name": "alice"},
     {("alice", "checkout-api", ""), ("alice", "⟨default⟩", ""), ("alice", "", "")}),
    ({"br_user_mode": "default", "br_strict": True}, {("⟨default⟩", "", "")}),
    ({"br_client_id_mode": "default"}, {("alice", "⟨default⟩", ""), ("⟨default⟩", "⟨default⟩", ""),
                                        ("", "⟨default⟩", "")}),
    ({"br_user_mode": "absent", "br_ip_mode": "absent"},
     {("", "mobile-gateway", ""), ("", "⟨default⟩", "")}),
    ({"br_search": "REPORT"}, {("⟨default⟩", "reports", ""), ("svc-reports", "", "")}),
    ({"br_ip_mode": "any"}, {("", "", "⟨default⟩"), ("", "", "10.0.0.12")}),
    ({"br_strict": True}, set()),
])
def test_browse_filters(sandbox, settings, expected):
    at = run_app("pages/browse.py")
    for key, value in settings.items():
        if key.endswith("_mode"):
            at.selectbox(key=key).set_value(value).run()
        elif key == "br_strict":
            at.checkbox(key=key).check().run()
        else:
            at.text_input(key=key).input(value).run()
    assert not at.exception
    assert set(browse_rows(at)) == expected


def test_browse_filter_error_like_describe(sandbox):
    at = run_app("pages/browse.py")
    at.selectbox(key="br_user_mode").set_value("any").run()
    at.selectbox(key="br_ip_mode").set_value("any").run()
    assert "IP filter component should not be used with user" in texts(at.error)[0]


def test_browse_level_pills_count_and_filter(sandbox):
    at = run_app("pages/browse.py")
    pills = at.pills(key="br_levels")
    assert "3 {user=U} · 4" in pills.options
    pills.select("3").run()
    assert {u for u, _, _ in browse_rows(at)} == {"alice", "<default>", "svc-reports",
                                                 "CN=etl,OU=data"}


def test_browse_exports(sandbox):
    at = run_app("pages/browse.py")
    labels = [b.label for b in at.get("download_button")]
    assert labels == ["Export CSV", "Export JSON"]


# -- edit ----------------------------------------------------------------------------------------
def open_edit(user: str | None = "alice", client: str | None = None, operator="jdoe",
              **query) -> AppTest:
    at = run_app("pages/edit.py", operator=operator, query=query or None)
    if user is not None:
        at.text_input(key="ed_user").input(user).run()
    if client is not None:
        at.selectbox(key="ed_client_mode").set_value("name").run()
        at.text_input(key="ed_client").input(client).run()
    assert not at.exception
    return at


def test_edit_loads_current_values(sandbox):
    at = open_edit("alice")
    values = {w.key: w.value for w in at.text_input if w.key.startswith("ed_val_")}
    assert values == {"ed_val_producer_byte_rate": "2MiB", "ed_val_consumer_byte_rate": "4MiB",
                      "ed_val_request_percentage": "50", "ed_val_controller_mutation_rate": ""}
    assert "No changes yet" in texts(at.info)[0]


@pytest.mark.parametrize("key, text, message", [
    ("producer_byte_rate", "-5", "-5 is not allowed; a quota must be greater than 0"),
    ("producer_byte_rate", "10 furlongs", "is not a byte rate"),
    ("producer_byte_rate", "1.5", "has a fraction, but producer_byte_rate is a whole number"),
    ("request_percentage", "nan", "NaN is not a quota"),
    ("request_percentage", "inf", "infinity is not a quota"),
    ("request_percentage", "0", "a quota must be greater than 0"),
    ("request_percentage", "lots", "'lots' is not a number"),
    ("consumer_byte_rate", "16EiB", "is not a byte rate"),
    # Form words (issue 15): the limit as a number, not "too large for a LONG".
    ("consumer_byte_rate", "9999999999TB", "is too large: the most a broker stores for "
                                           "consumer_byte_rate is 9,223,372,036,854,775,807 "
                                           "bytes/s"),
])
def test_edit_validation_next_to_the_field(sandbox, key, text, message):
    at = open_edit("alice")
    at.text_input(key=f"ed_val_{key}").input(text).run()
    errors = texts(at.error)
    assert any(message in e for e in errors), errors
    assert not [b for b in at.button if b.key == "ed_preview_btn"]  # nothing can be sent


def test_edit_shows_every_error_at_once(sandbox):
    at = open_edit("alice")
    at.text_input(key="ed_val_producer_byte_rate").input("-5").run()
    at.text_input(key="ed_val_consumer_byte_rate").input("abc").run()
    at.text_input(key="ed_val_request_percentage").input("1e400").run()
    errors = texts(at.error)
    assert any("producer_byte_rate" in e and "-5 is not allowed" in e for e in errors), errors
    assert any("'abc' is not a byte rate" in e or "abc" in e for e in errors), errors
    assert any("request_percentage" in e for e in errors), errors
    captions = " ".join(texts(at.caption))
    assert "= -5" not in captions and "Infinity" not in captions


def test_edit_fraction_suggests_the_nearest_value(sandbox):
    at = open_edit("alice")
    at.text_input(key="ed_val_producer_byte_rate").input("1000.6").run()
    assert any("Round it to 1001." in e for e in texts(at.error)), texts(at.error)


def test_edit_a_delete_says_what_clients_fall_back_to(sandbox):
    at = open_edit("alice")
    at.text_input(key="ed_val_producer_byte_rate").input("").run()
    captions = " ".join(texts(at.caption))
    # {user=alice} goes: alice's clients fall back to {user=<default>}'s 1 MiB/s (level 6).
    assert ("will be deleted (now 2 MiB/s); its clients fall back to 1 MiB/s from "
            "{user=<default>} (level 6)") in captions
    at.button(key="ed_preview_btn").click().run()
    diff = at.dataframe[0].value
    row = diff[diff["key"] == "producer_byte_rate"].iloc[0]
    assert row["change"] == "delete"
    assert row["after"] == "deleted → falls back to 1 MiB/s from {user=<default>} (level 6)"


def test_edit_shows_exact_bytes(sandbox):
    at = open_edit("alice")
    at.text_input(key="ed_val_producer_byte_rate").input("10MB").run()
    at.text_input(key="ed_val_consumer_byte_rate").input("1.5MiB").run()
    captions = " ".join(texts(at.caption))
    assert "= 10,000,000 bytes/s" in captions and "= 1,572,864 bytes/s" in captions


def test_edit_ip_entity_validation(sandbox):
    at = run_app("pages/edit.py", operator="jdoe")
    at.segmented_control(key="ed_kind").set_value("ip").run()
    at.text_input(key="ed_ip").input("db.example").run()
    at.text_input(key="ed_val_connection_creation_rate").input("5").run()
    assert any("'db.example' is not an IP address" in e for e in texts(at.error))


def test_edit_needs_a_name(sandbox):
    at = run_app("pages/edit.py")
    assert "Type your name in the sidebar" in texts(at.main.warning)[-1]
    assert [w.key for w in at.text_input] == ["operator_name"]  # no form
    at.sidebar.text_input(key="operator_name").input("jdoe").run()
    assert texts(at.main.warning) == [LOCAL_MODE] and at.text_input(key="ed_user")


def test_edit_editors_list(sandbox, env):
    env.setenv("QUOTA_EDITORS", "alice,bob")
    at = run_app("pages/edit.py", operator="mallory")
    assert "'mallory' is not in the editors list" in texts(at.main.warning)[-1]
    at = run_app("pages/edit.py", operator="bob")
    assert texts(at.main.warning) == [LOCAL_MODE] and at.text_input(key="ed_user")


def test_read_only_hides_editing(sandbox, env):
    env.setenv("QUOTA_READ_ONLY", "1")
    at = run_app()
    with pytest.raises(ValueError, match="Could not find a navigation page"):
        at.switch_page("pages/edit.py")
    assert "Read-only console" in " ".join(texts(at.sidebar.caption))
    at = run_app("pages/browse.py")
    assert not [b for b in at.button if "edit" in (b.key or "")]


def test_preview_diff_and_impact(sandbox):
    at = open_edit("alice", "checkout-api")
    at.text_input(key="ed_val_producer_byte_rate").input("").run()  # remove it
    at.get("file_uploader")[0].upload("clients.csv", b"user,client_id\nalice,checkout-api\n"
                                      b"bob,checkout-api\n", "text/csv")
    at.run()
    at.button(key="ed_preview_btn").click().run()
    assert not at.exception
    assert any("The cluster accepts this change" in t for t in texts(at.info))
    diff = at.dataframe[0].value
    assert list(diff["key"]) == ["producer_byte_rate"] and list(diff["change"]) == ["delete"]
    impact = at.dataframe[1].value
    assert list(impact["client"]) == ["alice · checkout-api"]
    assert list(impact["before → after"]) == ["8 MiB/s (level 1) → 2 MiB/s (level 3)"]
    assert "of 11 checked" in " ".join(texts(at.markdown))
    assert at.button(key="ed_apply").disabled  # not before the confirmation


def test_apply_changes_resolution_and_is_audited(sandbox, tmp_path):
    at = open_edit("alice", "checkout-api")
    at.text_input(key="ed_val_producer_byte_rate").input("3MiB").run()
    at.button(key="ed_preview_btn").click().run()
    at.checkbox(key="ed_confirm").check().run()
    at.button(key="ed_apply").click().run()
    assert not at.exception
    assert any("Applied to `{user=alice, client-id=checkout-api}` by jdoe" in t
               for t in texts(at.success))
    assert SandboxBackend(sandbox).describe_entity(E(user="alice", client_id="checkout-api")) \
        == {"producer_byte_rate": 3 * MiB}
    assert at.text_input(key="ed_val_producer_byte_rate").value == "3MiB"  # reloaded
    (record,) = AuditLog(tmp_path / "audit.jsonl").read()
    assert (record.actor, record.entity_text, record.before, record.after) == (
        "jdoe", "{user=alice, client-id=checkout-api}", {"producer_byte_rate": 8 * MiB},
        {"producer_byte_rate": 3 * MiB})
    at.switch_page("pages/resolve.py").run()
    at.text_input(key="rs_user").input("alice").run()
    at.text_input(key="rs_client").input("checkout-api").run()
    assert answers(at)["producer_byte_rate"] == "3 MiB/s"
    at.switch_page("pages/audit.py").run()
    audit = at.dataframe[0].value
    assert list(audit["who"]) == ["jdoe"]
    assert list(audit["after"]) == ["producer_byte_rate=3145728"]


def test_apply_refused_on_a_concurrent_change(sandbox, tmp_path):
    at = open_edit("alice")
    at.text_input(key="ed_val_request_percentage").input("75").run()
    at.button(key="ed_preview_btn").click().run()
    at.checkbox(key="ed_confirm").check().run()
    with SandboxBackend(sandbox) as other:  # someone else changes the entity meanwhile
        other.replace_all({**demo_quotas(), E(user="alice"): {"producer_byte_rate": 1.0 * MiB}})
    at.button(key="ed_apply").click().run()
    assert not at.exception
    error = texts(at.error)[0]
    assert error.startswith("{user=alice} changed since this form was loaded")
    assert "Nothing was applied" in error
    rows = at.dataframe[-1].value
    assert set(rows["key"]) == {"producer_byte_rate", "consumer_byte_rate", "request_percentage"}
    assert SandboxBackend(sandbox).describe_entity(E(user="alice")) == {"producer_byte_rate": MiB}
    assert AuditLog(tmp_path / "audit.jsonl").read() == []
    at.button(key="ed_conflict_reload").click().run()
    assert at.text_input(key="ed_val_producer_byte_rate").value == "1MiB"
    assert at.text_input(key="ed_val_request_percentage").value == ""


def test_delete_entity(sandbox, tmp_path):
    at = open_edit("svc-reports")
    at.button(key="ed_delete").click().run()
    at.button(key="ed_preview_btn").click().run()
    diff = at.dataframe[0].value
    assert set(diff["change"]) == {"delete"}
    at.checkbox(key="ed_confirm").check().run()
    at.button(key="ed_apply").click().run()
    assert E(user="svc-reports") not in SandboxBackend(sandbox).describe()
    (record,) = AuditLog(tmp_path / "audit.jsonl").read()
    assert record.action == "delete" and record.after == {}


def test_edit_link_from_a_query_param(sandbox):
    entity = json.dumps([["user", None], ["client-id", "reports"]])
    at = run_app("pages/edit.py", operator="jdoe")
    at.query_params["entity"] = entity
    at.run()
    assert at.selectbox(key="ed_user_mode").value == "default"
    assert at.text_input(key="ed_client").value == "reports"
    assert at.text_input(key="ed_val_consumer_byte_rate").value == "20MiB"


def test_audit_page_empty(sandbox):
    at = run_app("pages/audit.py")
    assert "No changes have been applied" in texts(at.info)[0]
