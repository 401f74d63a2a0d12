"""One verdict per client and key, from which every sentence on Resolve is rendered.

A :class:`KeyVerdict` holds the facts: the entry that sets the client's quota (level, limit),
the one bucket the broker puts the client in (:mod:`quota_core.domain.membership`), who shares it,
the quota window, what each broker measures for *that* bucket, and, apart, the other buckets
under the same user or client id. :mod:`quota_core.throttling.story` turns it into sentences; the
tests check every sentence against this object, so two sentences cannot contradict.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from quota_core.domain import ladder
from quota_core.domain.entities import CLIENT_ID, USER, Entity
from quota_core.domain.membership import UNNAMED, Membership, Tags, kind_of_tags, split_rows
from quota_core.throttling.live import live_verdict, recent_verdict
from quota_core.domain.resolution import Resolution
from quota_core.domain.shadows import applies_to_other_client_ids
from quota_core.throttling.throttle import DEFAULT_WINDOW, QuotaWindow

__all__ = ["BrokerFigure", "OtherBucket", "KeyVerdict", "key_verdict", "verdicts",
           "tags_entity", "read_window"]


def read_window(backend) -> QuotaWindow:
    """The brokers' quota window behind ``backend`` (the one most brokers have:
    :func:`quota_core.throttling.brokers.read_settings`), or Kafka's defaults saying why when the brokers'
    settings cannot be read: a verdict never fails for want of it."""
    from quota_core.throttling.brokers import read_settings

    return read_settings(backend).window()


def tags_entity(tags: Tags) -> Entity:
    """The bucket's tags as an entity, for display: ``{user=alice}``."""
    u, c = tags
    pairs = ([(USER, u)] if u is not None else []) + ([(CLIENT_ID, c)] if c is not None else [])
    return Entity(tuple(pairs))


@dataclass(frozen=True, slots=True)
class BrokerFigure:
    """What one broker measures for one bucket."""

    broker: str
    rate: float | None
    limit: float | None
    throttle_ms: float | None
    throttled: bool
    over_quota: bool
    estimated_ms: int
    #: Throttled recently, not now (quota_core.throttling.live.BucketUsage.recent).
    recent: bool = False

    @property
    def utilisation(self) -> float | None:
        if self.rate is None or not self.limit:
            return None
        return self.rate / self.limit

    @classmethod
    def of(cls, row, window: QuotaWindow = DEFAULT_WINDOW) -> "BrokerFigure":
        from quota_core.throttling.throttle import estimate_throttle

        estimated = row.estimated_throttle_ms
        if row.quota is not None and row.quota_type != "controller_mutation":
            estimated = estimate_throttle(row.key, row.rate or 0.0, row.quota,
                                          window=window.for_broker(row.broker)).throttle_ms
        return cls(row.broker, row.rate, row.quota, row.throttle_ms, row.throttled,
                   row.over_quota, estimated, bool(getattr(row, "recent", False)))

    def as_dict(self) -> dict:
        return {"broker": self.broker, "rate": self.rate, "limit": self.limit,
                "utilisation": self.utilisation, "throttle_ms": self.throttle_ms,
                "throttled": self.throttled, "recent": self.recent}


@dataclass(frozen=True, slots=True)
class OtherBucket:
    """A bucket under the same user or client id that is *not* this client's."""

    tags: Tags
    level: int | None
    entry: Entity | None
    limit: float | None
    #: Who is in it, in words (named client ids the console knows, or "any client id …").
    members: str
    brokers: tuple[BrokerFigure, ...]
    #: Brokers whose figures are unknown (quota_core.throttling.coverage.unread_brokers).
    unread: tuple[str, ...] = ()

    @property
    def throttled(self) -> bool | None:
        """The one rule (quota_core.throttling.live.live_verdict): None while a broker is unread."""
        return live_verdict(self.brokers, self.unread)


@dataclass(frozen=True)
class KeyVerdict:
    key: str
    user: str
    client_id: str
    #: The entry that sets this client's quota (None: no level does, unlimited).
    level: int | None
    entry: Entity | None
    limit: float | None
    #: The client's one bucket for this key: the broker's metric tags.
    bucket: Tags
    #: Who shares the allowance, in words.
    sharers: str
    window: QuotaWindow = DEFAULT_WINDOW
    #: None when no live figures were read; else one figure per broker reporting the bucket.
    brokers: tuple[BrokerFigure, ...] | None = None
    others: tuple[OtherBucket, ...] = ()
    #: Entries on the client's ladder that hold the key but do not decide it.
    set_back: tuple[tuple[int, Entity, float, bool], ...] = field(default=())
    #: Brokers whose figures are unknown: a dead endpoint or a stopped broker (by node id
    #: where known, else host:port), a broker no endpoint covers (quota_core.throttling.coverage).
    unread: tuple[str, ...] = ()

    @property
    def shared(self) -> bool:
        """True when the bucket is shared (a user or client-id bucket), False when the
        client has it to itself (a (user, client id) bucket)."""
        return kind_of_tags(self.bucket) != ladder.PAIR

    @property
    def throttled(self) -> bool | None:
        """Is this client throttled now, in its own bucket: the one rule
        (:func:`quota_core.throttling.live.live_verdict`): True when a broker read shows it; None
        (unknown) when a broker was not read, or with no live figures; else False."""
        if self.brokers is None:
            return None
        return live_verdict(self.brokers, self.unread)

    @property
    def recent(self) -> bool:
        """Throttled recently, not now: a broker's throttle-time average still holds
        throttles from earlier metric samples while the rate is under the quota."""
        return self.brokers is not None and recent_verdict(self.brokers)

    def as_dict(self) -> dict:
        return {"key": self.key, "level": self.level,
                "entry": None if self.entry is None else self.entry.as_dict(),
                "limit": self.limit, "bucket": {USER: self.bucket[0], CLIENT_ID: self.bucket[1]},
                "shared": self.shared, "sharers": self.sharers,
                "window": self.window.as_dict(), "throttled": self.throttled,
                "recent": self.recent, "unread": list(self.unread),
                "brokers": None if self.brokers is None else [b.as_dict() for b in self.brokers],
                "others": [{"bucket": {USER: o.tags[0], CLIENT_ID: o.tags[1]},
                            "level": o.level, "members": o.members, "throttled": o.throttled,
                            "entry": None if o.entry is None else o.entry.as_dict(),
                            "brokers": [b.as_dict() for b in o.brokers]}
                           for o in self.others]}


