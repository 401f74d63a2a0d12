"""What a change does: the per-key diff of one entity, and which clients it moves.

Pure functions over plain quota sets. Before anything is applied the Edit page shows
:func:`entity_diff` (what the entity holds before and after) and :func:`client_impact` (the
known clients whose effective quota or deciding level changes), and just before applying it
calls :func:`ensure_unchanged`, which raises :class:`~quota_core.errors.ConcurrentChange` if
someone else changed the entity since the form was loaded.

Known clients are ``(user, client_id)`` pairs. :func:`clients_from_entries` derives them from
the entries themselves; :data:`ANY_OTHER` stands for "any other": ``("alice", ANY_OTHER)`` is
alice with a client id that has no entry of its own, ``(ANY_OTHER, "reports")`` any user
without entries of their own running client id ``reports``. (Not the empty string: Kafka
treats an empty client id or user specially and skips most of the ladder for it.) :func:`parse_clients_csv` reads an uploaded ``user,client_id`` list,
where an empty user is an unauthenticated client (ANONYMOUS).
"""
from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from quota_core.domain.alterations import Alteration, apply_ops
from quota_core.domain.bulk import bulk_resolve
from quota_core.domain.entities import CLIENT_ID, IP, USER, Entity
from quota_core.errors import ConcurrentChange, ParseError
from quota_core.domain.keys import CLIENT_KEYS, IP_KEYS
from quota_core.domain.ladder import on_any_ladder, on_ladder
from quota_core.domain.resolution import ANONYMOUS, resolve_ip
from quota_core.domain.units import format_quota

__all__ = [
    "KeyChange",
    "ClientChange",
    "entity_diff",
    "apply_alteration",
    "clients_from_entries",
    "parse_clients_csv",
    "client_label",
    "could_affect",
    "client_impact",
    "ip_impact",
    "ensure_unchanged",
    "fallback",
    "MAX_UPLOADED_CLIENTS",
]

QuotaSet = Mapping[Entity, Mapping[str, float]]
#: The most (user, client id) rows an uploaded list may hold.
MAX_UPLOADED_CLIENTS = 1_000_000


@dataclass(frozen=True, slots=True)
class KeyChange:
    key: str
    before: float | None
    after: float | None

    @property
    def change(self) -> str:
        """``"set"``, ``"changed"``, ``"removed"`` or ``"unchanged"``."""
        if self.before is None and self.after is not None:
            return "set"
        if self.before is not None and self.after is None:
            return "removed"
        if self.before == self.after:
            return "unchanged"
        return "changed"

    def describe(self) -> str:
        b, a = format_quota(self.key, self.before), format_quota(self.key, self.after)
        return {"set": f"{self.key}: set to {a} (was not set)",
                "removed": f"{self.key}: removed (was {b})",
                "unchanged": f"{self.key}: {b}, unchanged",
                "changed": f"{self.key}: {b} → {a}"}[self.change]


@dataclass(frozen=True, slots=True)
class ClientChange:
    """One key of one client whose effective quota or deciding level changes."""

    user: str
    client_id: str
    key: str
    before: float | None
    before_level: int | None
    after: float | None
    after_level: int | None
    #: "client" for (user, client id) pairs, "ip" when ``user`` holds an ip.
    kind: str = "client"

    @property
    def label(self) -> str:
        if self.kind == "ip":
            return self.user
        return client_label(self.user, self.client_id)

    def describe(self) -> str:
        def side(v: float | None, lvl: int | None) -> str:
            return "unlimited" if lvl is None else f"{format_quota(self.key, v)} (level {lvl})"
        return f"{side(self.before, self.before_level)} → {side(self.after, self.after_level)}"


def entity_diff(before: Mapping[str, float], after: Mapping[str, float]) -> list[KeyChange]:
    """Every key held before or after, in key order, with what happens to it."""
    return [KeyChange(k, before.get(k), after.get(k)) for k in sorted(set(before) | set(after))]


def apply_alteration(quotas: QuotaSet, alteration: Alteration) -> dict[Entity, Mapping[str, float]]:
    """The quota set after ``alteration`` (a shallow copy; an emptied entity disappears)."""
    after: dict[Entity, Mapping[str, float]] = dict(quotas)
    new = apply_ops(quotas.get(alteration.entity, {}), alteration.ops)
    if new:
        after[alteration.entity] = new
    else:
        after.pop(alteration.entity, None)
    return after


# --------------------------------------------------------------------------- known clients
#: A name no entry uses, standing for "a user / client id without entries of its own".
ANY_OTHER = "\x00any other"


def client_label(user: str, client_id: str) -> str:
    """``alice · checkout-api``; :data:`ANY_OTHER` reads "any other"."""
    u = "any other user" if user == ANY_OTHER else (user or "(empty user)")
    c = "any other client id" if client_id == ANY_OTHER else (client_id or "(empty client id)")
    return f"{u} · {c}"


def clients_from_entries(quotas: QuotaSet) -> list[tuple[str, str]]:
    """Clients the entries name: every ``{user=U, client-id=C}`` pair, each named user with
    any other client id, each named client id with any other user, and any other pair."""
    seen: dict[tuple[str, str], None] = {}
    for entity in quotas:
        if entity.is_ip:
            continue
        d = entity.as_dict()
        u, c = d.get(USER), d.get(CLIENT_ID)
        if u is not None and c is not None:
            seen[(u, c)] = None
        if u is not None:
            seen[(u, ANY_OTHER)] = None
        if c is not None:
            seen[(ANY_OTHER, c)] = None
    seen[(ANY_OTHER, ANY_OTHER)] = None
    return list(seen)


