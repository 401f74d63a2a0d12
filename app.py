"""Quota console: the Streamlit dashboard (``make run``, or ``streamlit run app.py``).

The entry script only assembles: page config, the connection sidebar (every page), the
connection banner, and the navigation. The pages live in ``pages/``; their logic is in
``quota_core`` and their rendering helpers in ``ui``.
"""
import streamlit as st

from ui.nav import app_pages
from ui.context import start_run
from ui.sidebar import connection_banner

st.set_page_config(page_title="Quota console", page_icon=":material/speed:", layout="wide")

ctx = start_run()
page = st.navigation(app_pages(ctx.policy), position="sidebar")
connection_banner(ctx)
page.run()
