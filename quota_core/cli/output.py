"""Text and JSON renderings for the CLI: ``format_*`` return strings, the CLI prints them.

Text follows KIP-546: entities as ``{user=alice, client-id=<default>}`` with names sanitised,
``key=value`` lines sorted by key. JSON carries raw names and ``null`` for the default.
``plain`` is the text layout for people: raw names (quoted only where a name could be misread, as Entity.display does:
``{user='CN=a,OU=b'}``, ``{user='<default>'}``) and values with their unit.
"""
from __future__ import annotations

import contextlib
import io
import json
from typing import TYPE_CHECKING, Mapping, Sequence, TextIO

from quota_core.domain.alterations import AlterOutcome, Alteration
from quota_core.domain.entities import DEFAULT_TEXT, Entity, display_name, sanitize
from quota_core.domain.keys import QUOTA_KEYS, format_value, json_number
from quota_core.domain.units import format_exact, format_quota, format_rate
from quota_core.domain.wording import against

if TYPE_CHECKING:  # imported where used: --describe needs none of them (start-up time)
    from quota_core.throttling.live import BucketUsage
    from quota_core.domain.resolution import Resolution
    from quota_core.throttling.spreads import Reach, Spread
    from quota_core.throttling.throttle import QuotaWindow

__all__ = ["format_describe", "write_describe", "format_resolutions", "format_outcome",
           "resolution_to_json", "live_for_key", "client_view_for", "format_throttled", "format_spread_grid",
           "entity_text", "format_parsed",
           "format_alteration", "format_plan", "format_key_change", "window_json",
           "says_where_audited"]

@contextlib.contextmanager
def says_where_audited(audit, err: TextIO):
    """Around a write: when it appended to the audit log (an intent, an outcome) and ``err``
    is a terminal, one line on it after, ``audit: PATH``, so the person who made the change
    knows where its record is. A script capturing stderr gets no extra line (the path is
    QUOTA_AUDIT_LOG, ``--audit-log`` or the documented default)."""
    before = audit.size()
    try:
        yield
    finally:
        if audit.size() != before and _at_terminal(err):
            err.write(f"audit: {audit.path}\n")


def _at_terminal(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


#: Output formats of the CLI.
FORMATS = ("text", "plain", "json")


def _plain_name(name: str | None) -> str:
    return DEFAULT_TEXT if name is None else display_name(name)


def entity_text(entity: Entity, fmt: str = "text") -> str:
    """``{user=alice, client-id=<default>}``: names sanitised (text, KIP-546) or raw
    (plain: :meth:`Entity.display`, quoted where they could be misread)."""
    return entity.display() if fmt == "plain" else str(entity)


def format_parsed(key: str, value: float) -> str:
    """A value as it will be sent, exactly, with its unit: ``10,000,000 B/s``."""
    spec = QUOTA_KEYS.get(key)
    if spec is not None and spec.is_byte_rate and float(value).is_integer():
        return f"{int(value):,} B/s"
    return format_exact(key, value)


def _value(key: str, value: float | None, fmt: str) -> str:
    if value is None:
        return "unlimited"
    if fmt == "plain":
        spec = QUOTA_KEYS.get(key)
        if spec is not None and spec.is_byte_rate:
            return f"{format_value(value)} ({format_quota(key, value)})"
        return format_quota(key, value)
    return format_value(value)


def format_alteration(alteration: Alteration, fmt: str = "text") -> str:
    """One line per entity for stderr: what --alter sends, parsed:
    ``{user=alice}: producer_byte_rate=10,000,000 B/s, delete request_percentage``."""
    parts = [f"delete {op.key}" if op.value is None else f"{op.key}={format_parsed(op.key, op.value)}"
             for op in alteration.ops]
    return f"{entity_text(alteration.entity, fmt)}: {', '.join(parts)}"


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2) + "\n"


def format_describe(quotas: Mapping[Entity, Mapping[str, float]], fmt: str = "text") -> str:
    """What ``--describe`` prints, as one string (:func:`write_describe` streams it)."""
    buffer = io.StringIO()
    write_describe(quotas, fmt, buffer)
    return buffer.getvalue()


