"""Bucket membership: which broker bucket (metric tags) a client is in, per quota key.

Kafka puts a client in exactly **one** bucket per quota type (ClientQuotaManager's
``DefaultQuotaCallback.quotaMetricTags``), decided by the entries that hold that type's key:

* when the entries holding the key are all of one kind (all pairs, all user-only or all
  client-id-only) every client gets tags of that shape, even a client no entry limits;
* otherwise the first rung of the ladder (:data:`quota_core.domain.ladder.LADDER`) whose entry holds
  the key decides: its parts are the tags (both for 1, 2, 4, 5; user for 3, 6; client id for
  7, 8); with none, the client id alone (also when no entry holds the key at all).

Empty tags are dropped from the MBean name, so an empty client id in a pair bucket reads as a
user bucket. A client's live figures are read from that bucket only; a bucket that shares the
client's user or client id but is not its own is *another* bucket (:func:`split_rows`).

Everything here is derived from the ladder table at call time, never copied.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, TypeVar

from quota_core.domain import ladder
from quota_core.domain.entities import CLIENT_ID, USER, Entity

__all__ = ["Tags", "Membership", "bucket_tags", "split_rows", "kind_of_tags", "names_text",
           "NAMES_SHOWN"]

#: A bucket's tags: (user, client id), None where the bucket is not keyed by that tag.
Tags = tuple[str | None, str | None]
#: A name no entry can hold (entity names are non-empty strings without NUL in practice):
#: stands for "any name without an entry of its own".
UNNAMED = "\x00any"

R = TypeVar("R")


def _tags_of(kind: str, user: str, client_id: str) -> Tags:
    u = user if kind in (ladder.PAIR, ladder.USER_BUCKET) else ""
    c = client_id if kind in (ladder.PAIR, ladder.CLIENT_BUCKET) else ""
    return (u or None, c or None)


def kind_of_tags(tags: Tags) -> str | None:
    """PAIR, USER_BUCKET or CLIENT_BUCKET for a bucket's tags (None: no tag at all)."""
    u, c = tags
    if u is not None and c is not None:
        return ladder.PAIR
    if u is not None:
        return ladder.USER_BUCKET
    return ladder.CLIENT_BUCKET if c is not None else None


@dataclass(frozen=True)
class _KeyIndex:
    holders: frozenset[Entity]
    kinds: frozenset[str]
    users: frozenset[str]
    clients: frozenset[str]


