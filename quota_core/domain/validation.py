"""Validation of alterations, twice over.

* :func:`alteration_problems` is ours, the client side: strict, it never lets through what
  a broker would reject, and also refuses what brokers carelessly accept (NaN, infinity,
  host names for ip entities, a key both set and removed). Every message names the entity,
  the key, the rule and the fix.
* :func:`broker_rejection` is what a KRaft controller answers for one entity
  (ClientQuotaControlManager), used by the sandbox so it behaves like a broker.
"""
from __future__ import annotations

import ipaddress
import math
from typing import Callable, Iterable, Mapping, Sequence

from quota_core.domain.alterations import Alteration
from quota_core.domain.entities import IP, Entity
from quota_core.errors import AlterationError, Problem
from quota_core.domain.java_text import _hashmap_order, _java_hash
from quota_core.domain.keys import QUOTA_KEYS, keys_for, too_large_message

__all__ = [
    "alteration_problems",
    "validate_alterations",
    "broker_rejection",
    "java_entity_text",
    "is_ip_literal",
    "canonical_ip",
    "same_address",
    "too_large_message",
    "client_name_problems",
    "unknown_key_message",
    "entry_problems",
]


def unknown_key_message(key: str, is_ip: bool | None = None) -> str:
    """``unknown quota key 'prodcer_byte_rate' for ..., did you mean producer_byte_rate?
    Valid keys: ...``: the one unknown-key message (the CLI, files and forms all use it).
    ``is_ip`` None: the entity is not known yet (a flag), any key is valid somewhere."""
    import difflib

    allowed = tuple(QUOTA_KEYS) if is_ip is None else keys_for(is_ip)
    kind = "" if is_ip is None else (" for an ip entity" if is_ip
                                     else " for a user/client-id entity")
    if key in QUOTA_KEYS:  # a real key, on the wrong kind of entity: no look-alike to offer
        return f"unknown quota key {key!r}{kind}. Valid keys: {', '.join(allowed)}."
    close = difflib.get_close_matches(key.strip().lower(), allowed, n=1, cutoff=0.6)
    if close:
        return (f"unknown quota key {key!r}{kind}, did you mean {close[0]}? Valid keys: "
                f"{', '.join(allowed)}.")
    return f"unknown quota key {key!r}{kind}. Valid keys: {', '.join(allowed)}."


def is_ip_literal(name: str) -> bool:
    """An IPv4 or IPv6 address without a scope (``%eth0``), which brokers refuse."""
    try:
        return getattr(ipaddress.ip_address(name), "scope_id", None) is None
    except ValueError:
        return False


def canonical_ip(name: str) -> str | None:
    """The canonical text of an address (``0:0::1`` → ``::1``), None if not an address.

    An IPv4-mapped address is written dotted, ``::ffff:1.2.3.4`` (RFC 5952 §5), whatever the
    Python version (3.13 prints it so, 3.11 ``::ffff:102:304``)."""
    if not is_ip_literal(name):
        return None
    address = ipaddress.ip_address(name)
    mapped = getattr(address, "ipv4_mapped", None)
    return f"::ffff:{mapped}" if mapped is not None else str(address)


def same_address(a: str, b: str) -> bool:
    """True when a broker takes ``a`` and ``b`` for one address, as Java's
    ``InetAddress.getByName`` does: ``::ffff:1.2.3.4`` (either spelling) *is* ``1.2.3.4``."""
    def key(name: str):
        if not is_ip_literal(name):
            return None
        address = ipaddress.ip_address(name)
        return getattr(address, "ipv4_mapped", None) or address

    ka = key(a)
    return ka is not None and ka == key(b)


def client_name_problems(user: str, client_id: str, ip: str = "") -> list[str]:
    """What is wrong with names typed to resolve a client, with the fix: an ip that is not an
    address, or a principal pasted with its ACL prefix (``User:alice``)."""
    problems = []
    if ip and not is_ip_literal(ip):
        problems.append(f"{ip!r} is not an IP address: connection quotas apply to addresses. "
                        f"Give one such as 192.0.2.10.")
    for label, name in (("user", user), ("client id", client_id)):
        if name != name.strip():
            problems.append(f"The {label} {name!r} has spaces at its ends; a broker compares "
                            f"names exactly. Did you mean {name.strip()!r}?")
    if user.startswith("User:") and len(user) > len("User:"):
        problems.append(f"{user!r} is a principal as ACLs write it; quotas use the name alone. "
                        f"Did you mean {user[len('User:'):]!r}?")
    return problems


