"""Describe filters, with the broker's semantics (ClientQuotasImage / ClientQuotaControlManager).

A filter is a list of components, one per entity type, each matching an exact name, the
default, or any entity of that type (the default included). Every component must match.
A *strict* filter also requires the entity to have no other types. An empty non-strict
filter matches everything; an empty strict filter matches nothing.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Iterable, Mapping

from quota_core.domain.entities import CLIENT_ID, ENTITY_TYPES, IP, USER, Entity
from quota_core.errors import FilterError

__all__ = ["MatchType", "FilterComponent", "EntityFilter", "filter_quotas"]


class MatchType(IntEnum):
    """The protocol's match types (DescribeClientQuotas ``MatchType``)."""

    EXACT = 0
    DEFAULT = 1
    ANY = 2


@dataclass(frozen=True, slots=True)
class FilterComponent:
    entity_type: str
    match_type: MatchType
    #: The name for EXACT; None otherwise.
    match: str | None = None

    @classmethod
    def exact(cls, entity_type: str, name: str) -> "FilterComponent":
        return cls(entity_type, MatchType.EXACT, name)

    @classmethod
    def default(cls, entity_type: str) -> "FilterComponent":
        return cls(entity_type, MatchType.DEFAULT, None)

    @classmethod
    def any(cls, entity_type: str) -> "FilterComponent":
        return cls(entity_type, MatchType.ANY, None)

    def matches_name(self, name: str | None) -> bool:
        """Whether an entity's name for this type (None = default) matches."""
        if self.match_type is MatchType.ANY:
            return True
        if self.match_type is MatchType.DEFAULT:
            return name is None
        return name == self.match

    def __str__(self) -> str:
        if self.match_type is MatchType.ANY:
            return f"{self.entity_type}=*"
        if self.match_type is MatchType.DEFAULT:
            return f"{self.entity_type}=<default>"
        return f"{self.entity_type}={self.match}"


@dataclass(frozen=True, slots=True)
class EntityFilter:
    components: tuple[FilterComponent, ...] = ()
    strict: bool = False

    @classmethod
    def all(cls) -> "EntityFilter":
        """Every entity (the empty, non-strict filter)."""
        return cls((), False)

    @classmethod
    def contains(cls, components: Iterable[FilterComponent]) -> "EntityFilter":
        """Entities matching every component; they may have other types too."""
        return cls(tuple(components), False)

    @classmethod
    def contains_only(cls, components: Iterable[FilterComponent]) -> "EntityFilter":
        """Entities matching every component and having no other types."""
        return cls(tuple(components), True)

    @classmethod
    def for_entity(cls, entity: Entity) -> "EntityFilter":
        """Exactly this one entity."""
        return cls.contains_only(
            FilterComponent.default(t) if n is None else FilterComponent.exact(t, n)
            for t, n in entity.parts
        )

    def validate(self) -> None:
        """Raise :class:`FilterError` for anything a broker refuses, with its reason."""
        seen: set[str] = set()
        for c in self.components:
            if not c.entity_type:
                raise FilterError("Invalid empty entity type in the filter: give user, "
                                  "client-id or ip.")
            if c.entity_type in seen:
                raise FilterError(
                    f"Entity type {c.entity_type} cannot appear more than once in the filter.")
            seen.add(c.entity_type)
            if c.entity_type not in ENTITY_TYPES:
                raise FilterError(
                    f"Unsupported entity type {c.entity_type}: use user, client-id or ip.")
            if c.match_type is MatchType.EXACT and c.match is None:
                raise FilterError(
                    f"The exact match for {c.entity_type} has no name: give a name, or "
                    f"match the default instead.")
            if c.match_type is not MatchType.EXACT and c.match is not None:
                raise FilterError(
                    f"The {c.match_type.name.lower()} match for {c.entity_type} cannot carry "
                    f"a name ({c.match!r}): use an exact match to select a name.")
        if IP in seen and (USER in seen or CLIENT_ID in seen):
            raise FilterError(
                "Invalid entity filter component combination. IP filter component should "
                "not be used with user or clientId filter component.")

    def matches(self, entity: Entity) -> bool:
        names = entity.as_dict()
        if self.strict and len(names) != len(self.components):
            return False
        for c in self.components:
            if c.entity_type not in names or not c.matches_name(names[c.entity_type]):
                return False
        return True

    def __str__(self) -> str:
        inner = ", ".join(str(c) for c in self.components) or "everything"
        return f"{'only ' if self.strict else ''}{{{inner}}}"


def filter_quotas(quotas: Mapping[Entity, Mapping[str, float]],
                  entity_filter: EntityFilter) -> dict[Entity, dict[str, float]]:
    """Describe over an in-memory quota set: validate the filter, keep the matches."""
    entity_filter.validate()
    return {e: dict(q) for e, q in quotas.items() if q and entity_filter.matches(e)}