#: Entities encoded and written at a time: output starts at once and memory stays flat.
_CHUNK = 2000


def write_describe(quotas: Mapping[Entity, Mapping[str, float]], fmt: str, out: TextIO) -> None:
    """``--describe``'s output written to ``out`` a chunk at a time, sorted by entity.

    JSON is encoded by orjson, byte for byte what ``json.dumps(doc, ensure_ascii=False,
    indent=2)`` gives (tests/cli/test_describe_output.py holds that): its indented layout and
    string escapes are json's; only floats differ (``1e-5`` for json's ``1e-05``), so a
    non-integral value goes in as its ``repr`` (an ``orjson.Fragment``). Text is KIP-546's,
    built line by line."""
    entities = sorted(quotas, key=Entity.sort_key)
    if fmt == "json":
        write = _byte_writer(out)
        if not entities:
            write(b"[]\n")
            return
        import orjson

        write(b"[\n")
        for start in range(0, len(entities), _CHUNK):
            chunk = orjson.dumps([{"entity": dict(e.parts), "quotas": _json_values(quotas[e])}
                                  for e in entities[start:start + _CHUNK]],
                                 option=orjson.OPT_INDENT_2)
            # "[\n  {...},\n  {...}\n]": the elements are already at the top list's indent.
            write(chunk[2:-2] if start == 0 else b",\n" + chunk[2:-2])
        write(b"\n]\n")
        return
    for start in range(0, len(entities), _CHUNK):
        text = "\n".join(
            _entity_block(e, quotas[e], fmt) for e in entities[start:start + _CHUNK])
        out.write(text if start == 0 else "\n" + text)


def _entity_block(e: Entity, values: Mapping[str, float], fmt: str) -> str:
    if len(values) == 1:
        for k, v in values.items():
            if fmt == "text" and type(v) is float and v.is_integer():
                return f"{e}\n{k}={int(v)}\n"  # _value's common case (format_value), inline
            return f"{entity_text(e, fmt)}\n{k}={_value(k, v, fmt)}\n"
    return "".join([entity_text(e, fmt) + "\n"] + [f"{k}={_value(k, v, fmt)}\n"
                                                    for k, v in sorted(values.items())])


def _json_values(values: Mapping[str, float]) -> dict:
    """``{key: json_number(value)}`` sorted by key, a float as its repr (see write_describe)."""
    if len(values) == 1:  # json_number's common case, inline (100,000s of entries)
        for k, v in values.items():
            if type(v) is float and v.is_integer() and -_INT_RANGE < v < _INT_RANGE:
                return {k: int(v)}
    import orjson

    doc = {}
    for k, v in sorted(values.items()):
        n = json_number(v)
        doc[k] = orjson.Fragment(repr(n)) if type(n) is float else n
    return doc


_INT_RANGE = float(2**63)


def _byte_writer(out: TextIO):
    """A function that writes UTF-8 bytes to ``out``: straight to its binary buffer when it
    has one and encodes as UTF-8 (after flushing the text already written to it), else
    decoded, as text (a StringIO, a stream in another encoding)."""
    buffer = getattr(out, "buffer", None)
    encoding = (getattr(out, "encoding", None) or "").lower().replace("_", "-")
    if buffer is None or encoding not in ("utf-8", "utf8"):
        return lambda data: out.write(data.decode("utf-8"))
    out.flush()

    def write(data: bytes) -> None:
        view = memoryview(data)
        while view:  # a raw stream (python -u) may take part of it
            view = view[buffer.write(view) or 0:]
    return write


def _num(value: float | None):
    return None if value is None else json_number(value)


def _broker_json(row: BucketUsage) -> dict:
    return {"broker": row.broker, "rate": _num(row.rate), "quota": _num(row.quota),
            "utilisation": row.utilisation, "throttle_ms": row.throttle_ms, "bucket": row.bucket,
            "throttled": row.throttled, "recent": row.recent}


