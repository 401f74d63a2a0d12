"""Byte-rate units for people: parse ``10MB`` / ``1.5MiB`` and print ``1 MiB/s``."""
from __future__ import annotations

import math
import re

from quota_core.errors import AlterationError, ParseError
from quota_core.domain.keys import QUOTA_KEYS, format_value, too_large_message

__all__ = ["parse_byte_rate", "parse_quota_value", "format_bytes", "format_quota",
           "format_exact", "format_editable", "format_rate", "round_up_quota"]

#: Binary units, largest first: the one table every formatter here uses.
_BINARY = ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"))

_UNITS = {
    "": 1, "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
    "ki": 2**10, "mi": 2**20, "gi": 2**30, "ti": 2**40,
}
_BYTES = re.compile(r"^\s*([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(?:[eE]([+-]?[0-9]+))?\s*"
                    r"([A-Za-z]*)(?:/s)?\s*$")
#: Not byte rates, but passed on so validation refuses them with its own message.
_SPECIAL = {"nan": float("nan"), "inf": float("inf"), "+inf": float("inf"),
            "-inf": float("-inf"), "infinity": float("inf"), "-infinity": float("-inf")}


def parse_byte_rate(text: str) -> float:
    """``"10MB"`` → 10000000, ``"1.5MiB"`` → 1572864, ``"2048"`` → 2048 (bytes per second).

    Decimal units (kB, MB, GB) are powers of 1000, binary ones (KiB, MiB, GiB) powers of 1024.
    """
    if text.strip().lower() in _SPECIAL:
        return _SPECIAL[text.strip().lower()]
    m = _BYTES.match(text)
    unit = m.group(3).lower() if m else None
    if not m or unit not in _UNITS:
        raise ParseError(
            f"{text!r} is not a byte rate. Write a number with an optional unit: 2048, 10MB, "
            f"1.5MiB (kB/MB/GB are powers of 1000, KiB/MiB/GiB powers of 1024).")
    number = float(m.group(1) + (f"e{m.group(2)}" if m.group(2) else ""))
    value = number * _UNITS[unit]
    if _UNITS[unit] > 1 and math.isfinite(value) and not value.is_integer():
        value = float(round(value))
    return value


def parse_quota_value(key: str, text: str) -> float:
    """A value typed for ``key``: byte rates take units, other keys a plain number."""
    spec = QUOTA_KEYS.get(key)
    if spec is not None and spec.is_byte_rate:
        value = parse_byte_rate(text)
    else:
        try:
            value = float(text)
        except ValueError:
            raise ParseError(f"{key}={text!r}: {text!r} is not a number. Write a number such "
                             f"as 50 or 12.5.", key=key) from None
    if math.isinf(value) and text.strip().lower().lstrip("+-") not in ("inf", "infinity"):
        # 1e400 overflows to infinity: say it is too large, as for 1e30 (exit 1, refused).
        if value < 0:
            raise AlterationError(f"{key}={text.strip()}: a quota must be greater than 0. To "
                                  f"make it unlimited, delete the key (--delete {key}).", key=key)
        raise AlterationError(too_large_message(key, text.strip()), key=key)
    return value


def format_bytes(value: float) -> str:
    """``1048576`` → ``1 MiB``, ``1500000`` → ``1.5 MB``; exact values below 1 kB stay bytes."""
    if math.isnan(value) or math.isinf(value):
        return format_value(value)
    # A binary unit only where it reads exactly (1 MiB, 1.5 MiB), else decimal (1.95 MB).
    for size, unit in _BINARY:
        if size <= value < 1024 * size and (value / size * 100).is_integer():
            return f"{_short(value / size)} {unit}"
    for size, unit in ((10**12, "TB"), (10**9, "GB"), (10**6, "MB"), (10**3, "kB")):
        if value >= size:
            return f"{_short(value / size)} {unit}"
    return f"{format_value(value)} B"


def _short(x: float) -> str:
    """Three significant digits, never in exponent form: 1.95, 19.5, 195, 2252."""
    if float(x).is_integer():
        return str(int(x))
    return f"{x:.0f}" if x >= 100 else f"{x:.3g}"


def format_quota(key: str, value: float | None) -> str:
    """A quota value in human units: ``1 MiB/s``, ``50 %``, ``unlimited``."""
    if value is None:
        return "unlimited"
    spec = QUOTA_KEYS.get(key)
    if spec is None:
        return format_value(value)
    if spec.is_byte_rate:
        return f"{format_bytes(value)}/s"
    if spec.unit == "%":
        return f"{format_value(value)}% of a thread"
    return f"{format_value(value)} {spec.unit}"


def format_exact(key: str, value: float) -> str:
    """``8,388,608 bytes/s``: the exact number with the key's unit."""
    spec = QUOTA_KEYS.get(key)
    unit = spec.unit if spec else ""
    if float(value).is_integer() and abs(value) < 1e18:
        number = f"{int(value):,}"
    else:
        number = format_value(value)
    return f"{number} {unit}".strip()


def format_editable(key: str, value: float | None) -> str:
    """A value as an edit box pre-fills it: exact, and read back the same by
    :func:`parse_quota_value` (``8MiB`` where exact in a binary unit)."""
    if value is None:
        return ""
    spec = QUOTA_KEYS.get(key)
    if spec is not None and spec.is_byte_rate and float(value).is_integer():
        for size, unit in _BINARY:
            if value >= size and value % size == 0:
                return f"{int(value // size)}{unit}"
        return str(int(value))
    return format_value(value)


def format_rate(key: str, value: float | None) -> str:
    """A *measured* rate for people, in the unit of the key's quota and three significant
    digits: ``1.32 MiB/s``, ``1.51% of a thread``, ``0.02 mutations/s``."""
    if value is None:
        return "—"
    spec = QUOTA_KEYS.get(key)
    if math.isnan(value) or spec is None:
        return format_value(value)
    if spec.is_byte_rate:
        for size, unit in _BINARY:
            if value >= size:
                return f"{_short(value / size)} {unit}/s"
        return f"{_short(value)} B/s"
    text = _short(value) if value >= 0.01 or value == 0 else f"{value:.1g}"
    if spec.unit == "%":
        return f"{text}% of a thread"
    return f"{text} {spec.unit}"


def round_up_quota(key: str, value: float) -> float:
    """A suggested quota people can type and read: ``value`` rounded *up* (a smaller quota
    would not keep the rate under it) to three significant digits in the unit
    :func:`format_rate` shows it in (MiB/s, KiB/s… for byte rates), a whole number for
    whole-number keys: 10,848,520 B/s → 10.4 MiB/s = 10,905,191; 131.697 % → 132. The one
    display rounding of a suggestion (quota_core.analysis.quota_sizing), for lint and History alike."""
    if not math.isfinite(value) or value <= 0:
        return value
    spec = QUOTA_KEYS.get(key)
    size = 1
    if spec is not None and spec.is_byte_rate:
        size = next((s for s, _ in _BINARY if value >= s), 1)
    scaled = value / size
    step = 10 ** (math.floor(math.log10(scaled)) - 2)  # three significant digits
    rounded = math.ceil(round(scaled / step, 6)) * step
    if spec is not None and spec.integral:
        return float(math.ceil(rounded * size))
    return float(f"{rounded:.3g}") * size
