"""Plotly figures for the Browse page. Aggregated in pandas first, so a figure for 100,000
entries carries a few dozen numbers, not 100,000 points.

Browse shows the same figures as plain HTML by default (:func:`level_bars_html`,
:func:`byte_rate_table_html`): a few bars and a small table cost the browser next to nothing,
where two Plotly charts cost ~100 ms on every filter change (Plotly's script redraws both).
The Plotly charts are one toggle away, for hovering and zooming."""
from __future__ import annotations

import json
import threading
from collections import OrderedDict
from html import escape

import numpy as np
import plotly.graph_objects as go

from ui.browse import LEVELS
from quota_core.throttling import broker_name
from quota_core.domain import LADDER, format_bytes

from ui.text import chart_text

__all__ = ["level_bar", "byte_rate_box", "utilisation_bar", "rate_vs_quota", "level_bars_html",
           "byte_rate_table_html"]

_PATTERNS = {str(r.level): r.pattern for r in LADDER} | {"ip": "{ip=…}"}
_BUCKET_COLOURS = {"user+client-id": "#1a73e8", "user": "#e37400", "client-id": "#188038",
                   "ip": "#9334e6"}
_BUCKET_OF = {str(r.level): r.bucket for r in LADDER} | {"ip": "ip"}
_LEVEL_AXIS = dict(type="category", categoryorder="array", categoryarray=list(LEVELS),
                   title="ladder level (1 = {user=U, client-id=C} … 8 = {client-id=<default>})")


_FIGURES: OrderedDict[str, go.Figure] = OrderedDict()
_FIGURES_KEPT = 64
_FIGURES_LOCK = threading.Lock()


def _figure(spec: dict) -> go.Figure:
    """A Figure from a spec in plotly's own form (what ``Figure(...).to_dict()`` gives). The
    per-level statistics behind it are computed with numpy (cheaper than pandas'
    ``describe`` on every rerun); plotly's public constructor validates the result. Specs
    carry no template: the constructor applies the default one (Streamlit's) for ~2 ms,
    where validating it given explicitly costs ~7 ms.

    Even so a figure costs ~5 ms to validate on every rerun of a page, and
    the same few specs come back again and again (a filter undone, another session on the same
    set): recently made figures are reused. Streamlit only reads a figure (``to_json``)."""
    return _remembered(json.dumps(spec, sort_keys=True, default=_plain),
                       lambda: go.Figure(spec))


def _remembered(key: str, build) -> go.Figure:
    """The figure made for ``key`` (its data, as text) if it is still kept, else ``build()``:
    a figure is not built again while its data has not changed (a live panel redrawn every
    5 s between two scrapes, a rerun of the page around it)."""
    with _FIGURES_LOCK:
        figure = _FIGURES.get(key)
        if figure is not None:
            _FIGURES.move_to_end(key)
            return figure
    figure = build()
    with _FIGURES_LOCK:
        _FIGURES[key] = figure
        while len(_FIGURES) > _FIGURES_KEPT:
            _FIGURES.popitem(last=False)
    return figure


def _plain(value):
    """numpy scalars and arrays in a spec, for its cache key."""
    return value.tolist() if hasattr(value, "tolist") else str(value)


def _level_bar_spec(counts: dict[str, int]) -> dict:
    data = []
    for bucket, colour in _BUCKET_COLOURS.items():
        levels = [lv for lv in LEVELS if _BUCKET_OF[lv] == bucket]
        data.append(dict(
            type="bar", x=levels, y=[counts.get(lv, 0) for lv in levels],
            name=f"one quota per {bucket}", marker=dict(color=colour),
            text=[f"{counts.get(lv, 0):,}" for lv in levels], textposition="outside",
            cliponaxis=False, customdata=[_PATTERNS[lv] for lv in levels],
            hovertemplate="level %{x} %{customdata}: %{y:,} entries<extra></extra>"))
    layout = dict(title=dict(text="Entries per ladder level"), height=340, barmode="overlay",
                  margin=dict(l=10, r=10, t=50, b=10), legend=dict(orientation="h", y=-0.25),
                  xaxis=dict(_LEVEL_AXIS, title=dict(text=_LEVEL_AXIS["title"])),
                  yaxis=dict(title=dict(text="entries")))
    return dict(data=data, layout=layout)


def level_bar(counts: dict[str, int]) -> go.Figure:
    """Entries per ladder level, coloured by who shares a quota set at that level."""
    return _figure(_level_bar_spec(counts))


