"""Edit: set, change or remove quotas of one entity — validated, previewed, confirmed, audited.

Flow: pick the entity (its current quotas are read fresh from the cluster: "loaded"), edit
the values (errors appear next to each field before anything is sent), Preview (the cluster
validates without writing; the diff and the known clients whose quota changes are shown),
tick the confirmation, Apply. Apply is refused if the entity changed since it was loaded.
"""

import json

import streamlit as st

from quota_core import Entity, alteration_problems, diff_alteration, format_quota, parse_quota_value
from quota_core.domain import CLIENT_ID, DEFAULT_TEXT, IP, USER, entity_from_json, entity_to_json
from quota_core.errors import (ConcurrentChange, EntityError, OutcomeUnknown, QuotaError,
                               WriteConflict)
from quota_core.analysis import client_label, duration_text, what_if as history_what_if
from quota_core.planning import ANY_OTHER, apply_alteration, fallback, parse_clients_csv
from quota_core.backends.files import upload_text
from quota_core.domain import from_document, dead_keys
from quota_core.throttling import clients_seen, join_usage, after_change
from quota_core.domain import (QUOTA_KEYS, keys_for, clients_moved, inherited, plural, quota_before,
                               verb)
from quota_core.changes.workflow import apply_change, preview
from ui.render import KEY_ORDER, editable_text, exact_text, traffic_rows
from ui.spread import cluster_unread, preview_unread, show_traffic_spreads
from ui.history import WHAT_IF_COLUMNS, places as history_places, windows as history_windows
from ui.live import feed
from ui.context import context, secrets_dict
from ui.sidebar import editing_gate
from ui.registry import registry
from ui.form_words import form_message
from ui.brokers import settings_warnings
from ui.story import cluster_window
from ui.text import code, md

CLIENT, IPKIND = "user / client-id", "ip"
PART_MODES = {"name": "a name", "default": "the default", "none": "not part of the entity"}
IP_MODES = {"name": "an address", "default": "the default"}

ctx = context()
st.title("Edit quotas")
editing_gate(ctx, sign_in_key="sign_in_edit")  # who may edit: ui.identity
st.caption(f"Changes go to **{md(ctx.spec.label)}** ({code(ctx.spec.location)}) and are recorded "
           f"in the audit log as **{md(ctx.operator)}** ({md(ctx.identity.via)}), in "
           f"{code(str(ctx.audit.path))}.")
backend = ctx.backend
settings_warnings(backend)  # a custom quota callback decides instead of these entries
ss = st.session_state


# -- seed the entity from ?entity={"user": ..., "client-id": null} (links from Resolve/Browse) --
def _seed_from_param(raw: str) -> None:
    try:
        entity = entity_from_json(raw)
    except QuotaError:
        st.warning(md(f"Ignoring the entity in the link ({raw!r}): it is not a valid entity."))
        return
    d = entity.as_dict()
    if entity.is_ip:
        ss["ed_kind"] = IPKIND
        ss["ed_ip_mode"] = "default" if d[IP] is None else "name"
        ss["ed_ip"] = d[IP] or ""
        return
    ss["ed_kind"] = CLIENT
    for t, mode_key, name_key in ((USER, "ed_user_mode", "ed_user"),
                                  (CLIENT_ID, "ed_client_mode", "ed_client")):
        ss[mode_key] = "none" if t not in d else ("default" if d[t] is None else "name")
        ss[name_key] = d.get(t) or ""


param = st.query_params.get("entity")
if param and ss.get("ed_seeded_param") != param:
    _seed_from_param(param)
    ss["ed_seeded_param"] = param

