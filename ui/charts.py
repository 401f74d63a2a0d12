"""Plotly figures for the Browse page. Aggregated in pandas first, so a figure for 100,000
entries carries a few dozen numbers, not 100,000 points."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from quota_core.browse import LEVELS
from quota_core.resolution import LADDER
from quota_core.units import format_bytes

__all__ = ["level_bar", "byte_rate_box"]

_PATTERNS = {str(r.level): r.pattern for r in LADDER} | {"ip": "{ip=…}"}
_BUCKET_COLOURS = {"user+client-id": "#1a73e8", "user": "#e37400", "client-id": "#188038",
                   "ip": "#9334e6"}
_BUCKET_OF = {str(r.level): r.bucket for r in LADDER} | {"ip": "ip"}
_LEVEL_AXIS = dict(type="category", categoryorder="array", categoryarray=list(LEVELS),
                   title="ladder level (1 = {user=U, client-id=C} … 8 = {client-id=<default>})")


def level_bar(counts: dict[str, int]) -> go.Figure:
    """Entries per ladder level, coloured by who shares a quota set at that level."""
    fig = go.Figure()
    for bucket, colour in _BUCKET_COLOURS.items():
        levels = [lv for lv in LEVELS if _BUCKET_OF[lv] == bucket]
        fig.add_bar(x=levels, y=[counts.get(lv, 0) for lv in levels],
                    name=f"one quota per {bucket}", marker_color=colour,
                    text=[f"{counts.get(lv, 0):,}" for lv in levels], textposition="outside",
                    cliponaxis=False, customdata=[_PATTERNS[lv] for lv in levels],
                    hovertemplate="level %{x} %{customdata}: %{y:,} entries<extra></extra>")
    fig.update_layout(title="Entries per ladder level", height=340, barmode="overlay",
                      margin=dict(l=10, r=10, t=50, b=10), legend=dict(orientation="h", y=-0.25),
                      xaxis=_LEVEL_AXIS, yaxis_title="entries")
    return fig


def _ticks(lo: float, hi: float) -> tuple[list[float], list[str]]:
    vals = [2.0 ** p for p in range(0, 51, 2) if lo / 4 <= 2.0 ** p <= hi * 4] or [lo, hi]
    return vals, [f"{format_bytes(v)}/s" for v in vals]


def byte_rate_box(frame) -> go.Figure:
    """Byte-rate quotas per ladder level: min, quartiles and max, precomputed per level."""
    fig = go.Figure()
    lo, hi = np.inf, 0.0
    for key, colour in (("producer_byte_rate", "#1a73e8"), ("consumer_byte_rate", "#e37400")):
        col = frame[["level", key]].dropna()
        if col.empty:
            continue
        stats = col.groupby("level", observed=True)[key].describe()
        stats = stats.reindex([lv for lv in LEVELS if lv in stats.index])
        x = list(stats.index)
        fig.add_trace(go.Box(
            name=key, x=x, q1=stats["25%"], median=stats["50%"], q3=stats["75%"],
            lowerfence=stats["min"], upperfence=stats["max"], marker_color=colour,
            hovertext=[f"{key}<br>level {lv} {_PATTERNS[lv]}: {int(n):,} entries"
                       for lv, n in zip(stats.index, stats["count"])]))
        lo, hi = min(lo, float(stats["min"].min())), max(hi, float(stats["max"].max()))
    tickvals, ticktext = _ticks(lo, hi) if hi > 0 else ([], [])
    fig.update_layout(title="Byte-rate quotas by ladder level (min · quartiles · max)",
                      boxmode="group", height=360, margin=dict(l=10, r=10, t=50, b=10),
                      legend=dict(orientation="h", y=-0.25), xaxis=_LEVEL_AXIS,
                      yaxis=dict(type="log", tickvals=tickvals, ticktext=ticktext,
                                 title="quota per broker"))
    return fig