def live_for_key(r: Resolution, key: str, rows: Sequence[BucketUsage],
                 quotas: Mapping[Entity, Mapping[str, float]] | None = None,
                 reach: Reach | None = None, clients=None) -> dict:
    """What the brokers report for this client's own bucket of ``key``, one entry per broker
    (``throttled`` only from that bucket), and apart, the ``other_buckets`` under the same
    user or client id that are not this client's. With ``clients`` (a
    :class:`quota_core.throttling.client_view.ClientSide`) and ``quotas``, ``client``: what the bucket's
    clients report themselves (KIP-714) and whether it agrees (docs/interfaces.md)."""
    from quota_core.throttling.live import client_buckets
    from quota_core.domain.membership import Membership

    from quota_core.throttling.live import live_verdict, recent_verdict

    user, client_id = r.client.user or "", r.client.client_id or ""
    mine = [row for row in client_buckets(rows, user, client_id, quotas) if row.key == key]
    unread = list(reach.unread) if reach is not None else []
    # The one rule (docs/interfaces.md, "Live verdicts"): null while a broker is not read.
    doc = {"throttled": live_verdict(mine, unread), "recent": recent_verdict(mine),
           "unread": unread,
           "brokers": [_broker_json(row) for row in sorted(mine, key=lambda x: x.broker)]}
    # What the spread sentence rests on: the brokers with traffic, the summed rate and the
    # ceiling (quota x brokers with traffic); each broker still judges on its own.
    doc.update({k: v for k, v in _client_spread(r, key, mine, rows, reach).as_dict().items()
                if k not in doc})
    if quotas is not None:
        from quota_core.throttling.live import other_buckets

        u, c = Membership(quotas).tags(key, user, client_id)
        doc["bucket"] = {"user": u, "client-id": c}
        doc["other_buckets"] = [
            {**_broker_json(row), "level": row.level,
             "source": None if row.source is None else row.source.as_dict()}
            for row in sorted(other_buckets(rows, user, client_id, quotas),
                              key=lambda x: (x.user or "", x.client_id or "", x.broker))
            if row.key == key]
        if clients is not None:
            doc["client"] = client_view_for(key, mine, (u, c), quotas, reach, clients,
                                            own_verdicts(r, rows, quotas, reach)).as_dict()
    return doc


def own_verdicts(r: Resolution, rows: Sequence[BucketUsage], quotas, reach) -> dict:
    """Key -> the live verdict of the client's own bucket of that key: a client's throttle
    time covers all its quotas, so a wait may be another key's."""
    from quota_core.throttling.live import client_buckets, live_verdict

    unread = list(reach.unread) if reach is not None else []
    own = client_buckets(rows, r.client.user or "", r.client.client_id or "", quotas)
    return {k: live_verdict([x for x in own if x.key == k], unread)
            for k in {x.key for x in own}}


def client_view_for(key: str, mine: Sequence[BucketUsage], bucket, quotas, reach, clients,
                    verdicts=None):
    """The client view (quota_core.throttling.client_view) of one bucket's key, from its live rows and
    the one live verdict (``verdicts``: key -> the verdict of the client's own bucket of
    each key, so that a wait another key causes is named as its)."""
    from quota_core.throttling.client_view import throttled_elsewhere
    from quota_core.throttling.live import live_verdict, recent_verdict
    from quota_core.domain.membership import Membership

    unread = list(reach.unread) if reach is not None else []
    return clients.view(key, live_verdict(mine, unread), mine, bucket, Membership(quotas),
                        recent=recent_verdict(mine),
                        elsewhere=throttled_elsewhere(key, verdicts or {}))


def _client_spread(r: Resolution, key: str, mine: Sequence[BucketUsage],
                   rows: Sequence[BucketUsage], reach: Reach | None = None) -> Spread:
    """The client's own bucket of ``key`` over every broker the scrape read (``reach``: also
    those that answered without quota figures, and those it could not read)."""
    from quota_core.throttling.spreads import Reach, spread

    reach = reach or Reach()
    return spread(key, mine, {row.broker for row in rows} | set(reach.read), r.keys[key].value,
                  reach.unread)


