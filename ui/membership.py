"""The bucket rules over one described set, shared by every page run on it.

:class:`quota_core.domain.membership.Membership` answers from a per-key index of the entries that hold
the key (~1.6 s to build at 100,000 entries), and :meth:`~Membership.excepted` asks
:meth:`~Membership.tags` once for every name under the key (~0.2 s per key at 100,000). Resolve
built a fresh one several times per rerun (its cards, its verdicts, each sentence), so a
keystroke cost seconds. :class:`SharedMembership` is built once per snapshot
(:meth:`ui.registry.Snapshot.members`) and answers ``excepted`` by asking the core only once per
group of names that the ladder cannot tell apart.

Why that is exact: for a user bucket ``(u, None)``, the answer for a client id ``cc`` depends
on ``cc`` only through the rungs that name a client id (1, 4, 7): whether the entry each of
them looks up for ``(u, cc)`` is held. The other rungs look up the same entry for every
``cc``. Names with the same pattern of held rungs land on the same rung, hence in a bucket of
the same kind, and a bucket's kind alone says whether it is ``(u, None)``. So the core is asked
for one name of each pattern (at most 2³ of them, and one for all the names that no such rung
holds). The same holds for a client-id bucket over users. ``tests/pages/test_rerun_speed.py`` checks
the answers against the core's on every name of generated sets.
"""
from __future__ import annotations

import threading
from typing import Iterable

from quota_core.domain import CLIENT_ID, LADDER, NAME, USER, Membership, Rung, Tags, level_of

__all__ = ["SharedMembership"]

#: Per key and side: per rung that names that side, the names it holds; for a rung that also
#: names the other side, per name of the other side.
_Held = dict[int, "set[str] | dict[str, set[str]]"]


class SharedMembership(Membership):
    """A :class:`Membership` for a quota set that never changes under it (a snapshot is
    replaced, never edited): indexes built once, ``excepted`` answered per group of names
    and remembered."""

    def __init__(self, quotas) -> None:
        super().__init__(quotas)
        self._held: dict[tuple[str, str], _Held] = {}
        self._levels: dict | None = None
        self._excepted: dict[tuple[str, Tags], list[str]] = {}
        self._lock = threading.Lock()

    def warm(self, keys: Iterable[str]) -> None:
        """Build every index of these keys now (once per snapshot)."""
        for key in keys:
            self._for(key)
            self._held_for(key, USER)
            self._held_for(key, CLIENT_ID)

    def _held_for(self, key: str, side: str) -> _Held:
        """The names of ``side`` (USER or CLIENT_ID) that the rungs naming it hold for ``key``."""
        found = self._held.get((key, side))
        if found is not None:
            return found
        other = CLIENT_ID if side == USER else USER
        held: _Held = {}
        rungs = {r.level: r for r in LADDER if _names(r, side)}
        for r in rungs.values():
            held[r.level] = {} if _names(r, other) else set()
        if self._levels is None:  # every entry's rung, once for all keys and both sides
            self._levels = {e: level_of(e) for e in self._quotas}
        levels = self._levels
        for entity in self._for(key).holders:
            level = levels[entity]
            if level not in rungs:
                continue
            name = entity.name(side)
            slot = held[level]
            if isinstance(slot, dict):
                slot.setdefault(entity.name(other), set()).add(name)
            else:
                slot.add(name)
        self._held[(key, side)] = held
        return held

    def excepted(self, key: str, tags: Tags) -> list[str]:
        with self._lock:
            found = self._excepted.get((key, tags))
        if found is None:
            found = self._grouped_excepted(key, tags)
            with self._lock:
                if len(self._excepted) >= 4096:  # one entry per bucket asked about
                    self._excepted.clear()
                self._excepted[(key, tags)] = found
        return list(found)

    def _grouped_excepted(self, key: str, tags: Tags) -> list[str]:
        u, c = tags
        if (u is None) == (c is None):
            return super().excepted(key, tags)  # a pair bucket, or no tags: nobody
        index = self._for(key)
        if c is None:  # a user's bucket: which of the client ids are elsewhere
            side, fixed, names = CLIENT_ID, u, index.clients
        else:          # a client id's bucket: which of the users are elsewhere
            side, fixed, names = USER, c, index.users
        held = [slot.get(fixed, set()) if isinstance(slot, dict) else slot
                for slot in self._held_for(key, side).values()]

        def elsewhere(name: str) -> bool:
            mine = self.tags(key, u, name) if side == CLIENT_ID else self.tags(key, name, c)
            return mine != tags

        # An empty name is told apart by its bucket's tags (they drop it): it is asked alone.
        named = (set().union(*held) & names) - {""}
        groups: dict[tuple[bool, ...], list[str]] = {}
        for name in named:
            groups.setdefault(tuple(name in s for s in held), []).append(name)
        rest = names - named - {""}
        if rest:
            groups[(False,) * len(held)] = list(rest)
        out = [n for group in groups.values() if elsewhere(group[0]) for n in group]
        if "" in names and elsewhere(""):
            out.append("")
        return sorted(out)


def _names(r: Rung, side: str) -> bool:
    return (r.user if side == USER else r.client_id) == NAME
