"""History: who was throttled, for how long, by which entry, over the collector's history.

The page reads the hourly rollups the Spark job keeps (``kafka-client-quotas analyze``,
pipeline/; ``--follow`` keeps them current): any range of hours is summed here in pandas, with
no Spark job on open. The job runs on demand in its own process, its progress shown.
"""
from __future__ import annotations

import time

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from quota_core.domain import entity_from_json
from quota_core.throttling import broker_name
from quota_core.analysis import (client_label, duration_text, throttled_by_broker, freshness,
                                 hour_label)
from ui.history import (bucket_client_wait, bucket_hours, job_log, job_running, places,
                        range_sizing, range_tables, rollup_state, sizing_rows, start_job)
from ui.context import context, secrets_dict
from ui.text import chart_text, code, md

ctx = context()
st.title("History")
st.caption("Who was throttled, for how long, and by which quota entry, from the collector's "
           "usage history; each sample judged against the quota set in force at its time.")
where = places(secrets_dict())
if where is None and getattr(ctx, "cluster", None) is not None \
        and len(ctx.fleet.names()) > 1:
    st.info(f"No usage history for cluster {code(ctx.cluster.name)}: give it its own "
            f"`history_dir` in the fleet file (the console-wide history is not shown under a "
            f"fleet cluster's name: it may be another cluster's).",
            icon=":material/history_toggle_off:")
    st.stop()
if where is None:
    st.info("No usage history is configured. Run the collector (`kafka-client-quotas collect "
            "--metrics … --to DIR`) and set `QUOTA_HISTORY_DIR=DIR` (or `[history] path` in "
            "`.streamlit/secrets.toml`). `make run` sets up a demo history itself.",
            icon=":material/history_toggle_off:")
    st.stop()
if not (where.history / "usage").exists():
    st.info(f"No usage samples in {code(where.history)} yet: the collector writes them to "
            f"{code(str(where.history) + '/usage/')}.", icon=":material/hourglass:")
    st.stop()


state = rollup_state(where)
hours = sorted(state["hours"])
updated_at = state.get("updated_at", "")


@st.fragment(run_every=2)
def progress() -> None:
    if job_running(where):
        st.session_state["hi_started"] = True
        if not hours:  # the first analysis: nothing else to show yet
            with st.status("Analysing the history with Spark…", expanded=True):
                st.code("\n".join(job_log(where)) or "starting…", language=None)
        else:
            st.caption(f"Kept current by the analysis in the background: "
                       f"{md((job_log(where, 1) or ['starting…'])[-1])}")
    elif not hours or st.session_state.get("hi_started"):
        lines = job_log(where)
        if lines and any(line.startswith("error:") for line in lines[-3:]) or \
                not hours and any("error" in line for line in lines):
            st.error("The last analysis failed:\n\n" + "  \n".join(md(line) for line in lines[-3:]))
    if rollup_state(where).get("updated_at", "") != updated_at:
        st.rerun()  # new rollups landed while this page watched: read them


running = job_running(where)
c1, c2 = st.columns([3, 1])
if hours:
    c1.caption(freshness(state, time.time()))  # no user text in it: plain markdown
if c2.button("Update now" if hours else "Run the analysis", key="hi_run",
             disabled=running, icon=":material/play_arrow:", type="secondary" if hours
             else "primary"):
    busy = start_job(where)
    if busy is None:
        st.session_state["hi_started"] = True
        st.rerun()
    st.error(md(busy), icon=":material/lock:")  # another job writes the folder: who
progress()
if not hours:
    if running:
        st.caption("The tables appear here when the analysis finishes.")
    else:
        st.info("The history has not been analysed yet: run the analysis (Spark, local); it "
                "takes about a minute for a day of samples, and keeps hourly rollups that this "
                "page reads from then on.", icon=":material/info:")
    st.stop()

# -- the range: any hours kept, read from the rollups (no Spark) -----------------------------------
first, last = (st.select_slider("Hours (UTC)", options=hours, value=(hours[0], hours[-1]),
                                key="hi_range", format_func=hour_label)
               if len(hours) > 1 else (hours[0], hours[0]))
t = range_tables(str(where.rollups), updated_at, first, last)
by_client, by_entry = t["by_client"], t["by_entry"]
throttled = by_client[by_client["throttled_s"] > 0]
m1, m2, m3 = st.columns(3)
m1.metric("clients throttled", f"{len({(u, c) for u, c in zip(throttled['user'], throttled['client_id'])}):,}")
m2.metric("time over quota (broker-seconds)", duration_text(throttled["throttled_s"].sum()))
m3.metric("entries that throttled someone", f"{(by_entry['throttled_s'] > 0).sum():,}")
# -- top clients and entries ------------------------------------------------------------------
top = throttled.sort_values("throttled_s", ascending=False).head(15)
g1, g2 = st.columns(2)
if not top.empty:
    labels = [chart_text(f"{client_label(u, c)} · {k}") for u, c, k in
              zip(top["user"], top["client_id"], top["key"])]
    fig = go.Figure(go.Bar(x=top["throttled_s"] / 3600, y=labels, orientation="h",
                           marker_color="#d93025",
                           hovertemplate="%{y}: %{x:.2f} h over quota<extra></extra>"))
    fig.update_layout(title="Most throttled clients", height=420, yaxis=dict(autorange="reversed",
                      title="client · key"), xaxis_title="hours over quota (all brokers)",
                      margin=dict(l=10, r=10, t=50, b=10))
    g1.plotly_chart(fig, key="hi_top_clients")
