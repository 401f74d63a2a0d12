"""Resolve & explain: which quota applies to a client, which ladder level set it, and why.

The URL carries the query (``?user=alice&client_id=checkout-api`` or ``?ip=10.0.0.12``), so
a link to this page answers the question for whoever opens it.
"""

import os

import pandas as pd
import streamlit as st

from quota_core import estimate_throttle, explain_key, parse_quota_value, resolve, resolve_ip
from quota_core.domain import (CLIENT_ID, USER, entity_to_json, shadow_note_parts,
                               client_name_problems)
from quota_core.errors import QuotaError
from ui.render import KEY_ORDER, answers_html, entity_text, ladder_html
from ui.live_panel import live_panel
from ui.context import context, secrets_dict
from ui.fleet import CLUSTER_PARAM
from ui.fleet_page import fleet_resolution, fleet_timeout
from ui.brokers import settings_warnings
from ui.story import notes_html, sentences_html, shared_verdicts
from quota_core.throttling import client_story
from ui.text import md, md_frame

ctx = context()
st.title("Resolve & explain")
st.caption("Which quota does a client get, which entry sets it, and who shares it? "
           "Each key is resolved on its own: the first level (top down) that sets it wins.")

# -- the query: from the URL, else the last one asked in this session ------------------------
# Widget state is dropped when another page runs, so the last query is kept separately.
qp = st.query_params
#: ``?every=1``: the answer on every cluster of the fleet too (a shareable link).
EVERY_PARAM = "every"
last = st.session_state.setdefault("rs_last", {})


def _example(quotas) -> dict[str, str]:
    """A useful first question from the data: a client with its own entry, else a named user."""
    pairs = sorted((e.name(USER), e.name(CLIENT_ID)) for e in quotas
                   if not e.is_ip and e.has(USER) and e.has(CLIENT_ID)
                   and e.name(USER) is not None and e.name(CLIENT_ID) is not None)
    if pairs:
        return {"user": pairs[0][0], "client_id": pairs[0][1]}
    users = sorted(e.name(USER) for e in quotas if not e.is_ip and e.has(USER)
                   and e.name(USER) is not None)
    return {"user": users[0], "client_id": "app"} if users else {}


seed = ({k: v for k, v in qp.items() if k in ("user", "client_id", "ip")}
        if any(k in qp for k in ("user", "client_id", "ip")) else last)
if not seed and ctx.connected:
    seed = _example(ctx.snapshot.quotas)
if EVERY_PARAM in qp and "rs_every" not in st.session_state:
    st.session_state["rs_every"] = qp.get(EVERY_PARAM) == "1"
if not any(k in st.session_state for k in ("rs_user", "rs_client", "rs_ip")):
    st.session_state["rs_mode"] = "IP address" if seed.get("ip") else "User / client id"
    st.session_state["rs_user"] = seed.get("user", "")
    st.session_state["rs_client"] = seed.get("client_id", "")
    st.session_state["rs_ip"] = seed.get("ip", "")

