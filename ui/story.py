"""Resolve's sentences as escaped HTML: names are shown raw, never interpreted as markup.

Every sentence comes from :mod:`quota_core.throttling.story` (one verdict per key) or from the existing
explanations (:func:`quota_core.explain_key`, :func:`quota_core.domain.shadows.shadow_note_parts`).
"""
from __future__ import annotations

from html import escape
from typing import Iterable

from quota_core.throttling import STATUS, Sentence

__all__ = ["sentence_html", "sentences_html", "note_html", "notes_html", "shared_verdicts"]

_TONE = {  # background, border
    "throttled": ("#fdecea", "#f5c2c0"),
    "ok": ("#e8f5e9", "#b7dfb9"),
    # Unknown (a broker not read) and throttled recently: never the green of an all-clear.
    "unknown": ("#fff8e1", "#f5d37a"),
    "recent": ("#fff3e0", "#f6c58f"),
    "other": ("#f1f3f4", "#dadce0"),
    "plain": ("transparent", "transparent"),
}


def _tone(sentence: Sentence) -> str:
    if sentence.claims.get("subject") == "other":
        return "other"
    if sentence.kind in (STATUS, "spread"):  # quota_core.throttling.spreads.SPREAD
        throttled = sentence.claims.get("throttled")
        if throttled:
            return "throttled"
        # Green only for "not throttled" with every broker read (quota_core.throttling.live.live_verdict).
        if throttled is None or sentence.claims.get("unread"):
            return "unknown"
        return "recent" if sentence.claims.get("recent") else "ok"
    return "plain"


def sentence_html(sentence: Sentence) -> str:
    bg, border = _TONE[_tone(sentence)]
    return (f'<div class="qc-sentence" data-kind="{sentence.kind}" '
            f'data-subject="{escape(str(sentence.claims.get("subject", "")))}" '
            f'style="background:{bg};border:1px solid {border};border-radius:6px;'
            f'padding:6px 10px;margin:4px 0">{escape(sentence.text)}</div>')


def sentences_html(sentences: Iterable[Sentence]) -> str:
    return "".join(sentence_html(s) for s in sentences)


_TAG = {"code": "code", "em": "em"}  # quota_core.domain.shadows.CODE / EM


def note_html(parts) -> str:
    """A note as escaped HTML: ``parts`` are ``(style, text)`` pairs
    (:func:`quota_core.domain.shadows.shadow_note_parts`), each part escaped and, for an entity or a
    stressed word, wrapped in its tag. Markup is never read out of the text, so a name with
    ``*`` or a backtick is shown as written (issue 32, finding 6). A plain string is one
    plain part."""
    if isinstance(parts, str):
        return escape(parts)
    out = []
    for style, text in parts:
        tag = _TAG.get(style)
        out.append(f"<{tag}>{escape(text)}</{tag}>" if tag else escape(text))
    return "".join(out)


def notes_html(items: Iterable) -> str:
    """A bulleted list of notes (each as :func:`note_html` takes it)."""
    rows = []
    for parts in items:
        rows.append(f"<li>{note_html(parts)}</li>")
    return f'<ul class="qc-notes" style="margin:0 0 0 1.2em">{"".join(rows)}</ul>'


_SETTINGS: dict[int, tuple[float, object]] = {}
#: Re-read the brokers' settings at most this often (the quota window and the callback change
#: only by a broker restart or a dynamic config change).
_SETTINGS_TTL_S = 60.0


def cluster_settings(backend):
    """The broker settings of the cluster behind ``backend`` (:mod:`quota_core.throttling.brokers`;
    Kafka's defaults when they cannot be read, saying why); cached a minute per connection."""
    import threading
    import time

    from quota_core.throttling import ClusterSettings, read_settings

    if backend is None:
        return ClusterSettings.defaults()
    inner = getattr(backend, "inner", backend)
    hit = _SETTINGS.get(id(inner))
    if hit is not None and time.monotonic() - hit[0] < _SETTINGS_TTL_S:
        return hit[1]
    lock = getattr(backend, "_lock", None) or threading.RLock()
    with lock:
        settings = read_settings(inner)
    _SETTINGS[id(inner)] = (time.monotonic(), settings)
    return settings


def cluster_window(backend):
    """The quota window of the cluster behind ``backend`` (the one most brokers have)."""
    return cluster_settings(backend).window()


def shared_verdicts(resolution, keys, quotas, rows, window, members, unread=()):
    """:func:`quota_core.throttling.verdict.verdicts` with the snapshot's bucket rules (``members``,
    :meth:`ui.registry.Snapshot.members`) rather than a fresh index per call; ``unread`` the
    brokers whose figures are unknown (:func:`ui.live.frame_unread`)."""
    from quota_core.throttling import key_verdict

    unread = tuple(unread)
    return [key_verdict(resolution, k, quotas, rows, window, members, unread=unread)
            for k in keys]