entries = (by_entry[by_entry["throttled_s"] > 0]
           .sort_values("throttled_s", ascending=False).head(15))  # as many as the chart shows
if not entries.empty:
    names = [chart_text(f"{entity_from_json(s).display()} · {k}") for s, k in
             zip(entries["source"], entries["key"])]
    fig = go.Figure(go.Bar(x=entries["throttled_s"] / 3600, y=names, orientation="h",
                           marker_color="#e37400", customdata=entries["clients_throttled"],
                           hovertemplate="%{y}: %{x:.2f} h, %{customdata} clients"
                                         "<extra></extra>"))
    fig.update_layout(title="Entries that throttled the most", height=420,
                      yaxis=dict(autorange="reversed", title="entry · key"),
                      xaxis_title="hours over quota (all brokers)",
                      margin=dict(l=10, r=10, t=50, b=10))
    g2.plotly_chart(fig, key="hi_top_entries")

# -- heatmap by hour and client -----------------------------------------------------------------
heat = t["heat"]
if not heat.empty:
    fig = go.Figure(go.Heatmap(z=heat.to_numpy() / 60, x=list(heat.columns),
                               y=[chart_text(name) for name in heat.index],
                               colorscale="Reds", colorbar=dict(title="min over quota"),
                               hovertemplate="%{y}<br>%{x}: %{z:.0f} min<extra></extra>"))
    fig.update_layout(title=f"Throttled minutes by {t['heat_by']} and client (per broker where "
                            "a client was throttled on some brokers only)",
                      height=120 + 24 * len(heat), xaxis_title=f"{t['heat_by']} (UTC)",
                      yaxis_title="client",
                      margin=dict(l=10, r=10, t=50, b=10))
    st.plotly_chart(fig, key="hi_heatmap")

# -- one bucket over time -------------------------------------------------------------------------
st.subheader("Rate vs quota over time")
choices = [(u, c, k) for u, c, k in zip(top["user"], top["client_id"], top["key"])] or \
    list(dict.fromkeys(zip(by_client["user"], by_client["client_id"], by_client["key"])))[:50]
if choices:
    pick = st.selectbox("Bucket", choices, key="hi_bucket",
                        format_func=lambda t: f"{client_label(t[0], t[1])} · {t[2]}")
    u, c, k = (None if pd.isna(x) else x for x in pick)
    sel = bucket_hours(str(where.rollups), updated_at, first, last, (u, c, k))
    fig = go.Figure()
    per = "daily" if t["heat_by"] == "day" else "hourly"  # a long range: a point a day
    for broker, part in sel.groupby("broker", sort=False):
        fig.add_scatter(x=part["ts"], y=part["max_rate"], mode="lines+markers",
                        name=f"{broker_name(str(broker))}: {per} max", line=dict(shape="hv"))
        if per == "hourly":
            fig.add_scatter(x=part["ts"], y=part["p99_rate"], mode="lines",
                            name=f"{broker_name(str(broker))}: hourly p99",
                            line=dict(shape="hv", dash="dot"))
    if per == "daily":  # a day's sketch is merged over the brokers
        p99 = sel.drop_duplicates("ts")
        fig.add_scatter(x=p99["ts"], y=p99["p99_rate"], mode="lines", name="daily p99 "
                        "(all brokers)", line=dict(shape="hv", dash="dot", color="#5f6368"))
    quota = sel.sort_values("ts").drop_duplicates("ts", keep="last")
    fig.add_scatter(x=quota["ts"], y=quota["quota"], mode="lines", name="quota",
                    line=dict(dash="dash", shape="hv", color="#202124"))
    fig.update_layout(height=340, xaxis_title=f"{t['heat_by']} (UTC)",
                      yaxis=dict(title=f"{k} per broker", rangemode="tozero"),
                      margin=dict(l=10, r=10, t=30, b=10), legend=dict(orientation="h", y=-0.3))
    st.plotly_chart(fig, key="hi_bucket_chart")
    st.caption(md(throttled_by_broker(sel.assign(interval_s=sel["throttled_s"],
                                                   over_quota=sel["throttled_s"] > 0))))
    said = bucket_client_wait(str(where.rollups), updated_at, first, last, (u, c, k))
    st.caption(md(said[:1].upper() + said[1:] + "."), help=(
        "What the clients push (KIP-714) is an average wait per request, with no count of "
        "requests: History can say how long a request waited, not how long in all "
        "(docs/history.md)."))
    query = {key: v for key, v in (("user", u), ("client_id", c)) if v is not None and v == v}
    st.page_link("pages/resolve.py", label=f"Resolve {md(client_label(u, c))} now",
                 icon=":material/troubleshoot:", query_params=query)

# -- sizing -----------------------------------------------------------------------------------------
# computed when opened: it merges a sketch per bucket and day (or hour), the page's costliest
sizing_box = st.expander("Sizing: the smallest quota that would have kept p99 of each entry's "
                         "clients under it", key="hi_sizing", on_change="rerun")
if sizing_box.open:
    sizing_box.caption("now: the quota the cluster holds now; suggested: rounded up to three "
                       "significant digits.")
    sizing = range_sizing(str(where.rollups), updated_at, first, last)
    sizing_box.dataframe(sizing_rows(sizing, ctx.snapshot.quotas if ctx.connected else None),
                         hide_index=True)
