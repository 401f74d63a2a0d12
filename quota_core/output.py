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
from .resolution import Resolution

__all__ = ["format_describe", "format_resolutions", "format_outcome", "resolution_to_json"]


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


def resolution_to_json(r: Resolution) -> dict:
    return {
        "entity": r.client.as_dict(),
        "assumptions": r.client.assumptions(),
        "quotas": {k: {"value": None if kr.value is None else json_number(kr.value), "level": kr.level,
                       "source": None if kr.source is None else kr.source.as_dict()}
                   for k, kr in sorted(r.keys.items())},
        "ladder": [{"level": s.level, "pattern": s.pattern, "entity": s.entity.as_dict(),
                    "quotas": {k: json_number(v) for k, v in sorted(s.quotas.items())},
                    "wins": list(s.wins), "shadowed": list(s.shadowed), "applies": s.applies}
                   for s in r.ladder],
        "bucket": {k: kr.bucket.as_dict() for k, kr in sorted(r.keys.items())},
    }


def _client_header(r: Resolution) -> str:
    # Names sanitised like Entity.__str__, so a name with ", " or "=" cannot fake another part.
    return "{" + ", ".join(f"{t}={sanitize(n)}" for t, n in r.client.as_dict().items()) + "}"


def format_resolutions(resolutions: Sequence[Resolution], fmt: str = "text") -> str:
    if fmt == "json":
        docs = [resolution_to_json(r) for r in resolutions]
        return _json(docs[0] if len(docs) == 1 else docs)
    blocks = []
    for r in resolutions:
        lines = [f"{k}={format_value(kr.value)} {kr.source}"
                 for k, kr in sorted(r.keys.items()) if kr.value is not None]
        if len(resolutions) > 1:
            lines.insert(0, _client_header(r))
        blocks.append("".join(line + "\n" for line in lines))
    return "\n".join(b for b in blocks if b)


def format_outcome(outcome: AlterOutcome) -> str:
    return _json({"validate_only": outcome.validate_only, "results": [
        {"entity": r.entity.as_dict(), "ok": r.ok, "error": r.error, "error_code": r.error_code}
        for r in outcome.results]})
