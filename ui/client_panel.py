"""What the clients of a bucket report themselves (KIP-714), beside the broker's verdict: the
one sentence of :mod:`quota_core.throttling.client_view` and a table, one row per client instance.

Render-only: every figure and every word comes from :class:`quota_core.throttling.client_view.ClientView`.
Names go to ``st.dataframe`` (text as text), labels through :func:`ui.text.md` and sentences
through :func:`ui.text.md_note` (a command in them is shown as code, never with its backticks)."""
from __future__ import annotations

import time
from typing import Iterable

import pandas as pd
import streamlit as st

from quota_core.throttling import ClientView

from ui.text import md, md_note

__all__ = ["instances_frame", "show_client_views", "latency_text"]


def _ms(value: float | None) -> str:
    return "" if value is None else f"{value:,.0f} ms"


def latency_text(latency) -> str:
    """``1: 3 ms · 2: 505 ms`` (node id: ms; the column says "per broker")."""
    return " · ".join(f"{node}: {ms:,.0f} ms" for node, ms in sorted(latency.items()))


#: Who the instance is first (the instance id is what tells two instances of one client id
#: apart), then its figures; the latency, as long as the brokers are many, last: at 1,400 px
#: every column of three brokers is in view, and with more only the latency is cut off.
_ORDER = ["client id", "instance", "software", "throttle avg", "throttle max", "last push",
          "latency per broker"]


def instances_frame(view: ClientView) -> pd.DataFrame:
    """One row per client instance: text cells (a missing figure is blank, never "None")."""
    return pd.DataFrame([{
        "client id": i.client_id, "instance": i.instance_id, "software": i.software,
        "throttle avg": _ms(i.throttle_ms_avg), "throttle max": _ms(i.throttle_ms_max),
        "last push": "" if i.last_push_age_s is None else f"{i.last_push_age_s:.0f} s ago",
        "latency per broker": latency_text(i.latency_ms),
    } for i in view.instances], columns=_ORDER)


_COLUMNS = {"instance": st.column_config.TextColumn(
                "instance id", help="The client instance id it pushes under (KIP-714)."),
            "latency per broker": st.column_config.TextColumn(
                help="The request latency the client measures to each broker (node id: ms).")}
#: The columns that differ from key to key; the rest say who the instances are.
_PER_KEY = ["throttle avg", "throttle max"]


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
    shown: list[pd.DataFrame] = []
    for n, (label, view) in enumerate(views):
        st.markdown(md(f"{label}: ") + md_note(view.sentence))
        if not view.instances:
            continue
        frame = instances_frame(view)
        who = frame.drop(columns=_PER_KEY)
        # A key whose clients push no throttle time, with the very instances of a table above:
        # its sentence says it all; the same table again would only repeat.
        if (frame[_PER_KEY] == "").all(axis=None) and any(who.equals(s) for s in shown):
            continue
        shown.append(who)
        st.dataframe(frame, hide_index=True, key=f"{key}_{n}", column_config=_COLUMNS)
