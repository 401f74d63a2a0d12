"""Export and import a whole quota set as JSON or YAML.

The document is ``{"format": "quota-console/1", "entries": [{"entity": {type: name-or-null},
"quotas": {key: value}}]}``: raw names, ``null`` for the default, so every name round-trips.

:func:`loads` reads an export leniently (as ``--import`` always has). :func:`read_quota_file`
is the strict reader for files people edit, and the one reader of every command that takes
a quota file (``lint FILE``, ``plan``, ``--import``, ``analyze --quotas``, the Plan page;
:func:`quota_core.backends.files.read_quota_path` reads the file): it keeps the line of
every entry and key, and refuses, with the line number, what a lenient reader would let
through silently: a key twice in one mapping (the last would win), YAML anchors, aliases and
merge keys (which can hide a duplicate), unknown fields and quota keys (with a suggestion),
values that are not numbers, and every value or entity no quota may have
(:func:`quota_core.domain.validation.entry_problems`: NaN, infinity, 0 or less, an ip entity that is
not an address), so every reader refuses the same files with the same message.
"""
from __future__ import annotations

import bisect
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from quota_core.domain.alterations import Alteration, diff_alteration
from quota_core.domain.entities import QuotaSet
from quota_core.domain.entities import Entity
from quota_core.domain.keys import NON_FINITE, json_number, keys_for, too_large_message
from quota_core.errors import ParseError, ValidationError

__all__ = ["FORMAT", "MAX_DEPTH", "MAX_CHARS", "YAML_MAX_CHARS", "to_document",
           "from_document", "dumps", "loads", "import_plan", "QuotaFile", "read_quota_file",
           "format_of", "yaml_max_chars"]

FORMAT = "quota-console/1"
#: The deepest nesting a quota file may have (it needs 4: document, entries, entry, quotas).
#: Checked on the parser's event stream (YAML) and while reading (JSON), before anything
#: recursive sees the document: 100,000 ``[`` are refused at once, not after minutes.
MAX_DEPTH = 64
#: The most text a quota file may hold (what ``--import`` reads from disk, inputs.IMPORT_LIMIT).
MAX_CHARS = 64 * 2**20
#: The most text a YAML quota file may hold: what reads in a few seconds (measured: 100k
#: entries, 13 MB, in 6 s with libyaml; PyYAML's pure-Python parser is 15 times slower).
YAML_MAX_CHARS, YAML_MAX_CHARS_PURE = 16 * 2**20, 2 * 2**20


def yaml_max_chars() -> int:
    """:data:`YAML_MAX_CHARS`, or :data:`YAML_MAX_CHARS_PURE` where PyYAML has no libyaml."""
    import yaml

    return YAML_MAX_CHARS if getattr(yaml, "__with_libyaml__", False) else YAML_MAX_CHARS_PURE


def _sorted(quotas: Mapping[Entity, Mapping[str, float]]) -> list[Entity]:
    return sorted(quotas, key=Entity.sort_key)


def to_document(quotas: Mapping[Entity, Mapping[str, float]]) -> dict[str, Any]:
    return {"format": FORMAT, "entries": [
        {"entity": e.as_dict(), "quotas": {k: json_number(v) for k, v in sorted(quotas[e].items())}}
        for e in _sorted(quotas)]}


def from_document(doc: Any, source: str = "the document") -> QuotaSet:
    return _entries(doc, source, strict=False).quotas


@dataclass(frozen=True)
class QuotaFile:
    """A quota set read from a file, with where each entry and key is (1-based lines)."""

    quotas: QuotaSet
    source: str = "the document"
    entity_lines: dict[Entity, int] = field(default_factory=dict)
    key_lines: dict[tuple[Entity, str], int] = field(default_factory=dict)

    def line(self, entity: Entity, key: str | None = None) -> int | None:
        """The line of ``entity``'s entry (or of one of its keys), None if not known."""
        if key is not None and (entity, key) in self.key_lines:
            return self.key_lines[(entity, key)]
        return self.entity_lines.get(entity)

    def where(self, entity: Entity, key: str | None = None) -> str:
        """``quotas.yaml, line 12``: for messages about an entry of this file."""
        line = self.line(entity, key)
        return self.source if line is None else f"{self.source}, line {line}"


class _Map(dict):
    """A mapping read by the strict reader: its own line and each key's line."""

    line: int | None = None
    key_lines: dict = {}