def _members(members: Membership, key: str, tags: Tags, user: str, client_id: str,
             known: set[tuple[str, str]]) -> str:
    """Who is in another bucket: the clients the console knows (``known`` (user, client id)
    pairs: entries naming both, the brokers' pair buckets, any the caller adds) that are in
    it, then "any client id without an entry of its own" when an unknown one would be too."""
    u, c = tags
    if u is not None and c is not None:
        return f"the own bucket of client id {c!r} of user {u!r}"
    if u is not None:
        named = sorted({cc for uu, cc in known if uu == u and cc and cc != client_id
                        and members.tags(key, u, cc) == tags})
        parts = [repr(n) for n in named]
        if members.tags(key, u, UNNAMED) == tags:
            parts.append("any client id without an entry of its own")
        return (f"shared by the client ids of user {u!r}: "
                + (", ".join(parts) if parts else "none the console knows"))
    named = sorted({uu for uu, cc in known if cc == c and uu and uu != user
                    and members.tags(key, uu, c) == tags})
    parts = [repr(n) for n in named]
    if members.tags(key, UNNAMED, c) == tags:
        parts.append("any user without an entry of their own")
    return (f"shared by the users running client id {c!r}: "
            + (", ".join(parts) if parts else "none the console knows"))


def key_verdict(resolution: Resolution, key: str, quotas: Mapping[Entity, Mapping[str, float]],
                rows: Sequence | None = None, window: QuotaWindow = DEFAULT_WINDOW,
                members: Membership | None = None,
                known: Iterable[tuple[str, str]] = (), unread: Iterable[str] = ()
                ) -> KeyVerdict:
    """The verdict for one key of a (user, client id) resolution; ``rows`` are the live
    :class:`~quota_core.throttling.live.BucketUsage` rows (None: no live figures); ``known`` more
    (user, client id) clients the console knows of (e.g. from the usage history);
    ``unread`` the brokers whose figures are unknown (the verdict is then never False)."""
    unread = tuple(unread)
    members = members or Membership(quotas)
    user, client_id = resolution.client.user or "", resolution.client.client_id or ""
    kr = resolution.keys[key]
    bucket = members.tags(key, user, client_id)
    set_back = tuple((s.level, s.entity, s.quotas[key],
                      applies_to_other_client_ids(resolution, s.level, key))
                     for s in resolution.ladder if key in s.shadowed)
    brokers = others = None
    if rows is not None:
        mine = [r for r in rows if r.key == key]
        own, other = split_rows(mine, members, user, client_id)
        brokers = tuple(BrokerFigure.of(r, window) for r in sorted(own, key=lambda r: r.broker))
        # The clients the brokers name: a pair bucket of any quota type (batch-export's own
        # fetch bucket names it, while its produce bucket is {user=alice}).
        pairs = set(known) | {(r.user, r.client_id) for r in rows if r.user and r.client_id}
        pairs |= {(e.name(USER), e.name(CLIENT_ID)) for e in quotas
                  if e.has(USER) and e.has(CLIENT_ID) and e.name(USER) is not None
                  and e.name(CLIENT_ID) is not None}
        grouped: dict[Tags, list] = {}
        for r in other:
            if r.current:
                grouped.setdefault((r.user, r.client_id), []).append(r)
        others = tuple(
            OtherBucket(tags, rs[0].level, rs[0].source, rs[0].quota,
                        _members(members, key, tags, user, client_id, pairs),
                        tuple(BrokerFigure.of(r, window) for r in sorted(rs, key=lambda r: r.broker)),
                        unread)
            for tags, rs in sorted(grouped.items(), key=lambda t: (t[0][0] or "", t[0][1] or "")))
    return KeyVerdict(key, user, client_id, kr.level, kr.source, kr.value, bucket,
                      members.sharers(key, bucket), window, brokers, others or (), set_back,
                      unread if rows is not None else ())


def verdicts(resolution: Resolution, keys: Sequence[str],
             quotas: Mapping[Entity, Mapping[str, float]], rows: Sequence | None = None,
             window: QuotaWindow = DEFAULT_WINDOW,
             known: Iterable[tuple[str, str]] = (), unread: Iterable[str] = ()
             ) -> list[KeyVerdict]:
    members = Membership(quotas)
    known, unread = list(known), tuple(unread)
    return [key_verdict(resolution, k, quotas, rows, window, members, known, unread)
            for k in keys]
