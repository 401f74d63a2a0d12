"""Render-only helpers: turn quota_core results into text, HTML and table frames.

Nothing here decides anything about quotas; it only formats what quota_core computed.
Names are escaped everywhere HTML is built (they are user input).
"""
from __future__ import annotations

from html import escape
from typing import Iterable, Mapping

from ui.browse import ALL_KEYS, DEFAULT_LABEL
from quota_core.domain import (Entity, display_name, QUOTA_KEYS, format_value, Membership,
                               kind_of_tags, LADDER, Resolution, format_bytes, format_editable,
                               format_exact, format_quota, format_rate)

__all__ = ["exact_text", "short_value", "editable_text", "entity_text", "entity_html",
           "answers_html", "ladder_html", "traffic_rows", "KEY_ORDER", "BUCKET_WORDS"]

#: Column order for keys everywhere in the dashboard.
KEY_ORDER: tuple[str, ...] = ALL_KEYS
SHORT = {"producer_byte_rate": "produce", "consumer_byte_rate": "fetch (consume)",
         "request_percentage": "request time", "controller_mutation_rate": "mutations",
         "connection_creation_rate": "connections"}
BUCKET_WORDS = {"user+client-id": "this user + client id", "user": "all of the user's clients",
                "client-id": "all users of the client id"}

_WIN = ("background:#d6f5dd;color:#0b5d1e;font-weight:700;border:2px solid #1e8e3e;")
_SHADOW = "color:#9aa0a6;text-decoration:line-through;background:#f6f6f6;"
_EMPTY = "color:#c4c7c5;text-align:center;"
_CELL = "padding:6px 10px;border-bottom:1px solid #e3e3e3;vertical-align:top;"
_HEAD = ("padding:6px 10px;border-bottom:2px solid #9aa0a6;text-align:left;font-weight:600;"
         "background:#fafafa;")


#: The core's formatters, under the names the pages use.
exact_text = format_exact
editable_text = format_editable


def _name_html(name: str | None) -> str:
    """A name as :meth:`Entity.display` writes it (double-quoted where it could be misread:
    ``user="CN=etl,OU=data"``), escaped; the default as its grey label."""
    if name is None:
        return f'<em style="color:#5f6368" class="qc-default">{DEFAULT_LABEL}</em>'
    return f'<span class="qc-name">{escape(display_name(name))}</span>'


def entity_html(entity: Entity | None) -> str:
    if entity is None:
        return ""
    return ", ".join(f"{escape(t)}={_name_html(n)}" for t, n in entity.parts)


def entity_text(entity: Entity) -> str:
    """``user=alice, client-id=⟨default⟩`` (raw names; the default cannot be confused with a
    name spelled ``<default>``)."""
    return ", ".join(f"{t}={DEFAULT_LABEL if n is None else n}" for t, n in entity.parts)


def short_value(key: str, value: float | None) -> str:
    """Compact: ``8 MiB/s``, ``50%``, ``10/s``; ``unlimited`` for None."""
    if value is None:
        return "unlimited"
    return _cell_value(key, value)


def _cell_value(key: str, value: float) -> str:
    spec = QUOTA_KEYS.get(key)
    if spec is not None and spec.is_byte_rate:
        return f"{format_bytes(value)}/s"
    if spec is not None and spec.unit == "%":
        return f"{format_value(value)}%"
    return f"{format_value(value)}/s"


def _sharers(resolution: Resolution, key: str, members: Membership | None) -> str:
    """Who shares the client's bucket for ``key``, from the one membership model (the same
    words as Resolve's story when an entry takes names out of a shared bucket)."""
    kind = resolution.keys[key].bucket.kind
    if members is None or resolution.client.is_ip:
        return BUCKET_WORDS.get(kind, "this ip")
    user, client_id = resolution.client.user or "", resolution.client.client_id or ""
    tags = members.tags(key, user, client_id)
    kind = kind_of_tags(tags) or kind
    if members.excepted(key, tags):
        return members.sharers(key, tags)
    return BUCKET_WORDS.get(kind, "this ip")


