"""Quota health: the quotas that will hurt someone, before they do (``kafka-client-quotas
lint`` on the connected quota set, its brokers' settings and the configured usage history).

Findings grouped by severity, each with its evidence and its fix, which opens Plan (or Edit,
for one entry) filled in. The rules are quota_core.lint's one table; this page only renders.
"""
import streamlit as st

from ui.context import context, secrets_dict
from ui.health import lint_report, render_report

ctx = context()
st.title("Quota health")
st.caption("Defaults over the cluster's own clients, entries that never bind, quotas too small "
           "for one batch, and with a usage history the stale, churning and chronically "
           "throttled ones: the same rules as `kafka-client-quotas lint`.")
if not ctx.connected:
    st.info("Connect to a cluster or a sandbox (sidebar) to check its quotas.",
            icon=":material/link_off:")
    st.stop()
report, _, history_problem = lint_report(ctx, secrets_dict())
render_report(report, ctx.policy.editing_enabled, history_problem)
