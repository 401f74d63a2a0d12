"""The Resolve page's live panel: per key, this client's buckets on every broker over the last
minutes (rate vs quota), the broker's throttle, and one plain sentence from the figures."""
from __future__ import annotations

import time
from datetime import datetime

import streamlit as st

from quota_core.live import KEY_OF_TYPE, client_buckets, gather, join_usage
from quota_core.resolution import Resolution

from .charts import rate_vs_quota
from .live import feed
from .session import secrets_dict
from .text import md

__all__ = ["live_panel"]
_TYPE_OF_KEY = {key: quota_type for quota_type, key in KEY_OF_TYPE.items()}


def live_panel(resolution: Resolution, keys: list[str], quotas) -> None:
    live, problem = feed(secrets_dict())
    st.subheader("Live: what the brokers measure")
    if problem:
        st.error(problem, icon=":material/error:")
        return
    if live is None:
        st.caption("Configure the brokers' metrics endpoints (`QUOTA_METRICS` or `[metrics] "
                   "endpoints` in `.streamlit/secrets.toml`) to see this client's live rate "
                   "against its quota here. Until then, estimate by hand below.")
        return
    _panel(live, resolution, [k for k in keys if k in _TYPE_OF_KEY], quotas)


@st.fragment(run_every=5)
def _panel(live, resolution: Resolution, keys: list[str], quotas) -> None:
    """Reruns on its own every 5 s with the arguments of the page's last run (the quota set
    as the page read it)."""
    user, client_id = resolution.client.user or "", resolution.client.client_id or ""
    history = live.history()
    if not history:
        st.caption("Waiting for the first scrape of the metrics endpoints…")
        return
    latest = history[-1]
    for label, error in latest.errors.items():
        st.warning(md(f"{label}: {error}"), icon=":material/cloud_off:")
    now_rows = [r for r in client_buckets(join_usage(latest.series, quotas), user, client_id)
                if r.key in keys]
    st.caption(f"As of {time.strftime('%H:%M:%S', time.localtime(latest.at))} "
               f"({time.time() - latest.at:.0f} s ago), over the last "
               f"{(latest.at - history[0].at) / 60:.0f} min; per broker, never summed.")
    if not now_rows:
        st.info("The brokers report no traffic for this client's buckets right now.",
                icon=":material/sensors:")
        return
    for row in sorted(now_rows, key=lambda r: (keys.index(r.key), r.broker)):
        (st.error if row.throttled else st.success)(md(row.sentence()))
    # The quota is today's for every point (the quota set as read now); rates come from each
    # scrape, filtered to this client's buckets without resolving again.
    bucket_quota = {(r.broker, r.quota_type, r.user, r.client_id): r.quota for r in now_rows}
    points_by_key: dict[str, list] = {k: [] for k in keys}
    for frame in history:
        for bucket, figures in gather(frame.series).items():
            if bucket in bucket_quota and "rate" in figures:
                throttle = figures.get("throttle")
                points_by_key[KEY_OF_TYPE[bucket[1]]].append(
                    (datetime.fromtimestamp(frame.at), bucket[0], figures["rate"],
                     bucket_quota[bucket], None if throttle != throttle else throttle))
    for key, points in points_by_key.items():
        if points:
            st.plotly_chart(rate_vs_quota(points, key, f"{key}: rate vs quota"),
                            key=f"rs_live_{key}")