def _value_problem(entity: Entity, key: str, value: float,
                   unlimited: str | None = None) -> str | None:
    """What is wrong with ``value`` for ``key``; ``unlimited`` says how to make the key
    unlimited where the value was given (default: the ``--delete`` flag)."""
    spec = QUOTA_KEYS[key]
    where = f"{key} for {entity.display()}"
    unlimited = unlimited or f"delete the key (--delete {key})"
    if math.isnan(value):
        return f"{where}: NaN is not a quota. Give a number greater than 0."
    if math.isinf(value):
        return f"{where}: infinity is not a quota. To make it unlimited, {unlimited}."
    if value <= 0:
        return (f"{where}: {value:g} is not allowed; a quota must be greater than 0. To make it "
                f"unlimited, {unlimited}.")
    if spec.integral and abs(value % 1.0) > 1e-6:
        return (f"{where}: {value!r} has a fraction, but {key} is a whole number "
                f"({spec.unit}). Round it to {max(1, math.floor(value + 0.5))}.")
    # Values travel as doubles: compare as the broker does (Long.MAX_VALUE as a double).
    if value > float(spec.max_value):
        return (f"{where}: {value:.0f} is too large for {'a LONG' if spec.value_type == 'long' else 'an INT'}"
                f" (at most {spec.max_value}). Give a smaller value.")
    return None


def _entity_problems(entity: Entity) -> list[Problem]:
    """An ip entity whose name is not an address, or not in its canonical spelling."""
    problems = []
    if entity.is_ip:
        name = entity.name(IP)
        canonical = canonical_ip(name) if name is not None else None
        if name is not None and canonical is not None and canonical != name:
            problems.append(Problem(
                f"{entity.display()}: write the address {name!r} as {canonical!r}. A broker stores the text "
                f"as given, so two spellings of one address would be two entries, and one would "
                f"silently override the other.", entity=entity, field=IP))
        elif name is not None and not is_ip_literal(name):
            problems.append(Problem(
                f"{entity.display()}: {name!r} is not an IP address. Give an IPv4 or IPv6 address such as "
                f"192.0.2.10. (A broker accepts a host name it can resolve, but it resolves the "
                f"name once, when the quota is set, so the quota silently stays on the old "
                f"address if DNS changes; describe shows the name, not the address it limits.)",
                entity=entity, field=IP))
    return problems


#: How a quota file's entry makes a key unlimited (an infinite or non-positive value's fix).
_UNLIMITED_IN_A_FILE = "remove the key from the entry"


def entry_problems(entity: Entity, quotas: Mapping[str, float]) -> list[Problem]:
    """Every problem with one entry of a desired quota set (a quota file's entry, or the keys
    a plan sets): the checks :func:`alteration_problems` makes of a set op, worded for a file.
    The one check of every reader of a quota file (``lint``, ``plan``, ``--import``,
    ``apply``, ``analyze --quotas``, the Plan page), so they refuse the same files with the
    same message. A broker accepts NaN, infinity and host names for ip entities; a quota file
    may not hold them, as ``--alter`` may not send them."""
    problems = _entity_problems(entity)
    allowed = keys_for(entity.is_ip)
    for key, value in quotas.items():
        if key not in allowed:
            problems.append(Problem(f"{entity.display()}: {unknown_key_message(key, entity.is_ip)}",
                                    entity=entity, key=key))
            continue
        message = _value_problem(entity, key, float(value), _UNLIMITED_IN_A_FILE)
        if message:
            problems.append(Problem(message, entity=entity, key=key))
    return problems


