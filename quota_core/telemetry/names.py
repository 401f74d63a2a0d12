"""Decode the tag values Kafka puts in quota MBean names back into raw names.

Kafka writes the ``user`` tag through ``Sanitizer.sanitize`` (URL-encoding) and then every
tag through ``Sanitizer.jmxSanitize``, which leaves a value matching ``[\\w-%. \\t]*`` alone
and otherwise applies ``javax.management.ObjectName.quote`` (surround with ``"``, escape
``\\ " * ?`` with a backslash, newline as ``\\n``). Exporters copy the quoted form into the
label value, so a client id ``weird:client*1`` arrives as ``"weird:client\\*1"``.
(clients/src/main/java/org/apache/kafka/common/utils/Sanitizer.java)
"""
from __future__ import annotations

from quota_core.domain.entities import desanitize
from quota_core.errors import MetricsError

__all__ = ["decode_client_id", "decode_user", "jmx_unquote"]

_ESCAPED = {"n": "\n", "\\": "\\", '"': '"', "*": "*", "?": "?"}


def jmx_unquote(value: str) -> str:
    """``ObjectName.unquote`` for a quoted value; an unquoted value is returned as it is.

    Exactly Java's rules: only ``\\\\ \\" \\* \\? \\n`` escapes, and no bare ``" * ?`` or
    newline inside the quotes. A value that breaks them cannot come from Kafka.
    """
    if not value.startswith('"'):
        return value
    if len(value) < 2 or not value.endswith('"'):
        raise MetricsError(f"The tag value {value!r} opens a JMX quote but does not close it; "
                           "the exporter's rules must copy the MBean's tag value whole.",
                           value=value)
    out: list[str] = []
    body = iter(value[1:-1])
    for ch in body:
        if ch == "\\":
            nxt = next(body, None)
            if nxt not in _ESCAPED:
                what = "a trailing backslash" if nxt is None else f"the escape \\{nxt}"
                raise MetricsError(f"The tag value {value!r} has {what}, which JMX quoting never "
                                   "writes (only \\\\ \\\" \\* \\? \\n).", value=value)
            out.append(_ESCAPED[nxt])
        elif ch in '"*?\n':
            raise MetricsError(f"The tag value {value!r} has an unescaped {ch!r} inside its JMX "
                               "quotes, which ObjectName.quote never writes.", value=value)
        else:
            out.append(ch)
    return "".join(out)


def decode_user(tag: str) -> str:
    """The raw user name behind a ``user`` tag (Sanitizer-decoded: ``CN%3Da`` → ``CN=a``)."""
    return desanitize(jmx_unquote(tag))


def decode_client_id(tag: str) -> str:
    """The raw client id behind a ``client-id`` tag (JMX-unquoted; Kafka does not sanitise it)."""
    return jmx_unquote(tag)