def _cell(key: str, value: float | None, fmt) -> str:
    return "—" if value is None else fmt(key, value)


def format_spread_grid(sp: Spread, indent: str = "  ") -> list[str]:
    """The bucket on every broker as a small table (broker, rate, use, throttle; the quota
    heads it), then the sentence that explains the spread."""
    table = [("broker", "rate", "use", "throttle")]
    for c in sp.cells:
        rate = "no traffic" if not c.traffic else _cell(sp.key, c.rate, format_rate)
        table.append((c.broker, rate,
                      "" if c.utilisation is None or not c.traffic else f"{c.utilisation:.0%}",
                      f"{c.throttle_ms:,.0f} ms" if c.throttle_ms else
                      "over quota" if c.throttled else ""))
    table += [(b, "not read", "", "") for b in sp.unread]
    widths = [max(len(row[i]) for row in table) for i in range(4)]
    lines = [indent + "  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip()
             for row in table]
    return lines + [f"{indent}{sp.sentence().text}"]


def resolution_to_json(r: Resolution, live: Sequence[BucketUsage] | None = None,
                       quotas: Mapping[Entity, Mapping[str, float]] | None = None,
                       reach: Reach | None = None, clients=None) -> dict:
    quota_set = quotas
    quotas = {k: {"value": None if kr.value is None else json_number(kr.value), "level": kr.level,
                  "source": None if kr.source is None else kr.source.as_dict()}
              for k, kr in sorted(r.keys.items())}
    if live is not None and not r.client.is_ip:
        for k in quotas:
            quotas[k]["live"] = live_for_key(r, k, live, quota_set, reach, clients)
    return {
        "entity": r.client.as_dict(),
        "assumptions": r.client.assumptions(),
        "quotas": quotas,
        "ladder": [{"level": s.level, "pattern": s.pattern, "entity": s.entity.as_dict(),
                    "quotas": {k: json_number(v) for k, v in sorted(s.quotas.items())},
                    "wins": list(s.wins), "shadowed": list(s.shadowed), "applies": s.applies}
                   for s in r.ladder],
        "bucket": {k: kr.bucket.as_dict() for k, kr in sorted(r.keys.items())},
    }


def _client_header(r: Resolution, fmt: str = "text") -> str:
    # Names sanitised like Entity.__str__, so a name with ", " or "=" cannot fake another part.
    name = _plain_name if fmt == "plain" else sanitize
    return "{" + ", ".join(f"{t}={name(n)}" for t, n in r.client.as_dict().items()) + "}"


def _live_text(key: str, row: BucketUsage) -> str:
    throttle = ("throttled recently, not now (the broker's throttle-time average still "
                f"holds {row.throttle_ms:,.0f} ms from earlier samples)" if row.recent
                else f"throttled {row.throttle_ms:,.0f} ms" if row.throttle_ms
                else "over quota" if row.over_quota else "not throttled")
    return f"  live {row.broker}: {against(key, row.rate, row.quota, row.utilisation)}, {throttle}"


def window_json(window: QuotaWindow) -> dict:
    """The quota window a verdict used: ``{"num": 11, "size_s": 1, "source": "…",
    "throttle_memory_s": 60}``; the last is ``metrics.num.samples`` ×
    ``metrics.sample.window.ms``, how long the broker's throttle-time average keeps a throttle
    (a verdict of ``"recent": true`` rests on it)."""
    return {"num": window.samples, "size_s": window.sample_s, "source": window.source,
            "throttle_memory_s": window.throttle_memory_ms / 1000}


