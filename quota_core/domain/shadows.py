"""Shadowed and dead entries: when an entry's key is decided by another entry first.

Two questions, both read off the one ladder (:mod:`quota_core.domain.ladder`):

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

from quota_core.domain import ladder
from quota_core.domain.entities import CLIENT_ID, USER, Entity
from quota_core.domain.ladder import NAME
from quota_core.domain.resolution import Resolution
from quota_core.domain.units import format_quota

__all__ = ["DeadKey", "dead_keys", "shadow_notes", "shadow_note_parts",
           "applies_to_other_client_ids", "TEXT", "CODE", "EM"]


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


def applies_to_other_client_ids(resolution: Resolution, level: int, key: str) -> bool:
    """Whether the entry at ``level`` of this client's ladder decides ``key`` for the user's
    *other* client ids that have no entry of their own (``{user=alice}`` for alice's other
    client ids while ``{user=alice, client-id=checkout-api}`` sets checkout-api's).

    Read off the same ladder: such a client id consults the rungs that do not name a client
    id (2, 3, 5, 6, 8), whose entries are the same as this client's."""
    if resolution.client.is_ip or ladder.rung(level).client_id == NAME:
        return False
    for step in resolution.ladder:
        if ladder.rung(step.level).client_id == NAME:
            continue
        if key in step.quotas:
            return step.level == level
    return False


#: The styles of a note's parts (:func:`shadow_note_parts`): plain text, an entity, a stressed word.
TEXT, CODE, EM = "text", "code", "em"


def shadow_note_parts(resolution: Resolution) -> list[tuple[tuple[str, str], ...]]:
    """:func:`shadow_notes` as parts ``(style, text)``: entities are :data:`CODE`, a stressed
    word :data:`EM`, the rest :data:`TEXT`. A page renders each part as text in its style, so
    a name holding ``*`` or a backtick is never read as markup (issue 32, finding 6)."""
    client = resolution.client
    who = client.user if client.user else "this client"
    notes = []
    for step in resolution.ladder:
        for key in step.shadowed:
            kr = resolution.keys[key]
            if kr.level is None or kr.source is None:
                continue
            elsewhere = applies_to_other_client_ids(resolution, step.level, key)
            subject = (f"client id {client.client_id!r} of {who}" if elsewhere else who)
            mine, theirs = step.quotas[key], kr.value
            if theirs is None or theirs != theirs or mine != mine:
                compare = ()
            elif theirs > mine:
                compare = ((TEXT, f", so {subject} gets "), (EM, "more"),
                           (TEXT, " than this entry's cap"))
            elif theirs < mine:
                compare = ((TEXT, f", so {subject} gets "), (EM, "less"),
                           (TEXT, " than this entry would give"))
            else:
                compare = ((TEXT, " (the same value)"),)
            verb = "does not apply" if elsewhere else "never applies"
            note = ((CODE, step.entity.display()),
                    (TEXT, f" {format_quota(key, mine)} {verb} to {subject}: "),
                    (CODE, kr.source.display()),
                    (TEXT, f" at level {kr.level} sets {key} first "
                           f"({format_quota(key, theirs)})"),
                    *compare, (TEXT, "."))
            if elsewhere:
                note += ((TEXT, f" It still sets {key} for {who}'s other client ids without "
                                f"an entry of their own."),)
            notes.append(note)
    return notes


def shadow_notes(resolution: Resolution) -> list[str]:
    """Plain sentences for each key an entry on this client's ladder holds but does not
    decide: which level decides it instead, and whether the client gets more or less.
    Entities are marked `` `…` `` and the stressed word ``*…*`` (for text output; a page
    renders :func:`shadow_note_parts` instead, where a name is never markup).

    Per client and key: an entry that still decides the key for the user's other client ids
    is said not to apply to *this client id*, and that it applies to the others."""
    marks = {TEXT: "{}", CODE: "`{}`", EM: "*{}*"}
    return ["".join(marks[style].format(text) for style, text in parts)
            for parts in shadow_note_parts(resolution)]
