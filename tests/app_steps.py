"""The dashboard tests' shared step: the app in Streamlit's AppTest, optionally on a page."""
from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest
from streamlit.testing.v1.element_tree import AlertBase, Markdown

from ui.text import unmd

from tests import ROOT

APP = ROOT / "app.py"


def run_app(page: str | None = None, *, operator: str | None = None, query: dict | None = None,
            secrets: dict | None = None, user: dict | None = None) -> AppTest:
    """The app run once (then switched to ``page``), with no exception on the way. ``user``
    is the signed-in user's claims (``st.user``), left as AppTest's own when None."""
    at = AppTest.from_file(str(APP), default_timeout=60)
    # Secrets given here replace any .streamlit/secrets.toml of the machine running the tests.
    at.secrets.update(secrets or {"_tests": "isolated"})
    if user is not None:
        at.user = dict(user)
    if operator:
        at.session_state["operator_name"] = operator
    if query:
        at.query_params.update(query)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    if page:
        at.switch_page(page).run()
        assert not at.exception, [e.value for e in at.exception]
    return at


def table_rows(table) -> list[dict]:
    """An ``st.table``'s rows as people read them: its cells and column labels went through
    ``ui.text.md_frame`` (st.table renders markdown), so the escapes come off here."""
    def shown(value):
        return unmd(value) if isinstance(value, str) else value

    return [{shown(k): shown(v) for k, v in row.items()}
            for row in table.value.to_dict("records")]


def texts(elements) -> list[str]:
    """What each element shows: markdown (alerts, captions) as read, without the escapes that
    ``ui.text.md`` puts around names."""
    return [unmd(e.value) if isinstance(e, (Markdown, AlertBase)) else e.value
            for e in elements]