def _ticks(lo: float, hi: float) -> tuple[list[float], list[str]]:
    vals = [2.0 ** p for p in range(0, 51, 2) if lo / 4 <= 2.0 ** p <= hi * 4] or [lo, hi]
    return vals, [f"{format_bytes(v)}/s" for v in vals]


def _level_stats(frame, key: str) -> list[tuple[str, int, np.ndarray]]:
    """Per ladder level present (in ladder order): the level, how many entries set ``key``,
    and their min, quartiles and max (linear interpolation, as pandas' describe)."""
    codes = frame["level"].cat.codes.to_numpy()
    values = frame[key].to_numpy(dtype=float, na_value=np.nan)
    keep = ~np.isnan(values)
    codes, values = codes[keep], values[keep]
    if not len(values):
        return []
    order = np.lexsort((values, codes))
    codes, values = codes[order], values[order]
    categories = list(frame["level"].cat.categories)
    starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])
    ends = np.r_[starts[1:], len(codes)]
    found = {categories[codes[a]]: values[a:b] for a, b in zip(starts, ends)}
    return [(lv, len(found[lv]), np.quantile(found[lv], [0.0, 0.25, 0.5, 0.75, 1.0]))
            for lv in LEVELS if lv in found]


def _byte_rate_box_spec(frame) -> dict:
    data = []
    lo, hi = np.inf, 0.0
    for key, colour in (("producer_byte_rate", "#1a73e8"), ("consumer_byte_rate", "#e37400")):
        stats = _level_stats(frame, key)
        if not stats:
            continue
        q = np.array([s[2] for s in stats])
        data.append(dict(
            type="box", name=key, x=[s[0] for s in stats], q1=q[:, 1], median=q[:, 2],
            q3=q[:, 3], lowerfence=q[:, 0], upperfence=q[:, 4], marker=dict(color=colour),
            hovertext=[f"{key}<br>level {lv} {_PATTERNS[lv]}: {n:,} entries"
                       for lv, n, _ in stats]))
        lo, hi = min(lo, float(q[:, 0].min())), max(hi, float(q[:, 4].max()))
    tickvals, ticktext = _ticks(lo, hi) if hi > 0 else ([], [])
    layout = dict(title=dict(text="Byte-rate quotas by ladder level (min · quartiles · max)"),
                  boxmode="group", height=360, margin=dict(l=10, r=10, t=50, b=10),
                  legend=dict(orientation="h", y=-0.25),
                  xaxis=dict(_LEVEL_AXIS, title=dict(text=_LEVEL_AXIS["title"])),
                  yaxis=dict(type="log", tickvals=tickvals, ticktext=ticktext,
                             title=dict(text="quota per broker")))
    return dict(data=data, layout=layout)


def byte_rate_box(frame) -> go.Figure:
    """Byte-rate quotas per ladder level: min, quartiles and max, precomputed per level."""
    return _figure(_byte_rate_box_spec(frame))


def level_bars_html(counts: dict[str, int]) -> str:
    """Entries per ladder level as bars (HTML, no chart library), coloured by who shares a
    quota set at that level: the figures of :func:`level_bar`."""
    top = max(counts.values(), default=0) or 1
    rows = []
    for lv in LEVELS:
        n = counts.get(lv, 0)
        colour = _BUCKET_COLOURS[_BUCKET_OF[lv]]
        rows.append(
            f'<tr class="qc-level-bar" data-level="{lv}"><td style="padding:1px 8px;'
            f'white-space:nowrap">{lv} <code>{escape(_PATTERNS[lv])}</code></td>'
            f'<td style="padding:1px 8px;text-align:right">{n:,}</td>'
            f'<td style="padding:1px 8px;width:60%"><div style="background:{colour};height:12px;'
            f'width:{100 * n / top:.1f}%;min-width:{1 if n else 0}px"></div></td></tr>')
    legend = " · ".join(f'<span style="color:{c}">■</span> one quota per {escape(b)}'
                        for b, c in _BUCKET_COLOURS.items())
    return (f'<div class="qc-level-bars"><b>Entries per ladder level</b>'
            f'<table style="width:100%;border-collapse:collapse;font-size:0.9em">'
            f'{"".join(rows)}</table><div style="font-size:0.8em;color:#5f6368">{legend}'
            f'</div></div>')