def answers_html(resolution: Resolution, keys: Iterable[str],
                 quotas: Mapping[Entity, Mapping[str, float]] | None = None,
                 members: Membership | None = None) -> str:
    """One card per key: the effective quota, the level and entry that set it, who shares it
    (with ``quotas``: the bucket :class:`~quota_core.domain.membership.Membership` puts the client
    in, naming the client ids or users an entry of their own takes out of it).

    One HTML block rather than a metric widget per key: ``st.metric`` makes the browser load
    and run the chart library behind its sparklines, which doubled the page's load time.
    ``members``: the bucket rules over ``quotas`` when the caller holds them already."""
    if members is None and quotas is not None:
        members = Membership(quotas)
    cards = []
    for key in keys:
        r = resolution.keys[key]
        if r.unlimited:
            detail = "no level sets it"
        else:
            exact = (f"{escape(exact_text(key, r.value))} · " if QUOTA_KEYS[key].is_byte_rate
                     else "")
            detail = (f'<b>level {r.level}</b> · <code>{escape(entity_text(r.source))}</code><br>'
                      f'{exact}shared by {escape(_sharers(resolution, key, members))}')
        cards.append(
            f'<div class="qc-answer" data-key="{key}" style="flex:1 1 0;min-width:190px;'
            f'border:1px solid #e3e3e3;border-radius:8px;padding:10px 14px">'
            f'<div style="font-size:0.875rem" title="{escape(QUOTA_KEYS[key].description)}">'
            f'{key}</div><div class="qc-answer-value" style="font-size:2rem;line-height:1.3">'
            f'{escape(short_value(key, r.value))}</div>'
            f'<div style="font-size:0.85em;color:#5f6368">{detail}</div></div>')
    return (f'<div class="qc-answers" style="display:flex;gap:12px;flex-wrap:wrap">'
            f'{"".join(cards)}</div>')