class _Seq(list):
    line: int | None = None
    item_lines: list = []


_TOP_FIELDS = ("format", "entries")
_ENTRY_FIELDS = ("entity", "quotas")


def _unknown_field(name: Any, allowed: tuple[str, ...]) -> str:
    import difflib

    close = difflib.get_close_matches(str(name), allowed, n=1)
    hint = f", did you mean {close[0]}?" if close else "."
    return (f"unknown field {name!r}{hint} Allowed here: {', '.join(allowed)} (a YAML "
            f"comment starts with #).")


def _entries(doc: Any, source: str, strict: bool) -> QuotaFile:
    from quota_core.domain.validation import entry_problems, unknown_key_message

    def at(obj: Any, key: Any = None) -> int | None:
        if key is not None:
            return getattr(obj, "key_lines", {}).get(key)
        return getattr(obj, "line", None)

    if not isinstance(doc, dict) or not isinstance(doc.get("entries"), list):
        raise ParseError(f"{source} is not a quota export: expected an object with an "
                         f"'entries' list (format {FORMAT}).")
    if doc.get("format", FORMAT) != FORMAT:
        raise ParseError(f"{source} says format {doc.get('format')!r}, not {FORMAT!r}: make it "
                         f"with --export (or add \"format\": \"{FORMAT}\" if it already follows "
                         f"that layout).")
    if strict:
        for name in doc:
            if name not in _TOP_FIELDS:
                raise ParseError(f"{source}, line {at(doc, name)}: {_unknown_field(name, _TOP_FIELDS)}")
    out: QuotaSet = {}
    entity_lines: dict[Entity, int] = {}
    key_lines: dict[tuple[Entity, str], int] = {}
    items = doc["entries"]
    for i, entry in enumerate(items, start=1):
        line = (getattr(items, "item_lines", None) or [None] * i)[i - 1] if strict else None

        def where(key_line: int | None = None) -> str:
            if not strict:
                return f"{source}, entry {i}"
            return f"{source}, line {key_line or line} (entry {i})"

        if strict and isinstance(entry, dict):
            for name in entry:
                if name not in _ENTRY_FIELDS:
                    raise ParseError(f"{where(at(entry, name))}: "
                                     f"{_unknown_field(name, _ENTRY_FIELDS)}")
        if not isinstance(entry, dict) or not isinstance(entry.get("entity"), dict) \
                or not isinstance(entry.get("quotas"), dict):
            raise ParseError(f"{where()}: expected {{'entity': {{...}}, 'quotas': {{...}}}}.")
        try:
            entity = Entity.from_mapping(entry["entity"])
        except ValidationError as exc:
            raise ParseError(f"{where(at(entry, 'entity'))}: {exc}") from exc
        if entity in out:
            first = f" (first at line {entity_lines[entity]})" if strict else ""
            raise ParseError(f"{where()}: {entity.display()} appears twice{first}; merge its quotas "
                             f"into one entry.")
        quotas = {}
        for key, value in entry["quotas"].items():
            kline = at(entry["quotas"], key)
            if strict and (not isinstance(key, str) or key not in keys_for(entity.is_ip)):
                raise ParseError(f"{where(kline)}: {entity.display()}: "
                                 f"{unknown_key_message(str(key), entity.is_ip)}")
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
                raise ParseError(f"{where(kline)}: {key}={value!r} is not a number.{hint}")
            quotas[str(key)] = _number(value, str(key), where(kline))
            if kline is not None:
                key_lines[(entity, str(key))] = kline
        if strict:
            for problem in entry_problems(entity, quotas)[:1]:
                at_line = key_lines.get((entity, problem.key)) if problem.key else \
                    at(entry, "entity")
                raise ParseError(f"{where(at_line)}: {problem.message}")
        out[entity] = quotas
        if line is not None:
            entity_lines[entity] = line
    return QuotaFile(out, source, entity_lines, key_lines)


class _TooLarge(float):
    """A number written in a file beyond a double's range (``1e400``): its value is infinity,
    but it was not written as infinity, so it is refused as too large."""

    text = ""


def _json_float(text: str) -> float:
    number = float(text)
    if math.isinf(number):
        number = _TooLarge(number)
        number.text = text
    return number


