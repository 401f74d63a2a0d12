"""Steps the browser tests share: wait for Streamlit to finish a run, type into a field."""
from __future__ import annotations

from playwright.sync_api import expect


def settle(page) -> None:
    """Wait until Streamlit has finished running the script."""
    page.wait_for_timeout(300)
    expect(page.get_by_test_id("stStatusWidget")).to_have_count(0, timeout=30_000)
    page.wait_for_timeout(200)


def type_into(page, label: str, text: str) -> None:
    box = page.get_by_label(label, exact=True)
    box.fill(text)
    box.press("Enter")
    settle(page)
