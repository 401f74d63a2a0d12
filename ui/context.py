"""The page context: what a page reads about its connection (ui's job for every page).

:class:`PageContext` is the connection spec, backend, described snapshot, access policy and
identity of this run. ``app.py`` calls :func:`start_run` (it draws the sidebar, see
:mod:`ui.sidebar`); a page calls :func:`context` to read what that run built.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import streamlit as st

from quota_core.backends.base import QuotaBackend
from quota_core.changes.audit import AuditLog, cluster_fields, store_fields
from quota_core.errors import QuotaError

from .apptest import under_apptest
from .identity import Identity, may_edit
from .registry import Snapshot
from .settings import AccessPolicy, ConnectionSpec, access_policy

__all__ = ["PageContext", "context", "start_run", "secrets_dict"]


@dataclass
class PageContext:
    spec: ConnectionSpec | None
    backend: QuotaBackend | None
    snapshot: Snapshot | None
    error: str | None
    policy: AccessPolicy
    #: The verified (or, in local mode, typed) name: what the audit log records.
    operator: str | None
    identity: Identity
    audit: AuditLog
    all_specs: list[ConnectionSpec] = field(default_factory=list)

    @property
    def connected(self) -> bool:
        return self.snapshot is not None

    def may_edit(self) -> tuple[bool, str]:
        return may_edit(self.policy, self.identity)

    def cluster_fields(self) -> dict[str, Any]:
        """What the audit log records about the store a page writes to: its identity read
        now (quota_core.changes.audit.store_fields), else what :meth:`store` knows."""
        if self.backend is not None:
            try:
                return store_fields(self.backend, self.spec.label if self.spec else None)
            except QuotaError:  # unreadable now: the write itself will say why
                pass
        return self.store()

    def store(self) -> dict[str, Any]:
        """The store shown, as an audit record names it, from the described snapshot (no
        request): what "quota changed" marks and the Audit page match records against
        (quota_core.changes.audit.same_store)."""
        label = self.spec.label if self.spec else None
        if self.snapshot is not None:
            return cluster_fields(self.snapshot.info, label)
        return {"kind": self.spec.kind if self.spec else None, "label": label,
                "location": self.spec.location if self.spec else None, "cluster_id": None}


def secrets_dict() -> dict[str, Any]:
    """``st.secrets`` as a plain dict; {} when there is no secrets file."""
    try:
        return st.secrets.to_dict()
    except Exception:  # noqa: BLE001 - no secrets.toml (or a broken one) means no secrets
        return {}


_CTX_KEY = "_quota_page_context"
_FRESH_KEY = "_quota_page_context_fresh"


def connected_cluster():
    """The connected cluster's :class:`~quota_core.entities.ClusterInfo` as this session last
    described it (its brokers), or None; for fragments that rerun without the page."""
    ctx = st.session_state.get(_CTX_KEY)
    return ctx.snapshot.info if ctx is not None and ctx.snapshot is not None else None


def remember(ctx: PageContext) -> None:
    """Store this run's context, for :func:`context` to return."""
    st.session_state[_CTX_KEY] = ctx


def start_run() -> PageContext:
    """What ``app.py`` calls first on every run: the sidebar, then the page's context."""
    from .sidebar import sidebar  # it builds the PageContext defined here

    ctx = sidebar()
    st.session_state[_FRESH_KEY] = True
    return ctx


def _hand_over_to_app() -> None:
    """Switch Streamlit to ``st.navigation`` mode (the public call does it) and rerun, so the
    next run is ``app.py``'s, on the same URL and so the same page."""
    from .nav import app_pages

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
    if st.session_state.pop(_FRESH_KEY, False) and _CTX_KEY in st.session_state:
        return st.session_state[_CTX_KEY]
    if not under_apptest():
        _hand_over_to_app()
    try:
        st.set_page_config(page_title="Quota console", page_icon=":material/speed:",
                           layout="wide")
    except Exception:  # noqa: BLE001 - already set in this run
        pass
    from .sidebar import connection_banner, sidebar  # they build the PageContext defined here

    ctx = sidebar()
    connection_banner(ctx)
    return ctx
