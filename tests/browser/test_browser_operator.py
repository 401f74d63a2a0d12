"""The dashboard as a new operator meets it (issue 7, items 7–11), in the real browser.

Same app and fixtures as tests/browser/test_browser.py; screenshots land in artifacts/screenshots/.
"""
from __future__ import annotations

import pytest

from tests.browser.test_browser import (app_url, backend_env, choose, expect, page,  # noqa: F401
                                settle, shot, type_into)

pytestmark = pytest.mark.browser


def open_page(page, url: str, heading: str) -> None:  # noqa: F811
    """Go to ``url`` and wait until the page's title shows and Streamlit has settled."""
    page.goto(url)
    expect(page.get_by_test_id("stMain").get_by_role("heading", name=heading)) \
        .to_be_visible(timeout=60_000)
    settle(page)


def test_edit_shows_every_error_and_a_delete_with_its_fallback(page, app_url):  # noqa: F811
    open_page(page, f"{app_url}/edit", "Edit quotas")
    type_into(page, "Your name (recorded in the audit log)", "jdoe")
    type_into(page, "user name", "alice")
    type_into(page, "producer_byte_rate", "-5")
    type_into(page, "consumer_byte_rate", "abc")
    type_into(page, "request_percentage", "1e400")
    main = page.get_by_test_id("stMain")
    expect(main.get_by_text("-5 is not allowed", exact=False)).to_be_visible()
    expect(main.get_by_text("'abc'", exact=False).first).to_be_visible()
    expect(main.get_by_test_id("stAlertContentError")).to_have_count(3)
    assert "= -5" not in main.inner_text() and "Infinity %" not in main.inner_text()
    shot(page, "edit-every-error.png")

    # A delete reads as a delete, with what alice's clients fall back to.
    type_into(page, "producer_byte_rate", "")
    type_into(page, "consumer_byte_rate", "4MiB")
    type_into(page, "request_percentage", "50")
    expect(main.get_by_text("will be deleted (now 2 MiB/s); its clients fall back to 1 MiB/s "
                            "from {user=<default>} (level 6)")).to_be_visible()
    page.get_by_role("button", name="Preview").click()
    settle(page)
    expect(main.get_by_text("The cluster accepts this change")).to_be_visible()
    # The diff table's cells are drawn on a canvas; their text is checked exactly in
    # tests/pages/test_app.py::test_edit_a_delete_says_what_clients_fall_back_to.
    shot(page, "edit-delete-preview.png")


def test_names_as_people_wrote_them(page, app_url):  # noqa: F811
    open_page(page, f"{app_url}/browse", "Browse quotas")
    main = page.get_by_test_id("stMain")
    table = main.get_by_test_id("stDataFrame").first
    expect(table).to_contain_text("CN=etl,OU=data", timeout=20_000)
    expect(table).to_contain_text("<default>")   # the user literally named so
    expect(table).to_contain_text("⟨default⟩")   # the default entity, a different label
    open_page(page, f"{app_url}/?user=CN%3Detl%2COU%3Ddata&client_id=etl-loader",
              "Resolve & explain")
    expect(main).to_contain_text('set for {user="CN=etl,OU=data"} (ladder level 3)')
    text = main.inner_text()
    assert "%3D" not in text and "%3C" not in text and "%20" not in text
    shot(page, "resolve-raw-names.png")


def test_shadowed_and_dead_entries(page, app_url):  # noqa: F811
    open_page(page, f"{app_url}/?user=dave&client_id=mobile-gateway", "Resolve & explain")
    main = page.get_by_test_id("stMain")
    expect(main.get_by_text("Set back for this client")).to_be_visible()
    expect(main).to_contain_text("{client-id=mobile-gateway} 512 KiB/s never applies to dave: "
                                 "{user=<default>} at level 6 sets producer_byte_rate first "
                                 "(1 MiB/s), so dave gets more than this entry's cap.")
    shot(page, "resolve-shadowed.png")
    open_page(page, f"{app_url}/browse?never_applies=1", "Browse quotas")
    # {client-id=mobile-gateway} and {client-id=<default>}: {user=<default>} sets their keys.
    expect(main.get_by_text("2 of 13 entries", exact=False)).to_be_visible()
    grid = main.get_by_test_id("stDataFrame").first
    expect(grid).to_contain_text("mobile-gateway", timeout=20_000)
    expect(grid).to_contain_text("⚠")
    shot(page, "browse-never-applies.png")


def test_browse_fits_and_shares_its_view(page, app_url):  # noqa: F811
    page.set_viewport_size({"width": 1400, "height": 1200})
    open_page(page, f"{app_url}/browse", "Browse quotas")
    grid = page.get_by_test_id("stDataFrame").first
    # The grid renders only the columns in view: every key's column must be among them.
    expect(grid).to_contain_text("connections/s", timeout=20_000)
    headers = [h.strip() for h in grid.locator("[role=columnheader]").all_inner_texts()]
    for header in ("producer B/s", "consumer B/s", "request %", "mutations/s",
                   "connections/s", "⚠"):
        assert header in headers, (header, headers[4:])
    # Every column fits: the grid does not scroll sideways at 1,400 px.
    scroller = grid.locator(".dvn-scroller").first
    widths = scroller.evaluate("e => [e.scrollWidth, e.clientWidth]")
    assert widths[0] <= widths[1] + 1, f"the table scrolls sideways: {widths}"
    type_into(page, "Search names", "alice")
    assert "q=alice" in page.url
    shared = page.url
    open_page(page, shared, "Browse quotas")  # the same view from the link alone
    expect(page.get_by_test_id("stMain").get_by_text("3 of 13 entries", exact=False)) \
        .to_be_visible()
    shot(page, "browse-1400.png")


def test_resolve_checks_input_and_opens_on_an_example(page, app_url):  # noqa: F811
    open_page(page, app_url, "Resolve & explain")
    main = page.get_by_test_id("stMain")
    expect(page.get_by_label("User principal", exact=True)).to_have_value("alice")
    expect(page.get_by_label("Client id", exact=True)).to_have_value("checkout-api")
    type_into(page, "User principal", "User:alice")
    expect(main.get_by_text("Did you mean 'alice'?", exact=False)).to_be_visible()
    assert "--client-id" not in main.inner_text()
    shot(page, "resolve-did-you-mean.png")
    page.get_by_text("IP address", exact=True).click()
    settle(page)
    type_into(page, "IP address", "not-an-ip")
    expect(main.get_by_text("'not-an-ip' is not an IP address", exact=False)).to_be_visible()
