"""The dashboard's pages, defined once: ``app.py`` navigates with them, and a page that
Streamlit ran on its own (see :func:`ui.session.context`) hands over to them."""
from __future__ import annotations

import streamlit as st

from .settings import AccessPolicy

__all__ = ["app_pages"]


def app_pages(policy: AccessPolicy) -> list:
    """The ``st.Page`` list, in menu order; Edit only where editing is enabled. Resolve is
    the default (``/?user=…&client_id=…`` links answer a question); Throttled now comes first
    in the menu, the page an operator on call opens."""
    pages = [
        st.Page("pages/throttled.py", title="Throttled now", icon=":material/speed:"),
        st.Page("pages/resolve.py", title="Resolve & explain", icon=":material/troubleshoot:",
                default=True),
        st.Page("pages/browse.py", title="Browse quotas", icon=":material/table_view:"),
        st.Page("pages/history.py", title="History", icon=":material/monitoring:"),
    ]
    if policy.editing_enabled:
        pages.append(st.Page("pages/edit.py", title="Edit quotas", icon=":material/edit:"))
        pages.append(st.Page("pages/plan.py", title="Plan from a file",
                             icon=":material/difference:"))
    pages.append(st.Page("pages/audit.py", title="Audit log", icon=":material/history:"))
    return pages