def format_resolutions(resolutions: Sequence[Resolution], fmt: str = "text",
                       live: Sequence[BucketUsage] | None = None,
                       quotas: Mapping[Entity, Mapping[str, float]] | None = None,
                       window: QuotaWindow | None = None, reach: Reach | None = None,
                       clients=None) -> str:
    """``quotas`` (the quota set resolved against) decides each client's one bucket per key
    for the live figures; without it every bucket shape that could hold the client shows.
    ``window`` is the brokers' quota window the live verdict used: JSON gives it as
    ``window`` on each client with live figures, text names it once, at the end.
    ``clients`` (quota_core.throttling.client_view.ClientSide): what the clients pushed; each key with
    live figures then says what its bucket's clients report (JSON: ``live.client``; text:
    one ``client:`` line with the sentence)."""
    from quota_core.throttling.live import client_buckets

    if fmt == "json":
        docs = [resolution_to_json(r, live, quotas, reach, clients) for r in resolutions]
        if window is not None and live is not None:
            for doc, r in zip(docs, resolutions):
                if not r.client.is_ip:
                    doc["window"] = window_json(window)
        return _json(docs[0] if len(docs) == 1 else docs)
    blocks = []
    for r in resolutions:
        lines = []
        for k, kr in sorted(r.keys.items()):
            if kr.value is not None:
                lines.append(f"{k}={_value(k, kr.value, fmt)} "
                             f"{entity_text(kr.source, fmt)}")  # type: ignore[arg-type]
                lines.append(f"  level {kr.level}, shared by {_shared_by(r, k, quotas)}")
            if live is not None and not r.client.is_ip:
                mine = [row for row in client_buckets(live, r.client.user or "",
                                                      r.client.client_id or "", quotas)
                        if row.key == k]
                if mine:
                    # Every broker read, in broker order: one without this bucket says so.
                    sp = _client_spread(r, k, mine, live, reach)
                    by_broker = {row.broker: row for row in mine}
                    lines += [_live_text(k, by_broker[b]) if b in by_broker
                              else f"  live {b}: no traffic in this bucket" for b in sp.brokers]
                    lines += [f"  live {b}: not read, its figures are unknown"
                              for b in sp.unread]
                    lines.append(f"  across brokers: {sp.sentence().text}")
                elif reach is not None and reach.unread and kr.value is not None:
                    # Nothing read shows the bucket, and a broker was not read: unknown
                    # (quota_core.throttling.live.live_verdict), never "not throttled".
                    lines.append(f"  live: no broker read reports this bucket; "
                                 f"{', '.join(reach.unread)} not read: throttled or not "
                                 f"is unknown")
                if clients is not None and quotas is not None and (mine or kr.value is not None):
                    from quota_core.domain.membership import Membership

                    bucket = Membership(quotas).tags(k, r.client.user or "",
                                                     r.client.client_id or "")
                    lines.append("  client: " + client_view_for(
                        k, mine, bucket, quotas, reach, clients,
                        own_verdicts(r, live, quotas, reach)).sentence)
                if quotas is not None:
                    from quota_core.throttling.live import other_buckets

                    name = _plain_name if fmt == "plain" else sanitize
                    for row in sorted(other_buckets(live, r.client.user or "",
                                                    r.client.client_id or "", quotas),
                                      key=lambda x: (x.user or "", x.client_id or "", x.broker)):
                        if row.key != k:
                            continue
                        tags = ", ".join(f"{t}={name(n)}" for t, n in row.bucket.items()
                                         if n is not None)
                        lines.append(_live_text(k, row).replace(
                            "  live ", f"  another bucket {{{tags}}} on ", 1)
                            + ": not this client's")
        if len(resolutions) > 1:
            lines.insert(0, _client_header(r, fmt))
        blocks.append("".join(line + "\n" for line in lines))
    text = "\n".join(b for b in blocks if b)
    if window is not None and live is not None and any(not r.client.is_ip for r in resolutions):
        text += f"\nquota window {window.text()}: live rates are per broker over it\n"
    return text