# -- the entity ------------------------------------------------------------------------------
with st.container(border=True):
    ss.setdefault("ed_kind", CLIENT)
    ss.setdefault("ed_client_mode", "none")
    kind = st.segmented_control("Entity", [CLIENT, IPKIND], key="ed_kind") or CLIENT
    pairs, missing = [], None
    if kind == CLIENT:
        c1, c2 = st.columns(2)
        for col, t, label, mode_key, name_key in (
                (c1, USER, "user", "ed_user_mode", "ed_user"),
                (c2, CLIENT_ID, "client-id", "ed_client_mode", "ed_client")):
            mode = col.selectbox(label, list(PART_MODES), format_func=PART_MODES.__getitem__,
                                 key=mode_key)
            if mode == "name":
                name = col.text_input(f"{label} name", key=name_key,
                                      help=f"Exactly as the broker sees it. A {label} named "
                                           f"`{DEFAULT_TEXT}` is a name, not the default.")
                if not name:
                    col.caption(f":orange[Type a {label} name, or choose the default.]")
                    missing = t
                pairs.append((t, name))
            elif mode == "default":
                pairs.append((t, None))
    else:
        c1, _ = st.columns(2)
        mode = c1.selectbox("ip", list(IP_MODES), format_func=IP_MODES.__getitem__,
                            key="ed_ip_mode")
        if mode == "name":
            name = c1.text_input("ip address", key="ed_ip", placeholder="192.0.2.10")
            if not name:
                c1.caption(":orange[Type an IP address, or choose the default.]")
                missing = IP
            pairs.append((IP, name))
        else:
            pairs.append((IP, None))
    if missing:
        st.stop()
    try:
        entity = Entity.from_pairs(pairs)
    except EntityError as exc:
        st.error(md(exc), icon="✏️")
        st.stop()
    st.markdown(f"Entity: {code(entity.display())} — {md(entity.describe())}")

entity_param = entity_to_json(entity)
if st.query_params.get("entity") != entity_param:
    st.query_params["entity"] = entity_param
    ss["ed_seeded_param"] = entity_param

# -- load the entity's current quotas (fresh from the cluster) -------------------------------
keys = [k for k in KEY_ORDER if k in keys_for(entity.is_ip)]
if (ss.get("ed_loaded_entity") != entity or ss.get("ed_reload")
        or any(f"ed_val_{k}" not in ss for k in keys)):
    try:
        loaded = backend.describe_entity(entity)
    except QuotaError as exc:
        st.error(md(f"Cannot read {entity.display()}: {exc}"))
        st.stop()
    ss["ed_loaded_entity"], ss["ed_before"], ss["ed_reload"] = entity, loaded, False
    for k in keys:
        ss[f"ed_val_{k}"] = editable_text(k, loaded.get(k))
    for stale in ("ed_preview", "ed_confirm", "ed_conflict"):
        ss.pop(stale, None)
fix = st.query_params.get("fix")  # a fix from the Health page (ui.health.fix_links), once
if fix and ss.get("ed_fix_seen") != (entity_param, fix):
    ss["ed_fix_seen"] = (entity_param, fix)
    try:
        fill = from_document({"entries": [json.loads(fix)]}, "the fix in the link")
    except (ValueError, QuotaError):
        fill = {}
    for k in keys if entity in fill else ():
        ss[f"ed_val_{k}"] = editable_text(k, fill[entity].get(k))
before: dict = ss["ed_before"]
_elsewhere = {e: q for e, q in ctx.snapshot.quotas.items() if e != entity}


def _inherited(key: str):
    """What the entity's clients get for ``key`` from the rest of the ladder (value, level,
    source): a key the entry does not set is not "unlimited" when a lower level sets it."""
    return fallback(_elsewhere, entity, key)


result = ss.get("ed_result")
if result is not None and result.alteration.entity == entity:
    with st.container(border=True):
        st.success(f"Applied to {code(entity.display())} by {md(result.record.actor)} at "
                   f"{md(result.record.ts)}. Read back from the cluster:",
                   icon=":material/check_circle:")
        st.dataframe([{"key": k, "before": quota_before(k, result.before.get(k),
                                                        _inherited(k)),
                       "after (read back)": format_quota(k, result.after.get(k)),
                       "exact after": exact_text(k, result.after[k]) if k in result.after
                       else ""} for k in sorted(set(result.before) | set(result.after))],
                     hide_index=True)
        if ss.get("ed_settle"):
            st.info(md(ss["ed_settle"]), icon=":material/timer:")
        if not result.settled:
            st.warning("The cluster did not show the change yet when read back (brokers "
                       "update their view shortly after an alter). Refresh in a moment.")
        st.page_link("pages/audit.py", label="See it in the audit log", icon=":material/history:")