def parse_clients_csv(text: str) -> list[tuple[str, str]]:
    """``user,client_id`` rows (a header line is optional). An empty user is an
    unauthenticated client (ANONYMOUS); an empty client id is the empty client id."""
    rows: list[tuple[str, str]] = []
    reader = csv.reader(io.StringIO(text))
    for lineno, row in enumerate(reader, start=1):
        cells = [c.strip() for c in row]
        if not any(cells):
            continue
        if lineno == 1 and [c.lower().replace("-", "_") for c in cells[:2]] == ["user",
                                                                                 "client_id"]:
            continue
        if len(cells) > 2:
            raise ParseError(
                f"Line {lineno} of the clients file has {len(cells)} columns: give "
                f"'user,client_id' (quote names that contain commas).")
        user = cells[0] or ANONYMOUS
        client_id = cells[1] if len(cells) > 1 else ""
        rows.append((user, client_id))
        if len(rows) > MAX_UPLOADED_CLIENTS:
            raise ParseError(f"The clients file has more than {MAX_UPLOADED_CLIENTS:,} rows: "
                             f"upload the clients you care about.")
    return rows


def could_affect(entity: Entity, user: str, client_id: str) -> bool:
    """Whether Kafka consults ``entity`` for client ``(user, client_id)`` at all."""
    return on_ladder(entity)(user, client_id)


def client_impact(before: QuotaSet, after: QuotaSet, clients: Sequence[tuple[str, str]],
                  changed: Iterable[Entity], keys: tuple[str, ...] = CLIENT_KEYS
                  ) -> list[ClientChange]:
    """The known clients whose effective value or deciding level of a key differs between
    ``before`` and ``after``. Only clients whose ladder holds a changed entity are resolved
    (with :func:`quota_core.domain.bulk.bulk_resolve`), so this stays fast for big sets."""
    import numpy as np

    touched = on_any_ladder(changed)
    unique = list(dict.fromkeys(clients))
    candidates = [(u, c) for u, c in unique if touched(u, c)]
    if not candidates:
        return []
    users = [u for u, _ in candidates]
    cids = [c for _, c in candidates]
    b = bulk_resolve(before, users, cids, keys)
    a = bulk_resolve(after, users, cids, keys)
    found: list[tuple[int, int, ClientChange]] = []
    for ki, key in enumerate(keys):
        bl, al = b.levels[key], a.levels[key]
        bv, av = b.values[key], a.values[key]
        same_value = (bv == av) | (np.isnan(bv) & np.isnan(av))
        for i in np.flatnonzero((bl != al) | ~same_value):
            u, c = candidates[i]
            found.append((int(i), ki, ClientChange(
                u, c, key, None if bl[i] == 0 else float(bv[i]), int(bl[i]) or None,
                None if al[i] == 0 else float(av[i]), int(al[i]) or None)))
    found.sort(key=lambda t: (t[0], t[1]))
    return [change for _, _, change in found]


def ip_impact(before: QuotaSet, after: QuotaSet, entity: Entity) -> list[ClientChange]:
    """For an ip entity: the named ips and "any other ip" whose connection quota changes.
    ``user`` carries the ip, ``client_id`` is empty."""
    if not entity.is_ip:
        return []
    name = entity.name(IP)
    if name is not None:
        probes = [name]
    else:  # the ip default reaches every ip without its own entry
        probes = sorted({e.name(IP) for q in (before, after) for e in q  # type: ignore[misc]
                         if e.is_ip and e.name(IP) is not None}) + [""]
    out = []
    for ip in probes:
        rb, ra = resolve_ip(before, ip), resolve_ip(after, ip)
        for key in IP_KEYS:
            kb, ka = rb.keys[key], ra.keys[key]
            if kb.value != ka.value or kb.level != ka.level:
                out.append(ClientChange(ip or "any other ip", "", key, kb.value, kb.level,
                                        ka.value, ka.level, kind="ip"))
    return out


def fallback(quotas: QuotaSet, entity: Entity, key: str) -> tuple[float | None, int | None,
                                                                    Entity | None]:
    """What a client of ``entity`` gets for ``key`` from ``quotas`` (e.g. after deleting it):
    ``(value, level, source)``; ``(None, None, None)`` when nothing limits it. The client is
    the entity's own names, with any other name where the entity has the default or no part."""
    if entity.is_ip:
        name = entity.name(IP)
        kr = resolve_ip(quotas, name if name is not None else "192.0.2.1").keys[key]
    else:
        d = entity.as_dict()
        user = d.get(USER) or ANY_OTHER
        client_id = d.get(CLIENT_ID) or ANY_OTHER
        from quota_core.domain.resolution import resolve

        kr = resolve(quotas, user, client_id, (key,)).keys[key]
    return kr.value, kr.level, kr.source


def ensure_unchanged(entity: Entity, expected: Mapping[str, float],
                     current: Mapping[str, float]) -> None:
    """Raise :class:`ConcurrentChange` when ``current`` differs from what the form loaded."""
    diff = [c for c in entity_diff(expected, current) if c.change != "unchanged"]
    if diff:
        lines = "; ".join(c.describe() for c in diff)
        raise ConcurrentChange(
            f"{entity.display()} changed since this form was loaded ({lines}). Nothing was applied: "
            f"reload the entity, check the new values, and make your change again.",
            entity=entity, changes=diff, expected=dict(expected), current=dict(current))
