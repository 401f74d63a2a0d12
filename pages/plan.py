"""Plan: bring the cluster to a desired quota file (the export format, JSON or YAML).

Flow: upload or paste the file, Plan (the cluster is read fresh; the diff per entity and key,
the unmanaged entries and who gets a different effective quota are shown), tick the
confirmation, Apply. Apply is refused if the quota set changed in any way since the plan was
made; each entity is applied through the same workflow as the Edit page and the CLI
(guarded, read back, one audit record each).
"""

import streamlit as st

from quota_core.errors import ConcurrentChange, OutcomeUnknown, QuotaError
from quota_core.planning import change_kind, check_plan_cluster, make_plan, plan_impact, since_plan
from quota_core.backends.files import read_quota_upload
from quota_core.domain import format_quota, clients_moved, plural, verb
from quota_core.changes.workflow import apply_changes
from ui.live import feed
from ui.render import traffic_rows
from ui.spread import cluster_unread, preview_unread
from ui.context import context, secrets_dict
from ui.fleet_page import PROMOTE_PARAM, promotion_preview_notes, promotion_source, read_cluster_set
from ui.sidebar import editing_gate, may_apply
from ui.registry import registry
from ui.text import code, md

ctx = context()
st.title("Plan a promotion" if st.query_params.get(PROMOTE_PARAM) else "Plan from a file")
# A plan only reads: the editor's name is asked for where it is applied.
editing_gate(ctx, sign_in_key="sign_in_plan", to_read=True)
st.caption(("Compare another cluster's quota set" if st.query_params.get(PROMOTE_PARAM)
            else "Compare a desired quota set (an `--export` file, edited)") + " with "
           f"**{md(ctx.spec.label)}** ({code(ctx.spec.location)}); nothing is written until "
           f"you apply it" + (f" as **{md(ctx.operator)}**" if ctx.operator else ", under your name")
           + f", recorded in the audit log ({code(str(ctx.audit.path))}).")
backend = ctx.backend
ss = st.session_state
fix = st.query_params.get("fix")  # a fix from the Health page (ui.health.fix_links), once
if fix and ss.get("pl_fix_seen") != fix:
    ss["pl_text"], ss["pl_fix_seen"] = fix, fix

# -- the desired file (or, from the Drift page, another cluster's quota set) ------------------
promotion = promotion_source(ctx)
if promotion is not None:
    with st.container(border=True):
        st.markdown(f"**Promotion:** make **{md(ctx.cluster.display_name)}** "
                    f"({code(ctx.cluster.name)}) hold exactly the quota set of "
                    f"**{md(promotion.display_name)}** ({code(promotion.name)}), as read when "
                    f"you press Plan. Entries {md(promotion.name)} does not have are removed "
                    f"(prune), so the two sets are equal after the apply.")
    source, raw = f"cluster {promotion.name}", b""
    ss["pl_prune"] = True
else:
    with st.container(border=True):
        upload = st.file_uploader("Desired quota file (.yaml, .yml or .json)",
                                  type=["yaml", "yml", "json"], key="pl_upload")
        st.text_area("…or paste it here", key="pl_text", height=160,
                     placeholder="format: quota-console/1\nentries:\n- entity: {user: alice}\n"
                                 "  quotas: {producer_byte_rate: 2097152}")
        st.toggle("Prune: also remove entries the file does not have", key="pl_prune",
                  help="Off: entries the file does not mention are listed as unmanaged and "
                       "left as they are.")

    if upload is not None:
        source, raw = upload.name, upload.getvalue()
    else:
        source, raw = "pasted text", str(ss.get("pl_text") or "").encode("utf-8")
    if not raw.strip():
        st.info("Upload or paste a quota file: `kafka-client-quotas --export yaml` (or Browse's "
                "export) gives one to edit.")
        st.stop()
# The plan is bound to the cluster it was made on: another cluster picked since is another key.
key = (source, raw, bool(ss.get("pl_prune")), ctx.spec.location)