def _reload() -> None:
    ss["ed_reload"] = True


def _settle_sentence(applied) -> str | None:
    """When throttling should end, for a change that raises or removes a quota: the broker's
    rate window (the cluster's own settings) still holds the old traffic for a while."""
    raised = [k for k, v in applied.before.items()
              if k not in applied.after or applied.after[k] > v]
    if not raised or applied.alteration.entity.is_ip:
        return None
    live, _ = feed(secrets_dict())
    frame = live.latest(wait_s=0) if live is not None else None
    rows = join_usage(frame.series, ctx.snapshot.quotas) if frame is not None else []
    return after_change(applied.alteration.entity, raised, rows,
                        cluster_window(ctx.backend))[1]


def _history_what_if(change):
    """The change judged against the analysed usage history, when there is one."""
    where = history_places(secrets_dict())
    if where is None or not where.ready or change.entity.is_ip:
        return None
    now = ctx.snapshot.quotas
    after = apply_alteration(now, change)
    samples = history_windows(str(where.analysis), where.version, WHAT_IF_COLUMNS)
    return history_what_if(samples, now, after)


def _clear_all() -> None:
    for k in keys:
        ss[f"ed_val_{k}"] = ""


h1, h2 = st.columns([3, 1])
h1.markdown(f"**Currently** ({'no quotas: the entity does not exist yet' if not before else ''}"
            + ", ".join(f"{k}={format_quota(k, v)}" for k, v in sorted(before.items())) + ")")
h2.button("Reload from cluster", key="ed_reload_btn", on_click=_reload,
          icon=":material/refresh:")

# -- the values, each validated next to its field --------------------------------------------
after, problems = {}, {}
for k in keys:
    text = str(ss.get(f"ed_val_{k}", "")).strip()
    if text:
        try:
            after[k] = parse_quota_value(k, text)
        except QuotaError as exc:
            problems.setdefault(k, []).append(str(exc))
alteration = diff_alteration(entity, before, after)
# The quota set without this entity's keys that are being removed: what clients fall back to.
without_entity = {e: q for e, q in ctx.snapshot.quotas.items() if e != entity}
if after:
    without_entity[entity] = dict(after)
entity_problems = []
# Every field is checked on every change, each on its own: a field that does not parse keeps
# its current value here, so it neither hides the other fields' problems nor reads as a delete.
checked = dict(after)
for k in problems:
    if k in before:
        checked[k] = before[k]
check = diff_alteration(entity, before, checked)
if check.ops:
    for p in alteration_problems(check):
        if p.key in keys:
            problems.setdefault(p.key, []).append(p.message)
        else:
            entity_problems.append(p.message)

with st.container(border=True):
    st.markdown("**Quotas** — byte rates take units: `10MB` = 10,000,000, `1.5MiB` = "
                "1,572,864 bytes/s. Empty = not set on this entry: its clients get what the rest "
                "of the ladder gives them.")
    for k in keys:
        spec = QUOTA_KEYS[k]
        f1, f2 = st.columns([2, 3])
        f1.text_input(k, key=f"ed_val_{k}", placeholder="not set",
                      help=f"{spec.description} ({spec.unit}).")
        with f2:
            st.markdown("&nbsp;", unsafe_allow_html=True)
            if k in problems:
                for msg in problems[k]:
                    st.error(md(form_message(k, msg)), icon="✏️")
            elif k in after:
                note = exact_text(k, after[k])
                if before.get(k) != after[k]:
                    note += " — now " + (format_quota(k, before[k]) if k in before else
                                         inherited(entity, k, *_inherited(k)))
                st.caption(f"= {md(note)}")
            elif k in before:
                value, level, source = fallback(without_entity, entity, k)
                then = ("nothing limits its clients: unlimited" if level is None else
                        f"its clients fall back to {format_quota(k, value)} from "
                        f"{source.display()} (level {level})")
                st.caption(md(f"will be deleted (now {format_quota(k, before[k])}); {then}"))
    for msg in entity_problems:
        st.error(md(msg))
    st.button("Remove every key (delete the entity)", key="ed_delete", on_click=_clear_all,
              icon=":material/delete:", disabled=not before)

