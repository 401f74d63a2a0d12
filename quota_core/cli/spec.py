"""The CLI's text forms: ``--names``, ``--defaults``, ``--add``, ``--delete``.

``--names`` is a comma-separated list of ``type=name`` pairs in which ``\\,`` ``\\=`` and
``\\\\`` stand for a literal comma, equals sign and backslash, so any name can be written.
"""
from __future__ import annotations

from quota_core.domain.entities import ENTITY_TYPES
from quota_core.errors import ParseError
from quota_core.domain.units import parse_quota_value

__all__ = ["split_escaped", "parse_names", "format_names", "parse_defaults", "parse_add",
           "parse_delete", "escape_name"]

_ESCAPABLE = {",", "=", "\\"}


def split_escaped(text: str, sep: str) -> list[str]:
    """Split on unescaped ``sep``, keeping escapes in the pieces (for a second split)."""
    parts, current, i = [], [], 0
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            if i + 1 >= len(text) or text[i + 1] not in _ESCAPABLE:
                nxt = "the end" if i + 1 >= len(text) else repr(text[i + 1])
                raise ParseError(
                    f"{text!r}: a backslash before {nxt} at position {i + 1} escapes nothing. "
                    "Write \\, for a comma, \\= for an equals sign and \\\\ for a backslash.")
            current.append(text[i:i + 2])
            i += 2
            continue
        if ch == sep:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
        i += 1
    parts.append("".join(current))
    return parts


def _unescape(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        if text[i] == "\\":
            out.append(text[i + 1])
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def escape_name(name: str) -> str:
    return name.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def parse_names(text: str) -> list[tuple[str, str]]:
    """``"user=alice,client-id=app\\,1"`` → ``[("user", "alice"), ("client-id", "app,1")]``."""
    pairs = []
    for item in split_escaped(text, ","):
        pieces = split_escaped(item, "=")
        if len(pieces) < 2:
            raise ParseError(
                f"--names {text!r}: {item!r} is not type=name. Write e.g. "
                f"user=alice,client-id=app (escape , = \\ in names as \\, \\= \\\\).")
        entity_type = _unescape(pieces[0]).strip()
        name = _unescape("=".join(pieces[1:]))
        if entity_type not in ENTITY_TYPES:
            raise ParseError(f"--names {text!r}: unknown entity type {entity_type!r}. Use "
                             f"user, client-id or ip.")
        pairs.append((entity_type, name))
    return pairs


def format_names(pairs: list[tuple[str, str]]) -> str:
    """The inverse of :func:`parse_names`."""
    return ",".join(f"{t}={escape_name(n)}" for t, n in pairs)


def parse_defaults(text: str) -> list[str]:
    types = [t.strip() for t in text.split(",") if t.strip()]
    for t in types:
        if t not in ENTITY_TYPES:
            raise ParseError(f"--defaults {text!r}: unknown entity type {t!r}. Use user, "
                             f"client-id or ip, e.g. --defaults user,client-id.")
    if not types:
        raise ParseError("--defaults is empty: give entity types, e.g. --defaults user.")
    return types


def parse_add(text: str) -> list[tuple[str, float]]:
    """``"producer_byte_rate=10MB,request_percentage=50"`` → [(key, value), ...]."""
    out = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key or not value.strip():
            raise ParseError(f"--add {text!r}: {item!r} is not key=value. Write e.g. "
                             f"--add producer_byte_rate=1MiB,request_percentage=50.")
        try:
            out.append((key, parse_quota_value(key, value.strip())))
        except ParseError as exc:
            raise ParseError(f"--add {item}: {exc}", key=key) from None
    if not out:
        raise ParseError("--add is empty: give key=value pairs, e.g. --add producer_byte_rate=1MiB.")
    return out


def parse_delete(text: str) -> list[str]:
    keys = [k.strip() for k in text.split(",") if k.strip()]
    if not keys:
        raise ParseError("--delete is empty: give quota keys, e.g. --delete producer_byte_rate.")
    for k in keys:
        if "=" in k:
            raise ParseError(f"--delete {text!r}: {k!r} has a value; --delete takes key names "
                             f"only, e.g. --delete producer_byte_rate.")
    return keys