def ladder_html(resolution: Resolution, keys: Iterable[str] | None = None) -> str:
    """The ladder as an HTML table: a row per level (its concrete entity), a column per key;
    the winning entry of each key highlighted, entries it shadows struck through and grey."""
    keys = [k for k in (keys or KEY_ORDER) if k in resolution.keys]
    rungs = {r.level: r for r in LADDER}
    is_ip = resolution.client.is_ip
    head = "".join(f'<th style="{_HEAD}">{escape(k)}<br><span style="font-weight:400;'
                   f'color:#5f6368;font-size:0.85em">{escape(SHORT.get(k, ""))}</span></th>'
                   for k in keys)
    rows = []
    for step in resolution.ladder:
        won = bool(step.wins)
        present = bool(step.quotas)
        skipped = not step.applies  # Kafka never consults it (an empty client id or user)
        dim = "" if present and not skipped else "color:#9aa0a6;"
        rung = rungs.get(step.level)
        shared = "" if is_ip or rung is None else BUCKET_WORDS.get(rung.bucket, "")
        badge = ("background:#1e8e3e;color:white;" if won else
                 "background:#e8eaed;color:#3c4043;" if present else "color:#9aa0a6;")
        cells = [f'<td style="{_CELL}text-align:center;width:3.2em"><span style="{badge}'
                 f'display:inline-block;min-width:1.7em;border-radius:1em;padding:1px 6px;'
                 f'font-weight:700">{step.level}</span></td>',
                 f'<td style="{_CELL}{dim}"><span class="qc-entity">{entity_html(step.entity)}'
                 f'</span>' + ("" if present else ' <span style="font-size:0.85em">'
                               '(no entry)</span>')
                 + ('<br><span class="qc-skip" style="font-size:0.8em">not consulted: Kafka '
                    'skips this level for an empty client id or user</span>' if skipped else "")
                 + f'<br><code style="font-size:0.78em;color:#80868b;background:none;'
                   f'padding:0">{escape(step.pattern)}</code></td>']
        if not is_ip:
            cells.append(f'<td style="{_CELL}color:#5f6368;font-size:0.85em">{shared}</td>')
        for k in keys:
            if k in step.quotas:
                v = step.quotas[k]
                exact = escape(exact_text(k, v))
                if k in step.wins:
                    cells.append(f'<td class="qc-win" data-key="{k}" style="{_CELL}{_WIN}" '
                                 f'title="wins: {exact}">✔ {escape(_cell_value(k, v))}</td>')
                elif skipped:
                    cells.append(f'<td class="qc-skipped" data-key="{k}" '
                                 f'style="{_CELL}background:#f6f6f6" title="{exact} — not '
                                 f'consulted for this client"><span style="{_SHADOW}">'
                                 f'{escape(_cell_value(k, v))}</span> <span style="color:#80868b;'
                                 f'font-size:0.8em">not applied</span></td>')
                else:
                    winner = resolution.keys[k].level
                    cells.append(f'<td class="qc-shadowed" data-key="{k}" '
                                 f'style="{_CELL}background:#f6f6f6" title="{exact} — shadowed '
                                 f'by level {winner}"><span style="{_SHADOW}">'
                                 f'{escape(_cell_value(k, v))}</span> <span style="color:#80868b;'
                                 f'font-size:0.8em">↑ level {winner}</span></td>')
            else:
                cells.append(f'<td style="{_CELL}{_EMPTY}">·</td>')
        cls = "qc-rung qc-rung-win" if won else "qc-rung"
        rows.append(f'<tr class="{cls}" data-level="{step.level}">{"".join(cells)}</tr>')
    eff = []
    for k in keys:
        r = resolution.keys[k]
        text = "unlimited" if r.unlimited else f"{_cell_value(k, r.value)} · level {r.level}"
        eff.append(f'<td style="{_HEAD}border-top:2px solid #9aa0a6">{escape(text)}</td>')
    span = 2 if is_ip else 3
    shared_head = "" if is_ip else f'<th style="{_HEAD}">shared by</th>'
    foot = (f'<tr class="qc-effective"><td colspan="{span}" style="{_HEAD}'
            f'border-top:2px solid #9aa0a6">Effective quota (first level that sets the key)'
            f'</td>{"".join(eff)}</tr>')
    legend = (f'<div style="margin-top:6px;font-size:0.85em;color:#5f6368">'
              f'<span style="{_WIN}padding:1px 6px">✔ wins</span> the first level (top down) '
              f'that sets the key decides it &nbsp; '
              f'<span style="{_SHADOW}padding:1px 6px">shadowed</span> set lower down, '
              f'ignored for this client &nbsp; · not set at this level</div>')
    return (f'<div class="qc-ladder" style="overflow-x:auto">'
            f'<table style="border-collapse:collapse;width:100%;font-size:0.92em">'
            f'<thead><tr><th style="{_HEAD}">level</th><th style="{_HEAD}">entry on the '
            f'ladder of this client</th>{shared_head}{head}</tr></thead>'
            f'<tbody>{"".join(rows)}{foot}</tbody></table>{legend}</div>')


def traffic_rows(changes, limit: int = 500) -> list[dict]:
    """The table of buckets the brokers report whose quota a change moves (Edit and Plan
    previews, at today's rates): one row per ``quota_core.throttling.live.TrafficChange``."""
    return [{"broker": c.after.broker, "type": c.after.quota_type,
             "bucket": ", ".join(f"{t}={n}" for t, n in c.after.bucket.items() if n is not None),
             "rate now": format_rate(c.after.key, c.after.rate),
             "quota before → after": f"{format_quota(c.after.key, c.before.quota)} → "
                                     f"{format_quota(c.after.key, c.after.quota)}",
             "verdict": c.verdict} for c in changes[:limit]]
