"""Alterations (set / remove ops per entity) and their per-entity results."""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Iterable, Mapping

from quota_core.domain.entities import Entity
from quota_core.errors import AlterationError
from quota_core.domain.keys import same_value, too_large_message

__all__ = ["Op", "Alteration", "EntityResult", "AlterOutcome", "apply_ops", "diff_alteration"]


@dataclass(frozen=True, slots=True)
class Op:
    """Set ``key`` to ``value``, or remove ``key`` when ``value`` is None."""

    key: str
    value: float | None = None

    @classmethod
    def set(cls, key: str, value: float) -> "Op":
        try:
            return cls(key, float(value))
        except OverflowError:  # an integer beyond a double's range (10**400, from a file)
            try:
                text = str(value)
            except ValueError:  # more digits than Python will print
                text = "a number with more than 4300 digits"
            raise AlterationError(too_large_message(key, text), key=key) from None

    @classmethod
    def remove(cls, key: str) -> "Op":
        return cls(key, None)

    @property
    def is_remove(self) -> bool:
        return self.value is None


@dataclass(frozen=True, slots=True)
class Alteration:
    entity: Entity
    ops: tuple[Op, ...]

    @classmethod
    def of(cls, entity: Entity, set: Mapping[str, float] | None = None,
           remove: Iterable[str] = ()) -> "Alteration":
        ops = [Op.set(k, v) for k, v in (set or {}).items()]
        ops += [Op.remove(k) for k in remove]
        return cls(entity, tuple(ops))


@dataclass(frozen=True, slots=True)
class EntityResult:
    """The outcome for one entity: ``error`` is None when it was (or would be) applied."""

    entity: Entity
    error: str | None = None
    #: The Kafka error name when a broker answered (e.g. INVALID_REQUEST).
    error_code: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class AlterOutcome:
    """The answer to an alter: one result per entity, in order. Lookups by entity go through
    :attr:`by_entity`, a dict built once, so a writer that asks about each of N entities does
    N hash lookups, not N scans of N results (issue 32: a 100k import never finished)."""

    results: tuple[EntityResult, ...] = field(default_factory=tuple)
    validate_only: bool = False

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.results)

    @cached_property
    def failed(self) -> tuple[EntityResult, ...]:
        return tuple(r for r in self.results if not r.ok)

    @cached_property
    def by_entity(self) -> Mapping[Entity, EntityResult]:
        """Each entity's result (the first, should an entity appear twice)."""
        index: dict[Entity, EntityResult] = {}
        for r in self.results:
            index.setdefault(r.entity, r)
        return index

    def for_entity(self, entity: Entity) -> EntityResult:
        """``entity``'s result (KeyError when the answer has none): one dict lookup."""
        return self.by_entity[entity]


def apply_ops(current: Mapping[str, float], ops: Iterable[Op]) -> dict[str, float]:
    """The quotas an entity has after ``ops`` (no validation; pure)."""
    after = dict(current)
    for op in ops:
        if op.value is None:
            after.pop(op.key, None)
        else:
            after[op.key] = op.value
    return after


def diff_alteration(entity: Entity, before: Mapping[str, float],
                    after: Mapping[str, float]) -> Alteration:
    """The ops that turn ``before`` into ``after`` for one entity (used by import and forms)."""
    ops = [Op.set(k, v) for k, v in sorted(after.items())
           if k not in before or not same_value(before[k], v)]
    ops += [Op.remove(k) for k in sorted(before) if k not in after]
    return Alteration(entity, tuple(ops))