def alteration_problems(alteration: Alteration) -> list[Problem]:
    """Every client-side problem with one entity's alteration (empty when it may be sent)."""
    entity = alteration.entity
    problems = _entity_problems(entity)
    allowed = keys_for(entity.is_ip)
    if not alteration.ops:
        problems.append(Problem(f"{entity.display()}: nothing to change. Give --add key=value or "
                                f"--delete key.", entity=entity))
    seen: dict[str, bool] = {}
    for op in alteration.ops:
        key = op.key
        if key in seen:
            if seen[key] != op.is_remove:
                msg = (f"{key} for {entity.display()} is both set and removed. Keep one: --add "
                       f"{key}=VALUE or --delete {key}.")
            else:
                msg = f"{key} for {entity.display()} is given twice. Give each key once."
            problems.append(Problem(msg, entity=entity, key=key))
            continue
        seen[key] = op.is_remove
        if key not in QUOTA_KEYS or key not in allowed:
            problems.append(Problem(f"{entity.display()}: {unknown_key_message(key, entity.is_ip)}",
                                    entity=entity, key=key))
            continue
        if op.value is not None:
            message = _value_problem(entity, key, op.value)
            if message:
                problems.append(Problem(message, entity=entity, key=key))
    return problems


def validate_alterations(alterations: Sequence[Alteration]) -> None:
    """Raise :class:`AlterationError` listing every problem, or return when all may be sent.

    Also refuses the same entity twice in one request: a broker applies the first and
    rejects the second, which is never what anyone meant.
    """
    problems: list[Problem] = []
    seen: set[Entity] = set()
    for alteration in alterations:
        if alteration.entity in seen:
            problems.append(Problem(
                f"{alteration.entity.display()} appears twice in one request. Merge its changes into "
                f"one alteration.", entity=alteration.entity))
        seen.add(alteration.entity)
        problems.extend(alteration_problems(alteration))
    if problems:
        message = problems[0].message if len(problems) == 1 else (
            f"{len(problems)} problems, nothing was sent:\n" +
            "\n".join(f"- {p.message}" for p in problems))
        raise AlterationError(message, problems=problems)


def broker_rejection(alteration: Alteration, *,
                     resolvable: Callable[[str], bool]) -> str | None:
    """The error a Kafka 4.x controller gives this entity's alteration, or None if accepted.

    ``resolvable(name)`` answers whether an ip entity's name is an address or a host the
    broker's ``InetAddress.getByName`` resolves: a DNS lookup, so the caller (a backend)
    brings it and this stays pure (the sandbox passes :func:`quota_core.backends.sandbox.host_resolves`).

    Mirrors ClientQuotaControlManager: duplicate keys reject the entity; entity checks; key
    and value checks for *set* ops only (a remove is never validated); NaN passes every check
    there, and +infinity passes for double keys.
    """
    entity = alteration.entity
    keys: set[str] = set()
    for op in alteration.ops:
        if op.key in keys:
            return f"Ignoring duplicate entity {java_entity_text(entity)}"
        keys.add(op.key)
    if entity.is_ip:
        name = entity.name(IP)
        if name is not None and not resolvable(name):
            return f"{name} is not a valid IP or resolvable host."
    allowed = keys_for(entity.is_ip)
    for op in alteration.ops:
        if op.value is None:
            continue
        if op.key not in allowed:
            return f"Invalid configuration key {op.key}"
        value = op.value
        if value <= 0.0:
            return f"Quota {op.key} must be greater than 0"
        spec = QUOTA_KEYS[op.key]
        if spec.value_type == "double":
            continue
        # Java compares the double with (double) Long.MAX_VALUE, so 2**63 itself passes.
        if value > float(spec.max_value):
            article = "a LONG" if spec.value_type == "long" else "an INT"
            return f"Proposed value for {op.key} is too large for {article}."
        if abs(math.fmod(value, 1.0)) > 1e-6:
            return f"{op.key} cannot be a fractional value."
    return None


def java_entity_text(entity: Entity) -> str:
    """``ClientQuotaEntity.toString()`` as a broker prints it: its entries HashMap (16 buckets)
    iterated in Java's order (:func:`~quota_core.domain.java_text._hashmap_order`), null defaults."""
    parts = list(entity.parts)
    order = _hashmap_order([_java_hash(t) for t, _ in parts], 16)
    return "ClientQuotaEntity(entries={" + ", ".join(
        f"{t}={'null' if n is None else n}" for t, n in (parts[i] for i in order)) + "})"


