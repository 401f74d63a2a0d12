"""Live throttling: broker quota metrics joined with the ladder. Pure: series in, rows out.

A broker exports, per bucket (its metric tags), the observed rate and the throttle time it
applied. The tags are the parts of the rung that matched (quota_core.domain.ladder), so the limit a
bucket runs against is the narrowed ladder for those tags, resolved here with
:func:`~quota_core.domain.bulk.bulk_resolve_buckets`: the quota, the entry and level that set it, and
who shares it. Every row is per broker: each broker enforces on its own, so rates are never
summed across brokers.

``throttle-time`` is NaN when the broker throttled nobody in that bucket lately: that is "not
throttled", never an error.

**Now, recently, unknown.** ``throttle-time`` is an average over the broker's own metric
samples (``metrics.num.samples`` × ``metrics.sample.window.ms``, 2 × 30 s by default), not over
the quota window, so it still shows a throttle up to a minute after the last one. A bucket is
*throttled now* when it is over its quota, or when the broker reports a throttle and its rate
is still at :data:`NOW_SHARE` (90 %) of its quota or more (a client being throttled is held at
about its quota). A throttle time beside a rate under 90 % of the quota (or a bucket no quota
limits any more) is *throttled recently*: :attr:`BucketUsage.recent`. Across brokers,
:func:`live_verdict` is the one rule: throttled when any broker read shows it, unknown when
a broker of the cluster was not read, else not throttled.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Mapping, Protocol, Sequence

from quota_core.domain import ladder
from quota_core.domain.entities import CLIENT_ID, USER, Entity
from quota_core.domain.wording import (broker_name, broker_order, brokers_text,  # noqa: F401
                                       ms_text)  # their home is wording; importers here keep working
from quota_core.throttling.throttle import estimate_throttle, mutation_throttle_ms

__all__ = ["QUOTA_TYPES", "KEY_OF_TYPE", "NOW_SHARE", "CONFIRM_S", "BucketUsage", "live_verdict",
           "recent_verdict", "hold", "finite", "gather", "join_usage",
           "throttled_rows", "client_buckets", "other_buckets", "clients_seen",
           "TrafficChange", "traffic_impact", "broker_name", "broker_order",
           "brokers_text"]

#: Quota types as the collector and the pipeline name them, with the key each is limited by.
KEY_OF_TYPE: dict[str, str] = {
    "produce": "producer_byte_rate",
    "fetch": "consumer_byte_rate",
    "request": "request_percentage",
    "controller_mutation": "controller_mutation_rate",
}
QUOTA_TYPES: tuple[str, ...] = tuple(KEY_OF_TYPE)
#: A bucket whose broker reports a throttle time is throttled *now* only while its rate is at
#: least this share of its quota: a throttled client is held at about its quota (each delay
#: brings its rate back to it), so a rate well under it means the broker's throttle-time
#: average is holding throttles from earlier metric samples ("throttled recently").
NOW_SHARE = 0.9
#: How long a bucket must read under :data:`NOW_SHARE` (with a throttle time) before it is
#: "throttled recently": a client the broker keeps throttling reads at 100-130 % of its quota
#: but dips to 30-80 % for up to about 2 s as the broker's rate window rolls over (seen on
#: 4.3.1 brokers with Java and librdkafka producers, every ~12 s). :func:`hold` compares
#: reads this far apart.
CONFIRM_S = 3.0
#: The attribute that carries each type's rate.
_RATE_ATTRIBUTE = {"produce": "byte-rate", "fetch": "byte-rate", "request": "request-time",
                   "controller_mutation": "mutation-rate"}


class Series(Protocol):  # quota_core.telemetry.QuotaSeries
    broker: str
    quota_type: str
    attribute: str
    user: str | None
    client_id: str | None
    value: float


@dataclass(frozen=True, slots=True)
class BucketUsage:
    """One bucket on one broker, for one quota key, right now."""

    broker: str
    quota_type: str
    key: str
    #: The bucket's tags, raw names; None where the bucket is not keyed by that tag.
    user: str | None
    client_id: str | None
    rate: float | None
    #: The broker's own figure (ms); None when it reported NaN (nobody throttled lately).
    throttle_ms: float | None
    quota: float | None
    level: int | None
    source: Entity | None
    #: For controller_mutation: the token bucket's level (negative: mutations rejected).
    tokens: float | None = None
    #: False for a bucket no client is in with this quota set (an old-shape bucket lingers in
    #: the broker's metrics for an hour after a change): see quota_core.domain.membership.
    current: bool = True
    #: Another read a moment apart showed this bucket throttled now (:func:`hold`): one read
    #: under :data:`NOW_SHARE` is then a dip, not the end of throttling.
    held: bool = False

    @property
    def utilisation(self) -> float | None:
        """rate / quota (1.0 = exactly at quota); None when unlimited or not measured."""
        if self.rate is None or not self.quota or math.isnan(self.quota):
            return None
        return self.rate / self.quota

    @property
    def over_quota(self) -> bool:
        if self.quota_type == "controller_mutation" and self.tokens is not None:
            return self.tokens < 0
        return self.rate is not None and self.quota is not None and self.rate > self.quota

    @property
    def throttled(self) -> bool:
        """Throttled now: the bucket is over quota (the broker throttles its next request),
        or the broker reports a throttle time while the rate is still near the quota (at
        :data:`NOW_SHARE` of it or more, or not measured)."""
        return self.over_quota or (self._reports_throttle and not self.recent)

    @property
    def _reports_throttle(self) -> bool:
        return bool(self.throttle_ms and self.throttle_ms > 0)

    @property
    def recent(self) -> bool:
        """Throttled recently, not now: the broker's throttle-time average still holds
        throttles from earlier metric samples, while the rate is under :data:`NOW_SHARE` of
        the quota (or no quota limits the bucket any more), and no other read a moment apart
        shows it throttled now (:attr:`held`)."""
        if not self._reports_throttle or self.over_quota or self.held:
            return False
        if self.quota is None:
            return True
        u = self.utilisation
        return u is not None and u < NOW_SHARE

    @property
    def estimated_throttle_ms(self) -> int:
        """Kafka's arithmetic for the observed rate: the delay per request it implies."""
        if self.quota is None:
            return 0
        if self.quota_type == "controller_mutation":
            return mutation_throttle_ms(self.tokens if self.tokens is not None else 0.0,
                                        self.quota)
        return estimate_throttle(self.key, self.rate or 0.0, self.quota).throttle_ms

    @property
    def bucket(self) -> dict[str, str | None]:
        return {USER: self.user, CLIENT_ID: self.client_id}

    @property
    def shared_by(self) -> str:
        if self.user is not None and self.client_id is not None:
            return f"only client id {self.client_id!r} of user {self.user!r}"
        if self.user is not None:
            return f"every client id of user {self.user!r} together"
        if self.client_id is not None:
            return f"every user running client id {self.client_id!r} together"
        return "every client without a user or client id"

    def sentence(self) -> str:
        """One plain sentence from the live figures: who shares what, how much they send,
        and what the broker does about it."""
        from quota_core.domain.units import format_quota, format_rate

        q = format_quota(self.key, self.quota)
        entry = "no entry limits it" if self.source is None else \
            f"set for {self.source.display()} (level {self.level})"
        if self.user is not None and self.client_id is not None:
            who, verb = f"Client id {self.client_id!r} of user {self.user!r} has {q} to itself", "sends"
        elif self.user is not None:
            who, verb = f"The client ids of user {self.user!r} share {q}", "together they send"
        else:
            who, verb = f"Every user running client id {self.client_id!r} shares {q}", \
                "together they send"
        rate = "nothing measured" if self.rate is None else format_rate(self.key, self.rate)
        text = f"{who}, {entry}; {verb} {rate} on {broker_name(self.broker)}"
        if self.quota is None:
            return text + ": never throttled."
        if self.throttled:
            wait = self.throttle_ms if self.throttle_ms else self.estimated_throttle_ms
            told = "" if not self.throttle_ms else " as the broker reports"
            return text + f", so each request waits ≈ {ms_text(wait)}{told}."
        share = "" if self.utilisation is None else f" ({self.utilisation:.0%} of it)"
        if self.recent:
            return text + f"{share}: throttled recently, not now."
        return text + f"{share}: not throttled."

    def as_dict(self) -> dict:
        return {"broker": self.broker, "quota_type": self.quota_type, "key": self.key,
                "bucket": self.bucket, "rate": self.rate, "quota": self.quota,
                "utilisation": self.utilisation, "throttle_ms": self.throttle_ms,
                "throttled": self.throttled, "recent": self.recent, "level": self.level,
                "source": None if self.source is None else self.source.as_dict(),
                "shared_by": self.shared_by, "current": self.current}