if st.button("Plan", key="pl_plan_btn", icon=":material/difference:"):
    ss.pop("pl_result", None)
    ss.pop("pl_conflict", None)
    try:
        desired = (read_cluster_set(promotion) if promotion is not None
                   else read_quota_upload(raw, source))  # as lint, plan and --import read a file
        current = backend.describe()
        plan = make_plan(current, desired, prune=bool(ss.get("pl_prune")),
                         source=source if promotion is not None else None)
        live, _ = feed(secrets_dict())
        frame = live.latest() if live is not None else None
        series = list(frame.series) if frame is not None else None
        ss["pl_plan"] = (key, plan, plan_impact(plan, series, ctx.snapshot.known_clients(),
                                                unread=cluster_unread(frame) if series else ()))
        ss["pl_cluster"] = backend.identity()
        ss["pl_notes"] = (promotion_preview_notes(promotion, ctx.cluster, backend)
                          if promotion is not None else [])
    except QuotaError as exc:
        for line in str(exc).splitlines():
            st.error(md(line), icon="✏️")
        ss.pop("pl_plan", None)

result = ss.get("pl_result")
if result is not None:
    with st.container(border=True):
        done = result
        if done.ok:
            st.success(f"Applied {plural(len(done.applied), 'entity change')} by "
                       f"{md(ctx.operator)}; {verb(len(done.applied), 'it is', 'each is')} in "
                       f"the audit log.", icon=":material/check_circle:")
        else:
            st.error(f"Applied {len(done.applied)}; {len(done.refused)} refused and not "
                     f"applied; {plural(len(done.conflicts), 'conflict')}: written, but the read-back "
                     f"shows another writer's values." + (
                         f" The audit log could not be written: {md(done.audit_error)}"
                         if done.audit_error else ""), icon=":material/block:")
        st.dataframe([{"entity": str(a.alteration.entity), "outcome": "applied",
                       "read back": "as written"} for a in done.applied]
                     + [{"entity": str(a.alteration.entity), "outcome": "conflict",
                         "read back": ", ".join(f"{k}={format_quota(k, v)}" for k, v in
                                                sorted(a.after.items())) or "no quotas"}
                        for a in done.conflicts]
                     + [{"entity": str(r.entity), "outcome": f"refused: {r.error}",
                         "read back": ""} for r in done.refused], hide_index=True)
        st.page_link("pages/audit.py", label="See it in the audit log", icon=":material/history:")

stored = ss.get("pl_plan")
if stored is None or stored[0] != key:
    st.caption("Plan reads the cluster fresh and shows what would change; nothing is written.")
    st.stop()
_, plan, impact = stored
for note in ss.get("pl_notes") or []:  # a promotion between clusters that differ
    st.warning(md(note), icon=":material/warning:")

# -- the plan ---------------------------------------------------------------------------------
st.subheader("Changes")
if not plan.changes:
    st.success("Nothing to change: the cluster already holds what the file says.",
               icon=":material/task_alt:")
else:
    st.markdown(f"**{plan.summary()}** against {len(plan.base):,} entries now "
                f"(`{plan.base_hash[:19]}…`).")
    st.dataframe([{"entity": str(c.entity), "entity change": c.action, "key": k.key,
                   "key change": change_kind(k), "before": format_quota(k.key, k.before)
                   if k.before is not None else "not set",
                   "after": format_quota(k.key, k.after) if k.after is not None else "not set"}
                  for c in plan.changes for k in c.keys], hide_index=True, key="pl_diff")
if plan.unmanaged:
    with st.expander(f"Unmanaged: {len(plan.unmanaged):,} entries not in the file "
                     f"({'removed: prune is on' if plan.prune else 'left as they are'})"):
        st.dataframe([{"entity": str(e), "quotas": ", ".join(
            f"{k}={format_quota(k, v)}" for k, v in sorted(q.items()))}
            for e, q in list(plan.unmanaged.items())[:2000]], hide_index=True)