def _shared_by(r: Resolution, key: str,
               quotas: Mapping[Entity, Mapping[str, float]] | None) -> str:
    """Who shares the client's bucket: the bucket's words, or, where an entry takes client
    ids (or users) out of it, the membership model's, naming them (as Resolve does)."""
    kr = r.keys[key]
    if quotas is None or r.client.is_ip:
        return kr.bucket.shared_by
    from quota_core.domain.membership import Membership

    members = Membership(quotas)
    tags = members.tags(key, r.client.user or "", r.client.client_id or "")
    return members.sharers(key, tags) if members.excepted(key, tags) else kr.bucket.shared_by


def format_outcome(outcome: AlterOutcome) -> str:
    return _json({"validate_only": outcome.validate_only, "results": [
        {"entity": r.entity.as_dict(), "ok": r.ok, "error": r.error, "error_code": r.error_code}
        for r in outcome.results]})


def format_throttled(rows: Sequence[BucketUsage], fmt: str = "text",
                     every: Sequence[BucketUsage] | None = None,
                     reach: Reach | None = None) -> str:
    """``--throttled``: one line (or JSON object) per bucket, in the order given; then each
    bucket over every broker (``every``: all the rows the scrape gave, so brokers without its
    traffic show too) with the sentence that explains the spread (JSON: ``spread`` on each
    row)."""
    from quota_core.throttling.spreads import Reach, bucket_spreads

    reach = reach or Reach()
    every = [*(every or ()), *rows]
    spreads = bucket_spreads(every, {r.broker for r in every} | set(reach.read), reach.unread)
    if fmt == "json":
        return _json([{"broker": r.broker, "quota_type": r.quota_type, "key": r.key,
                       "bucket": r.bucket, "rate": _num(r.rate), "quota": _num(r.quota),
                       "utilisation": r.utilisation, "throttle_ms": r.throttle_ms,
                       "level": r.level,
                       "source": None if r.source is None else r.source.as_dict(),
                       "current": r.current, "throttled": r.throttled, "recent": r.recent,
                       "spread": spreads[(r.quota_type, r.user, r.client_id)].as_dict()}
                      for r in rows])
    lines = []
    for r in rows:
        name = _plain_name if fmt == "plain" else sanitize
        tags = ", ".join(f"{t}={name(n)}" for t, n in r.bucket.items() if n is not None)
        figures = against(r.key, r.rate, r.quota, r.utilisation)
        throttle = (f"throttled recently, not now (throttle-time {r.throttle_ms:,.0f} ms is "
                    f"from earlier samples)" if r.recent
                    else f"throttle {r.throttle_ms:,.0f} ms" if r.throttle_ms
                    else "no throttle yet")
        where = ("no quota" if r.source is None
                 else f"{entity_text(r.source, fmt)} (level {r.level})")
        stale = "" if r.current else "; no client is in this bucket now (an old shape)"
        lines.append(f"{r.broker} {r.quota_type} {{{tags}}}: {figures}, {throttle}; set by {where}"
                     f"{stale}\n")
    # Each bucket once, over every broker: the client x broker view.
    for bucket in dict.fromkeys((r.quota_type, r.user, r.client_id) for r in rows):
        r = next(x for x in rows if (x.quota_type, x.user, x.client_id) == bucket)
        name = _plain_name if fmt == "plain" else sanitize
        tags = ", ".join(f"{t}={name(n)}" for t, n in r.bucket.items() if n is not None)
        lines.append(f"\n{{{tags}}} {r.quota_type}, quota {format_quota(r.key, r.quota)} on "
                     f"each broker:\n")
        lines += [line + "\n" for line in format_spread_grid(spreads[bucket])]
    return "".join(lines)


# --------------------------------------------------------------------------- plans
_SIGN = {"add": "+", "change": "~", "remove": "-"}


def format_key_change(key: str, before: float | None, after: float | None,
                      fmt: str = "text") -> str:
    """``producer_byte_rate 2097152 → 3145728`` (plain: with units); ``(not set)``."""
    def side(v: float | None) -> str:
        return "(not set)" if v is None else _value(key, v, fmt if fmt == "plain" else "plain")
    return f"{key} {side(before)} → {side(after)}"