def live_verdict(figures: Iterable, unread: Iterable[str] = ()) -> bool | None:
    """The one rule for a live verdict of a bucket and key over the brokers: ``True`` when any
    broker that was read shows it throttled now (``figures``: anything with ``throttled``,
    one per broker read); else ``None`` (unknown) when any broker of the cluster was not read
    (``unread``: a dead endpoint, a broker no endpoint covers, a stopped broker); else
    ``False``. Every page and every output decides with this function (docs/interfaces.md)."""
    if any(bool(f.throttled) for f in figures):
        return True
    return None if any(True for _ in unread) else False


def hold(rows: Sequence[BucketUsage], other: Iterable[BucketUsage]) -> list[BucketUsage]:
    """``rows`` with :attr:`BucketUsage.held` set on each bucket that looks throttled
    recently but that ``other`` (another read, :data:`CONFIRM_S` or more apart) shows
    throttled now. A client the broker keeps throttling is held at about its quota, but a read
    can catch its rate far under it for a moment, as the broker's rate window rolls over; only
    two reads under it, :data:`CONFIRM_S` apart, are "recently"."""
    from dataclasses import replace

    now = {(r.broker, r.quota_type, r.user, r.client_id) for r in other if r.throttled}
    return [replace(r, held=True) if r.recent
            and (r.broker, r.quota_type, r.user, r.client_id) in now else r for r in rows]


