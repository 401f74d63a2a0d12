"""End to end: real sign-in. A real OpenID Connect provider (oidc-provider-mock, on 127.0.0.1)
and the real app (``streamlit run app.py`` with an ``[auth]`` section in a temporary
secrets.toml, passed with ``--secrets.files``), driven in Chromium through the provider's
login page. An editor signs in, applies a change and the audit log records the verified
email; a signed-in non-editor cannot edit; signing out brings back "Sign in to edit".
Screenshots land in ``artifacts/screenshots/signin-*.png``.
"""
from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from localkafka import stop_process_group
from quota_core import Entity
from quota_core.changes.audit import AuditLog
from localkafka.demo import demo_quotas
from quota_core.backends.sandbox import SandboxBackend

from tests import ROOT

pytestmark = pytest.mark.browser
playwright_api = pytest.importorskip("playwright.sync_api")
from tests.browser_steps import settle, type_into  # noqa: E402
for _module in ("authlib", "oidc_provider_mock"):  # not imported here: the app and the provider do
    if importlib.util.find_spec(_module) is None:
        pytest.skip(f"{_module} is not installed (requirements.txt)", allow_module_level=True)
expect = playwright_api.expect
WAIT = 20_000  # ms an expectation waits: a sidebar button shows once the run has finished