@st.fragment
def answer() -> None:
    """The query and everything it decides: a keystroke reruns this part only, not the
    sidebar or the navigation (the live panel inside keeps its own 5 s refresh)."""
    mode = st.segmented_control("Resolve for", ["User / client id", "IP address"], key="rs_mode")
    mode = mode or "User / client id"
    if mode == "IP address":
        ip = st.text_input("IP address", key="rs_ip", placeholder="10.0.0.12").strip()
        user = client_id = ""
        query = {"ip": ip} if ip else {}
    else:
        c1, c2 = st.columns(2)
        user = c1.text_input("User principal", key="rs_user", placeholder="empty = "
                             "unauthenticated (ANONYMOUS)",
                             help="The authenticated user name as the broker sees it (e.g. the "
                                  "SASL user, or the certificate's DN). Leave empty for an "
                                  "unauthenticated client.")
        client_id = c2.text_input("Client id", key="rs_client", placeholder="empty = "
                                  "no client.id",
                                  help="The client.id the application sets.")
        ip = ""
        query = {k: v for k, v in (("user", user), ("client_id", client_id)) if v}
    every = ctx.fleet is not None and len(ctx.fleet) > 1 and st.toggle(
        "On every cluster", key="rs_every",
        help="Resolve this client on every cluster of the fleet at once: one line per "
             "cluster, each key's value and the entry that sets it.")
    # Keep the URL in step with the query (and the cluster shown), so it can be shared.
    shown = {**query, **{k: st.query_params[k] for k in (CLUSTER_PARAM,) if k in st.query_params},
             **({EVERY_PARAM: "1"} if every else {})}
    if dict(st.query_params) != shown:
        st.query_params.from_dict(shown)
    st.session_state["rs_last"] = dict(query)
    if every and query:
        st.subheader("On every cluster")
        fleet_rows, differ = fleet_resolution(ctx.fleet, query, dict(os.environ),
                                              secrets_dict(),
                                              fleet_timeout(dict(os.environ), secrets_dict()))
        st.table(md_frame(pd.DataFrame(fleet_rows).fillna("")).style.hide(axis="index"))
        st.caption(("Differs between the clusters: " + ", ".join(differ) + ".") if differ
                   else "The same effective quota on every cluster that answered.")
        if ctx.cluster is not None:
            st.subheader(f"On {md(ctx.cluster.display_name)}, in detail")

    if not ctx.connected:
        st.info("Not connected to a cluster: see the message above.",
                icon=":material/cloud_off:")
        return
    quotas, members = ctx.snapshot.quotas, ctx.snapshot.members()

    problems = client_name_problems(user, client_id, ip)
    if ip and problems:
        st.error(md(problems[0]), icon=":material/error:")
        return
    for problem in problems:
        st.warning(md(problem), icon=":material/help:")

    if mode == "IP address":
        if not ip:
            st.info("Type an IP address to see its connection-rate quota.")
            return
        resolution = resolve_ip(quotas, ip)
    else:
        resolution = resolve(quotas, user or None, client_id or None)

    for note in resolution.client.assumptions():
        st.warning(md(note), icon=":material/info:")

    # -- the answer per key ------------------------------------------------------------------
    keys = [k for k in KEY_ORDER if k in resolution.keys]
    st.html(answers_html(resolution, keys, quotas, members))

    # -- live: whether this client is throttled, from its own bucket only --------------------
    # The brokers' settings: a custom quota callback or brokers that disagree are named here.
    settings = settings_warnings(ctx.backend)
    window = settings.window()
    if resolution.client.is_ip and settings.connection_cap() is not None:
        st.info(md(settings.connection_cap().text), icon=":material/lan:")
    if not resolution.client.is_ip:
        live_panel(resolution, keys, quotas, window, members)

    # -- the ladder ---------------------------------------------------------------------------
    st.subheader("The ladder for this client")
    st.caption(md(settings.ladder_label()))
    st.html(ladder_html(resolution, keys))

    st.subheader("In plain words")
    # Per key: the answer, then (from the same verdict as the live panel) who shares the
    # allowance and what to change, under that key's bullet, so no sentence stands without its
    # key. Escaped HTML, so names are shown as written, never as markup.
    found = {} if resolution.client.is_ip else {
        v.key: v for v in shared_verdicts(resolution, keys, quotas, None, window, members)}
    for key in keys:
        st.markdown(f"- **{key}** — {md(explain_key(resolution, key, quotas, members))}")
        if key in found:
            st.html('<div class="qc-key-story" style="margin:-8px 0 8px 1.6em">'
                    + sentences_html(x for x in client_story(found[key])
                                     if x.kind in ("share", "change")) + "</div>")
    if not resolution.client.is_ip:
        st.caption("Quotas are enforced by each broker on its own: a client spread over N "
                   "brokers can use up to N × the quota in total.")
        notes = shadow_note_parts(resolution)
        if notes:
            st.subheader("Set back for this client")
            st.html(notes_html(notes))

    # -- links: share, edit ------------------------------------------------------------------
    with st.expander("Share or change this"):
        st.markdown("The address bar holds this query: copy it to share the answer. ")
        # Plain text, not st.code: its syntax highlighter is a large script for one line.
        st.text("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "(empty)")
        if ctx.policy.editing_enabled:
            st.markdown("Edit an entry of this ladder:")
            for step in resolution.ladder:
                if step.quotas:
                    st.page_link("pages/edit.py", label=f"level {step.level}: "
                                 f"{md(entity_text(step.entity))}", icon=":material/edit:",
                                 query_params={"entity": entity_to_json(step.entity)})

    # -- observed rates -> estimated throttle --------------------------------------------------
    with st.expander("Observed rates → estimated throttle (by hand)"):
        st.caption("Give what a broker measures for this client's bucket (per broker, per "
                   "second; byte rates take units such as 12MB or 3MiB). The broker delays the "
                   "client by (observed − quota) / quota × the "
                   f"{window.measured_ms[0] / 1000:.0f} s window (quota window {window.text()}).")
        tcols = st.columns(len(keys))
        for col, key in zip(tcols, keys):
            text = col.text_input(f"observed {key}", key=f"rs_obs_{key}").strip()
            if not text:
                continue
            try:
                observed = parse_quota_value(key, text)
            except QuotaError as exc:
                col.error(md(exc))
                continue
            est = estimate_throttle(key, observed, resolution.keys[key].value, window=window)
            if est.quota is None:
                col.info("unlimited: never throttled")
            elif est.throttled:
                col.error(f"throttled ≈ {est.throttle_ms:,} ms per request "
                          f"({est.usage_ratio:.0%} of quota)"
                          + (" — capped at one sample window" if est.capped else ""))
            else:
                col.success(f"not throttled ({est.usage_ratio:.0%} of quota)")


answer()
