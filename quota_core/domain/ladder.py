"""The precedence ladder: the one definition every resolver derives from.

Kafka's default quota callback (ClientQuotaManager.DefaultQuotaCallback) looks for each quota
key on these rungs, in order, and the first rung holding that key wins. The rung also decides
the bucket (the metric tags): who shares the allowance.

====  ==========================================  ===============================
rung  entity                                      bucket: one per
====  ==========================================  ===============================
1     {user=U, client-id=C}                       (user, client-id)
2     {user=U, client-id=<default>}               (user, client-id)
3     {user=U}                                    user
4     {user=<default>, client-id=C}               (user, client-id)
5     {user=<default>, client-id=<default>}       (user, client-id)
6     {user=<default>}                            user
7     {client-id=C}                               client-id
8     {client-id=<default>}                       client-id
====  ==========================================  ===============================

Two narrowing rules come from the same table, by the parts a rung has:

* **Empty names** (:func:`consulted`): a rung is consulted only when every type it names is
  non-empty for the client: with an empty client id only rungs 3 and 6 apply, with an empty
  user only 7 and 8, with both empty none (checked on a 4.3.1 broker).
* **Bucket tags** (:func:`levels_for_tags`): a broker bucket's metric tags are exactly the
  parts of the rung that matched, so the limit of a bucket tagged (user, client-id) comes from
  rungs 1, 2, 4, 5 only; user only, 3 and 6; client-id only, 7 and 8.

Resolution, bulk resolution, browse, impact, the metrics join and the Spark job all read
:data:`LADDER` through the functions here, at call time, so a change to the table or to a
rule is made once (tests/core/test_ladder_single_source.py proves it).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

from quota_core.domain.entities import CLIENT_ID, IP, USER, Entity

__all__ = [
    "NAME",
    "DEFAULT",
    "ABSENT",
    "PAIR",
    "USER_BUCKET",
    "CLIENT_BUCKET",
    "Rung",
    "LADDER",
    "rung",
    "consulted",
    "active_levels",
    "levels_for_tags",
    "shape_of",
    "level_of_shape",
    "level_of",
    "source_entity",
    "on_ladder",
    "on_any_ladder",
]

#: How a rung (or an entity) holds one entity type: a name, the default, or not at all.
NAME, DEFAULT, ABSENT = "name", "default", "absent"
#: Bucket kinds: whose allowance it is.
PAIR, USER_BUCKET, CLIENT_BUCKET = "user+client-id", "user", "client-id"


@dataclass(frozen=True, slots=True)
class Rung:
    level: int
    user: str       # NAME / DEFAULT / ABSENT
    client_id: str  # NAME / DEFAULT / ABSENT

    @property
    def uses_user(self) -> bool:
        return self.user != ABSENT

    @property
    def uses_client_id(self) -> bool:
        return self.client_id != ABSENT

    @property
    def bucket(self) -> str:
        """Whose allowance it is: the rung's parts are the bucket's metric tags."""
        if self.uses_user and self.uses_client_id:
            return PAIR
        return USER_BUCKET if self.uses_user else CLIENT_BUCKET

    def entity_for(self, user: str, client_id: str) -> Entity:
        """The entry this rung looks up for a client."""
        pairs = []
        if self.uses_user:
            pairs.append((USER, user if self.user == NAME else None))
        if self.uses_client_id:
            pairs.append((CLIENT_ID, client_id if self.client_id == NAME else None))
        return Entity(tuple(pairs))

    @property
    def pattern(self) -> str:
        """``{user=U, client-id=<default>}``: the rung as the docs print it."""
        parts = []
        if self.uses_user:
            parts.append(f"user={'U' if self.user == NAME else '<default>'}")
        if self.uses_client_id:
            parts.append(f"client-id={'C' if self.client_id == NAME else '<default>'}")
        return "{" + ", ".join(parts) + "}"


LADDER: tuple[Rung, ...] = (
    Rung(1, NAME, NAME),
    Rung(2, NAME, DEFAULT),
    Rung(3, NAME, ABSENT),
    Rung(4, DEFAULT, NAME),
    Rung(5, DEFAULT, DEFAULT),
    Rung(6, DEFAULT, ABSENT),
    Rung(7, ABSENT, NAME),
    Rung(8, ABSENT, DEFAULT),
)


def rung(level: int) -> Rung:
    """The rung at ``level`` (1-based, as Kafka's docs number them)."""
    for r in LADDER:
        if r.level == level:
            return r
    raise KeyError(level)


def consulted(r: Rung, has_user: bool, has_client_id: bool) -> bool:
    """Whether Kafka consults rung ``r`` for a client whose user / client id is non-empty."""
    return (has_user or not r.uses_user) and (has_client_id or not r.uses_client_id)


def active_levels(user: str, client_id: str) -> frozenset[int]:
    """The levels Kafka consults for this client (all eight when both names are non-empty)."""
    return frozenset(r.level for r in LADDER if consulted(r, bool(user), bool(client_id)))


def levels_for_tags(has_user_tag: bool, has_client_tag: bool) -> frozenset[int]:
    """The levels that can set the limit of a broker bucket with these metric tags."""
    return frozenset(r.level for r in LADDER
                     if r.uses_user == has_user_tag and r.uses_client_id == has_client_tag)


def shape_of(entity: Entity) -> tuple[str, str]:
    """(user part, client-id part) of an entity: each NAME, DEFAULT or ABSENT."""
    def part(entity_type: str) -> str:
        if not entity.has(entity_type):
            return ABSENT
        return DEFAULT if entity.name(entity_type) is None else NAME
    return part(USER), part(CLIENT_ID)


def level_of_shape(user_part: str, client_part: str) -> int | None:
    """The level whose rung has this shape (None for no rung: an ip entity's shape)."""
    for r in LADDER:
        if (r.user, r.client_id) == (user_part, client_part):
            return r.level
    return None


def level_of(entity: Entity) -> int | None:
    """The level an entry fills on every ladder it is on; None for ip entities."""
    if entity.has(IP):
        return None
    return level_of_shape(*shape_of(entity))


def source_entity(level: int, user: str, client_id: str) -> Entity:
    """The entry that level ``level`` stands for, for a client (or a bucket's tags)."""
    return rung(level).entity_for(user, client_id)


def on_ladder(entity: Entity) -> Callable[[str, str], bool]:
    """A predicate ``(user, client_id) -> bool``: is ``entity`` consulted for that client?

    The entity's names are looked up once, so testing many clients stays cheap."""
    level = level_of(entity)
    if level is None:
        return lambda u, c: False
    r = rung(level)
    user = entity.name(USER) if r.user == NAME else None
    client = entity.name(CLIENT_ID) if r.client_id == NAME else None

    def test(u: str, c: str) -> bool:
        return (consulted(r, bool(u), bool(c))
                and (user is None or u == user) and (client is None or c == client))
    return test


def on_any_ladder(entities: Iterable[Entity]) -> Callable[[str, str], bool]:
    """A predicate ``(user, client_id) -> bool``: is any of ``entities`` consulted for that
    client? As ``any(on_ladder(e)(u, c) for e in entities)``, but one set lookup per rung:
    testing N clients against N changed entities (a plan of a whole set) is linear, not
    quadratic (issue 32)."""
    keys: set[tuple[int, str | None, str | None]] = set()
    for entity in entities:
        level = level_of(entity)
        if level is None:
            continue
        r = rung(level)
        keys.add((level, entity.name(USER) if r.user == NAME else None,
                  entity.name(CLIENT_ID) if r.client_id == NAME else None))
    rungs = [r for r in LADDER if any(k[0] == r.level for k in keys)]

    def test(u: str, c: str) -> bool:
        return any(consulted(r, bool(u), bool(c)) and
                   (r.level, u if r.user == NAME else None,
                    c if r.client_id == NAME else None) in keys for r in rungs)
    return test