if plan.changes:
    moved = {(c.user, c.client_id) for c in impact.clients}
    if impact.clients:
        st.markdown(clients_moved(len(moved), impact.clients_checked))
        st.dataframe([{"client": c.label, "key": c.key, "before → after": c.describe()}
                      for c in impact.clients[:2000]], hide_index=True, key="pl_impact")
    else:
        st.markdown(f"No known client changes its effective quota "
                    f"({impact.clients_checked:,} checked).")
    if impact.ips:
        st.dataframe([{"ip": c.label, "key": c.key, "before → after": c.describe()}
                      for c in impact.ips], hide_index=True)
    if impact.traffic:
        st.markdown("**At today's rates** (live metrics):")
        st.dataframe(traffic_rows(impact.traffic), hide_index=True)
        preview_unread()  # brokers not read: named, never judged (quota_core.throttling.live)

if not plan.changes:
    st.stop()

conflict = ss.get("pl_conflict")
if conflict is not None:
    with st.container(border=True):
        st.error(md(conflict["message"]), icon=":material/sync_problem:")
        st.dataframe(conflict["rows"], hide_index=True)
    st.stop()

if not may_apply(ctx, sign_in_key="sign_in_plan"):
    st.stop()
confirm = st.checkbox(f"I have checked the plan: apply it to {md(ctx.spec.label)}", key="pl_confirm")
if st.button("Apply", key="pl_apply", type="primary", icon=":material/done_all:",
             disabled=not confirm):
    class AlreadyApplied(Exception):
        """The cluster already holds the set this plan leads to."""

    def unchanged_since_plan(backend) -> None:  # run under the cluster's write lease
        since = since_plan(plan, backend.describe())
        if since.state == "applied":
            raise AlreadyApplied()
        if since.state == "moved":
            drift = list(since.drift)
            raise ConcurrentChange(
                f"The quota set changed since this plan was made ({len(drift)} "
                f"difference{'' if len(drift) == 1 else 's'}): nothing was applied. Press "
                f"Plan again, check the new plan, and apply that.", drift=drift)

    try:
        check_plan_cluster({"cluster": {"cluster_id": ss.get("pl_cluster")}},
                           backend.identity(), ctx.spec.location, "This plan")
        done = apply_changes(backend, plan.alterations, plan.base, actor=ctx.operator,
                             cluster=ctx.cluster_fields(), audit=ctx.audit, action="apply",
                             extra={"via": "dashboard plan", "source": plan.source,
                                    **({"promoted_from": promotion.name}
                                       if promotion is not None else {})},
                             precheck=unchanged_since_plan)
    except AlreadyApplied:
        ss.pop("pl_plan", None)
        ss.pop("pl_confirm", None)
        registry().invalidate(ctx.spec)
        st.success("Nothing to apply: the cluster already holds the quota set this plan leads "
                   "to (it was applied already).", icon=":material/check_circle:")
        st.stop()
    except ConcurrentChange as exc:
        ss["pl_conflict"] = {"message": str(exc), "rows": [
            {"entity": str(e), "key": c.key, "when planned": format_quota(c.key, c.before),
             "now": format_quota(c.key, c.after)}
            for e, c in exc.context.get("drift", [])[:2000]]}
        st.rerun()
    except OutcomeUnknown as exc:
        registry().invalidate(ctx.spec)
        st.warning(md(f"Outcome unknown: {exc} Press Plan again to see what the cluster "
                      f"holds now."), icon=":material/help:")
        st.stop()
    except QuotaError as exc:
        st.error(md(f"Not applied: {exc}"), icon=":material/block:")
        st.stop()
    ss["pl_result"] = done
    ss.pop("pl_plan", None)
    ss.pop("pl_confirm", None)
    registry().invalidate(ctx.spec)
    st.rerun()
