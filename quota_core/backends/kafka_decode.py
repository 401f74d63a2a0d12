"""DescribeClientQuotas answers (API key 48, versions 0 and 1) read straight from their bytes.

kafka-python decodes an answer into one object per entry, per entity part and per value
(about 0.6 s and 100 MB for 100,000 entries), which :meth:`KafkaBackend.describe` then turned
into entities and dicts. Here the bytes become the :data:`QuotaSet` in one pass: each name is
decoded once, each type and key string is shared by every entry that holds it, and an
entity is built directly when it is one of the shapes every broker accepts (anything else
goes through :meth:`Entity.from_pairs`, which raises the usual :class:`EntityError`).

The layout (``DescribeClientQuotasResponse.json``; version 1 is "flexible": compact strings
and arrays, whose lengths are unsigned varints holding length + 1, and tagged fields after
every struct)::

    ThrottleTimeMs int32, ErrorCode int16, ErrorMessage nullable string,
    Entries nullable array of {
        Entity array of {EntityType string, EntityName nullable string},
        Values array of {Key string, Value float64}}

No I/O and no Kafka client here: :mod:`.kafka_wire` hands over the bytes.
"""
from __future__ import annotations

import gc
import struct

from quota_core.domain.entities import CLIENT_ID, ENTITY_TYPES, USER, Entity, QuotaSet
from quota_core.domain.limits import MAX_NAME_BYTES

__all__ = ["DescribeAnswer", "read_answer", "decode_quotas"]

_INT16 = struct.Struct(">h").unpack_from
_INT32 = struct.Struct(">i").unpack_from
_DOUBLE = struct.Struct(">d").unpack_from
#: Names up to this many characters cannot exceed MAX_NAME_BYTES of UTF-8 (4 bytes a
#: character at most): Entity.from_pairs skips its length check for them too.
_SHORT = MAX_NAME_BYTES // 4
_TYPES = frozenset(ENTITY_TYPES)


class DescribeAnswer:
    """The head of an answer (read at once) and where its entries start (read on demand)."""

    __slots__ = ("data", "entries_at", "flexible", "throttle_time_ms", "error_code",
                 "error_message")

    def __init__(self, data, entries_at: int, flexible: bool, throttle_time_ms: int,
                 error_code: int, error_message: str | None) -> None:
        self.data = data
        self.entries_at = entries_at
        self.flexible = flexible
        self.throttle_time_ms = throttle_time_ms
        self.error_code = error_code
        self.error_message = error_message

    def quotas(self) -> QuotaSet:
        return decode_quotas(self.data, self.entries_at, self.flexible)


