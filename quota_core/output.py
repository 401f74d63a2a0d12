"""Text and JSON renderings for the CLI: ``format_*`` return strings, the CLI prints them.

Text follows KIP-546: entities as ``{user=alice, client-id=<default>}`` with names sanitised,
``key=value`` lines sorted by key. JSON carries raw names and ``null`` for the default.
"""
from __future__ import annotations

import json
from typing import Mapping, Sequence

from .alterations import AlterOutcome
from .entities import Entity, sanitize
from .keys import format_value, json_number
from .live import BucketUsage, client_buckets
from .resolution import Resolution
from .units import format_quota, format_rate

__all__ = ["format_describe", "format_resolutions", "format_outcome", "resolution_to_json",
           "live_for_key", "format_throttled"]


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2) + "\n"


def format_describe(quotas: Mapping[Entity, Mapping[str, float]], fmt: str = "text") -> str:
    entities = sorted(quotas, key=Entity.sort_key)
    if fmt == "json":
        return _json([{"entity": e.as_dict(),
                       "quotas": {k: json_number(v) for k, v in sorted(quotas[e].items())}}
                      for e in entities])
    blocks = []
    for e in entities:
        lines = [str(e)] + [f"{k}={format_value(v)}" for k, v in sorted(quotas[e].items())]
        blocks.append("\n".join(lines) + "\n")
    return "\n".join(blocks)


def _num(value: float | None):
    return None if value is None else json_number(value)


def _broker_json(row: BucketUsage) -> dict:
    return {"broker": row.broker, "rate": _num(row.rate), "quota": _num(row.quota),
            "utilisation": row.utilisation, "throttle_ms": row.throttle_ms, "bucket": row.bucket}


def live_for_key(r: Resolution, key: str, rows: Sequence[BucketUsage]) -> dict:
    """What the brokers report for this client's bucket of ``key``, one entry per broker."""
    mine = [row for row in client_buckets(rows, r.client.user or "", r.client.client_id or "")
            if row.key == key]
    return {"throttled": any(row.throttled for row in mine),
            "brokers": [_broker_json(row) for row in sorted(mine, key=lambda x: x.broker)]}


def resolution_to_json(r: Resolution, live: Sequence[BucketUsage] | None = None) -> dict:
    quotas = {k: {"value": None if kr.value is None else json_number(kr.value), "level": kr.level,
                  "source": None if kr.source is None else kr.source.as_dict()}
              for k, kr in sorted(r.keys.items())}
    if live is not None and not r.client.is_ip:
        for k in quotas:
            quotas[k]["live"] = live_for_key(r, k, live)
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


def _client_header(r: Resolution) -> str:
    # Names sanitised like Entity.__str__, so a name with ", " or "=" cannot fake another part.
    return "{" + ", ".join(f"{t}={sanitize(n)}" for t, n in r.client.as_dict().items()) + "}"


def _live_text(key: str, row: BucketUsage) -> str:
    rate = "no rate" if row.rate is None else format_rate(key, row.rate)
    share = "" if row.utilisation is None else f" ({row.utilisation:.0%})"
    throttle = (f"throttled {row.throttle_ms:,.0f} ms" if row.throttle_ms
                else "over quota" if row.over_quota else "not throttled")
    return f"  live {row.broker}: {rate} of {format_quota(key, row.quota)}{share}, {throttle}"


def format_resolutions(resolutions: Sequence[Resolution], fmt: str = "text",
                       live: Sequence[BucketUsage] | None = None) -> str:
    if fmt == "json":
        docs = [resolution_to_json(r, live) for r in resolutions]
        return _json(docs[0] if len(docs) == 1 else docs)
    blocks = []
    for r in resolutions:
        lines = []
        for k, kr in sorted(r.keys.items()):
            if kr.value is not None:
                lines.append(f"{k}={format_value(kr.value)} {kr.source}")
            if live is not None and not r.client.is_ip:
                mine = [row for row in client_buckets(live, r.client.user or "",
                                                      r.client.client_id or "") if row.key == k]
                lines += [_live_text(k, row) for row in sorted(mine, key=lambda x: x.broker)]
        if len(resolutions) > 1:
            lines.insert(0, _client_header(r))
        blocks.append("".join(line + "\n" for line in lines))
    return "\n".join(b for b in blocks if b)


def format_outcome(outcome: AlterOutcome) -> str:
    return _json({"validate_only": outcome.validate_only, "results": [
        {"entity": r.entity.as_dict(), "ok": r.ok, "error": r.error, "error_code": r.error_code}
        for r in outcome.results]})


def format_throttled(rows: Sequence[BucketUsage], fmt: str = "text") -> str:
    """``--throttled``: one line (or JSON object) per bucket, in the order given."""
    if fmt == "json":
        return _json([{"broker": r.broker, "quota_type": r.quota_type, "key": r.key,
                       "bucket": r.bucket, "rate": _num(r.rate), "quota": _num(r.quota),
                       "utilisation": r.utilisation, "throttle_ms": r.throttle_ms,
                       "level": r.level,
                       "source": None if r.source is None else r.source.as_dict()}
                      for r in rows])
    lines = []
    for r in rows:
        tags = ", ".join(f"{t}={sanitize(n)}" for t, n in r.bucket.items() if n is not None)
        rate = "?" if r.rate is None else format_rate(r.key, r.rate)
        share = "" if r.utilisation is None else f" ({r.utilisation:.0%})"
        throttle = f"throttle {r.throttle_ms:,.0f} ms" if r.throttle_ms else "no throttle yet"
        where = "no quota" if r.source is None else f"{r.source} (level {r.level})"
        lines.append(f"{r.broker} {r.quota_type} {{{tags}}}: {rate} of "
                     f"{format_quota(r.key, r.quota)}{share}, {throttle}; set by {where}\n")
    return "".join(lines)
