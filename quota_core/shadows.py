"""Shadowed and dead entries: when an entry's key is decided by another entry first.

Two questions, both read off the one ladder (:mod:`quota_core.ladder`):

* **For one client** (:func:`shadow_notes`): which configured keys on its ladder are set back
  by a higher level, in plain words, saying whether the client ends up with more or less than
  the entry that never applies to it.
* **For every client** (:func:`dead_keys`): which keys of an entry can never bind anyone,
  because a higher level that every one of its clients consults always sets the key first.
  Example: every ``{client-id=C}`` key that ``{user=<default>}`` also sets: a client always
  has a user (an unauthenticated one is ``ANONYMOUS``), so level 6 always answers first.

A client may have an empty client id (kafka-python allows it), which skips every level that
names a client id; so ``{user=U, client-id=<default>}`` does not make ``{user=U}`` dead.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from . import ladder
from .entities import CLIENT_ID, USER, Entity
from .ladder import NAME
from .resolution import Resolution
from .units import format_quota

__all__ = ["DeadKey", "dead_keys", "shadow_notes"]


@dataclass(frozen=True, slots=True)
class DeadKey:
    """``key`` of ``entity`` never binds a client: ``winner`` (at ``level``) sets it first."""

    entity: Entity
    key: str
    winner: Entity
    level: int

    def reason(self) -> str:
        return (f"{self.key} of {self.entity.display()} never applies to any client: "
                f"{self.winner.display()} "
                f"(level {self.level}) sets {self.key} first for every client this entry "
                f"could limit.")


def _fixed_entity(earlier: ladder.Rung, rung: ladder.Rung, user: str | None,
                  client_id: str | None) -> Entity | None:
    """The entry ``earlier`` looks up for every client of an entry at ``rung`` with these
    names, or None when it depends on the client (a name the entry leaves open)."""
    if earlier.user == NAME and rung.user != NAME:
        return None
    if earlier.client_id == NAME and rung.client_id != NAME:
        return None
    return earlier.entity_for(user or "", client_id or "")


def dead_keys(quotas: Mapping[Entity, Mapping[str, float]]) -> dict[Entity, list[DeadKey]]:
    """Every entry with keys that can never bind a client, and what decides them instead."""
    out: dict[Entity, list[DeadKey]] = {}
    for entity, held in quotas.items():
        level = ladder.level_of(entity)
        if level is None or not held:
            continue
        r = ladder.rung(level)
        user = entity.name(USER) if r.uses_user else None
        client_id = entity.name(CLIENT_ID) if r.uses_client_id else None
        open_keys = set(held)
        for earlier in ladder.LADDER:
            if earlier.level == level:
                break
            # Every client of the entry must consult the earlier rung: it may name a client id
            # only if the entry does (a client may have an empty client id).
            if earlier.uses_client_id and not r.uses_client_id:
                continue
            winner = _fixed_entity(earlier, r, user, client_id)
            if winner is None or winner == entity:
                continue
            for key in sorted(open_keys & set(quotas.get(winner, ()))):
                out.setdefault(entity, []).append(DeadKey(entity, key, winner, earlier.level))
                open_keys.discard(key)
            if not open_keys:
                break
    return out


def shadow_notes(resolution: Resolution) -> list[str]:
    """Plain sentences for each key an entry on this client's ladder holds but does not
    decide: which level decides it instead, and whether the client gets more or less."""
    client = resolution.client
    who = client.user if client.user else "this client"
    notes = []
    for step in resolution.ladder:
        for key in step.shadowed:
            kr = resolution.keys[key]
            if kr.level is None or kr.source is None:
                continue
            mine, theirs = step.quotas[key], kr.value
            if theirs is None or theirs != theirs or mine != mine:
                compare = ""
            elif theirs > mine:
                compare = f", so {who} gets *more* than this entry's cap"
            elif theirs < mine:
                compare = f", so {who} gets *less* than this entry would give"
            else:
                compare = " (the same value)"
            notes.append(f"`{step.entity.display()}` {format_quota(key, mine)} never applies "
                         f"to {who}: `{kr.source.display()}` at level {kr.level} sets {key} first "
                         f"({format_quota(key, theirs)}){compare}.")
    return notes