def _uvarint(data, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise ValueError("a varint longer than 5 bytes")


def _skip_tags(data, pos: int) -> int:
    """Past a tagged-field section (unknown tags are skipped, as every Kafka client does)."""
    count, pos = _uvarint(data, pos)
    for _ in range(count):
        _, pos = _uvarint(data, pos)
        size, pos = _uvarint(data, pos)
        pos += size
    return pos


def _string(data, pos: int, flexible: bool) -> tuple[str | None, int]:
    if flexible:
        size, pos = _uvarint(data, pos)
        size -= 1
    else:
        (size,), pos = _INT16(data, pos), pos + 2
    if size < 0:
        return None, pos
    end = pos + size
    if end > len(data):
        raise ValueError("a string runs past the end of the answer")
    return str(data[pos:end], "utf-8", "surrogateescape"), end


def read_answer(data, pos: int, version: int) -> DescribeAnswer:
    """The fixed head of an answer whose body starts at ``data[pos]`` (after the response
    header): throttle time, error code and message; the entries are decoded later."""
    flexible = version >= 1
    (throttle,) = _INT32(data, pos)
    (error_code,) = _INT16(data, pos + 4)
    message, pos = _string(data, pos + 6, flexible)
    return DescribeAnswer(data, pos, flexible, throttle, error_code, message)


def _entity(parts: list) -> Entity:
    """The entity of ``parts`` ((type, name) pairs, in the broker's order, names decoded from
    valid UTF-8): built directly for a user, a client id, an ip, or a user with a client id,
    with names a broker holds; else by Entity.from_pairs, which checks every rule (and
    raises EntityError)."""
    if len(parts) == 1:
        t, n = parts[0]
        if t in _TYPES and (n is None or 0 < len(n) <= _SHORT):
            return Entity((parts[0],))
    elif len(parts) == 2:
        (t1, n1), (t2, n2) = parts
        if ((n1 is None or 0 < len(n1) <= _SHORT) and (n2 is None or 0 < len(n2) <= _SHORT)):
            if t1 == USER and t2 == CLIENT_ID:
                return Entity((parts[0], parts[1]))
            if t1 == CLIENT_ID and t2 == USER:
                return Entity((parts[1], parts[0]))
    return Entity.from_pairs(parts)


def decode_quotas(data, pos: int, flexible: bool) -> QuotaSet:
    """The entries at ``data[pos]`` as a QuotaSet (entities without values are left out, as a
    broker never sends them). ValueError or IndexError when the bytes are cut short or
    malformed; EntityError for an entity no broker accepts."""
    data = data if isinstance(data, bytes) else bytes(data)
    # Nothing built here can form a cycle: collecting while 100,000s of entities and dicts
    # are made would only walk them again and again (a third of the time).
    collecting = gc.isenabled()
    gc.disable()
    try:
        return (_flexible if flexible else _classic)(data, pos)
    finally:
        if collecting:
            gc.enable()


def _flexible(d: bytes, pos: int) -> QuotaSet:
    """Version 1. Written for speed (100,000 entries are common): lengths below 128 (one
    varint byte) and empty tagged-field sections are read inline, anything else by
    _uvarint / _skip_tags; a 1-part entity with a name a broker holds is built directly."""
    strings: dict[bytes, str] = {}
    quotas: QuotaSet = {}
    limit = len(d)
    count, pos = _uvarint(d, pos)
    for _ in range(count - 1):
        # The common entry first: one entity part with a known type and a short name, no
        # tags, one value with a known key. Any other entry, or any surprise, is read by the
        # general code below from the same position.
        if d[pos] == 2:
            size = d[pos + 1]
            if 0 < size < 0x80:
                end = pos + 1 + size
                entity_type = strings.get(d[pos + 2:end])
                size = d[end] if entity_type is not None else 0
                if 1 < size < 0x80:
                    start = end + 1
                    end = start + size - 1
                    key_at = end + 3
                    if d[end] == 0 and d[end + 1] == 2 and end + 1 < limit:
                        size = d[end + 2]
                        key = strings.get(d[key_at:key_at + size - 1]) if 0 < size < 0x80 \
                            else None
                        at = key_at + size - 1
                        if key is not None and d[at + 8] == 0 and d[at + 9] == 0:
                            try:
                                name = d[start:end].decode()
                            except UnicodeDecodeError:
                                name = ""  # left to the general code, which names it
                            if name and len(name) <= _SHORT and entity_type in _TYPES:
                                quotas[Entity(((entity_type, name),))] = {
                                    key: _DOUBLE(d, at)[0]}
                                pos = at + 10
                                continue
        n = d[pos] - 1
        if n < 0x7F:
            pos += 1
        else:
            n, pos = _uvarint(d, pos)
            n -= 1
        parts = []
        for _ in range(n):
            size = d[pos] - 1
            if size < 0x7F:
                pos += 1
            else:
                size, pos = _uvarint(d, pos)
                size -= 1
            end = pos + size
            raw = d[pos:end]
            entity_type = strings.get(raw)
            if entity_type is None:
                if end > limit or size < 0:
                    raise ValueError("an entity type runs past the end of the answer")
                entity_type = strings[raw] = raw.decode("utf-8", "surrogateescape")
            size = d[end] - 1
            if size < 0x7F:
                pos = end + 1
            else:
                size, pos = _uvarint(d, end)
                size -= 1
            if size < 0:
                name = None
            else:
                end = pos + size
                if end > limit:
                    raise ValueError("a name runs past the end of the answer")
                try:
                    name = d[pos:end].decode()
                except UnicodeDecodeError:  # Entity.from_pairs raises, naming the byte
                    Entity.from_pairs([(entity_type, d[pos:end].decode("utf-8",
                                                                       "surrogateescape"))])
                    raise
                pos = end
            if d[pos]:
                pos = _skip_tags(d, pos)
            else:
                pos += 1
            parts.append((entity_type, name))
        n = d[pos] - 1
        if n < 0x7F:
            pos += 1
        else:
            n, pos = _uvarint(d, pos)
            n -= 1
        values: dict[str, float] = {}
        for _ in range(n):
            size = d[pos] - 1
            if size < 0x7F:
                pos += 1
            else:
                size, pos = _uvarint(d, pos)
                size -= 1
            end = pos + size
            raw = d[pos:end]
            key = strings.get(raw)
            if key is None:
                if end > limit or size < 0:
                    raise ValueError("a key runs past the end of the answer")
                key = strings[raw] = raw.decode("utf-8", "surrogateescape")
            (values[key],) = _DOUBLE(d, end)
            if d[end + 8]:
                pos = _skip_tags(d, end + 8)
            else:
                pos = end + 9
        if d[pos]:
            pos = _skip_tags(d, pos)
        else:
            pos += 1
        if values:
            if n == 1 and len(parts) == 1:  # inline _entity's first case: most entries
                part = parts[0]
                name = part[1]
                if part[0] in _TYPES and (name is None or 0 < len(name) <= _SHORT):
                    quotas[Entity((part,))] = values
                    continue
            quotas[_entity(parts)] = values
    if _skip_tags(d, pos) > limit:  # the answer's own tagged fields close it
        raise ValueError("the entries run past the end of the answer")
    return quotas


def _classic(d: bytes, pos: int) -> QuotaSet:
    """Version 0 (brokers 2.6 and 2.7): int16 string and int32 array lengths."""
    strings: dict[bytes, str] = {}

    def string(shared: bool = True) -> str | None:
        nonlocal pos
        (size,) = _INT16(d, pos)
        pos += 2
        if size < 0:
            return None
        end = pos + size
        if end > len(d):
            raise ValueError("a string runs past the end of the answer")
        raw = d[pos:end]
        pos = end
        if not shared:
            return raw.decode("utf-8", "surrogateescape")
        text = strings.get(raw)
        if text is None:
            text = strings[raw] = raw.decode("utf-8", "surrogateescape")
        return text

    def count() -> int:
        nonlocal pos
        (n,) = _INT32(d, pos)
        pos += 4
        return n

    quotas: QuotaSet = {}
    for _ in range(count()):
        parts = [(string(), string(False)) for _ in range(count())]
        values = {}
        for _ in range(count()):
            key = string()
            (values[key],) = _DOUBLE(d, pos)
            pos += 8
        if values:  # every rule checked: these names are not known to be UTF-8
            quotas[Entity.from_pairs(parts)] = values
    return quotas