def _number(value: float | int, key: str, where: str) -> float:
    """A quota value from a file as a float; a number too large for a double is refused."""
    try:
        number = float(value)
    except OverflowError:  # an integer with 309 digits or more
        raise ParseError(f"{where}: {too_large_message(key, str(value))}") from None
    if isinstance(value, _TooLarge):
        raise ParseError(f"{where}: {too_large_message(key, value.text)}")
    return number


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
    """A quota set from a JSON or YAML quota file: :func:`read_quota_file`'s strict reading
    and checks, without the lines."""
    return read_quota_file(text, fmt, source).quotas


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


# --------------------------------------------------------------------------- the strict reader
def format_of(name: str, text: str = "") -> str:
    """``yaml`` for a .yaml/.yml name, ``json`` for .json; otherwise guess from the text
    (a JSON document starts with ``{`` or ``[``)."""
    lower = str(name).lower()
    if lower.endswith((".yaml", ".yml")):
        return "yaml"
    if lower.endswith(".json"):
        return "json"
    return "json" if text.lstrip("\ufeff \t\r\n")[:1] in ("{", "[") else "yaml"


def read_quota_file(text: str, fmt: str = "json", source: str = "the document") -> QuotaFile:
    """Read a quota set people wrote or edited, strictly, keeping line numbers (see the
    module docstring for what is refused). Raises :class:`ParseError` naming the line, in one
    line of text. Bounded: at most :data:`MAX_CHARS` of text, :data:`MAX_DEPTH` levels."""
    if len(text) > MAX_CHARS:
        raise ParseError(f"{source} is larger than {MAX_CHARS // 2**20} MiB, the most a quota "
                         f"file may be. Check that it is the right file.")
    if fmt == "json":
        doc = _json_tree(text, source)
    elif fmt == "yaml":
        cap = yaml_max_chars()
        if len(text) > cap:
            raise ParseError(
                f"{source} is {len(text) / 2**20:.1f} MiB of YAML, over the {cap // 2**20} MiB "
                f"a YAML quota file may be (a larger one takes more than a few seconds to "
                f"read). Convert it to JSON, which may be up to {MAX_CHARS // 2**20} MiB: "
                f"python3 -c 'import json, sys, yaml; json.dump(yaml.safe_load(sys.stdin), "
                f"sys.stdout)' < FILE.yaml > FILE.json")
        doc = _yaml_tree(text, source)
    else:
        raise ParseError(f"Unknown import format {fmt!r}: use json or yaml.")
    return _entries(doc, source, strict=True)


def _dup_key(source: str, line: int | None, key: Any, first: int | None, what: str) -> ParseError:
    return ParseError(f"{source}, line {line}: {key!r} appears twice in one {what} (first at "
                      f"line {first}); a reader keeps only one of them silently. Remove or "
                      f"merge the other.")


def _yaml_loader(text: str, fast: bool = True) -> Any:
    """A safe YAML loader over ``text``: libyaml's (``CSafeLoader``) when PyYAML has it and
    ``fast``, else the pure-Python one (10 times slower, its error messages more precise)."""
    import yaml

    if fast and getattr(yaml, "__with_libyaml__", False):
        return yaml.CSafeLoader(text)
    return yaml.SafeLoader(text)


def _yaml_tree(text: str, source: str) -> Any:
    """YAML in one pass over the parser's events, building the tree with the line of every
    key and item: no node graph (which held ~130 bytes of marks per scalar and took 90 s and
    900 MB for 100k entries), each scalar typed by PyYAML's own resolver and constructors.
    Anchors, aliases, merge keys, duplicate keys and nesting deeper than :data:`MAX_DEPTH`
    are refused as they come."""
    import yaml

    try:
        return _yaml_events_tree(_yaml_loader(text), source)
    except yaml.YAMLError as exc:
        if len(text) <= YAML_RETRY_CHARS and getattr(yaml, "__with_libyaml__", False):
            try:  # the pure-Python parser names the character at fault; libyaml does not
                _yaml_events_tree(_yaml_loader(text, fast=False), source)
            except yaml.YAMLError as slow:
                exc = slow
            except (ParseError, ValueError, OverflowError, RecursionError):
                pass
        raise ParseError(f"{source} is not valid yaml: {_yaml_problem(exc)}") from None
    except RecursionError:
        raise _too_deep(source, None) from None
    except (ValueError, OverflowError) as exc:  # a constructor's: int('9' * 5000), a date
        reason = " ".join(str(exc).split())[:200]
        raise ParseError(f"{source} holds a value that cannot be read ({reason}).") from None


