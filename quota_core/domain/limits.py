"""What a Kafka 4.3.1 broker can hold and accept in one request, and how alters are split.

Both backends use these, so the sandbox and a real broker agree:

* A name is a protocol ``STRING``: at most 32,767 bytes of UTF-8 (Java's generated message
  code refuses longer ones; a broker that is sent one closes the connection without an
  answer: "string field entityName had invalid length 32768").
* One AlterClientQuotas request may produce at most 10,000 metadata records
  (``QuorumController.MAX_RECORDS_PER_USER_OP``: ``ClientQuotaControlManager.alterClientQuotas``
  collects them in a ``BoundedList`` of that size). One record per key that changes: a set to
  a new value, or the removal of a key that is set. Above it the whole request is refused,
  every entity with POLICY_VIOLATION, and nothing is applied.

:func:`request_batches` splits a large alteration into requests that stay under both that
record limit and a request size far below the broker's ``socket.request.max.bytes``.
"""
from __future__ import annotations

from typing import Sequence

__all__ = ["MAX_NAME_BYTES", "MAX_RECORDS_PER_REQUEST", "MAX_REQUEST_BYTES", "PER_ENTITY_READS",
           "POLICY_VIOLATION_MESSAGE", "name_length_problem", "request_batches"]

#: A protocol STRING's limit (``Short.MAX_VALUE`` bytes of UTF-8).
MAX_NAME_BYTES = 32_767
#: ``QuorumController.MAX_RECORDS_PER_USER_OP`` in Kafka 4.3.1.
MAX_RECORDS_PER_REQUEST = 10_000
#: Our own bound on one request's (estimated) size: far below the broker's default
#: ``socket.request.max.bytes`` (100 MiB), so a request of long names is split too.
MAX_REQUEST_BYTES = 8 * 1024 * 1024
#: Up to this many entities, a read-back describes each entity on its own; above it, one
#: describe of the whole set (or of the entities' shape) is cheaper. The apply workflow's
#: read-back and the Kafka backend's propagation check both use it.
PER_ENTITY_READS = 20
#: What a 4.3.1 broker answers for every entity of a request over the record limit
#: (POLICY_VIOLATION, with no message of its own: this is the error's description).
POLICY_VIOLATION_MESSAGE = "Request parameters do not satisfy the configured policy."


def name_length_problem(entity_type: str, name: str) -> str | None:
    """Why ``name`` cannot be a Kafka entity name (too many UTF-8 bytes), or None."""
    size = len(name.encode("utf-8", "surrogatepass"))
    if size <= MAX_NAME_BYTES:
        return None
    chars = "" if size == len(name) else f" ({len(name):,} characters)"
    return (f"The {entity_type} name {name[:24]!r}… is {size:,} bytes in UTF-8{chars}; a Kafka "
            f"broker holds names of at most {MAX_NAME_BYTES:,} bytes (a protocol STRING). "
            f"Use a shorter name.")


def _records(alteration) -> int:
    """At most how many records an alteration makes: one per distinct key."""
    return len({op.key for op in alteration.ops})


def _size(alteration) -> int:
    """A generous estimate of an alteration's bytes in a request (names, keys, framing)."""
    names = sum(len(t) + len((n or "").encode("utf-8", "surrogatepass")) + 8
                for t, n in alteration.entity.parts)
    return 16 + names + sum(len(op.key) + 16 for op in alteration.ops)


def request_batches(alterations: Sequence, max_records: int = MAX_RECORDS_PER_REQUEST,
                    max_bytes: int = MAX_REQUEST_BYTES) -> list[list]:
    """``alterations`` split into requests a broker accepts, in order.

    Every alteration of one entity stays in one request (a broker applies the first and
    refuses the repeat only within a request), so splitting never changes what is applied.
    """
    groups: dict[object, list] = {}
    for alteration in alterations:
        groups.setdefault(alteration.entity, []).append(alteration)
    batches: list[list] = []
    batch: list = []
    records = size = 0
    for group in groups.values():
        g_records = sum(_records(a) for a in group)
        g_size = sum(_size(a) for a in group)
        if batch and (records + g_records > max_records or size + g_size > max_bytes):
            batches.append(batch)
            batch, records, size = [], 0, 0
        batch.extend(group)
        records += g_records
        size += g_size
    if batch:
        batches.append(batch)
    return batches