def recent_verdict(figures: Iterable) -> bool:
    """Throttled recently: no broker read shows the bucket throttled now, and one still
    reports a throttle from earlier metric samples (:attr:`BucketUsage.recent`)."""
    figures = list(figures)
    return not any(f.throttled for f in figures) and any(getattr(f, "recent", False)
                                                         for f in figures)


def finite(value: float | None) -> float | None:
    """A metric figure as a float, or None when the broker did not export it (missing or
    NaN): the one reading of an absent figure, for live rows and the usage history."""
    return None if value is None or math.isnan(value) else float(value)


def gather(series: Iterable[Series]) -> dict[tuple, dict[str, float]]:
    """Series grouped per bucket: ``(broker, quota_type, user, client_id) -> {"rate": …,
    "throttle": …, "tokens": …}`` (only the figures the broker exported)."""
    gathered: dict[tuple, dict[str, float]] = {}
    for s in series:
        if s.quota_type not in KEY_OF_TYPE:
            continue
        row = gathered.setdefault((s.broker, s.quota_type, s.user or None, s.client_id or None),
                                  {})
        if s.attribute == _RATE_ATTRIBUTE[s.quota_type]:
            row["rate"] = s.value
        elif s.attribute == "throttle-time":
            row["throttle"] = s.value
        elif s.attribute == "tokens":
            row["tokens"] = s.value
    return gathered


def join_usage(series: Iterable[Series], quotas: Mapping[Entity, Mapping[str, float]]
               ) -> list[BucketUsage]:
    """One row per (broker, quota type, bucket) the series mention, with the quota that bucket
    runs against and the entry that set it."""
    from quota_core.domain.bulk import bulk_resolve_buckets
    from quota_core.domain.membership import Membership

    gathered = gather(series)
    if not gathered:
        return []
    members = Membership(quotas)
    tags = list(dict.fromkeys((u, c) for _, _, u, c in gathered))
    resolved = bulk_resolve_buckets(quotas, [u for u, _ in tags], [c for _, c in tags],
                                    tuple(KEY_OF_TYPE.values()))
    position = {t: i for i, t in enumerate(tags)}
    rows = []
    for (broker, quota_type, user, client_id), figures in gathered.items():
        key = KEY_OF_TYPE[quota_type]
        i = position[(user, client_id)]
        level = int(resolved.levels[key][i])
        source = ladder.source_entity(level, user or "", client_id or "") if level else None
        rows.append(BucketUsage(
            broker, quota_type, key, user, client_id, finite(figures.get("rate")),
            finite(figures.get("throttle")),
            float(resolved.values[key][i]) if level else None, level or None, source,
            finite(figures.get("tokens")), members.current(key, (user, client_id))))
    return rows


def throttled_rows(rows: Sequence[BucketUsage], above: float | None = None
                   ) -> list[BucketUsage]:
    """Buckets throttled now, then those throttled recently (:attr:`BucketUsage.recent`),
    then (with ``above``, a percentage) those running above that share of their quota; worst
    first within each (the broker's throttle, then utilisation)."""
    def hot(r: BucketUsage) -> bool:
        u = r.utilisation
        return r.throttled or r.recent or (above is not None and u is not None
                                           and u * 100 >= above)

    return sorted((r for r in rows if hot(r)),
                  key=lambda r: (0 if r.throttled else 1 if r.recent else 2,
                                 -(r.throttle_ms or 0.0), -(r.utilisation or 0.0), r.broker,
                                 r.quota_type, r.user or "", r.client_id or ""))