if not alteration.ops:
    st.info("No changes yet: edit a value above.")
    st.stop()
if problems or entity_problems:
    st.stop()

# -- preview -----------------------------------------------------------------------------------
st.subheader("Preview")
uploaded: list[tuple[str, str]] = []
upload = st.file_uploader("Known clients to check (CSV: user,client_id)", type=["csv", "txt"],
                          key="ed_clients",
                          help="One client per line. An empty user is an unauthenticated "
                               "client (ANONYMOUS). Clients named in entries are always "
                               "checked.")
if upload is not None:
    try:
        uploaded = parse_clients_csv(upload_text(upload.getvalue(), "clients file"))
    except QuotaError as exc:
        st.error(md(exc))
        st.stop()

if st.button("Preview", key="ed_preview_btn", type="secondary", icon=":material/visibility:"):
    try:
        live, _ = feed(secrets_dict())
        frame = live.latest() if live is not None else None
        series = list(frame.series) if frame is not None else None
        known = ctx.snapshot.known_clients() + uploaded + (
            clients_seen(series, ANY_OTHER) if series else [])
        ss["ed_preview"] = preview(backend, ctx.snapshot.quotas, alteration, before, known,
                                   series, cluster_unread(frame) if series else ())
        ss["ed_history"] = _history_what_if(alteration)
        ss.pop("ed_conflict", None)
    except QuotaError as exc:
        st.error(md(f"Preview failed: {exc}"))
        ss.pop("ed_preview", None)

pv = ss.get("ed_preview")
if pv is None or pv.alteration != alteration:
    st.caption("Preview asks the cluster to validate the change (nothing is written) and "
               "shows what it would do.")
    st.stop()

with st.container(border=True):
    if pv.accepted:
        # Information, not an all-clear: the preview's live part may be blind (issue 27).
        st.info("The cluster accepts this change (validated only, nothing written).",
                   icon=":material/fact_check:")
    else:
        for r in pv.outcome.failed:
            st.error(md(f"The cluster would refuse it: {r.error}"), icon=":material/block:")
    st.markdown(f"**{code(entity.display())}** — before → after")
    def _after(c) -> str:
        if c.change != "removed":
            return format_quota(c.key, c.after)
        value, level, source = fallback(without_entity, entity, c.key)
        return "deleted → " + ("unlimited (no lower level sets it)" if level is None else
                               f"falls back to {format_quota(c.key, value)} from "
                               f"{source.display()} (level {level})")

    st.dataframe([{"key": c.key, "change": "delete" if c.change == "removed" else c.change,
                   "before": quota_before(c.key, c.before, _inherited(c.key)),
                   "after": _after(c),
                   "after (exact)": "" if c.after is None else exact_text(c.key, c.after)}
                  for c in pv.diff if c.change != "unchanged"], hide_index=True)
    n_clients = len({(c.user, c.client_id) for c in pv.impact})
    who = "ip" if entity.is_ip else "known client"
    if pv.impact:
        st.markdown(clients_moved(n_clients, pv.clients_checked, who))
        st.dataframe([{"client": c.label, "key": c.key, "before → after": c.describe()}
                      for c in pv.impact[:2000]], hide_index=True)
        if len(pv.impact) > 2000:
            st.caption(f"First 2,000 of {len(pv.impact):,} changes shown.")
    else:
        dead = {d.key: d for d in dead_keys({**ctx.snapshot.quotas, entity: {
            **before, **after}}).get(entity, [])}
        changed_keys = [c.key for c in pv.diff if c.change != "unchanged"]
        why = [dead[k].reason() for k in changed_keys if k in dead]
        st.markdown(f"No {who}s change their effective quota ({pv.clients_checked:,} "
                    f"checked). " + (md(" ".join(why)) if why else
                                     "No known client resolves through this entity for "
                                     "these keys: a higher level decides them for every "
                                     "known client, or no known client is on its ladder."))
    impact_history = ss.get("ed_history")
    if impact_history is not None:
        st.info(md(impact_history.sentence()), icon=":material/history:")
        moved = impact_history.changed.sort_values("throttled_s_after", ascending=False)
        if not moved.empty:
            st.dataframe([{"client": client_label(u, c), "key": k,
                           "over quota before": duration_text(b),
                           "over quota after": duration_text(a)}
                          for u, c, k, b, a in zip(moved["user"], moved["client_id"],
                                                   moved["key"], moved["throttled_s_before"],
                                                   moved["throttled_s_after"])][:200],
                         hide_index=True)
    if pv.traffic:
        moved = [c for c in pv.traffic if c.verdict in ("newly throttled", "freed")]
        st.markdown(f"**At today's rates** (live metrics): {plural(len(pv.traffic), 'bucket')} "
                    f"the brokers report {verb(len(pv.traffic), 'changes', 'change')} quota; "
                    f"{sum(c.verdict == 'newly throttled' for c in moved)} would be newly "
                    f"throttled, {sum(c.verdict == 'freed' for c in moved)} freed.")
        st.dataframe(traffic_rows(pv.traffic), hide_index=True)
        show_traffic_spreads(pv.traffic)
    else:
        # No traffic seen on the brokers read is not "no traffic": name the brokers not read.
        preview_unread()

