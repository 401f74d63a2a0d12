"""Throttled now: every bucket a broker throttles (or that runs near its quota), with the entry
that sets its quota and who shares it. The first page an operator on call opens."""
from __future__ import annotations

import time
from urllib.parse import urlencode

import pandas as pd
import streamlit as st

from quota_core.changes.audit import for_store
from quota_core.throttling import bucket_views, throttled_rows
from quota_core.domain import Membership
from quota_core.throttling import tags_entity, changed_lately, recent_changes, brokers_text
from quota_core.domain import format_quota, format_rate, plural, quota_changed, verb
from ui.charts import utilisation_bar
from ui.client_panel import show_client_views
from ui.coverage import unwatched_warnings
from ui.live import ended_ago, feed, fleet_metrics_hint, frame_unread, held_rows
from ui.render import entity_text
from ui.spread import show_bucket_spreads
from ui.context import context, secrets_dict
from ui.brokers import settings_warnings
from ui.story import cluster_window
from ui.text import md

ctx = context()
st.title("Throttled now")
st.caption("Every bucket a broker throttles right now, or that runs near its quota, per broker "
           "(each broker enforces on its own), with the quota entry that governs it.")
live, problem = feed(secrets_dict())
if problem:
    st.error(problem, icon=":material/error:")
    st.stop()
if live is None and fleet_metrics_hint():
    st.info(md(fleet_metrics_hint()), icon=":material/sensors_off:")
    st.stop()
if live is None:
    st.info("No metrics endpoints are configured, so live throttling cannot be shown. Set "
            "`QUOTA_METRICS=http://broker-1:7071/metrics,...` or `[metrics] endpoints = [...]` "
            "in `.streamlit/secrets.toml`: the brokers' Prometheus JMX exporter. "
            "`make run` configures its local broker's endpoint itself.",
            icon=":material/sensors_off:")
    st.stop()
if not ctx.connected:
    st.info("Not connected to a cluster: see the message above.", icon=":material/cloud_off:")
    st.stop()
settings_warnings(ctx.backend)  # a custom quota callback, brokers that disagree


def _resolve_link(user: str | None, client_id: str | None) -> str:
    query = {k: v for k, v in (("user", user), ("client_id", client_id)) if v}
    return "./resolve?" + urlencode(query)


def _clock(t: float) -> str:
    return time.strftime('%H:%M:%S', time.localtime(t))