REPO = ROOT
SHOTS = REPO / "artifacts" / "screenshots"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
USERS = [  # the provider's accounts: sub (the login page's button), and the claims it signs
    {"sub": "alice", "email": "alice@example.test", "email_verified": True,
     "preferred_username": "alice", "name": "Alice Editor"},
    {"sub": "bob", "email": "bob@example.test", "email_verified": True,
     "preferred_username": "bob", "name": "Bob Viewer"},
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(cmd: list[str], log: Path, url: str, env: dict | None = None) -> subprocess.Popen:
    """Start ``cmd`` in its own process group and wait until ``url`` answers 200."""
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return proc
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            stop_process_group(proc)
            pytest.fail(f"{cmd[2]} did not start:\n{log.read_text()[-3000:]}")
        time.sleep(0.2)


@pytest.fixture
def provider(tmp_path):
    """A real OpenID provider on 127.0.0.1: discovery, login page, token and JWKS endpoints."""
    port = _free_port()
    cmd = [sys.executable, "-m", "oidc_provider_mock", "--host", "127.0.0.1", "--port", str(port)]
    for user in USERS:
        cmd += ["--user-claims", json.dumps(user)]
    url = f"http://127.0.0.1:{port}"
    proc = _start(cmd, tmp_path / "provider.log", f"{url}/.well-known/openid-configuration",
                  env={**os.environ, "NO_COLOR": "1"})
    try:
        yield url
    finally:
        stop_process_group(proc)


@pytest.fixture
def signin_app(provider, tmp_path):
    """The app with sign-in configured (alice is the only editor), on a seeded sandbox."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    sandbox = tmp_path / "quotas.sqlite"
    with SandboxBackend(sandbox) as backend:
        backend.replace_all(demo_quotas())
    secrets = tmp_path / "secrets.toml"
    secrets.write_text(f'''
[auth]
redirect_uri = "{url}/oauth2callback"
cookie_secret = "{os.urandom(24).hex()}"
client_id = "quota-console"
client_secret = "test-client-secret"
server_metadata_url = "{provider}/.well-known/openid-configuration"

[access]
editors = ["Alice@Example.test"]
identity_claim = "email"
''')
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUOTA_")}
    env.update(QUOTA_SANDBOX=str(sandbox), QUOTA_AUDIT_LOG=str(tmp_path / "audit.jsonl"),
               QUOTA_CACHE_TTL="600")
    # --secrets.files replaces every other secrets.toml (the checkout's, ~/.streamlit's).
    proc = _start([sys.executable, "-m", "streamlit", "run", "app.py",
                   "--server.address", "127.0.0.1", "--server.port", str(port),
                   "--server.headless", "true", "--browser.gatherUsageStats", "false",
                   "--secrets.files", str(secrets)],
                  tmp_path / "streamlit.log", f"{url}/_stcore/health", env=env)
    try:
        yield url, sandbox, tmp_path / "audit.jsonl"
    finally:
        stop_process_group(proc)


@pytest.fixture
def browser():
    if not Path(CHROMIUM).exists():
        pytest.skip(f"Chromium is not installed at {CHROMIUM} (make chromium)")
    with playwright_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


def new_page(browser):
    """A fresh browser profile (its own cookies): one person."""
    page = browser.new_context(viewport={"width": 1400, "height": 1400}).new_page()
    page.set_default_timeout(30_000)
    return page


def see(locator) -> None:
    expect(locator).to_be_visible(timeout=WAIT)


def shot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / name), full_page=True)


def sign_in(page, app_url: str, provider_url: str, sub: str, screenshot: str | None = None):
    """Sidebar "Sign in to edit" -> the provider's login page -> back in the app, signed in."""
    page.get_by_test_id("stSidebar").get_by_role("button", name="Sign in to edit").click()
    page.wait_for_url(f"{provider_url}/oauth2/authorize**")
    see(page.get_by_role("heading", name="Authorize Client"))
    if screenshot:
        shot(page, screenshot)
    page.get_by_role("button", name=sub, exact=True).click()
    page.wait_for_url(f"{app_url}/**")
    settle(page)


def test_signin_editor_applies_and_non_editor_cannot(browser, signin_app, provider):
    app_url, sandbox, audit = signin_app

    # Signed out: anyone may look; editing asks for sign-in, and no name can be typed.
    alice = new_page(browser)
    alice.goto(f"{app_url}/")
    settle(alice)
    sidebar = alice.get_by_test_id("stSidebar")
    see(sidebar.get_by_role("button", name="Sign in to edit"))
    expect(alice.get_by_label("Your name (recorded in the audit log)")).to_have_count(0)
    sidebar.get_by_role("link", name="Edit quotas").click()
    settle(alice)
    see(alice.get_by_text("Sign in to edit: every change is recorded with your identity."))
    expect(alice.get_by_label("user name", exact=True)).to_have_count(0)
    shot(alice, "signin-signed-out.png")

    # Alice signs in at the provider; the sidebar shows her verified email.
    sign_in(alice, app_url, provider, "alice", screenshot="signin-provider.png")
    see(sidebar.get_by_text("Signed in as alice@example.test (verified email)"))
    see(sidebar.get_by_role("button", name="Sign out"))

    # ... and edits: the audit log records the identity the provider signed.
    sidebar.get_by_role("link", name="Edit quotas").click()
    settle(alice)
    see(alice.get_by_text("recorded in the audit log as alice@example.test (verified email)"))
    type_into(alice, "user name", "alice")
    expect(alice.get_by_label("request_percentage", exact=True)).to_have_value("50", timeout=WAIT)
    type_into(alice, "request_percentage", "75")
    alice.get_by_role("button", name="Preview").click()
    settle(alice)
    see(alice.get_by_text("The cluster accepts this change"))
    apply = alice.get_by_role("button", name="Apply")
    expect(apply).to_be_disabled(timeout=WAIT)  # the preview's run has finished
    alice.get_by_text("I have checked the preview").click()
    expect(apply).to_be_enabled(timeout=WAIT)
    apply.click()
    settle(alice)
    see(alice.get_by_text("Applied to {user=alice} by alice@example.test"))
    shot(alice, "signin-editor-applied.png")
    (record,) = AuditLog(audit).read()
    assert (record.actor, record.entity_text, record.after.get("request_percentage")) == (
        "alice@example.test", "{user=alice}", 75)
    assert SandboxBackend(sandbox).describe_entity(Entity.of(user="alice"))[
        "request_percentage"] == 75

    # Bob signs in (his own browser profile) but is not an editor: no form, a clear reason.
    bob = new_page(browser)
    bob.goto(f"{app_url}/")
    settle(bob)
    sign_in(bob, app_url, provider, "bob")
    bob_sidebar = bob.get_by_test_id("stSidebar")
    see(bob_sidebar.get_by_text("Signed in as bob@example.test (verified email)"))
    bob_sidebar.get_by_role("link", name="Edit quotas").click()
    settle(bob)
    see(bob.get_by_text("Signed in as bob@example.test, which is not in the editors list"))
    expect(bob.get_by_label("user name", exact=True)).to_have_count(0)
    shot(bob, "signin-non-editor.png")
    assert len(AuditLog(audit).read()) == 1

    # Alice signs out (the provider's end-session page, then back): sign-in is offered again.
    sidebar.get_by_role("button", name="Sign out").click()
    alice.wait_for_url(f"{provider}/oauth2/end_session**")
    alice.get_by_role("button", name="End session").click()
    alice.wait_for_url(f"{app_url}/**")
    settle(alice)
    see(alice.get_by_test_id("stSidebar").get_by_role("button", name="Sign in to edit"))