class Membership:
    """The bucket rules over one quota set, indexed once per key (cheap per client)."""

    def __init__(self, quotas: Mapping[Entity, Mapping[str, float]]) -> None:
        self._quotas = quotas
        self._index: dict[str, _KeyIndex] = {}

    def _for(self, key: str) -> _KeyIndex:
        index = self._index.get(key)
        if index is None:
            holders = frozenset(e for e, q in self._quotas.items()
                                if key in q and ladder.level_of(e) is not None)
            kinds = frozenset(ladder.rung(ladder.level_of(e)).bucket for e in holders)  # type: ignore[arg-type]
            users = frozenset(e.name(USER) for e in holders
                              if e.has(USER) and e.name(USER) is not None)
            clients = frozenset(e.name(CLIENT_ID) for e in holders
                                if e.has(CLIENT_ID) and e.name(CLIENT_ID) is not None)
            index = self._index[key] = _KeyIndex(holders, kinds, users, clients)  # type: ignore[arg-type]
        return index

    def level(self, key: str, user: str, client_id: str) -> int | None:
        """The rung whose entry decides the tags (None: no rung does; see :meth:`tags`)."""
        index = self._for(key)
        for r in ladder.LADDER:
            if r.entity_for(user, client_id) in index.holders:
                return r.level
        return None

    def tags(self, key: str, user: str, client_id: str) -> Tags:
        """The bucket the broker puts this client in for ``key`` (raw names)."""
        index = self._for(key)
        if len(index.kinds) == 1:
            return _tags_of(next(iter(index.kinds)), user, client_id)
        level = self.level(key, user, client_id)
        kind = ladder.CLIENT_BUCKET if level is None else ladder.rung(level).bucket
        return _tags_of(kind, user, client_id)

    def holds(self, key: str, tags: Tags, user: str, client_id: str) -> bool:
        """Whether the bucket with ``tags`` is this client's bucket for ``key``."""
        return self.tags(key, user, client_id) == (tags[0] or None, tags[1] or None)

    def current(self, key: str, tags: Tags) -> bool:
        """Whether any client is in a bucket with these tags now (an old-shape bucket lingers
        in the broker's metrics for an hour after a change, but nobody is in it).

        Only the open name needs trying, and only a name no entry holds (or an empty client
        id): a name an entry holds adds rungs that name it, and those are never of the open
        bucket's kind (a client id adds pair and client-id rungs to a user bucket's question,
        a user adds pair and user rungs to a client-id bucket's)."""
        u, c = tags
        if u is not None and c is not None:
            return self.tags(key, u, c) == tags
        if u is not None:
            return any(self.tags(key, u, cc) == tags for cc in (UNNAMED, ""))
        if c is not None:
            return self.tags(key, UNNAMED, c) == tags
        return False

    def excepted(self, key: str, tags: Tags) -> list[str]:
        """For a shared bucket, the names an entry takes out of it: the client ids of its
        user (or the users of its client id) that are in a bucket of their own."""
        u, c = tags
        index = self._for(key)
        if u is not None and c is None:
            return sorted(cc for cc in index.clients if self.tags(key, u, cc) != tags)
        if c is not None and u is None:
            return sorted(uu for uu in index.users if self.tags(key, uu, c) != tags)
        return []

    def sharers(self, key: str, tags: Tags) -> str:
        """Who shares a bucket, in words: ``every client id of user 'alice' except
        'checkout-api' (in a bucket of its own)``."""
        u, c = tags
        own = self.excepted(key, tags)
        if u is not None and c is not None:
            return f"only client id {c!r} of user {u!r}"
        if u is not None:
            but = "" if not own else \
                f" except {names_text(own)} (in a bucket of {_its(own)} own)"
            return f"every client id of user {u!r}{but}"
        if c is not None:
            but = "" if not own else \
                f" except users {names_text(own)} (in a bucket of {_its(own)} own)"
            return f"every user running client id {c!r}{but}"
        return "every client without a user or client id"


#: A sentence names at most this many of the names an entry takes out of a shared bucket: at
#: 100,000 entries that can be tens of thousands, which nobody reads and which made Resolve send
#: megabytes of text to the browser on every keystroke.
NAMES_SHOWN = 10


def names_text(names: list[str]) -> str:
    """``'a', 'b'``: the names, quoted; past :data:`NAMES_SHOWN`, the first ones and how many
    more (``'a', …, 'j' and 4,754 more``)."""
    shown = ", ".join(map(repr, names[:NAMES_SHOWN]))
    more = len(names) - NAMES_SHOWN
    return shown if more <= 0 else f"{shown} and {more:,} more"


def _its(names: list[str]) -> str:
    return "its" if len(names) == 1 else "their"


def bucket_tags(quotas: Mapping[Entity, Mapping[str, float]], key: str, user: str,
                client_id: str) -> Tags:
    """The one bucket a client is in for ``key`` (see the module docstring)."""
    return Membership(quotas).tags(key, user, client_id)


def split_rows(rows: Iterable[R], membership: Membership, user: str, client_id: str
               ) -> tuple[list[R], list[R]]:
    """``(own, others)``: the rows of this client's own bucket per key, and the rows of
    *other* buckets that share its user or its client id (never its own figures).

    Rows need ``key``, ``user`` and ``client_id`` (a :class:`quota_core.throttling.live.BucketUsage`)."""
    own: list[R] = []
    others: list[R] = []
    for r in rows:
        tags = (r.user, r.client_id)  # type: ignore[attr-defined]
        if membership.holds(r.key, tags, user, client_id):  # type: ignore[attr-defined]
            own.append(r)
        elif (tags[0] is not None and tags[0] == user) or \
                (tags[1] is not None and tags[1] == client_id):
            others.append(r)
    return own, others
