"""Quota console: the Streamlit dashboard (``make run``, or ``streamlit run app.py``).

The entry script only assembles: page config, the connection sidebar (every page), the
connection banner, and the navigation. The pages live in ``pages/``; their logic is in
``quota_core`` and their rendering helpers in ``ui``.
"""
import streamlit as st

from ui.session import connection_banner, start_run

st.set_page_config(page_title="Quota console", page_icon=":material/speed:", layout="wide")

ctx = start_run()
pages = [
    st.Page("pages/resolve.py", title="Resolve & explain", icon=":material/troubleshoot:",
            default=True),
    st.Page("pages/browse.py", title="Browse quotas", icon=":material/table_view:"),
]
if ctx.policy.editing_enabled:
    pages.append(st.Page("pages/edit.py", title="Edit quotas", icon=":material/edit:"))
pages.append(st.Page("pages/audit.py", title="Audit log", icon=":material/history:"))

page = st.navigation(pages, position="sidebar")
connection_banner(ctx)
page.run()
