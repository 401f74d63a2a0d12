"""What a run of the app knows about its connection: :class:`PageContext` (the connection
spec, backend, described snapshot, access policy and identity of this run), kept in the
session by :func:`remember`, and what fragments read of it without the page.

:mod:`ui.sidebar` builds the context and :mod:`ui.context` hands it to pages; both import it
from here, so neither imports the other's caller (no import circle).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import streamlit as st

from quota_core.backends.base import QuotaBackend
from quota_core.changes.audit import AuditLog, cluster_fields, store_fields
from quota_core.errors import QuotaError

from ui.identity import Identity, may_edit
from ui.registry import Snapshot
from ui.settings import AccessPolicy, ConnectionSpec

__all__ = ["PageContext", "secrets_dict", "connected_cluster", "fleet_cluster", "remember",
           "CTX_KEY"]


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
    #: The configured fleet (quota_core.domain.fleet.Fleet), None without a fleet file.
    fleet: Any = None
    #: The fleet's cluster this run shows (quota_core.domain.fleet.ClusterConfig), or None.
    cluster: Any = None

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
                return self._named(store_fields(self.backend,
                                                self.spec.label if self.spec else None))
            except QuotaError:  # unreadable now: the write itself will say why
                pass
        return self.store()

    def _named(self, fields: dict[str, Any]) -> dict[str, Any]:
        """With the fleet's name for the cluster (``"name"``), when it has one."""
        return {**fields, "name": self.cluster.name} if self.cluster is not None else fields

    def store(self) -> dict[str, Any]:
        """The store shown, as an audit record names it, from the described snapshot (no
        request): what "quota changed" marks and the Audit page match records against
        (quota_core.changes.audit.same_store)."""
        label = self.spec.label if self.spec else None
        if self.snapshot is not None:
            return self._named(cluster_fields(self.snapshot.info, label))
        return {"kind": self.spec.kind if self.spec else None, "label": label,
                "location": self.spec.location if self.spec else None, "cluster_id": None}


def secrets_dict() -> dict[str, Any]:
    """``st.secrets`` as a plain dict; {} when there is no secrets file."""
    try:
        return st.secrets.to_dict()
    except Exception:  # noqa: BLE001 - no secrets.toml (or a broken one) means no secrets
        return {}


#: Where this session keeps the context of its last run.
CTX_KEY = "_quota_page_context"


def connected_cluster():
    """The connected cluster's :class:`~quota_core.domain.entities.ClusterInfo` as this session last
    described it (its brokers), or None; for fragments that rerun without the page."""
    ctx = st.session_state.get(CTX_KEY)
    return ctx.snapshot.info if ctx is not None and ctx.snapshot is not None else None


def fleet_cluster():
    """The fleet's cluster this session last showed (quota_core.domain.fleet.ClusterConfig), or None
    without a fleet file: whose metrics endpoints the live feed reads."""
    ctx = st.session_state.get(CTX_KEY)
    return ctx.cluster if ctx is not None else None


def remember(ctx: PageContext) -> None:
    """Store this run's context, for :func:`context` to return."""
    st.session_state[CTX_KEY] = ctx
