"""Drift between two quota sets (two clusters): every (entity, key) whose value differs,
including a key held on one side only. Pure: two quota sets in, rows out; no I/O.

The rows come in the order every other list of changes uses (:func:`quota_core.plan.set_diff`):
entities by :meth:`Entity.sort_key` (user, client-id, ip; the default before names), then
keys by name. NaN equals NaN (a broker stores NaN), as :func:`quota_core.keys.same_value`
says.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from .entities import Entity
from .keys import same_value
from .wording import custom_callback_on, versions_differ

__all__ = ["DriftRow", "quota_drift", "promotion_notes"]

QuotaSet = Mapping[Entity, Mapping[str, float]]


@dataclass(frozen=True)
class DriftRow:
    """One (entity, key) that differs; ``values`` maps each side's name to its value, or
    None where that side does not hold the key."""

    entity: Entity
    key: str
    values: dict[str, float | None]


def quota_drift(name_a: str, entries_a: QuotaSet, name_b: str,
                entries_b: QuotaSet) -> list[DriftRow]:
    """Every (entity, key) whose value differs between ``entries_a`` and ``entries_b``.

    ``name_a`` and ``name_b`` label the two sides in each row's ``values`` (cluster names);
    they must differ, or one side would hide the other."""
    if name_a == name_b:
        raise ValueError(f"the two sides of a drift need two names, got {name_a!r} twice")
    rows: list[DriftRow] = []
    for entity in sorted(set(entries_a) | set(entries_b), key=Entity.sort_key):
        qa, qb = entries_a.get(entity, {}), entries_b.get(entity, {})
        for key in sorted(set(qa) | set(qb)):
            a, b = qa.get(key), qb.get(key)
            if not same_value(a, b):
                rows.append(DriftRow(entity, key, {name_a: a, name_b: b}))
    return rows


def _brokers(nodes: tuple[str, ...]) -> str:
    nodes = tuple(nodes)
    if not nodes:
        return "its brokers"
    word = "broker" if len(nodes) == 1 else "brokers"
    return f"{word} {', '.join(nodes)}"


def promotion_notes(source: str, target: str, versions: Mapping[str, str | None],
                    callbacks: Mapping[str, Mapping[str, tuple[str, ...]]]) -> list[str]:
    """What a plan that copies ``source``'s quota set onto ``target`` must say in its preview:
    the two clusters run different Kafka versions (``versions``: each cluster's, None when it
    has no brokers to ask, a sandbox), or either runs a custom quota callback (``callbacks``:
    each cluster's ``{class: node ids}``, :attr:`quota_core.brokers.ClusterSettings.callbacks`).
    Empty when there is nothing to say."""
    notes = []
    va, vb = versions.get(source), versions.get(target)
    if va and vb and va != vb:
        notes.append(versions_differ(source, va, target, vb))
    for cluster in (source, target):
        for callback, nodes in (callbacks.get(cluster) or {}).items():
            notes.append(custom_callback_on(cluster, callback, _brokers(nodes)))
    return notes
