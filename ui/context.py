"""The page context: what a page reads about its connection (ui's job for every page).

:class:`PageContext` (:mod:`ui.page_context`) is the connection spec, backend, described
snapshot, access policy and identity of this run. ``app.py`` calls :func:`start_run` (it draws
the sidebar, see :mod:`ui.sidebar`); a page calls :func:`context` to read what that run built.
"""
from __future__ import annotations

import os

import streamlit as st

from ui.apptest import under_apptest
from ui.page_context import CTX_KEY, PageContext, connected_cluster, secrets_dict
from ui.settings import access_policy
from ui.sidebar import connection_banner, sidebar

__all__ = ["PageContext", "context", "start_run", "secrets_dict", "connected_cluster"]

_FRESH_KEY = "_quota_page_context_fresh"


def start_run() -> PageContext:
    """What ``app.py`` calls first on every run: the sidebar, then the page's context."""
    ctx = sidebar()
    st.session_state[_FRESH_KEY] = True
    return ctx


def _hand_over_to_app() -> None:
    """Switch Streamlit to ``st.navigation`` mode (the public call does it) and rerun, so the
    next run is ``app.py``'s, on the same URL and so the same page."""
    from ui.nav import app_pages

    st.navigation(app_pages(access_policy(dict(os.environ), secrets_dict())), position="hidden")
    st.rerun()


def context() -> PageContext:
    """The context ``app.py`` built for this run.

    Streamlit sometimes runs a page file without the entry script: because a folder named
    ``pages/`` sits next to ``app.py``, a fresh server starts in Streamlit's old multipage
    mode, and stays there if its first request opens a page other than the default one
    (``AppTest`` does the same on every rerun). In a real session we hand over to
    ``app.py``'s navigation (public API only), so it draws the sidebar and the navigation;
    under AppTest the page builds the sidebar and banner itself.
    """
    if st.session_state.pop(_FRESH_KEY, False) and CTX_KEY in st.session_state:
        return st.session_state[CTX_KEY]
    if not under_apptest():
        _hand_over_to_app()
    try:
        st.set_page_config(page_title="Quota console", page_icon=":material/speed:",
                           layout="wide")
    except Exception:  # noqa: BLE001 - already set in this run
        pass
    ctx = sidebar()
    connection_banner(ctx)
    return ctx
