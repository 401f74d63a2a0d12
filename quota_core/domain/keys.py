"""Quota keys, their value types, and which entities accept them (Kafka's QuotaConfig)."""
from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = [
    "QuotaKey",
    "QUOTA_KEYS",
    "CLIENT_KEYS",
    "IP_KEYS",
    "PRODUCER_BYTE_RATE",
    "CONSUMER_BYTE_RATE",
    "REQUEST_PERCENTAGE",
    "CONTROLLER_MUTATION_RATE",
    "CONNECTION_CREATION_RATE",
    "LONG_MAX",
    "INT_MAX",
    "keys_for",
    "format_value",
    "json_number",
    "same_value",
    "NON_FINITE",
    "too_large_message",
]

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class QuotaKey:
    name: str
    #: "long", "int" or "double", as in Kafka's ConfigDef.
    value_type: str
    #: "client" (user / client-id entities) or "ip".
    applies_to: str
    unit: str
    description: str

    @property
    def integral(self) -> bool:
        return self.value_type in ("long", "int")

    @property
    def max_value(self) -> float:
        return {"long": LONG_MAX, "int": INT_MAX}.get(self.value_type, math.inf)

    @property
    def is_byte_rate(self) -> bool:
        return self.unit == "bytes/s"


PRODUCER_BYTE_RATE = QuotaKey("producer_byte_rate", "long", "client", "bytes/s",
                              "bytes per second produced, per broker")
CONSUMER_BYTE_RATE = QuotaKey("consumer_byte_rate", "long", "client", "bytes/s",
                              "bytes per second fetched, per broker")
REQUEST_PERCENTAGE = QuotaKey("request_percentage", "double", "client", "%",
                              "percent of one request-handler/network thread, per broker")
CONTROLLER_MUTATION_RATE = QuotaKey("controller_mutation_rate", "double", "client",
                                    "mutations/s",
                                    "partitions created or deleted per second")
CONNECTION_CREATION_RATE = QuotaKey("connection_creation_rate", "int", "ip", "connections/s",
                                    "new connections per second from one ip, per broker")

QUOTA_KEYS: dict[str, QuotaKey] = {
    k.name: k
    for k in (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE,
              CONTROLLER_MUTATION_RATE, CONNECTION_CREATION_RATE)
}
#: Keys of user / client-id entities, in print order.
CLIENT_KEYS: tuple[str, ...] = tuple(sorted(k for k, v in QUOTA_KEYS.items()
                                            if v.applies_to == "client"))
IP_KEYS: tuple[str, ...] = ("connection_creation_rate",)


def keys_for(is_ip: bool) -> tuple[str, ...]:
    """The keys an entity accepts: ip entities only ``connection_creation_rate``."""
    return IP_KEYS if is_ip else CLIENT_KEYS


def format_value(value: float) -> str:
    """Integral values without a decimal point (``4000000``), others in shortest form
    (``56.25``); NaN and infinities as Java prints them."""
    value = float(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value.is_integer():
        return str(int(value))
    return repr(value)


#: How JSON documents carry the values a broker accepts but JSON has no number for.
NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def json_number(value: float) -> float | int | str:
    """A quota value for a JSON document: integral values as integers, and NaN / infinities
    (which a broker accepts) as the strings ``"NaN"`` / ``"Infinity"``, so the document stays
    valid JSON for strict parsers such as jq."""
    value = float(value)
    if not math.isfinite(value):
        return format_value(value)
    return int(value) if value.is_integer() and abs(value) < 2**63 else value


def same_value(a: float | None, b: float | None) -> bool:
    """Equal quota values, where NaN equals NaN (a broker stores NaN) and None is "not set"."""
    if a is None or b is None:
        return a is b
    return a == b or (math.isnan(a) and math.isnan(b))


def too_large_message(key: str, text: str) -> str:
    """``text`` names a number beyond a double's range (``1e400``): too large, not infinity."""
    spec = QUOTA_KEYS.get(key)
    shown = text if len(text) <= 24 else f"{text[:12]}… ({len(text)} characters)"
    if spec is not None and spec.value_type in ("long", "int"):
        limit = (f"for {'a LONG' if spec.value_type == 'long' else 'an INT'} (at most "
                 f"{spec.max_value})")
    else:
        limit = "for any quota (beyond a double's range, about 1.8e308)"
    return f"{key}={shown}: that number is too large {limit}. Give a smaller value."
