"""Who may edit: the identity policy (ui.identity, ui.settings.access_policy) as tables, then
how the sidebar and the Edit page render it (AppTest; ``AppTest.user`` stands in for the
provider's verified claims: the real sign-in is tests/browser/test_signin.py)."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from quota_core import Entity
from quota_core.changes.audit import AuditLog
from localkafka.demo import demo_quotas
from quota_core.backends.sandbox import SandboxBackend
from ui.identity import (LOCAL, LOCAL_MODE_NOTICE, NONE, PROXY, SIGNIN, Identity, access_mode,
                         identify, is_loopback, may_edit, setup_banner)
from tests import app_steps
from tests.app_steps import APP, texts
from ui.settings import AccessPolicy, access_policy

MiB = 1024 * 1024
AUTH = {"redirect_uri": "http://127.0.0.1:8501/oauth2callback", "cookie_secret": "s" * 32,
        "client_id": "quota-console", "client_secret": "x",
        "server_metadata_url": "http://127.0.0.1:9400/.well-known/openid-configuration"}
ENV_VARS = ("QUOTA_SANDBOX", "QUOTA_BOOTSTRAP_SERVERS", "QUOTA_COMMAND_CONFIG",
            "QUOTA_CONNECTION_LABEL", "QUOTA_READ_ONLY", "QUOTA_EDITORS", "QUOTA_USER_HEADER",
            "QUOTA_TRUST_PROXY_HEADER", "QUOTA_LOCAL_MODE", "QUOTA_IDENTITY_CLAIM",
            "QUOTA_AUDIT_LOG", "QUOTA_CACHE_TTL", "QUOTA_KAFKA_TIMEOUT", "QUOTA_METRICS",
            "QUOTA_HISTORY_DIR")

P = AccessPolicy
SIGNED = P(signin=True)
EDITORS = frozenset({"alice@example.test", "ops"})


# -- settings: what access_policy reads ------------------------------------------------------
@pytest.mark.parametrize("env, secrets, expected", [
    ({}, {}, P()),
    ({"QUOTA_LOCAL_MODE": "1"}, {}, P(local_mode=True)),
    ({}, {"access": {"mode": "local"}}, P(local_mode=True)),
    ({"QUOTA_LOCAL_MODE": "0"}, {"access": {"mode": "local"}}, P()),  # env wins
    ({}, {"access": {"mode": "LOCAL"}}, P(local_mode=True)),
    ({}, {"access": {"mode": "open"}}, P(mode_error=(
        "Unknown [access] mode 'open': the only mode is \"local\" (typed names, not "
        "verified); leave it out otherwise."))),
    ({}, {"access": {"user_header": "X-User", "trust_proxy_header": True}},
     P(user_header="X-User", trust_proxy_header=True)),
    ({"QUOTA_USER_HEADER": "X-User", "QUOTA_TRUST_PROXY_HEADER": "yes"}, {},
     P(user_header="X-User", trust_proxy_header=True)),
    ({"QUOTA_TRUST_PROXY_HEADER": "0"}, {"access": {"trust_proxy_header": True}}, P()),
    ({}, {"auth": AUTH}, P(signin=True)),
    ({}, {"auth": {**AUTH, "identity_claim": "ignored"},
          "access": {"identity_claim": "preferred_username"}},
     P(signin=True, identity_claim="preferred_username")),
    ({"QUOTA_IDENTITY_CLAIM": "sub"}, {"auth": AUTH}, P(signin=True, identity_claim="sub")),
    ({}, {"auth": {"redirect_uri": "http://h/oauth2callback", "cookie_secret": "c",
                   "default": {"client_id": "a", "client_secret": "b",
                               "server_metadata_url": "http://m"}}}, P(signin=True)),
    ({}, {"auth": {"client_id": "a"}}, P(signin=True, signin_problems=(
        "missing [auth] redirect_uri, [auth] cookie_secret, [auth] client_secret, "
        "[auth] server_metadata_url",))),
])
def test_access_policy_reads_identity_settings(env, secrets, expected):
    assert access_policy(env, secrets) == expected


@pytest.mark.parametrize("address, loopback", [
    ("127.0.0.1", True), ("127.0.0.2", True), ("::1", True), ("[::1]", True),
    ("localhost", True), ("LocalHost", True),
    (None, False), ("", False), ("0.0.0.0", False), ("::", False), ("10.1.2.3", False),
    ("console.example", False),
])
def test_is_loopback(address, loopback):
    assert is_loopback(address) is loopback


# -- which mode, and why nobody may edit -----------------------------------------------------
PROXY_ON = P(user_header="X-Forwarded-User", trust_proxy_header=True)


@pytest.mark.parametrize("policy, address, mode, problem", [
    (P(), "127.0.0.1", NONE, "Nobody is identified, so nobody may edit. Configure sign-in"),
    (P(local_mode=True), None, LOCAL, None),
    (SIGNED, None, SIGNIN, None),
    # A verified identity is never replaced by a weaker one.
    (P(signin=True, local_mode=True), None, SIGNIN, None),
    (P(signin=True, user_header="X-U", trust_proxy_header=True), "0.0.0.0", SIGNIN, None),
    (P(signin=True, signin_problems=("missing [auth] cookie_secret",)), None, SIGNIN,
     "Sign-in is configured but incomplete: missing [auth] cookie_secret."),
    (PROXY_ON, "127.0.0.1", PROXY, None),
    (PROXY_ON, "::1", PROXY, None),
    (PROXY_ON, "localhost", PROXY, None),
    (PROXY_ON, None, PROXY, "server.address is unset (every interface)"),
    (PROXY_ON, "0.0.0.0", PROXY, "Editing is refused: the X-Forwarded-User header is trusted "
                                 "only when the console listens on loopback"),
    # An unsafe proxy is refused, never downgraded to typed names.
    (P(user_header="X-U", trust_proxy_header=True, local_mode=True), "0.0.0.0", PROXY,
     "server.address is '0.0.0.0'"),
    (P(trust_proxy_header=True), "127.0.0.1", PROXY, "needs [access] user_header"),
    # A header alone is no longer trusted.
    (P(user_header="X-U"), "127.0.0.1", NONE, "The X-U header is not trusted"),
    (P(user_header="X-U", local_mode=True), "127.0.0.1", LOCAL, None),
    (P(mode_error="Unknown [access] mode 'x'", signin=True), None, NONE,
     "Unknown [access] mode 'x'"),
])
def test_access_mode(policy, address, mode, problem):
    got_mode, got_problem = access_mode(policy, address)
    assert got_mode == mode
    if problem is None:
        assert got_problem is None
    else:
        assert problem in got_problem


# -- the identity of one request -------------------------------------------------------------
ALICE = {"is_logged_in": True, "email": "alice@example.test", "email_verified": True,
         "preferred_username": "alice", "sub": "u-1"}


@pytest.mark.parametrize("policy, mode, inputs, name, via, problem", [
    (SIGNED, SIGNIN, {"user": ALICE}, "alice@example.test", "verified email", None),
    (SIGNED, SIGNIN, {"user": {"is_logged_in": False}}, None, "", None),
    (SIGNED, SIGNIN, {"user": None}, None, "", None),
    # Logged-out claims, a header and a typed name never identify anyone in signin mode.
    (SIGNED, SIGNIN, {"user": {**ALICE, "is_logged_in": False}, "header_value": "alice",
                      "typed": "alice"}, None, "", None),
    (P(signin=True, identity_claim="preferred_username"), SIGNIN, {"user": ALICE}, "alice",
     "verified preferred_username", None),
    (P(signin=True, identity_claim="sub"), SIGNIN, {"user": ALICE}, "u-1", "verified sub",
     None),
    (P(signin=True, identity_claim="upn"), SIGNIN, {"user": ALICE}, None, "no upn claim",
     "the provider sent no 'upn' claim"),
    (SIGNED, SIGNIN, {"user": {**ALICE, "email_verified": False}}, None, "email not verified",
     "the email address alice@example.test is not verified"),
    (SIGNED, SIGNIN, {"user": {k: v for k, v in ALICE.items() if k != "email_verified"}},
     "alice@example.test", "verified email", None),  # providers that omit the claim
    (PROXY_ON, PROXY, {"header_value": " ops ", "typed": "mallory"}, "ops",
     "X-Forwarded-User header", None),
    (PROXY_ON, PROXY, {"header_value": None, "typed": "mallory"}, None,
     "X-Forwarded-User header", None),
    (P(local_mode=True), LOCAL, {"typed": " jdoe ", "header_value": "ops"}, "jdoe",
     "typed, not verified", None),
    (P(local_mode=True), LOCAL, {"typed": "  "}, None, "typed, not verified", None),
    (P(), NONE, {"typed": "jdoe", "header_value": "ops"}, None, "",
     "Nobody is identified"),
])
def test_identify(policy, mode, inputs, name, via, problem):
    identity = identify(policy, mode, **inputs)
    assert (identity.mode, identity.name, identity.via) == (mode, name, via)
    if problem is None:
        assert identity.problem is None
    else:
        assert problem in identity.problem


def test_a_configuration_problem_wins_over_any_input():
    identity = identify(PROXY_ON, PROXY, "refused", header_value="ops")
    assert identity == Identity(PROXY, problem="refused", setup=True)


# -- may edit --------------------------------------------------------------------------------
def signed_in(name, claim="email"):
    return Identity(SIGNIN, name, f"verified {claim}")


@pytest.mark.parametrize("policy, identity, allowed, reason", [
    (SIGNED, signed_in("alice@example.test"), True, ""),
    (SIGNED, Identity(SIGNIN), False, "Sign in to edit"),
    (P(signin=True, editors=EDITORS), signed_in("alice@example.test"), True, ""),
    (P(signin=True, editors=EDITORS), signed_in("Alice@Example.TEST"), True, ""),  # email: any case
    (P(signin=True, editors=EDITORS), signed_in("bob@example.test"), False,
     "Signed in as bob@example.test, which is not in the editors list"),
    (P(signin=True, editors=EDITORS, identity_claim="preferred_username"),
     signed_in("OPS", "preferred_username"), False, "not in the editors list"),  # exact
    (P(signin=True, editors=EDITORS, identity_claim="preferred_username"),
     signed_in("ops", "preferred_username"), True, ""),
    (P(signin=True, read_only=True), signed_in("alice@example.test"), False, "read-only"),
    (SIGNED, Identity(SIGNIN, via="verified email", problem="not verified"), False,
     "not verified"),
    (replace(PROXY_ON, editors=EDITORS),
     Identity(PROXY, "ops", "X-Forwarded-User header"), True, ""),
    (replace(PROXY_ON, editors=EDITORS),
     Identity(PROXY, "mallory", "X-Forwarded-User header"), False,
     "'mallory' (from the X-Forwarded-User header) is not in the editors list"),
    (PROXY_ON, Identity(PROXY, None, "X-Forwarded-User header"), False,
     "No user name arrived in the X-Forwarded-User header"),
    (PROXY_ON, Identity(PROXY, problem="Editing is refused", setup=True), False,
     "Editing is refused"),
    (P(local_mode=True), Identity(LOCAL, "jdoe", "typed, not verified"), True, ""),
    (P(local_mode=True), Identity(LOCAL, None, "typed, not verified"), False,
     "Type your name in the sidebar"),
    (P(local_mode=True, editors=frozenset({"alice"})), Identity(LOCAL, "jdoe"), False,
     "'jdoe' is not in the editors list"),
    (P(local_mode=True, editors=frozenset({"alice"})), Identity(LOCAL, "alice"), True, ""),
    (P(), identify(P(), NONE), False, "Nobody is identified, so nobody may edit"),
])
def test_may_edit(policy, identity, allowed, reason):
    ok, why = may_edit(policy, identity)
    assert ok is allowed and reason in why


@pytest.mark.parametrize("policy, address, banner", [
    (P(), "127.0.0.1", None),                     # nothing configured: the Edit page says how
    (P(local_mode=True), None, None),
    (SIGNED, None, None),
    (PROXY_ON, "127.0.0.1", None),
    (PROXY_ON, "0.0.0.0", "Editing is refused"),  # an unsafe proxy header: everyone sees why
    (P(user_header="X-U"), "127.0.0.1", "The X-U header is not trusted"),
    (P(signin=True, signin_problems=("missing [auth] cookie_secret",)), None,
     "Sign-in is configured but incomplete"),
    (P(mode_error="Unknown [access] mode 'x'"), None, "Unknown [access] mode"),
    (P(read_only=True, user_header="X-U"), "0.0.0.0", None),
])
def test_setup_banner(policy, address, banner):
    mode, problem = access_mode(policy, address)
    text = setup_banner(policy, identify(policy, mode, problem))
    assert (text is None) if banner is None else (banner in text)


# -- rendered: sidebar and Edit page (AppTest) -----------------------------------------------
@pytest.fixture
def sandbox(monkeypatch, tmp_path) -> Path:
    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("QUOTA_AUDIT_LOG", str(tmp_path / "audit.jsonl"))
    path = tmp_path / "quotas.sqlite"
    with SandboxBackend(path) as backend:
        backend.replace_all(demo_quotas())
    monkeypatch.setenv("QUOTA_SANDBOX", str(path))
    return path


def run_app(page=None, *, secrets=None, user=None, operator=None) -> AppTest:
    """Signed out unless ``user`` is given."""
    return app_steps.run_app(page, secrets=secrets, operator=operator,
                             user=user if user is not None else {})


SIGNIN_SECRETS = {"auth": AUTH, "access": {"editors": ["alice@example.test"]}}


@pytest.mark.parametrize("page, form_key", [("edit", "ed_user")])
def test_signin_sidebar_and_writing_pages_when_signed_out(sandbox, page, form_key):
    at = run_app(f"pages/{page}.py", secrets=SIGNIN_SECRETS, user={"is_logged_in": False},
                 operator="alice@example.test")  # a typed name counts for nothing here
    assert [b.label for b in at.sidebar.button if b.key == "sign_in"] == ["Sign in to edit"]
    assert not [w for w in at.text_input if w.key == "operator_name"]
    assert "Sign in to edit" in texts(at.warning)[0]
    assert at.button(key=f"sign_in_{page}").label == "Sign in to edit"
    assert not [w for w in [*at.text_input, *at.text_area] if w.key == form_key]


def test_plan_signed_out_computes_the_diff_and_asks_to_sign_in_only_to_apply(sandbox):
    """Issue 27 item 8: a plan is read-only; signing in is asked for where it is applied."""
    at = run_app("pages/plan.py", secrets=SIGNIN_SECRETS, user={"is_logged_in": False})
    at.text_area(key="pl_text").input("format: quota-console/1\nentries:\n"
                                      "- entity: {user: alice}\n"
                                      "  quotas: {producer_byte_rate: 1048576}\n").run()
    assert not [b for b in at.button if b.key == "sign_in_plan"]  # nothing to apply yet
    at.button(key="pl_plan_btn").click().run()
    assert any("key change" in d.value.columns for d in at.dataframe)
    assert any("Sign in to edit" in w for w in texts(at.warning)), texts(at.warning)
    assert at.button(key="sign_in_plan").label == "Sign in to edit"
    assert not [b for b in at.button if b.key == "pl_apply"]


def test_local_mode_is_announced_on_both_writing_pages(sandbox, monkeypatch):
    monkeypatch.setenv("QUOTA_LOCAL_MODE", "1")
    for page in ("edit", "plan"):
        at = run_app(f"pages/{page}.py", operator="jdoe")
        assert any(LOCAL_MODE_NOTICE in w for w in texts(at.warning)), (page, texts(at.warning))


def test_signed_in_editor_applies_and_the_audit_log_records_the_verified_email(sandbox, tmp_path):
    at = run_app("pages/edit.py", secrets=SIGNIN_SECRETS, user=ALICE)
    sidebar = " ".join(texts(at.sidebar.caption))
    assert "Signed in as **alice@example.test** (verified email)" in sidebar
    assert at.sidebar.button(key="sign_out").label == "Sign out"
    assert "recorded in the audit log as **alice@example.test**" in " ".join(texts(at.caption))
    at.text_input(key="ed_user").input("alice").run()
    at.text_input(key="ed_val_request_percentage").input("75").run()
    at.button(key="ed_preview_btn").click().run()
    at.checkbox(key="ed_confirm").check().run()
    at.button(key="ed_apply").click().run()
    assert not at.exception
    (record,) = AuditLog(tmp_path / "audit.jsonl").read()
    assert record.actor == "alice@example.test"
    assert SandboxBackend(sandbox).describe_entity(Entity.of(user="alice"))[
        "request_percentage"] == 75


def test_signed_in_non_editor_cannot_edit(sandbox):
    at = run_app("pages/edit.py", secrets=SIGNIN_SECRETS,
                 user={**ALICE, "email": "bob@example.test"})
    assert ("Signed in as bob@example.test, which is not in the editors list"
            in texts(at.warning)[0])
    assert not [w for w in at.text_input if w.key == "ed_user"]


def test_unverified_email_cannot_edit(sandbox):
    at = run_app("pages/edit.py", secrets=SIGNIN_SECRETS, user={**ALICE, "email_verified": False})
    assert "is not verified" in texts(at.warning)[0]


def test_nothing_configured_means_nobody_edits_and_says_how(sandbox):
    at = run_app("pages/edit.py", operator="jdoe")
    warning = texts(at.warning)[0]
    assert warning.startswith("Nobody is identified, so nobody may edit.")
    assert "QUOTA_LOCAL_MODE=1" in warning and "[auth]" in warning
    assert not at.error  # no banner on every page for an unconfigured console
    assert not [w for w in at.text_input if w.key in ("operator_name", "ed_user")]


def test_local_mode_says_names_are_not_verified(sandbox, monkeypatch):
    monkeypatch.setenv("QUOTA_LOCAL_MODE", "1")
    at = run_app("pages/edit.py", operator="jdoe")
    assert any("Local mode: names are not verified." in w for w in texts(at.sidebar.warning))
    assert any("Local mode: names are not verified." in w for w in texts(at.main.warning))
    assert "as **jdoe** (typed, not verified)" in " ".join(texts(at.caption))


def test_untrusted_header_is_a_banner_on_every_page(sandbox, monkeypatch):
    monkeypatch.setenv("QUOTA_USER_HEADER", "X-Forwarded-User")
    at = run_app("pages/browse.py", operator="jdoe")
    assert "The X-Forwarded-User header is not trusted" in texts(at.error)[0]


def test_trusted_header_refused_off_loopback(sandbox, monkeypatch):
    # AppTest runs with server.address unset: Streamlit then listens on every interface.
    monkeypatch.setenv("QUOTA_USER_HEADER", "X-Forwarded-User")
    monkeypatch.setenv("QUOTA_TRUST_PROXY_HEADER", "1")
    at = run_app("pages/edit.py")
    assert "Editing is refused: the X-Forwarded-User header is trusted only when" \
        in texts(at.error)[0]
    assert "server.address is unset" in texts(at.warning)[0]


# -- `make run`: local mode for its demo backend only when nothing else is configured ---------
@pytest.mark.parametrize("env, toml, local", [
    ({}, None, True),
    ({}, '[kafka]\nbootstrap_servers = "a:1"\n', True),  # main() only asks for a demo backend
    ({"QUOTA_LOCAL_MODE": "0"}, None, False),             # the person's own choice stands
    ({"QUOTA_LOCAL_MODE": "1"}, None, False),             # already set: nothing to add
    ({}, '[auth]\nclient_id = "x"\n', False),
    ({}, '[access]\nuser_header = "X-U"\n', False),
    ({"QUOTA_READ_ONLY": "1"}, None, False),
    ({}, "[auth\n", False),                               # unreadable: the app reports it
])
def test_make_run_demo_local_mode(tmp_path, env, toml, local):
    import importlib.util

    script = APP.parent / "scripts" / "run_dashboard.py"
    spec = importlib.util.spec_from_file_location("run_dashboard_identity", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    path = tmp_path / "secrets.toml"
    if toml is not None:
        path.write_text(toml)
    assert module.demo_local_mode(env, path) is local


def test_the_secrets_example_configures_sign_in():
    import tomllib

    example = tomllib.loads((APP.parent / ".streamlit" / "secrets.toml.example").read_text())
    policy = access_policy({}, example)
    assert access_mode(policy, "127.0.0.1") == (SIGNIN, None)
    assert policy.identity_claim == "email" and policy.editors
