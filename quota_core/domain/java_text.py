"""Java and Scala behaviour that kafka-configs.sh's text depends on, imitated in Python.

``String.split``/``trim``, ``Double.parseDouble``/``toString``, ``String.hashCode`` and
the iteration order of a ``HashMap`` or ``Properties``, Scala's ``Set``/``ArrayBuffer``
text. Pure functions over strings: the one place these imitations live (the kafka-configs
dialect in :mod:`quota_core.cli.configs_compat` and the broker's entity text in
:mod:`quota_core.domain.validation` both use them).
"""
from __future__ import annotations

import math
import re
from decimal import Decimal
from typing import Iterable, Sequence

__all__ = ["java_parse_double", "java_double"]


# -- Java and Scala behaviour the output depends on ----------------------------------------
_JAVA_WS = "".join(map(chr, range(0x21)))
_JAVA_END = r"(?:\r\n|[\n\r\u0085\u2028\u2029])?\Z"  # Java's $ without MULTILINE
_OUTSIDE_BRACKETS = r"(?=[^\]]*(?:\[|" + _JAVA_END + "))"
_COMMA = re.compile("," + _OUTSIDE_BRACKETS)
_EQUALS = re.compile(r"[ \t\n\x0b\f\r]*=[ \t\n\x0b\f\r]*" + _OUTSIDE_BRACKETS)
_JAVA_DOUBLE = re.compile(
    r"[+-]?(?:NaN|Infinity|(?:(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)"
    r"|(?:0[xX](?:[0-9a-fA-F]+\.?|[0-9a-fA-F]*\.[0-9a-fA-F]+)[pP][+-]?\d+))[fFdD]?)", re.A)


def _java_trim(text: str) -> str:
    return text.strip(_JAVA_WS)


def _java_split(pattern: re.Pattern, text: str, keep_trailing: bool) -> list[str]:
    """String.split: no match gives the text itself; limit 0 drops trailing empty parts."""
    parts = pattern.split(text)
    if len(parts) > 1 and not keep_trailing:
        while parts and parts[-1] == "":
            parts.pop()
    return parts


def java_parse_double(text: str) -> float:
    """``java.lang.Double.parseDouble``: raises ValueError where Java throws."""
    body = _java_trim(text)
    if not _JAVA_DOUBLE.fullmatch(body):
        raise ValueError(text)
    if body[-1] in "fFdD":  # a type suffix: hex digits never end a valid number
        body = body[:-1]
    if body.lstrip("+-")[:2].lower() == "0x":
        return float.fromhex(body)
    return float(body)


def java_double(value: float) -> str:
    """``Double.toString``: the shortest decimal that rounds to ``value`` (at least two digits,
    the closer one), as JDK 19+ prints it; JDK 17 prints a longer one for a few 16-17 digit
    values."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    sign = "-" if math.copysign(1.0, value) < 0 else ""
    if value == 0:
        return sign + "0.0"
    _, digits_t, exp = Decimal(repr(abs(value))).normalize().as_tuple()
    if len(digits_t) == 1:  # Java then picks the closest of the 2-digit decimals (4.9E-324)
        two = Decimal(f"{Decimal(abs(value)):.1e}")
        if float(two) == abs(value):
            _, digits_t, exp = two.normalize().as_tuple()
    digits = "".join(map(str, digits_t))
    sci = len(digits) - 1 + int(exp)
    if -3 <= sci < 7:
        if int(exp) >= 0:
            return f"{sign}{digits}{'0' * int(exp)}.0"
        point = len(digits) + int(exp)
        if point > 0:
            return f"{sign}{digits[:point]}.{digits[point:]}"
        return f"{sign}0.{'0' * -point}{digits}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{sci}"


def _java_hash(text: str | None) -> int:
    """String.hashCode (UTF-16 units) as an unsigned 32-bit int; 0 for null."""
    if text is None:
        return 0
    data, h = text.encode("utf-16-le", "surrogatepass"), 0
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] | data[i + 1] << 8)) & 0xFFFFFFFF
    return h


def _table_size_for(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def _hashmap_order(hashes: Sequence[int], initial_capacity: int) -> list[int]:
    """Indexes of keys put (in this order) into ``new HashMap<>(initial_capacity)``, in the
    order the map iterates them: by bucket of the final table, then insertion order."""
    cap, threshold = 0, _table_size_for(initial_capacity)
    for size in range(1, len(hashes) + 1):
        if cap == 0:  # first put: the table is created at the requested capacity
            cap = threshold
            threshold = int(cap * 0.75)
        if size > threshold:
            cap, threshold = cap * 2, (threshold * 2 if cap >= 16 else int(cap * 2 * 0.75))
    spread = [(h ^ (h >> 16)) & (max(cap, 1) - 1) for h in hashes]
    return sorted(range(len(hashes)), key=lambda i: (spread[i], i))


def _properties_order(keys: Sequence[str]) -> list[str]:
    """Iteration order of a java.util.Properties (a ConcurrentHashMap of 16 bins) holding
    ``keys`` (first-put order); exact up to 11 keys, where it would resize."""
    bins = [((h ^ (h >> 16)) & 15) for h in map(_java_hash, keys)]
    return [keys[i] for i in sorted(range(len(keys)), key=lambda i: (bins[i], i))]


def _scala_set(items: Iterable[str]) -> str:
    return f"Set({', '.join(dict.fromkeys(items))})"


def _scala_buffer(items: Iterable[str]) -> str:
    return f"ArrayBuffer({', '.join(items)})"
