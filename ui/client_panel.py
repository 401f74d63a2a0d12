"""What the clients of a bucket report themselves (KIP-714), beside the broker's verdict: the
one sentence of :mod:`quota_core.throttling.client_view` and a table, one row per client instance.

Render-only: every figure and every word comes from :class:`quota_core.throttling.client_view.ClientView`.
Names go to ``st.dataframe`` (text as text) and sentences through :func:`ui.text.md`."""
from __future__ import annotations

import time
from typing import Iterable

import pandas as pd
import streamlit as st

from quota_core.throttling import ClientView

from ui.text import md

__all__ = ["instances_frame", "show_client_views", "latency_text"]


def _ms(value: float | None) -> str:
    return "" if value is None else f"{value:,.0f} ms"


def latency_text(latency) -> str:
    """``broker 1: 3 ms · broker 2: 505 ms``."""
    return " · ".join(f"broker {node}: {ms:,.0f} ms" for node, ms in sorted(latency.items()))


def instances_frame(view: ClientView) -> pd.DataFrame:
    """One row per client instance: text cells (a missing figure is blank, never "None")."""
    return pd.DataFrame([{
        "client id": i.client_id, "software": i.software,
        "throttle avg": _ms(i.throttle_ms_avg), "throttle max": _ms(i.throttle_ms_max),
        "latency per broker": latency_text(i.latency_ms),
        "last push": "" if i.last_push_age_s is None else f"{i.last_push_age_s:.0f} s ago",
        "instance": i.instance_id,
    } for i in view.instances], columns=["client id", "software", "throttle avg",
                                         "throttle max", "latency per broker", "last push",
                                         "instance"])


def show_client_views(views: Iterable[tuple[str, ClientView]], at: float, key: str) -> None:
    """Each view under its label (a bucket and key, shown as text): the sentence, then the
    instances; ``at`` is when the figures were read (their freshness is shown)."""
    views = list(views)
    if not views:
        return
    st.markdown("**What the clients report** (their own metrics, pushed to the brokers: "
                "KIP-714)")
    st.caption(f"As of {time.strftime('%H:%M:%S', time.localtime(at))} "
               f"({time.time() - at:.0f} s ago); each client's figures are over its last "
               f"pushes, and \"last push\" says how old they are.")
    for n, (label, view) in enumerate(views):
        st.markdown(md(f"{label}: {view.sentence}"))
        if view.instances:
            st.dataframe(instances_frame(view), hide_index=True, key=f"{key}_{n}")