@st.fragment(run_every=5)
def board() -> None:
    # In the fragment with what it filters: moving it reruns the board, not the page.
    above = st.slider("Also show buckets running at or above this share of their quota", 50,
                      100, 80, step=5, format="%d%%", key="tn_above")
    frame = live.latest()
    if frame is None:
        st.warning("The metrics endpoints have not answered yet.", icon=":material/hourglass:")
        return
    # Blind is never green: an endpoint that failed its last scrape is named (host:port), with
    # when it last answered; the counts are then unknown and no all-clear is shown.
    for down in frame.down:
        st.error(md(f"Cannot read the metrics of {down.label}, {down.since_text(frame.at)}. "
                    f"{down.error}"), icon=":material/cloud_off:")
    unwatched = unwatched_warnings(frame)
    # Every broker not read, once (by node id where known): quota_core.throttling.coverage.
    unread = frame_unread(frame, ctx.snapshot.info.node_ids if ctx.snapshot.info else ())
    rows = held_rows(live, frame, ctx.snapshot.quotas)
    hot = throttled_rows(rows, above=float(above))
    throttled = [r for r in hot if r.throttled]
    # A throttle time left over from earlier metric samples, the rate under 90 % of the quota
    # now (quota_core.throttling.live.BucketUsage.recent): not "throttled now".
    recent = [r for r in hot if r.recent]
    near = [r for r in hot if not r.throttled and not r.recent]  # shown = the three
    age = time.time() - frame.at
    answered = len(live.endpoints) - len(frame.down)
    source = "" if frame.complete else f"from {answered} of {len(live.endpoints)} endpoints "
    st.caption(f"Metrics {source}as of {_clock(frame.at)} ({age:.0f} s ago, refreshed every {live.every_s:g} s); "
               f"quota set as of {_clock(ctx.snapshot.loaded_at)} "
               f"({ctx.snapshot.age_s:.0f} s ago). {plural(len(rows), 'bucket')} seen on "
               f"{plural(len({r.broker for r in rows}), 'broker')}.")
    unknown = "unknown"
    c1, c4, c2, c3 = st.columns(4)
    c1.metric("throttled now", len(throttled) if frame.complete else unknown)
    c4.metric("throttled recently", len(recent) if frame.complete else unknown,
              help="The broker's throttle-time average still holds throttles from earlier "
                   "metric samples, while the rate is under 90% of the quota now.")
    c2.metric(f"not throttled, at or above {above}% of quota",
              len(near) if frame.complete else unknown)
    c3.metric("buckets without a quota",
              sum(1 for r in rows if r.quota is None) if frame.complete else unknown)
    if not frame.complete:
        # "The rows below" only when rows follow (issue 27): with none, nothing is below.
        rows_below = (" The rows below come from the endpoints that answered." if hot else "")
        st.warning(md(f"Counts are unknown while {', '.join(d.label for d in frame.down)} cannot "
                      f"be read: a bucket there may be throttled.{rows_below}"),
                   icon=":material/visibility_off:")
    if not hot:
        if frame.complete and not unwatched:
            st.success("No bucket is throttled or near its quota.",
                       icon=":material/check_circle:")
        elif frame.complete:  # blind on some brokers: never an all-clear
            st.info(md(f"No bucket is throttled or near its quota on the brokers watched; "
                       f"{brokers_text(unwatched)} {verb(len(unwatched), 'is', 'are')} not "
                       f"watched (above)."),
                    icon=":material/visibility_off:")
        return
    st.plotly_chart(utilisation_bar(hot[:25]), key="tn_chart")
    # A bucket whose quota was changed (from this console: the audit log) within the broker's
    # rate window may still be throttled on traffic from before the change: say so per row.
    window = cluster_window(ctx.backend)
    worst_ms = max((r.throttle_ms or 0.0 for r in hot), default=0.0)
    changes = recent_changes(for_store(ctx.audit.read(), ctx.store()), time.time(), window,
                             last_throttle_ms=worst_ms)  # this cluster's records only
    changed = changed_lately(hot, changes) if changes else {}
    if changed:
        st.info(md(quota_changed(len(changed), window.text(), window.measured_ms[1] / 1000)
                   + f" Its throttle-time average keeps earlier throttles for up to "
                     f"{window.throttle_memory_ms / 1000:.0f} s: a bucket under 90% of its new "
                     f"quota shows as throttled recently, not now."),
                icon=":material/timer:")
    history = live.history()

    def _state(r) -> str:
        if r.throttled:
            return "throttled now"
        if not r.recent:
            return "not throttled"
        ago = ended_ago(history, r, window.throttle_memory_ms, frame.at)
        return (f"throttled recently (ended about {ago:.0f} s ago)" if ago is not None else
                f"throttled recently (ended within the last "
                f"{window.throttle_memory_ms / 1000:.0f} s)")
    table = pd.DataFrame([{
        "broker": r.broker, "type": r.quota_type, "state": _state(r),
        "user": "" if r.user is None else r.user,
        "client id": "" if r.client_id is None else r.client_id,
        "rate": format_rate(r.key, r.rate),
        "quota": format_quota(r.key, r.quota),
        "use": None if r.utilisation is None else r.utilisation * 100,
        # Text, blank when the broker reports none: a grid shows a missing number as "None",
        # which a person reads as a value.
        "throttle ms": _ms(r.throttle_ms),
        "level": r.level,
        "entry": "" if r.source is None else entity_text(r.source),
        "shared by": r.shared_by if r.current else
        "nobody now: the quota set puts its clients in other buckets (the broker keeps an "
        "old bucket's figures for a while)",
        "resolve": _resolve_link(r.user, r.client_id),
        "quota changed": (f"{time.time() - changed[i].at:.0f} s ago" if i in changed else ""),
    } for i, r in enumerate(hot)])
    # The link comes right after the names it resolves, so it is in view at 1,400 px.
    order = ["broker", "type", "user", "client id", "resolve", "state", "use", "rate", "quota",
             "throttle ms", "quota changed", "level", "entry", "shared by"]
    st.dataframe(table, hide_index=True, key="tn_table", column_order=order, column_config={
        # Full at 100 %: above it the bar stays full and the figure says how far over.
        "use": st.column_config.ProgressColumn("use of quota", format="%.0f%%", min_value=0,
                                               max_value=100),
        "resolve": st.column_config.LinkColumn("resolve", display_text="Resolve →"),
    })
    show_bucket_spreads(rows, hot, unread, key="tn_spread",
                        brokers=frame.brokers)
    # What the clients of each bucket shown report themselves (KIP-714).
    show_client_views([(f"{key} {tags_entity((u, c)).display()}", view)
                       for (key, u, c), view in bucket_views(
                           rows, frame.client_side(), Membership(ctx.snapshot.quotas), unread,
                           only=[r for r in hot if r.throttled or r.recent])],
                      frame.at, key="tn_clients")


def _ms(value: float | None) -> str:
    return "" if value is None or value != value else f"{value:,.0f} ms"


board()
