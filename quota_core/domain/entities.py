"""Quota entities: a map from entity type (user, client-id, ip) to a name or the default.

The default entity of a type is ``None`` here, exactly as in the protocol (a null name).
A user literally named ``"<default>"`` is an ordinary name; only the text formats print the
default as ``<default>`` and sanitise real names so the two cannot be confused.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Mapping
from urllib.parse import quote, unquote_plus

from quota_core.errors import EntityError
from quota_core.domain.limits import MAX_NAME_BYTES, name_length_problem

__all__ = [
    "ClusterInfo",
    "QuotaSet",
    "USER",
    "CLIENT_ID",
    "IP",
    "ENTITY_TYPES",
    "DEFAULT_TEXT",
    "Entity",
    "sanitize",
    "desanitize",
    "display_name",
    "entity_to_json",
    "entity_from_json",
]

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
#: Every entity type, in the order entities are printed.
ENTITY_TYPES: tuple[str, ...] = (USER, CLIENT_ID, IP)
_TYPE_ORDER = {t: i for i, t in enumerate(ENTITY_TYPES)}
#: How the default entity is printed; never a name.
DEFAULT_TEXT = "<default>"


def sanitize(name: str) -> str:
    """Kafka's ``Sanitizer.sanitize``: URL-encode, with ``*``→``%2A``, space→``%20``, ``~``→``%7E``.

    Java's URLEncoder keeps ``*`` and encodes ``~``; Python's ``quote`` does the opposite
    for ``~``, and encodes ``*`` already, so only ``~`` needs fixing here.
    """
    if _UNRESERVED(name):  # nothing to encode (most names): quote would return it as is
        return name
    # Java's String.getBytes(UTF_8) turns a lone surrogate into '?': so does "replace".
    return quote(name.encode("utf-8", "replace"), safe="").replace("~", "%7E")


#: Names made only of what both URLEncoder and quote leave alone (``~`` is not among them).
_UNRESERVED = re.compile(r"[A-Za-z0-9_.\-]*").fullmatch


def _is_utf8_text(name: str) -> bool:
    """False when ``name`` holds a lone surrogate (from undecodable bytes: argv, a file)."""
    try:
        name.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def _first_surrogate(name: str) -> str:
    char = next(c for c in name if "\ud800" <= c <= "\udfff")
    return f"U+{ord(char):04X}" + (f", from the byte 0x{ord(char) - 0xDC00:02X}"
                                    if 0xDC80 <= ord(char) <= 0xDCFF else "")


_PLAIN_NAME = re.compile(r"^[^\s,={}\"\\](?:[^,={}\"\\]*[^\s,={}\"\\])?$")


def display_name(name: str) -> str:
    """A raw name as people read it: as is, or JSON-quoted where it could be misread."""
    if name != DEFAULT_TEXT and _PLAIN_NAME.match(name) and name.isprintable():
        return name
    return json.dumps(name, ensure_ascii=False)


def desanitize(name: str) -> str:
    """Kafka's ``Sanitizer.desanitize`` (Java's URLDecoder: ``+`` is a space)."""
    return unquote_plus(name)


def _describe_type(entity_type: str) -> str:
    return {USER: "user", CLIENT_ID: "client id", IP: "ip"}.get(entity_type, entity_type)


@dataclass(frozen=True, slots=True)
class Entity:
    """An immutable, hashable quota entity.

    ``parts`` holds ``(type, name)`` pairs in the order user, client-id, ip; a name of
    ``None`` is the default entity of that type. Build one with :meth:`of` or
    :meth:`from_mapping`; both check the rules every broker enforces.
    """

    parts: tuple[tuple[str, str | None], ...]

    # -- construction -------------------------------------------------------------------
    @classmethod
    def from_mapping(cls, mapping: Mapping[str, str | None]) -> "Entity":
        """Build from ``{type: name-or-None}``; raises :class:`EntityError` if no broker
        would accept it."""
        return cls.from_pairs(mapping.items())

    @classmethod
    def from_pairs(cls, pairs: Iterable[tuple[str, str | None]]) -> "Entity":
        seen: dict[str, str | None] = {}
        for entity_type, name in pairs:
            if entity_type not in _TYPE_ORDER:
                raise EntityError(
                    f"Unknown entity type {entity_type!r}: use one of user, client-id, ip.",
                    entity_type=entity_type,
                )
            if entity_type in seen:
                raise EntityError(
                    f"Entity type {entity_type} is given twice: an entity has at most one "
                    f"name per type.",
                    entity_type=entity_type,
                )
            if name is not None and not isinstance(name, str):
                raise EntityError(f"The {entity_type} name must be a string, not {name!r}.")
            if name == "":
                raise EntityError(
                    f"Empty {entity_type} not supported: give a non-empty "
                    f"{_describe_type(entity_type)} name, or use the default "
                    f"{_describe_type(entity_type)} (--defaults {entity_type}).",
                    entity_type=entity_type,
                )
            if name is not None and not _is_utf8_text(name):
                raise EntityError(
                    f"The {_describe_type(entity_type)} name {name!r} is not valid text: it "
                    f"holds a lone surrogate ({_first_surrogate(name)}), which is what invalid "
                    f"UTF-8 bytes become. Kafka names are UTF-8: write the name in UTF-8 "
                    f"(check the terminal's or the file's encoding).",
                    entity_type=entity_type,
                )
            if name is not None and len(name) > MAX_NAME_BYTES // 4:  # cheap pre-check
                too_long = name_length_problem(entity_type, name)
                if too_long:
                    raise EntityError(too_long, entity_type=entity_type)
            seen[entity_type] = name
        if not seen:
            raise EntityError(
                "An empty entity is not a quota entity: name a user, a client id, or an ip "
                "(or the default of one of them)."
            )
        if IP in seen and len(seen) > 1:
            raise EntityError(
                "An ip entity cannot be combined with user or client-id: ip quotas "
                "(connection_creation_rate) stand alone; alter them in a separate entity.",
            )
        return cls(tuple(sorted(seen.items(), key=lambda kv: _TYPE_ORDER[kv[0]])))

    @classmethod
    def of(cls, *, user: str | None | type[...] = ..., client_id: str | None | type[...] = ...,
           ip: str | None | type[...] = ...) -> "Entity":
        """Keyword shorthand: ``Entity.of(user="alice", client_id=None)``.

        ``None`` is the default entity; leave a keyword out to leave that type out.
        """
        pairs = [(t, v) for t, v in ((USER, user), (CLIENT_ID, client_id), (IP, ip))
                 if v is not ...]
        return cls.from_pairs(pairs)  # type: ignore[arg-type]

    # -- access ---------------------------------------------------------------------------
    @property
    def types(self) -> tuple[str, ...]:
        return tuple(t for t, _ in self.parts)

    def has(self, entity_type: str) -> bool:
        return any(t == entity_type for t, _ in self.parts)

    def name(self, entity_type: str) -> str | None:
        """The name for ``entity_type`` (``None`` for the default); KeyError if absent."""
        for t, n in self.parts:
            if t == entity_type:
                return n
        raise KeyError(entity_type)

    def as_dict(self) -> dict[str, str | None]:
        return dict(self.parts)

    def __iter__(self) -> Iterator[tuple[str, str | None]]:
        return iter(self.parts)

    @property
    def is_ip(self) -> bool:
        return self.has(IP)

    # -- text -----------------------------------------------------------------------------
    def __str__(self) -> str:
        """The KIP-546 form: ``{user=alice, client-id=<default>}``, names sanitised."""
        if len(self.parts) == 1:  # the same text, without a generator (describe prints 100,000s)
            ((t, n),) = self.parts
            return f"{{{t}={DEFAULT_TEXT if n is None else sanitize(n)}}}"
        return "{" + ", ".join(
            f"{t}={DEFAULT_TEXT if n is None else sanitize(n)}" for t, n in self.parts
        ) + "}"

    def display(self) -> str:
        """For people: raw names, double-quoted only where a name could be misread (``,`` ``=``
        braces, quotes, edge spaces, or a name spelled ``<default>``); the default entity
        unquoted as ``<default>``: ``{user="CN=etl,OU=data", client-id=<default>}``."""
        return "{" + ", ".join(f"{t}={DEFAULT_TEXT if n is None else display_name(n)}"
                               for t, n in self.parts) + "}"

    def sort_key(self) -> tuple:
        """A total order: part by part, by type (user, client-id, ip), then the default
        before names, then names; an entity before its extensions. A flat tuple, three items
        a part (the order of the nested ``((type, default?, name), ...)``, but compared
        faster: describe sorts 100,000s)."""
        parts = self.parts
        if len(parts) == 1:
            ((t, n),) = parts
            return (_TYPE_ORDER[t], n is not None, n or "")
        return tuple(x for t, n in parts for x in (_TYPE_ORDER[t], n is not None, n or ""))

    def describe(self) -> str:
        """Plain words for people: ``user 'alice' with the default client id``."""
        words = []
        for t, n in self.parts:
            words.append(f"the default {_describe_type(t)}" if n is None
                         else f"{_describe_type(t)} {n!r}")
        return " with ".join(words)


# --------------------------------------------------------------------------- the JSON codec
def entity_to_json(entity: Entity) -> str:
    """The one JSON form of an entity: ``{"user":"alice","client-id":null}``.

    Raw names, ``null`` for the default, types in the order user, client-id, ip, compact and
    not ASCII-escaped: canonical, so equal entities give equal text (the sandbox keys rows by
    it). The export format, the audit log, quota snapshots and page links all use it."""
    return json.dumps(entity.as_dict(), ensure_ascii=False, separators=(",", ":"))


def entity_from_json(value: str | Mapping[str, Any] | list) -> Entity:
    """Read :func:`entity_to_json`'s form (as text or already parsed). The older
    ``[["user","alice"],["client-id",null]]`` form of sandbox files and audit logs is read too.
    Raises :class:`EntityError` for anything else."""
    try:
        obj = json.loads(value) if isinstance(value, str) else value
    except ValueError as exc:
        raise EntityError(f"{value!r} is not an entity in JSON: expected an object such as "
                          f'{{"user":"alice","client-id":null}} ({exc}).') from None
    if isinstance(obj, Mapping):
        return Entity.from_mapping(obj)
    if isinstance(obj, list) and all(isinstance(p, list) and len(p) == 2 for p in obj):
        return Entity.from_pairs((t, n) for t, n in obj)
    raise EntityError(f"{value!r} is not an entity in JSON: expected an object such as "
                      f'{{"user":"alice","client-id":null}}.')


#: What describe returns: every matching entity with its quotas.
QuotaSet = dict[Entity, dict[str, float]]


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    #: "kafka" or "sandbox".
    kind: str
    #: Where: the bootstrap servers, or the sandbox file path.
    location: str
    cluster_id: str | None = None
    broker_count: int | None = None
    #: The node ids of the cluster's brokers (Metadata/DescribeCluster), as strings, as the
    #: console labels brokers; empty for the sandbox (it has no brokers).
    node_ids: tuple[str, ...] = ()
    #: Each broker's advertised host, in the order of :attr:`node_ids`.
    hosts: tuple[str, ...] = ()