#: A broken YAML file up to this size is parsed again by the pure-Python parser, whose error
#: names the character at fault (a fraction of a second); a larger one keeps libyaml's.
YAML_RETRY_CHARS = 2**20


def _yaml_events_tree(loader: Any, source: str) -> Any:
    import yaml
    from yaml import events as ev

    merge_tag = "tag:yaml.org,2002:merge"
    str_tag = "tag:yaml.org,2002:str"
    constructors = type(loader).yaml_constructors

    def scalar(event: Any, merge_is_a_key: bool = False) -> tuple[str, Any]:
        tag = event.tag
        if tag is None or tag == "!":
            tag = loader.resolve(yaml.ScalarNode, event.value, event.implicit)
        if tag == merge_tag and merge_is_a_key:
            raise ParseError(
                f"{source}, line {event.start_mark.line + 1}: a merge key (<<) is not allowed: "
                f"it can hide a duplicate entry or key. Write the mapping out in full.")
        if tag == str_tag:
            return tag, event.value
        node = yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark, event.style)
        construct = constructors.get(tag)
        # An unknown tag (!!python/name, !custom): the loader's own refusal (ConstructorError).
        return tag, (construct(loader, node) if construct is not None
                     else loader.construct_object(node))

    def refuse_anchor(event: Any) -> None:
        line = event.start_mark.line + 1
        if isinstance(event, ev.AliasEvent):
            raise ParseError(
                f"{source}, line {line}: the alias *{event.anchor} repeats another part of "
                f"the file. A quota file may not use YAML anchors and aliases (&name, *name): "
                f"they can hide a duplicate entry. Write each entry out in full.")
        raise ParseError(
            f"{source}, line {line}: the anchor &{event.anchor} is not allowed. A quota file "
            f"may not use YAML anchors and aliases (&name, *name): they can hide a duplicate "
            f"entry. Write each entry out in full.")

    def not_a_word(line: int) -> ParseError:
        return ParseError(f"{source}, line {line}: a key must be a plain word such as "
                          f"producer_byte_rate.")

    root: Any = None
    stack: list[Any] = []  # the open collections, innermost last
    pending: list[Any] = []  # per open mapping: its key waiting for a value, or _NO_KEY
    documents = 0
    # One branch per event class (the parser makes these exact classes): this loop runs
    # once per event, 16 per entry of an export.
    try:
        while True:
            event = loader.get_event()
            kind = type(event)
            if kind is ev.ScalarEvent:
                if event.anchor:
                    refuse_anchor(event)
                if stack and pending and stack[-1] is pending[-1][0] \
                        and pending[-1][1] is _NO_KEY:
                    line = event.start_mark.line + 1
                    key = scalar(event, merge_is_a_key=True)[1]
                    mapping = stack[-1]
                    try:
                        if key in mapping:
                            raise _dup_key(source, line, key, mapping.key_lines[key],
                                           "mapping")
                    except TypeError:  # an unhashable key (a !!set, ...)
                        raise not_a_word(line) from None
                    mapping.key_lines[key] = line
                    pending[-1][1] = key
                    continue
                value = scalar(event)[1]
                line = event.start_mark.line + 1
            elif kind is ev.MappingStartEvent or kind is ev.SequenceStartEvent:
                line = event.start_mark.line + 1
                if event.anchor:
                    refuse_anchor(event)
                if len(stack) >= MAX_DEPTH:
                    raise _too_deep(source, line)
                if stack and pending and stack[-1] is pending[-1][0] \
                        and pending[-1][1] is _NO_KEY:
                    raise not_a_word(line)
                if kind is ev.MappingStartEvent:
                    value = _Map()
                    value.line, value.key_lines = line, {}
                    pending.append([value, _NO_KEY])
                else:
                    value = _Seq()
                    value.line, value.item_lines = line, []
                stack.append(value)
                continue
            elif kind is ev.MappingEndEvent:
                value = stack.pop()
                pending.pop()
                line = value.line
            elif kind is ev.SequenceEndEvent:
                value = stack.pop()
                line = value.line
            elif kind is ev.AliasEvent:
                refuse_anchor(event)
            elif kind is ev.DocumentStartEvent:
                documents += 1
                if documents > 1:
                    raise ParseError(f"{source} is not valid yaml: line "
                                     f"{event.start_mark.line + 1}: a second document (---); "
                                     f"a quota file is one document.")
                continue
            elif kind is ev.StreamEndEvent or event is None:
                return root
            else:  # the stream's start, a document's end
                continue
            # A finished value: the root, an item of a sequence, or a mapping's value.
            if not stack:
                root = value
            elif pending and stack[-1] is pending[-1][0]:
                stack[-1][pending[-1][1]] = value
                pending[-1][1] = _NO_KEY
            else:
                stack[-1].append(value)
                stack[-1].item_lines.append(line)
    finally:
        loader.dispose()


