"""Drift: two clusters of the fleet side by side, every (entity, key) whose value differs
(quota_core.planning.drift), and **Plan this promotion**, which opens Plan with the plan that makes
the second cluster hold the first one's quota set (bound to the second, as every plan is).

The address holds the pair (``?a=staging&b=prod``), so a link opens the same comparison.
"""
import os

import pandas as pd
import streamlit as st

from quota_core.planning import quota_drift
from quota_core.domain import format_quota
from ui.context import context, secrets_dict
from ui.fleet import CLUSTER_PARAM, read_only_refusal
from ui.fleet_page import PROMOTE_PARAM, fleet_timeout, page_fleet, snapshots_of
from ui.text import code, md, md_frame

ctx = context()
st.title("Drift between clusters")
env, secrets = dict(os.environ), secrets_dict()
fleet = page_fleet(ctx, env, secrets)
names = fleet.names()
if len(names) < 2:
    st.info("Drift compares two clusters: the fleet has "
            f"{len(names)}. Configure more in a fleet file (QUOTA_CONFIG) or in "
            "[clusters.NAME] tables of .streamlit/secrets.toml.", icon=":material/hub:")
    st.stop()
st.caption("Every entry and key whose value differs between two clusters, including those "
           "one side does not have. **Plan this promotion** makes the second hold exactly the "
           "first one's quota set.")

# -- the pair: from the address, else this session's, else (another, the one picked) -------
qp, ss = st.query_params, st.session_state
for side in ("a", "b"):
    asked = qp.get(side)
    if asked is not None and asked not in names:
        st.error(md(f"The address names cluster {asked!r} (?{side}={asked}), which is not in "
                    f"the fleet. Known clusters: {', '.join(names)}."), icon=":material/error:")
        st.stop()
    if asked is not None:
        ss[f"dr_{side}"] = asked
here = ctx.cluster.name if ctx.cluster is not None else names[-1]
if ss.get("dr_b") not in names:
    ss["dr_b"] = here
if ss.get("dr_a") not in names:
    ss["dr_a"] = next(n for n in names if n != ss["dr_b"])
labels = {c.name: c.display_name for c in fleet}


def _follow(side: str) -> None:
    """A pick changes the address too (the address wins on the next run)."""
    qp[side] = ss[f"dr_{side}"]


c1, c2 = st.columns(2)
a = c1.selectbox("From (the tested set)", names, key="dr_a", format_func=labels.get,
                 on_change=_follow, args=("a",))
b = c2.selectbox("To (the cluster to change)", names, key="dr_b", format_func=labels.get,
                 on_change=_follow, args=("b",))
if qp.get("a") != a or qp.get("b") != b:
    qp["a"], qp["b"] = a, b
if a == b:
    st.info("Pick two different clusters.", icon=":material/compare_arrows:")
    st.stop()

# -- both read at once, each bounded ------------------------------------------------------------
sets, problems = {}, []
for cluster, snap, error in snapshots_of([fleet.clusters[a], fleet.clusters[b]], env, secrets,
                                         fleet_timeout(env, secrets)):
    if error is not None:
        problems.append(f"Cluster {cluster.name!r} cannot be read: {error}")
    else:
        sets[cluster.name] = snap
for problem in problems:
    st.error(md(problem), icon=":material/cloud_off:")
if problems:
    st.stop()

left, right = st.columns(2)
for col, name in ((left, a), (right, b)):
    snap, cluster = sets[name], fleet.clusters[name]
    brokers = snap.info.broker_count
    col.metric(md(labels[name]), f"{len(snap.quotas):,} entries",
               help=md(f"{cluster.location}; {brokers if brokers is not None else '?'} brokers"))
rows = quota_drift(a, sets[a].quotas, b, sets[b].quotas)
if not rows:
    st.success(f"No drift: {md(labels[b])} holds the same quota set as {md(labels[a])}.",
               icon=":material/task_alt:")
    st.stop()


def _cell(key, value):
    return "not set" if value is None else format_quota(key, value)


def _what(values):
    if values[a] is None:
        return f"only on {b}"
    if values[b] is None:
        return f"only on {a}"
    return "differs"


st.subheader(f"{len(rows):,} difference{'s' if len(rows) != 1 else ''}")
shown = [{"entity": r.entity.display(), "key": r.key, a: _cell(r.key, r.values[a]),
          b: _cell(r.key, r.values[b]), "": _what(r.values)} for r in rows[:5000]]
if len(shown) <= 200:  # a static table reads at a glance (md_frame: its text stays text)
    st.table(md_frame(pd.DataFrame(shown)).style.hide(axis="index"))
else:
    st.dataframe(shown, hide_index=True, use_container_width=True, key="dr_rows")
if len(rows) > 5000:
    st.caption(f"The first 5,000 of {len(rows):,} shown.")

# -- promotion ---------------------------------------------------------------------------------
target = fleet.clusters[b]
if target.read_only:
    st.error(md(read_only_refusal(b)), icon=":material/lock:")
elif not ctx.policy.editing_enabled:
    st.info("This console is read-only: a promotion is planned with "
            f"`kafka-client-quotas plan --from-cluster {a} --cluster {b}`.")
elif st.button("Plan this promotion", key="dr_promote", type="primary",
               icon=":material/difference:",
               help=f"Opens Plan for {b} with the plan whose apply makes it hold {a}'s quota "
                    f"set (entries {a} does not have are removed)."):
    st.switch_page("pages/plan.py", query_params={CLUSTER_PARAM: b, PROMOTE_PARAM: a})
st.caption(f"The same from a shell: {code(f'kafka-client-quotas diff --cluster {a} --against {b}')}")