def client_buckets(rows: Sequence[BucketUsage], user: str, client_id: str,
                   quotas: Mapping[Entity, Mapping[str, float]] | None = None
                   ) -> list[BucketUsage]:
    """The rows of this client's own bucket, one per key and broker: Kafka puts a client in
    exactly one bucket per quota type (quota_core.domain.membership), decided by ``quotas``.

    Without ``quotas`` (an older call): every row whose shape *could* hold the client; never
    use that for a verdict."""
    if quotas is not None:
        from quota_core.domain.membership import Membership, split_rows

        return split_rows(rows, Membership(quotas), user, client_id)[0]
    return [r for r in rows
            if (r.user is None or r.user == user) and (r.client_id is None or r.client_id == client_id)
            and (r.user is not None or r.client_id is not None)]


def other_buckets(rows: Sequence[BucketUsage], user: str, client_id: str,
                  quotas: Mapping[Entity, Mapping[str, float]]) -> list[BucketUsage]:
    """Buckets that share this client's user or client id but are *not* its own (its user's
    other client ids, other users of its client id): shown as another bucket, never as this
    client's figures. Old-shape buckets nobody is in are left out."""
    from quota_core.domain.membership import Membership, split_rows

    return [r for r in split_rows(rows, Membership(quotas), user, client_id)[1] if r.current]


def clients_seen(series: Iterable[Series], any_other: str) -> list[tuple[str, str]]:
    """The (user, client id) clients the brokers' buckets show: a pair bucket names both; a
    user bucket is that user with ``any_other`` client id; a client-id bucket, any user."""
    seen: dict[tuple[str, str], None] = {}
    for _, _, user, client_id in gather(series):
        if user or client_id:
            seen[(user or any_other, client_id or any_other)] = None
    return list(seen)


@dataclass(frozen=True, slots=True)
class TrafficChange:
    """A bucket whose quota changes, judged at the rate the brokers measure now."""

    before: BucketUsage
    after: BucketUsage
    #: The brokers not read (:func:`quota_core.throttling.coverage.unread_brokers`).
    unread: tuple[str, ...] = ()
    #: Whether any broker read would throttle the bucket after the change at today's rates.
    bucket_over: bool = False

    @property
    def throttled(self) -> bool | None:
        """The bucket's verdict after the change at today's rates, by :func:`live_verdict`:
        ``None`` (unknown) when no broker read would throttle it and a broker was not read."""
        return live_verdict([_Over(self.bucket_over or self.after.over_quota)], self.unread)

    @property
    def verdict(self) -> str:
        """``"newly throttled"``, ``"freed"``, ``"still throttled"`` or ``"not throttled"``;
        ``"clients move to another bucket"`` when nobody is in this bucket after the change
        (its rate today is then no one's figure: it is not judged against the new quota);
        ``"unknown: broker N not read"`` instead of "freed" or "not throttled" when a broker
        was not read and no broker read would throttle the bucket (:func:`live_verdict`)."""
        if self.before.current and not self.after.current:
            return "clients move to another bucket"
        was, now = self.before.over_quota, self.after.over_quota
        if not now and self.throttled is None:
            return f"unknown: {brokers_text(self.unread)} could not be read"
        if now and not was:
            return "newly throttled"
        if was and not now:
            return "freed"
        return "still throttled" if now else "not throttled"


@dataclass(frozen=True, slots=True)
class _Over:
    throttled: bool


def traffic_impact(before: Mapping[Entity, Mapping[str, float]],
                   after: Mapping[Entity, Mapping[str, float]], series: Iterable[Series],
                   unread: Iterable[str] = ()) -> list[TrafficChange]:
    """Every bucket the brokers report whose quota differs between ``before`` and ``after``,
    with whether it would be throttled at today's rate; those that change verdict first.

    A bucket is judged with the tags it has today: a change that gives a client a more
    specific entry also moves it to a new bucket, whose rate is then its own share.
    ``unread``: the brokers not read; a bucket no broker read would throttle is then unknown,
    not "freed" or "not throttled" (:func:`live_verdict`)."""
    series, unread = list(series), tuple(unread)
    old = {(r.broker, r.quota_type, r.user, r.client_id): r for r in join_usage(series, before)}
    new = join_usage(series, after)
    over = {(r.quota_type, r.user, r.client_id) for r in new if r.over_quota}
    changes = [TrafficChange(old[(r.broker, r.quota_type, r.user, r.client_id)], r, unread,
                             (r.quota_type, r.user, r.client_id) in over)
               for r in new
               if (r.broker, r.quota_type, r.user, r.client_id) in old]
    changes = [c for c in changes
               if (c.before.quota, c.before.level, c.before.source, c.before.current)
               != (c.after.quota, c.after.level, c.after.source, c.after.current)]
    order = {"newly throttled": 0, "freed": 1, "still throttled": 2,
             "clients move to another bucket": 3, "not throttled": 4}
    return sorted(changes, key=lambda c: (order.get(c.verdict, 3), -(c.after.rate or 0.0)))