conflict = ss.get("ed_conflict")
if conflict is not None:
    with st.container(border=True):
        st.error(md(conflict["message"]), icon=":material/sync_problem:")
        st.dataframe(conflict["rows"], hide_index=True)
        st.button("Reload the entity", key="ed_conflict_reload", on_click=_reload,
                  type="primary", icon=":material/refresh:")
    st.stop()

confirm = st.checkbox(f"I have checked the preview: apply it to {md(ctx.spec.label)}",
                      key="ed_confirm", disabled=not pv.accepted)
if st.button("Apply", key="ed_apply", type="primary", icon=":material/done_all:",
             disabled=not (confirm and pv.accepted)):
    try:
        applied = apply_change(backend, alteration, before, actor=ctx.operator,
                               cluster=ctx.cluster_fields(), audit=ctx.audit,
                               action="delete" if not pv.after else "alter")
    except ConcurrentChange as exc:
        ss.pop("ed_result", None)  # the last "Applied" no longer describes the entity
        ss["ed_conflict"] = {"message": str(exc), "rows": [
            {"key": c.key, "when loaded": format_quota(c.key, c.before),
             "now on the cluster": format_quota(c.key, c.after)}
            for c in exc.context.get("changes", [])]}
        st.rerun()
    except WriteConflict as exc:  # written, but the read-back shows another writer's values
        ss.pop("ed_result", None)
        registry().invalidate(ctx.spec)
        done = exc.context["entities"][0]
        ss["ed_conflict"] = {"message": str(exc), "rows": [
            {"key": k, "written": format_quota(k, done.meant[k]) if k in done.meant else "not set",
             "now on the cluster": format_quota(k, done.after[k]) if k in done.after
             else "not set"} for k in sorted(set(done.meant) | set(done.after))]}
        st.rerun()
    except OutcomeUnknown as exc:
        # Sent, and the answer was lost: never claim applied or refused. Reload to see.
        ss.pop("ed_result", None)
        registry().invalidate(ctx.spec)
        st.warning(md(f"Outcome unknown: {exc} Reload the entity to see what the cluster "
                      f"holds now; applying the same change again is safe."),
                   icon=":material/help:")
        st.button("Reload the entity", key="ed_unknown_reload", on_click=_reload,
                  icon=":material/refresh:")
        st.stop()
    except QuotaError as exc:
        st.error(md(f"Not applied: {exc}"), icon=":material/block:")
        st.stop()
    ss["ed_result"] = applied
    ss["ed_settle"] = _settle_sentence(applied)
    ss["ed_reload"] = True
    registry().invalidate(ctx.spec)
    st.rerun()
