"""Export and import a whole quota set as JSON or YAML.

The document is ``{"format": "quota-console/1", "entries": [{"entity": {type: name-or-null},
"quotas": {key: value}}]}``: raw names, ``null`` for the default, so every name round-trips.
"""
from __future__ import annotations

import json
from typing import Any, Mapping

from .alterations import Alteration, diff_alteration
from .backend import QuotaSet
from .entities import Entity
from .keys import NON_FINITE, json_number
from .errors import ParseError, ValidationError

__all__ = ["FORMAT", "to_document", "from_document", "dumps", "loads", "import_plan"]

FORMAT = "quota-console/1"


def _sorted(quotas: Mapping[Entity, Mapping[str, float]]) -> list[Entity]:
    return sorted(quotas, key=Entity.sort_key)


def to_document(quotas: Mapping[Entity, Mapping[str, float]]) -> dict[str, Any]:
    return {"format": FORMAT, "entries": [
        {"entity": e.as_dict(), "quotas": {k: json_number(v) for k, v in sorted(quotas[e].items())}}
        for e in _sorted(quotas)]}


def from_document(doc: Any, source: str = "the document") -> QuotaSet:
    if not isinstance(doc, dict) or not isinstance(doc.get("entries"), list):
        raise ParseError(f"{source} is not a quota export: expected an object with an "
                         f"'entries' list (format {FORMAT}).")
    if doc.get("format", FORMAT) != FORMAT:
        raise ParseError(f"{source} says format {doc.get('format')!r}, not {FORMAT!r}: make it "
                         f"with --export (or add \"format\": \"{FORMAT}\" if it already follows "
                         f"that layout).")
    out: QuotaSet = {}
    for i, entry in enumerate(doc["entries"], start=1):
        where = f"{source}, entry {i}"
        if not isinstance(entry, dict) or not isinstance(entry.get("entity"), dict) \
                or not isinstance(entry.get("quotas"), dict):
            raise ParseError(f"{where}: expected {{'entity': {{...}}, 'quotas': {{...}}}}.")
        try:
            entity = Entity.from_mapping(entry["entity"])
        except ValidationError as exc:
            raise ParseError(f"{where}: {exc}") from exc
        if entity in out:
            raise ParseError(f"{where}: {entity} appears twice; merge its quotas into one entry.")
        quotas = {}
        for key, value in entry["quotas"].items():
            if isinstance(value, str) and value in NON_FINITE:
                value = NON_FINITE[value]
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                hint = ""
                if isinstance(value, str):
                    try:
                        float(value)
                        hint = (" (YAML reads 1e6 as text, and quotes make any number text: "
                                "write 1000000 or 1.0e+6.)")
                    except ValueError:
                        pass
                raise ParseError(f"{where}: {key}={value!r} is not a number.{hint}")
            quotas[str(key)] = float(value)
        out[entity] = quotas
    return out


def dumps(quotas: Mapping[Entity, Mapping[str, float]], fmt: str = "json") -> str:
    doc = to_document(quotas)
    if fmt == "json":
        return json.dumps(doc, ensure_ascii=False, indent=2) + "\n"
    if fmt == "yaml":
        return _yaml_dump(doc)
    raise ParseError(f"Unknown export format {fmt!r}: use json or yaml.")


def _yaml_dump(doc: Any) -> str:
    import yaml

    class Dumper(yaml.SafeDumper):
        pass

    def represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
        # PyYAML writes U+0085 (NEL) raw inside a single-quoted scalar and reads it back as a
        # line break, i.e. a space: a name holding one would come back as another name.
        # The double-quoted style escapes it as \N.
        style = '"' if "\x85" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Dumper.add_representer(str, represent_str)
    return yaml.dump(doc, Dumper=Dumper, allow_unicode=True, sort_keys=False)


def loads(text: str, fmt: str = "json", source: str = "the document") -> QuotaSet:
    try:
        if fmt == "json":
            doc = json.loads(text)
        elif fmt == "yaml":
            import yaml

            doc = yaml.safe_load(text)
        else:
            raise ParseError(f"Unknown import format {fmt!r}: use json or yaml.")
    except (ValueError, ImportError) as exc:  # json.JSONDecodeError and yaml.YAMLError
        raise ParseError(f"{source} is not valid {fmt}: {exc}") from exc
    except Exception as exc:  # yaml.YAMLError does not derive from ValueError
        raise ParseError(f"{source} is not valid {fmt}: {exc}") from exc
    return from_document(doc, source)


def import_plan(current: Mapping[Entity, Mapping[str, float]],
                desired: Mapping[Entity, Mapping[str, float]],
                replace: bool = False) -> list[Alteration]:
    """The alterations that bring ``current`` to ``desired``.

    Merge (default): set every key in ``desired``, leave everything else. Replace: also
    remove keys and entities that ``desired`` does not have.
    """
    plan = []
    for entity in _sorted({**current, **desired}):
        before = dict(current.get(entity, {}))
        if entity in desired:
            after = dict(desired[entity]) if replace else {**before, **desired[entity]}
        elif replace:
            after = {}
        else:
            continue
        alteration = diff_alteration(entity, before, after)
        if alteration.ops:
            plan.append(alteration)
    return plan
