"""The client × broker view: buckets (rows) over brokers (columns), each cell the bucket's
rate, use and throttle on that broker, coloured so a throttled broker stands out; then the
sentence of :mod:`quota_core.throttling.spreads` that explains the spread.

Render-only: every figure and every word comes from :class:`quota_core.throttling.spreads.Spread`. Each
broker is its own column, never a summed "cluster" figure.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Iterable

import pandas as pd
import streamlit as st

from quota_core.throttling import Spread, broker_order, bucket_spreads, judged_spread, tags_entity
from quota_core.domain import format_quota, format_rate

from ui.story import sentences_html

__all__ = ["cell_text", "spread_grid", "show_spreads", "show_bucket_spreads",
           "show_traffic_spreads", "traffic_spreads", "labelled", "NO_TRAFFIC", "preview_unread",
           "total_text"]

NO_TRAFFIC = "no traffic"
_HOT = "background-color:#fdecea;color:#8a1c14;font-weight:600"
_OK = "background-color:#e8f5e9;color:#0b5d1e"
_QUIET = "color:#9aa0a6"


def cell_text(sp: Spread, broker: str) -> str:
    """``104% · 1.04 MiB/s · throttled 820 ms``; ``no traffic``; ``not read``."""
    if broker in sp.unread:
        return "not read"
    cell = next((c for c in sp.cells if c.broker == broker), None)
    if cell is None or not cell.traffic:
        return NO_TRAFFIC
    use = "" if cell.utilisation is None else f"{cell.utilisation:.0%} · "
    text = f"{use}{format_rate(sp.key, cell.rate)}"
    if cell.throttle_ms:
        return f"{text} · throttled {cell.throttle_ms:,.0f} ms"
    return f"{text} · over quota" if cell.throttled else text


def _column(broker: str) -> str:
    return f"broker {broker}"


def spread_grid(spreads: Iterable[tuple[str, Spread]]) -> pd.DataFrame:
    """One row per ``(label, spread)``: its quota on each broker, then one column per broker
    known (in broker order) with :func:`cell_text`."""
    spreads = list(spreads)
    brokers = sorted({b for _, sp in spreads for b in (*sp.brokers, *sp.unread)},
                     key=broker_order)
    return pd.DataFrame([{"bucket": label, "quota on each broker": format_quota(sp.key, sp.quota),
                          **{_column(b): cell_text(sp, b) for b in brokers},
                          "in total": total_text(sp)}
                         for label, sp in spreads])


def total_text(sp: Spread) -> str:
    """The bucket's rate summed over the brokers read; with a broker not read, a lower bound
    (``at least 2 MiB/s``), or ``unknown`` when the brokers read see none of it."""
    total = format_rate(sp.key, sp.total_rate)
    if not sp.unread:
        return total
    return f"at least {total}" if sp.total_rate > 0 else "unknown"


def _style(value: str) -> str:
    if not isinstance(value, str):
        return ""
    if "throttled" in value or "over quota" in value:
        return _HOT
    if value in (NO_TRAFFIC, "not read"):
        return _QUIET
    return _OK if "%" in value else ""


def show_spreads(spreads: list[tuple[str, Spread]], key: str) -> None:
    """The grid (throttled cells red, cells with traffic green, brokers without it grey),
    then one spread sentence per row."""
    if not spreads:
        return
    grid = spread_grid(spreads)
    columns = [c for c in grid.columns if c.startswith("broker ")]
    st.dataframe(grid.style.map(_style, subset=columns), hide_index=True, key=key)
    st.html(sentences_html(labelled(label, sp) for label, sp in spreads))


def labelled(label: str, sp: Spread):
    """The spread sentence, led by the row it explains: ``produce {client-id=x}: …``."""
    s = sp.sentence()
    return replace(s, text=f"{label}: {s.text}")


def show_bucket_spreads(rows, shown, unread: Iterable[str] = (), key: str = "spread",
                        limit: int = 25, brokers: Iterable[str] = ()) -> None:
    """Throttled now: each bucket of ``shown`` (live rows, in their order) over every broker
    of ``rows`` (all the rows read) and ``brokers`` (every endpoint that answered), when more
    than one broker is known; ``unread``: brokers whose figures are unknown."""
    unread = list(unread)
    known = {r.broker for r in rows} | set(brokers)
    if len(known | set(unread)) < 2:
        return
    spreads = bucket_spreads(rows, known, unread=unread)
    buckets = list(dict.fromkeys((r.quota_type, r.user, r.client_id) for r in shown))[:limit]
    st.markdown("**Per broker**: each broker enforces the quota on its own; a bucket can be "
                "throttled on one broker and not on another.")
    show_spreads([(f"{t} {tags_entity((u, c)).display()}", spreads[(t, u, c)])
                  for t, u, c in buckets], key=key)


def traffic_spreads(changes, brokers: Iterable[str] = (),
                    unread: Iterable[str] = ()) -> list[tuple[str, Spread]]:
    """Edit's preview at today's rates: each bucket whose quota changes, after the change,
    over ``brokers`` (every broker read) and those reporting it; ``unread`` the brokers
    whose figures are unknown."""
    unread = tuple(unread)
    grouped: dict[tuple, list] = {}
    for c in changes:
        if c.verdict != "clients move to another bucket":
            grouped.setdefault((c.after.quota_type, c.after.user, c.after.client_id),
                               []).append(c)
    known = set(brokers) | {c.after.broker for c in changes}
    out = []
    for (t, u, c), cs in grouped.items():
        key = cs[0].after.key
        label = (f"{t} {tags_entity((u, c)).display()}, "
                 f"{format_quota(key, cs[0].before.quota)} → "
                 f"{format_quota(key, cs[0].after.quota)}")
        out.append((label, judged_spread([x.after for x in cs], known, unread)))
    return out


def show_traffic_spreads(changes, key: str = "ed_spread") -> None:
    """The grid and sentences of :func:`traffic_spreads`, over the brokers the live feed
    read last (when more than one)."""
    from ui.page_context import secrets_dict
    from ui.live import feed

    live, _ = feed(secrets_dict())
    frame = live.latest(wait_s=0) if live is not None else None
    known = ({s.broker for s in frame.series} | set(frame.brokers)) if frame is not None \
        else set()
    unread = preview_unread(frame)
    if len(known | {c.after.broker for c in changes} | set(unread)) < 2:
        return
    st.markdown("**Per broker, after the change** (judged at today's rate on each broker, "
                "which enforces on its own):")
    show_spreads(traffic_spreads(changes, known, unread)[:25], key=key)


def cluster_unread(frame) -> tuple[str, ...]:
    """The brokers of the connected cluster ``frame`` (a live feed round, or None) holds no
    figures of (:func:`ui.live.frame_unread`): what a verdict at today's rates passes to
    :func:`quota_core.throttling.live.live_verdict`, so the Plan page and the Edit preview agree with
    ``plan --metrics``."""
    from ui.page_context import connected_cluster
    from ui.live import frame_unread

    cluster = connected_cluster()
    return frame_unread(frame, cluster.node_ids if cluster is not None else ())


def preview_unread(frame=None) -> tuple[str, ...]:
    """The brokers a preview at today's rates cannot judge (their figures are unknown), each
    once, by node id where known; with a warning naming them. ``frame`` defaults to the live
    feed's latest round."""
    from ui.page_context import secrets_dict
    from ui.live import feed

    if frame is None:
        live, _ = feed(secrets_dict())
        if live is None:
            return ()
        frame = live.latest(wait_s=0)
    unread = cluster_unread(frame)
    if unread:
        from quota_core.throttling import brokers_text

        names = brokers_text(unread)
        st.warning(f"{names[0].upper()}{names[1:]} could not be read: the preview at today's "
                   f"rates cannot say what the change does there.",
                   icon=":material/visibility_off:")
    return unread