def byte_rate_table_html(frame) -> str:
    """Byte-rate quotas per ladder level, min · quartiles · max, as a table (HTML, no chart
    library): the figures of :func:`byte_rate_box`."""
    body = []
    for key in ("producer_byte_rate", "consumer_byte_rate"):
        for lv, n, q in _level_stats(frame, key):
            cells = "".join(f'<td style="padding:1px 8px;text-align:right">'
                            f'{escape(format_bytes(float(v)))}/s</td>' for v in q)
            body.append(f'<tr class="qc-rate-row"><td style="padding:1px 8px">{key}</td>'
                        f'<td style="padding:1px 8px">{lv} <code>{escape(_PATTERNS[lv])}</code>'
                        f'</td><td style="padding:1px 8px;text-align:right">{n:,}</td>{cells}</tr>')
    if not body:
        return ('<div class="qc-rate-table"><b>Byte-rate quotas by ladder level</b><br>'
                'No entry shown sets a byte rate.</div>')
    head = "".join(f'<th style="padding:1px 8px;text-align:{a}">{h}</th>' for h, a in (
        ("key", "left"), ("level", "left"), ("entries", "right"), ("min", "right"),
        ("q1", "right"), ("median", "right"), ("q3", "right"), ("max", "right")))
    return (f'<div class="qc-rate-table"><b>Byte-rate quotas by ladder level</b> (per broker)'
            f'<table style="border-collapse:collapse;font-size:0.9em"><tr>{head}</tr>'
            f'{"".join(body)}</table></div>')


def _bucket_label(row) -> str:
    tags = ", ".join(f"{t}={n}" for t, n in row.bucket.items() if n is not None)
    return chart_text(f"{row.broker} · {row.quota_type} · {tags}")


def utilisation_bar(rows) -> go.Figure:
    """Use of quota per bucket (rate / quota), throttled buckets in red, a line at 100 %."""
    rows = [r for r in rows if r.utilisation is not None][::-1]  # worst on top
    data = [(_bucket_label(r), r.utilisation, bool(r.throttled)) for r in rows]
    return _remembered(json.dumps(["utilisation", data]), lambda: _utilisation_bar(rows))


def _utilisation_bar(rows) -> go.Figure:
    fig = go.Figure(go.Bar(
        x=[r.utilisation * 100 for r in rows], y=[_bucket_label(r) for r in rows],
        orientation="h", marker_color=["#d93025" if r.throttled else "#f9ab00" for r in rows],
        text=[f"{r.utilisation:.0%}" for r in rows], textposition="outside", cliponaxis=False,
        hovertemplate="%{y}: %{x:.0f}% of its quota<extra></extra>"))
    fig.add_vline(x=100, line_dash="dash", line_color="#5f6368",
                  annotation_text="quota", annotation_position="top")
    fig.update_layout(title="Use of quota per bucket (red: throttled now)",
                      height=max(220, 40 + 28 * len(rows)), margin=dict(l=10, r=40, t=50, b=10),
                      xaxis_title="rate as % of the bucket's quota (per broker)",
                      yaxis_title="broker · quota type · bucket")
    return fig


def rate_vs_quota(points, key: str, title: str) -> go.Figure:
    """Rate over time against the quota, per broker. ``points``: (time, broker, rate, quota,
    throttle_ms) tuples."""
    return _remembered(json.dumps(["rate", key, title, points], default=_plain),
                       lambda: _rate_vs_quota(points, key, title))


def _rate_vs_quota(points, key: str, title: str) -> go.Figure:
    import pandas as pd

    frame = pd.DataFrame(points, columns=["time", "broker", "rate", "quota", "throttle_ms"])
    per_second = key in ("producer_byte_rate", "consumer_byte_rate")
    fig = go.Figure()
    for broker, part in frame.groupby("broker"):
        fig.add_scatter(x=part["time"], y=part["rate"], mode="lines+markers",
                        name=f"{broker_name(broker)} rate", customdata=part["throttle_ms"].fillna(0),
                        hovertemplate="%{x|%H:%M:%S}: %{y:,.0f}, throttle %{customdata:,.0f} ms"
                                      "<extra></extra>")
        if part["quota"].notna().any():
            fig.add_scatter(x=part["time"], y=part["quota"], mode="lines", name=f"{broker_name(broker)} quota",
                            line=dict(dash="dash"))
    fig.update_layout(title=title, height=300, margin=dict(l=10, r=10, t=50, b=10),
                      legend=dict(orientation="h", y=-0.3), xaxis_title="time",
                      yaxis=dict(rangemode="tozero",
                                 title="bytes/s per broker" if per_second else key))
    return fig