def _unknown_note(traffic) -> str:
    """``, 5 unknown (broker 2 could not be read)`` when a verdict is unknown (issue 27)."""
    unknown = [t for t in traffic if t.throttled is None and t.verdict.startswith("unknown")]
    if not unknown:
        return ""
    from quota_core.throttling.live import brokers_text

    return (f", {len(unknown)} unknown ({brokers_text(unknown[0].unread)} could not be "
            f"read)")


def format_plan(plan, impact=None, fmt: str = "text", *, where: str = "",
                limit: int = 50) -> str:
    """A plan for people: each entity with its keys (+ add, ~ change, - remove), the
    unmanaged entries, and who gets a different effective quota."""
    from quota_core.planning.plan import change_kind

    lines = [f"Plan for {plan.source or 'the file'}"
             + (f" against {where}" if where else "")
             + f" ({len(plan.base)} entr{'y' if len(plan.base) == 1 else 'ies'} now, "
               f"{plan.base_hash[:19]}…):", ""]
    for c in plan.changes:
        lines.append(f"{_SIGN[c.action]} {c.action} {entity_text(c.entity, fmt)}")
        for k in c.keys:
            kind = change_kind(k)
            if kind == "add":
                text = f"{k.key} = {_value(k.key, k.after, 'plain')}"
            elif kind == "remove":
                text = f"{k.key} (was {_value(k.key, k.before, 'plain')})"
            else:
                text = (f"{k.key} {_value(k.key, k.before, 'plain')} → "
                        f"{_value(k.key, k.after, 'plain')}")
            lines.append(f"    {_SIGN[kind]} {text}")
    if not plan.changes:
        lines.append("No changes: the cluster already holds what the file says.")
    if plan.unmanaged:
        n = len(plan.unmanaged)
        lines += ["", f"Unmanaged: {n} entr{'y' if n == 1 else 'ies'} not in the file, left as "
                      f"{'it is' if n == 1 else 'they are'} (--prune would remove "
                      f"{'it' if n == 1 else 'them'}):"]
        shown = list(plan.unmanaged)[:limit]
        lines += [f"  {entity_text(e, fmt)}" for e in shown]
        if n > len(shown):
            lines.append(f"  … and {n - len(shown)} more")
    if impact is not None and plan.changes:
        moved = {(c.user, c.client_id) for c in impact.clients}
        lines += ["", f"Impact on known clients: {len(moved)} of {impact.clients_checked:,} "
                      f"checked get a different effective quota"
                      + (":" if moved else " (the changes are shadowed, or no known client "
                                           "resolves through them).")]
        for c in impact.clients[:limit]:
            lines.append(f"  {c.label}  {c.key}: {c.describe()}")
        if len(impact.clients) > limit:
            lines.append(f"  … and {len(impact.clients) - limit} more")
        if impact.ips:
            lines.append(f"Impact on ips: {len(impact.ips)}:")
            lines += [f"  {c.label}  {c.key}: {c.describe()}" for c in impact.ips[:limit]]
        if impact.traffic:
            newly = sum(t.verdict == "newly throttled" for t in impact.traffic)
            freed = sum(t.verdict == "freed" for t in impact.traffic)
            lines.append(f"At today's rates (live metrics): {len(impact.traffic)} bucket"
                         f"{'' if len(impact.traffic) == 1 else 's'} change quota; {newly} "
                         f"newly throttled, {freed} freed{_unknown_note(impact.traffic)}:")
            name = _plain_name if fmt == "plain" else sanitize
            for t in impact.traffic[:limit]:
                r = t.after
                tags = ", ".join(f"{k}={name(v)}" for k, v in r.bucket.items() if v is not None)
                lines.append(f"  {r.broker} {r.quota_type} {{{tags}}}: "
                             f"{format_rate(r.key, r.rate)}, quota "
                             f"{format_quota(r.key, t.before.quota)} → "
                             f"{format_quota(r.key, r.quota)}: {t.verdict}")
    lines += ["", f"{plan.summary()}."]
    return "\n".join(lines) + "\n"