#: A mapping waiting for its next key (no key read yet).
_NO_KEY = object()


def _too_deep(source: str, line: int | None) -> ParseError:
    where = f"{source}, line {line}" if line else source
    return ParseError(f"{where}: nested more than {MAX_DEPTH} levels deep, which no quota file "
                      f"is (it needs 4): it is not a quota file.")


def _yaml_problem(exc: Exception) -> str:
    """PyYAML's error (several lines, with a caret under the text) as one line: where, what,
    and while doing what (docs/interfaces.md promises one line per error)."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None)
    if mark is None or not problem:
        if hasattr(exc, "position") and hasattr(exc, "reason"):  # yaml.reader.ReaderError
            character = getattr(exc, "character", "")
            if isinstance(character, str) and len(character) == 1:
                character = ord(character)
            code = f" #x{character:04x}" if isinstance(character, int) else ""
            return f"character {exc.position + 1}{code}: {exc.reason}"
        return " ".join(str(exc).split("\n  in ")[0].split())
    text = f"line {mark.line + 1}, column {mark.column + 1}: {problem}"
    context, context_mark = getattr(exc, "context", None), getattr(exc, "context_mark", None)
    if context:
        text += f" ({context}" + (f" at line {context_mark.line + 1}" if context_mark else "") + ")"
    return " ".join(text.split())


_JSON_WS = re.compile(r"[ \t\n\r]*")


def _json_tree(text: str, source: str) -> Any:
    """JSON with the line of every object key and array item. The text is first checked by
    :mod:`json` (its error messages), then scanned once more here for the positions: the
    containers here, every key and scalar by ``JSONDecoder.raw_decode`` (public)."""
    scalar = json.JSONDecoder(parse_float=_json_float).raw_decode

    try:
        json.loads(text)
    except ValueError as exc:
        raise ParseError(f"{source} is not valid json: {exc}") from exc
    except RecursionError:
        raise _too_deep(source, None) from None
    starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def line_of(pos: int) -> int:
        return bisect.bisect_right(starts, pos)

    def skip(pos: int) -> int:
        return _JSON_WS.match(text, pos).end()  # type: ignore[union-attr]

    def value(pos: int, depth: int = 1) -> tuple[Any, int]:
        pos = skip(pos)
        ch = text[pos]
        if ch in "{[" and depth > MAX_DEPTH:
            raise _too_deep(source, line_of(pos))
        if ch == "{":
            obj = _Map()
            obj.line, obj.key_lines = line_of(pos), {}
            pos = skip(pos + 1)
            if text[pos] == "}":
                return obj, pos + 1
            while True:
                pos = skip(pos)
                kline = line_of(pos)
                key, pos = scalar(text, pos)
                pos = skip(pos) + 1  # the colon
                item, pos = value(pos, depth + 1)
                if key in obj:
                    raise _dup_key(source, kline, key, obj.key_lines[key], "object")
                obj[key], obj.key_lines[key] = item, kline
                pos = skip(pos)
                if text[pos] == "}":
                    return obj, pos + 1
                pos += 1  # the comma
        if ch == "[":
            arr = _Seq()
            arr.line, arr.item_lines = line_of(pos), []
            pos = skip(pos + 1)
            if text[pos] == "]":
                return arr, pos + 1
            while True:
                pos = skip(pos)
                arr.item_lines.append(line_of(pos))
                item, pos = value(pos, depth + 1)
                arr.append(item)
                pos = skip(pos)
                if text[pos] == "]":
                    return arr, pos + 1
                pos += 1
        return scalar(text, pos)  # a string, number, true/false/null, NaN or ±Infinity

    try:
        return value(0)[0]
    except RecursionError:
        raise _too_deep(source, None) from None
