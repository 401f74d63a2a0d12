"""The Quota health page in Chromium on the demo: ``make run``'s demo quotas (a sandbox) and its
48 h demo history; a screenshot (artifacts/screenshots/health.png), and a fix followed to Plan
in the real browser (which stays on Plan, unlike AppTest)."""
from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from localkafka.demo import demo_quotas
from pipeline.demo_history import HistorySpec, generate, write_history
from quota_core.backends.sandbox import SandboxBackend
from tests.browser.test_browser import page, serve_app, shot  # noqa: F401 - the fixture
from tests.browser_steps import settle, type_into

pytestmark = pytest.mark.browser


@pytest.fixture
def demo_url(tmp_path):
    store = tmp_path / "demo.sqlite"
    with SandboxBackend(store) as backend:
        backend.replace_all(demo_quotas())
    write_history(generate(HistorySpec(hours=48, clients=12)), tmp_path / "history")
    yield from serve_app({"QUOTA_SANDBOX": str(store), "QUOTA_HISTORY_DIR": str(tmp_path / "history"),
                          "QUOTA_LINT_PROTECTED": "svc-*,client-id:legacy-app"}, tmp_path)


def test_health_page_on_the_demo(demo_url, page):  # noqa: F811 - the fixture
    page.goto(f"{demo_url}/health")
    settle(page)
    page.get_by_role("heading", name="Quota health").wait_for()
    page.get_by_text("Which rules ran, on what data").wait_for()   # the page's last element
    body = page.locator("section.main, [data-testid='stMain']").first.inner_text()
    assert "Errors (" in body and "Warnings (" in body
    assert "'svc-reports'" in body or "'legacy-app'" in body
    assert "<default>" in body  # the default, shown as text
    page.get_by_role("link", name="Open in Plan").first.wait_for()
    page.wait_for_timeout(1500)  # the last deltas painted
    shot(page, "health.png")
    type_into(page, "Your name (recorded in the audit log)", "jdoe")  # local mode: who edits
    page.get_by_role("link", name="Open in Plan").first.click()
    settle(page)
    page.get_by_role("heading", name="Plan from a file").wait_for()
    # the heading paints before the box is filled: wait for the value (a loaded machine
    # took longer than one look; Playwright's expect polls)
    expect(page.get_by_label("…or paste it here")).to_have_value(
        re.compile("quota-console/1"), timeout=20_000)
    assert "/plan?fix=" in page.url
    shot(page, "health-plan.png")
