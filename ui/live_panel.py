"""The Resolve page's live panel: per key, whether *this* client is throttled now, read only
from its own bucket (quota_core.domain.membership), per broker; the bucket's rate against its quota
over the last minutes; on several brokers, a client × broker grid with the sentence that
explains the spread (quota_core.throttling.spreads); and apart, the other buckets under the same user or
client id.

Every sentence is rendered from the one verdict per key (quota_core.throttling.verdict / story)."""
from __future__ import annotations

import time
from datetime import datetime

import streamlit as st

from quota_core.throttling import view_for_verdict, KEY_OF_TYPE, gather
from quota_core.domain import Membership, Resolution
from quota_core.throttling import (spread, bucket_details, client_story, is_blind, is_quiet,
                                   others_story, quiet_story, unknown_story, DEFAULT_WINDOW,
                                   tags_entity)

from ui.charts import rate_vs_quota
from ui.client_panel import show_client_views
from ui.live import feed, fleet_metrics_hint, frame_unread, held_rows
from ui.spread import show_spreads
from ui.page_context import connected_cluster, secrets_dict
from ui.coverage import unwatched_warnings
from ui.story import sentences_html, shared_verdicts
from ui.text import md

__all__ = ["live_panel"]
_TYPE_OF_KEY = {key: quota_type for quota_type, key in KEY_OF_TYPE.items()}


def live_panel(resolution: Resolution, keys: list[str], quotas, window=DEFAULT_WINDOW,
               members: Membership | None = None) -> None:
    live, problem = feed(secrets_dict())
    st.subheader("Live: what the brokers measure")
    if problem:
        st.error(problem, icon=":material/error:")
        return
    if live is None and fleet_metrics_hint():
        st.caption(md(fleet_metrics_hint()) + " Until then, estimate by hand below.")
        return
    if live is None:
        st.caption("Configure the brokers' metrics endpoints (`QUOTA_METRICS` or `[metrics] "
                   "endpoints` in `.streamlit/secrets.toml`) to see this client's live rate "
                   "against its quota here. Until then, estimate by hand below.")
        return
    _panel(live, resolution, [k for k in keys if k in _TYPE_OF_KEY], quotas, window,
           members or Membership(quotas))


@st.fragment(run_every=5)
def _panel(live, resolution: Resolution, keys: list[str], quotas, window,
           members: Membership) -> None:
    """Reruns on its own every 5 s with the arguments of the page's last run (the quota set
    as the page read it)."""
    history = live.history()
    if not history:
        st.caption("Waiting for the first scrape of the metrics endpoints…")
        return
    latest = history[-1]
    for down in latest.down:
        st.warning(md(f"{down.label}: {down.error}"), icon=":material/cloud_off:")
    unwatched_warnings(latest)
    cluster = connected_cluster()
    # The brokers not read, once each (by node id where known): the verdict is unknown, never
    # "not throttled", while any is (quota_core.throttling.live.live_verdict).
    unread = frame_unread(latest, cluster.node_ids if cluster is not None else ())
    rows = held_rows(live, latest, quotas)
    found = shared_verdicts(resolution, keys, quotas, rows, window, members, unread)
    span = latest.at - history[0].at
    st.caption(f"As of {time.strftime('%H:%M:%S', time.localtime(latest.at))} "
               f"({time.time() - latest.at:.0f} s ago), over the last "
               + (f"{span:.0f} s" if span < 120 else f"{span / 60:.0f} min")
               + f"; per broker, never summed; quota window {window.text()}.")
    # Keys with traffic: the status, then (for a shared bucket) who sends what in it; the
    # figures of an own bucket are in the status already. Keys without: one sentence.
    busy = [v for v in found if not is_quiet(v) and not is_blind(v)]  # no "0 of 10 on broker 3"
    quiet, blind = quiet_story(found), unknown_story(found)
    said = [s for v in busy
            for s in [*client_story(v)[:1], *(bucket_details(v) if v.shared else [])]
            if s.kind == "status"] + [s for s in (blind, quiet) if s]
    if said:  # st.html refuses an empty body
        st.html(sentences_html(said))
    # What the bucket's clients report themselves (KIP-714), per key with live figures.
    side = latest.client_side()
    show_client_views([(f"{v.key} {tags_entity(v.bucket).display()}",
                        view_for_verdict(v, side.reports, members, collected=side.collected,
                                         others=found))
                       for v in found if v.brokers is not None], latest.at, key="rs_clients")
    # The client x broker view: its own bucket per key on every broker read (more than one),
    # and the sentence that explains the spread. Never one summed "cluster" throttle.
    known = {r.broker for r in rows} | set(latest.brokers)
    if len(known | set(unread)) > 1:
        show_spreads([(f"{v.key} {tags_entity(v.bucket).display()}",
                       spread(v.key, v.brokers, known, v.limit, unread))
                      for v in found if v.brokers], key="rs_spread")
    # Apart: what else is throttled under the same user or client id; the others, one line.
    hot = [(v, o) for v in found for o in v.others if o.throttled]
    if hot:
        st.markdown("**Throttled in other buckets under the same user or client id** "
                    "(not this client's)")
        st.html(sentences_html(s for v in found for s in others_story(v)
                               if s.claims.get("throttled")))
    calm = [f"{tags_entity(o.tags).display()} ({v.key})" for v in found for o in v.others
            if o.throttled is False]
    if calm:
        st.caption(md("Other buckets under the same user or client id, not throttled: "
                      + ", ".join(calm) + "."))
    # The quota is today's for every point (the quota set as read now); rates come from each
    # scrape, filtered to this client's own bucket per key without resolving again.
    user, client_id = resolution.client.user or "", resolution.client.client_id or ""
    own = {(_TYPE_OF_KEY[k], *members.tags(k, user, client_id)): v.limit
           for k, v in zip(keys, found)}
    points_by_key: dict[str, list] = {k: [] for k in keys}
    for frame in history:
        for (broker, quota_type, u, c), figures in gather(frame.series).items():
            limit_key = (quota_type, u, c)
            if limit_key in own and "rate" in figures:
                throttle = figures.get("throttle")
                points_by_key[KEY_OF_TYPE[quota_type]].append(
                    (datetime.fromtimestamp(frame.at), broker, figures["rate"],
                     own[limit_key], None if throttle != throttle else throttle))
    for key, points in points_by_key.items():
        if points:
            st.plotly_chart(rate_vs_quota(points, key, f"{key}: rate vs quota"),
                            key=f"rs_live_{key}")
