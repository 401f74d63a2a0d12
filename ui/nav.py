"""The dashboard's pages, defined once: ``app.py`` navigates with them, and a page that
Streamlit ran on its own (see :func:`ui.context.context`) hands over to them."""
from __future__ import annotations

import streamlit as st

from ui.settings import AccessPolicy

__all__ = ["app_pages", "RESOLVE", "FLEET"]

#: Resolve's script: its address is ``/resolve``.
RESOLVE = "pages/resolve.py"
#: The Fleet page's script: its address is ``/fleet``.
FLEET = "pages/fleet.py"


def _to_resolve() -> None:
    """``/``: Resolve's old address. A link such as ``/?user=alice&client_id=app`` goes on to
    ``/resolve`` with its query, so links shared before pages had names still answer."""
    query = [(k, v) for k in st.query_params for v in st.query_params.get_all(k)]
    st.switch_page(RESOLVE, query_params=query)


def app_pages(policy: AccessPolicy) -> list:
    """The ``st.Page`` list, in menu order; Edit only where editing is enabled. Every page
    has a name in the address (``/resolve``, ``/throttled``, …); the root ``/`` opens
    Resolve. Throttled now comes first in the menu, the page an operator on call opens."""
    pages = [
        st.Page(_to_resolve, title="Quota console", url_path="start", default=True,
                visibility="hidden"),
        st.Page("pages/throttled.py", title="Throttled now", icon=":material/speed:"),
        st.Page(RESOLVE, title="Resolve & explain", icon=":material/troubleshoot:",
                url_path="resolve"),
        st.Page("pages/browse.py", title="Browse quotas", icon=":material/table_view:"),
        st.Page("pages/history.py", title="History", icon=":material/monitoring:"),
        st.Page("pages/health.py", title="Quota health", icon=":material/health_and_safety:"),
        st.Page(FLEET, title="Fleet", icon=":material/hub:", url_path="fleet"),
        st.Page("pages/drift.py", title="Drift between clusters",
                icon=":material/compare_arrows:", url_path="drift"),
    ]
    if policy.editing_enabled:
        pages.append(st.Page("pages/edit.py", title="Edit quotas", icon=":material/edit:"))
        pages.append(st.Page("pages/plan.py", title="Plan from a file",
                             icon=":material/difference:"))
        pages.append(st.Page("pages/telemetry.py", title="Client telemetry",
                             icon=":material/sensors:", url_path="telemetry"))
    pages.append(st.Page("pages/audit.py", title="Audit log", icon=":material/history:"))
    return pages
