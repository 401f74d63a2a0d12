"""Throttled now: every bucket a broker throttles (or that runs near its quota), with the entry
that sets its quota and who shares it. The first page an operator on call opens."""
from __future__ import annotations

import time
from urllib.parse import urlencode

import pandas as pd
import streamlit as st

from quota_core.live import join_usage, throttled_rows
from quota_core.units import format_quota, format_rate
from ui.charts import utilisation_bar
from ui.live import feed
from ui.render import entity_text
from ui.session import context, secrets_dict

ctx = context()
st.title("Throttled now")
st.caption("Every bucket a broker throttles right now, or that runs near its quota, per broker "
           "(each broker enforces on its own), with the quota entry that governs it.")
live, problem = feed(secrets_dict())
if problem:
    st.error(problem, icon=":material/error:")
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
above = st.slider("Also show buckets running at or above this share of their quota", 50, 100,
                  80, step=5, format="%d%%", key="tn_above")


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def _resolve_link(user: str | None, client_id: str | None) -> str:
    query = {k: v for k, v in (("user", user), ("client_id", client_id)) if v}
    return "./?" + urlencode(query)


@st.fragment(run_every=5)
def board() -> None:
    frame = live.latest()
    if frame is None:
        st.warning("The metrics endpoints have not answered yet.", icon=":material/hourglass:")
        return
    for label, error in frame.errors.items():
        st.warning(f"{label}: {error}", icon=":material/cloud_off:")
    rows = join_usage(frame.series, ctx.snapshot.quotas)
    hot = throttled_rows(rows, above=float(above))
    throttled = [r for r in hot if r.throttled]
    age = time.time() - frame.at
    st.caption(f"Metrics as of {time.strftime('%H:%M:%S', time.localtime(frame.at))} "
               f"({age:.0f} s ago, refreshed every {live.every_s:g} s); quota set as of "
               f"{time.strftime('%H:%M:%S', time.localtime(ctx.snapshot.loaded_at))} "
               f"({ctx.snapshot.age_s:.0f} s ago). {len(rows):,} buckets seen on "
               f"{_plural(len({r.broker for r in rows}), 'broker')}.")
    c1, c2, c3 = st.columns(3)
    c1.metric("throttled now", len(throttled))
    c2.metric(f"at or above {above}% of quota", len(hot) - len(throttled))
    c3.metric("buckets without a quota", sum(1 for r in rows if r.quota is None))
    if not hot:
        st.success("No bucket is throttled or near its quota.", icon=":material/check_circle:")
        return
    st.plotly_chart(utilisation_bar(hot[:25]), key="tn_chart")
    table = pd.DataFrame([{
        "broker": r.broker, "type": r.quota_type,
        "user": "" if r.user is None else r.user,
        "client id": "" if r.client_id is None else r.client_id,
        "rate": format_rate(r.key, r.rate),
        "quota": format_quota(r.key, r.quota),
        "use": None if r.utilisation is None else r.utilisation * 100,
        "throttle ms": r.throttle_ms,
        "level": r.level,
        "entry": "" if r.source is None else entity_text(r.source),
        "shared by": r.shared_by,
        "resolve": _resolve_link(r.user, r.client_id),
    } for r in hot])
    st.dataframe(table, hide_index=True, key="tn_table", column_config={
        "use": st.column_config.ProgressColumn("use of quota", format="%.0f%%", min_value=0,
                                               max_value=200),
        "throttle ms": st.column_config.NumberColumn(format="%d ms"),
        "resolve": st.column_config.LinkColumn("resolve", display_text="Resolve →"),
    })


board()
