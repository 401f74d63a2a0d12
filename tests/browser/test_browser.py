"""End to end: the real app (``streamlit run app.py``) on a real backend, driven in Chromium.

The backend is the real local Kafka broker (the session fixture ``kafka_broker``, seeded
with the demo quotas through KafkaBackend) when Java and the Kafka backend are available,
else a sandbox file. Screenshots of every page land in ``artifacts/screenshots/``.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from localkafka import stop_process_group
from quota_core import diff_alteration
from quota_core.changes.audit import AuditLog
from quota_core.backends.base import checked_alter
from localkafka.demo import demo_quotas

from tests import ROOT

pytestmark = pytest.mark.browser
playwright_api = pytest.importorskip("playwright.sync_api")
from tests.browser_steps import settle, type_into  # noqa: E402
expect = playwright_api.expect
# A loaded 2-core machine (a broker, Spark and Chromium at once) can take more than
# Playwright's default 5 s to show a rerun: wait up to 20 s for what a person would see.
expect.set_options(timeout=20_000)

REPO = ROOT
SHOTS = REPO / "artifacts" / "screenshots"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
MiB = 1024 * 1024


def _kafka_usable() -> bool:
    if os.environ.get("QUOTA_BROWSER_BACKEND") == "sandbox" or not shutil.which("java"):
        return False
    try:
        import quota_core.backends.kafka  # noqa: F401
    except ImportError:
        return False
    return True


def _make_exactly(backend, target: dict) -> None:
    """Alter ``backend`` until it holds exactly ``target``."""
    current = backend.describe()
    alterations = [diff_alteration(e, current.get(e, {}), target.get(e, {}))
                   for e in set(current) | set(target)]
    alterations = [a for a in alterations if a.ops]
    if alterations:
        outcome = checked_alter(backend, alterations)
        assert outcome.ok, outcome.failed
    deadline = time.monotonic() + 10
    while backend.describe() != target:
        assert time.monotonic() < deadline, "the backend did not settle on the demo quotas"
        time.sleep(0.2)


@pytest.fixture
def backend_env(request, tmp_path):
    """Env vars that point the app at a seeded backend, and what it is."""
    if _kafka_usable():
        from quota_core.backends.kafka import KafkaBackend

        broker = request.getfixturevalue("kafka_broker")
        with KafkaBackend(broker.bootstrap) as backend:
            _make_exactly(backend, demo_quotas())
        yield {"QUOTA_BOOTSTRAP_SERVERS": broker.bootstrap,
               "QUOTA_CONNECTION_LABEL": "Local test broker",
               "QUOTA_METRICS": f"local={broker.metrics_url}", "QUOTA_LIVE_EVERY": "2"}, "kafka"
        with KafkaBackend(broker.bootstrap) as backend:  # leave the shared broker clean
            _make_exactly(backend, {})
    else:
        from quota_core.backends.sandbox import SandboxBackend

        path = tmp_path / "quotas.sqlite"
        with SandboxBackend(path) as backend:
            backend.replace_all(demo_quotas())
        yield {"QUOTA_SANDBOX": str(path)}, "sandbox"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _empty_secrets(tmp_path: Path) -> Path:
    path = tmp_path / "secrets.toml"
    path.write_text("")
    return path


@pytest.fixture
def app_url(backend_env, tmp_path):
    """The app running as a real ``streamlit run`` subprocess; always stopped afterwards."""
    settings, _ = backend_env
    yield from serve_app(settings, tmp_path)


def serve_app(settings: dict, tmp_path: Path):
    """``streamlit run app.py`` with ``settings`` (QUOTA_* env vars) on a free port: yields
    its URL once it answers, and stops it (its whole process group) afterwards."""
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUOTA_")}
    # Explicit local mode: the journey types a name (real sign-in: tests/browser/test_signin.py).
    env.update(settings, QUOTA_AUDIT_LOG=str(tmp_path / "audit.jsonl"), QUOTA_CACHE_TTL="600",
               QUOTA_LOCAL_MODE="1")
    log = open(tmp_path / "streamlit.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.address", "127.0.0.1",
         "--server.port", str(port), "--server.headless", "true",
         "--browser.gatherUsageStats", "false",
         # Only this (empty) secrets file: a developer's own .streamlit/secrets.toml (an
         # [auth] section, another cluster) must not change what the tests see.
         "--secrets.files", str(_empty_secrets(tmp_path))],
        cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                    if r.read().strip() == b"ok":
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                log.flush()
                pytest.fail("streamlit did not start:\n" +
                            (tmp_path / "streamlit.log").read_text()[-3000:])
            time.sleep(0.3)
        yield url
    finally:
        stop_process_group(proc)
        log.close()


@pytest.fixture
def page():
    if not Path(CHROMIUM).exists():
        pytest.skip(f"Chromium is not installed at {CHROMIUM} (make chromium)")
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            pg = browser.new_page(viewport={"width": 1500, "height": 2000})
            pg.set_default_timeout(30_000)
            yield pg
        finally:
            browser.close()


def choose(page, label: str, option: str) -> None:
    page.get_by_label(label, exact=True).click()
    page.get_by_role("option", name=option, exact=True).click()
    settle(page)


def shot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / name), full_page=True)


def ladder_cell(page, level: int, key: str, kind: str):
    return page.locator(f'tr[data-level="{level}"] td.qc-{kind}[data-key="{key}"]')


def test_operator_journey(page, app_url, backend_env, tmp_path):
    _, kind = backend_env

    # 1. Resolve a throttled client: the winning level is highlighted, shadowed ones set back.
    page.goto(f"{app_url}/?user=alice&client_id=checkout-api")
    expect(page.locator(".qc-ladder")).to_be_visible()
    settle(page)
    expect(ladder_cell(page, 1, "producer_byte_rate", "win")).to_contain_text("8 MiB/s")
    expect(ladder_cell(page, 2, "consumer_byte_rate", "win")).to_contain_text("6 MiB/s")
    expect(ladder_cell(page, 3, "request_percentage", "win")).to_contain_text("50%")
    expect(ladder_cell(page, 6, "controller_mutation_rate", "win")).to_contain_text("10/s")
    shadow = ladder_cell(page, 3, "producer_byte_rate", "shadowed")
    expect(shadow).to_contain_text("2 MiB/s")
    struck = shadow.locator("span").first.evaluate("e => getComputedStyle(e).textDecorationLine")
    assert struck == "line-through"
    win_bg = ladder_cell(page, 1, "producer_byte_rate", "win").evaluate(
        "e => getComputedStyle(e).backgroundColor")
    assert win_bg == "rgb(214, 245, 221)"
    expect(page.get_by_text("Client id 'checkout-api' of user 'alice' gets 8 MiB/s")).to_be_visible()
    sidebar = page.get_by_test_id("stSidebar")
    expect(sidebar).to_contain_text("13 quota entries")
    expect(sidebar).to_contain_text("1 broker")
    shot(page, "resolve.png")

    # The URL carries the query: changing the client changes the address.
    type_into(page, "Client id", "batch-export")
    assert "client_id=batch-export" in page.url and "user=alice" in page.url
    expect(ladder_cell(page, 3, "producer_byte_rate", "win")).to_contain_text("2 MiB/s")

    # 2. Browse and filter.
    page.get_by_role("link", name="Browse quotas").click()
    settle(page)
    expect(page.get_by_text("13 of 13 entries")).to_be_visible()
    choose(page, "user", "exact name")
    type_into(page, "user name", "alice")
    expect(page.get_by_text("3 of 13 entries")).to_be_visible()
    expect(page.get_by_text("{user=alice}", exact=True)).to_be_visible()  # describe filter
    choose(page, "user", "— (no filter)")
    type_into(page, "Search names", "default")
    expect(page.get_by_text("1 of 13 entries")).to_be_visible()  # the literal name only
    type_into(page, "Search names", "")
    shot(page, "browse.png")

    # 3. Edit through the form: preview, confirm, apply.
    page.get_by_role("link", name="Edit quotas").click()
    settle(page)
    type_into(page, "Your name (recorded in the audit log)", "jdoe")
    type_into(page, "user name", "alice")
    choose(page, "client-id", "a name")
    type_into(page, "client-id name", "checkout-api")
    expect(page.get_by_label("producer_byte_rate", exact=True)).to_have_value("8MiB")
    type_into(page, "producer_byte_rate", "3MiB")
    expect(page.get_by_text("= 3,145,728 bytes/s")).to_be_visible()
    type_into(page, "consumer_byte_rate", "-1")
    expect(page.get_by_text("-1 is not allowed; a quota must be greater than 0", exact=False)).to_be_visible()  # inline, nothing sent
    expect(page.get_by_role("button", name="Preview")).to_have_count(0)
    type_into(page, "consumer_byte_rate", "")
    page.get_by_role("button", name="Preview").click()
    settle(page)
    expect(page.get_by_text("The cluster accepts this change")).to_be_visible()
    expect(page.get_by_text("known client gets a different effective quota")).to_be_visible()
    shot(page, "edit-preview.png")
    page.get_by_text("I have checked the preview").click()
    settle(page)
    page.get_by_role("button", name="Apply").click()
    settle(page)
    expect(page.get_by_text("Applied to {user=alice, client-id=checkout-api} by jdoe")) \
        .to_be_visible()
    shot(page, "edit-applied.png")

    # 4. The resolution changed.
    page.goto(f"{app_url}/?user=alice&client_id=checkout-api")
    expect(page.locator(".qc-ladder")).to_be_visible()
    settle(page)
    expect(ladder_cell(page, 1, "producer_byte_rate", "win")).to_contain_text("3 MiB/s")

    # 5. The audit entry.
    page.get_by_role("link", name="Audit log").click()
    settle(page)
    expect(page.get_by_text("1 of 1 changes")).to_be_visible()
    shot(page, "audit.png")
    (record,) = AuditLog(tmp_path / "audit.jsonl").read()
    assert (record.actor, record.entity_text, record.before, record.after) == (
        "jdoe", "{user=alice, client-id=checkout-api}", {"producer_byte_rate": 8 * MiB},
        {"producer_byte_rate": 3 * MiB})
    assert record.cluster["kind"] == kind


def test_unreachable_cluster_banner(page, tmp_path):
    """A cluster that does not answer: a clear banner with Retry, and the app still works."""
    port = _free_port()  # nothing listens there
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUOTA_")}
    env.update(QUOTA_BOOTSTRAP_SERVERS=f"127.0.0.1:{_free_port()}", QUOTA_KAFKA_TIMEOUT="2",
               QUOTA_AUDIT_LOG=str(tmp_path / "audit.jsonl"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.address", "127.0.0.1",
         "--server.port", str(port), "--server.headless", "true"],
        cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).close()
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.3)
        page.goto(url)
        expect(page.get_by_text("Cannot read quotas from Kafka cluster (environment)")).to_be_visible()
        expect(page.get_by_role("button", name="Retry")).to_be_visible()
        settle(page)
        shot(page, "unreachable.png")
        page.get_by_role("button", name="Retry").click()
        settle(page)
        expect(page.get_by_text("Cannot read quotas from Kafka cluster (environment)")).to_be_visible()
        page.get_by_role("link", name="Audit log").click()
        settle(page)
        expect(page.get_by_text("No changes have been applied from this console yet.")).to_be_visible()
    finally:
        stop_process_group(proc)


def test_deep_link_as_the_first_request_to_a_fresh_server(page, app_url):
    # A fresh server's first request opens a page other than the default: Streamlit runs
    # pages/browse.py on its own, and the page hands over to app.py's navigation (public API).
    page.goto(f"{app_url}/browse")
    settle(page)
    expect(page.get_by_role("heading", name="Browse quotas")).to_be_visible()
    nav = page.get_by_test_id("stSidebarNav")
    expect(nav).to_contain_text("Resolve & explain")
    expect(nav).to_contain_text("Audit log")
    expect(page.get_by_test_id("stSidebar")).to_contain_text("13 quota entries")
    assert page.url.rstrip("/").endswith("/browse")
    shot(page, "deep-link-browse.png")


def _over_quota_load(bootstrap: str, seconds: float) -> threading.Thread:
    """An unauthenticated librdkafka producer at ~2 MiB/s: over the 1 MiB/s that the demo's
    {user=<default>} gives user ANONYMOUS (level 6)."""
    from confluent_kafka import Producer

    def run() -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "client.id": "browser-load",
                             "linger.ms": 5})
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            for _ in range(20):
                try:
                    producer.produce("browser-load", b"x" * 10240)
                except BufferError:
                    break
            producer.poll(0.1)
        producer.flush(5)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_throttled_now_and_the_live_resolve_panel(page, app_url, backend_env):
    settings, kind = backend_env
    if kind != "kafka":
        pytest.skip("live throttling needs the real broker's metrics")
    load = _over_quota_load(settings["QUOTA_BOOTSTRAP_SERVERS"], seconds=40)
    time.sleep(12)  # past the broker's 10 s rate window
    page.goto(f"{app_url}/throttled")
    settle(page)
    main = page.get_by_test_id("stMain")
    expect(main.get_by_role("heading", name="Throttled now")).to_be_visible()
    table = page.get_by_test_id("stDataFrame").first
    expect(table).to_contain_text("ANONYMOUS", timeout=20_000)
    expect(table).to_contain_text("user=⟨default⟩")
    expect(page.locator(".js-plotly-plot").first).to_be_visible()
    expect(main).to_contain_text("Use of quota per bucket")
    shot(page, "throttled-now.png")

    page.goto(f"{app_url}/?user=ANONYMOUS&client_id=browser-load")
    settle(page)
    expect(main.get_by_text("Live: what the brokers measure")).to_be_visible()
    expect(main.get_by_text("The client ids of user 'ANONYMOUS' share 1 MiB/s, set for "
                            "{user=<default>} (level 6)")).to_be_visible(timeout=20_000)
    expect(main.get_by_text("producer_byte_rate: rate vs quota")).to_be_visible()
    shot(page, "resolve-live.png")
    load.join(60)
