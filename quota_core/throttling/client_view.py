"""The client's own side (KIP-714) beside the broker's verdict. Pure: reports in, a view out.

Clients push their metrics to a broker (KIP-714); the brokers' endpoints show them
(:mod:`quota_core.telemetry.client_reports` reads them into client reports: one per client
instance and broker endpoint). :func:`client_view` joins them to one quota key of one bucket:

* which client instances are in the bucket: those whose (user, client id) the broker puts in
  it (:meth:`quota_core.domain.membership.Membership.tags`, the same rule as the broker's tags);
* what each reports for the key's direction: ``producer_byte_rate`` → its produce throttle
  time, ``consumer_byte_rate`` → its fetch throttle time, ``request_percentage`` → both (a
  request quota delays any request: the larger of the two), ``controller_mutation_rate`` →
  none (clients push no mutation throttle time);
* whether the two sides agree (:data:`AGREEMENTS`), and one sentence
  (:mod:`quota_core.domain.wording`).

The broker side is the one live verdict (:func:`quota_core.throttling.live.live_verdict`). When it is
unknown (``None``: a broker not read) the view never claims agreement: ``agreement`` is then
``None`` and the sentence says the broker side is unknown. A bucket with no instance that
pushes is ``"no-telemetry"``: never read as "not throttled".
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Protocol, Sequence

from quota_core.domain.membership import Membership, Tags

__all__ = ["AGREEMENTS", "AGREE", "CLIENT_NOT_THROTTLED", "BROKER_NOT_THROTTLED",
           "NO_TELEMETRY", "DIRECTIONS", "ClientInstance", "ClientView", "client_view",
           "user_of_principal", "in_bucket", "view_for_verdict", "ClientSide", "bucket_views",
           "throttled_elsewhere",
           "bucket_client_throttle"]

AGREE = "agree"
CLIENT_NOT_THROTTLED = "client-not-throttled"
BROKER_NOT_THROTTLED = "broker-not-throttled"
NO_TELEMETRY = "no-telemetry"
#: The values of :attr:`ClientView.agreement` (``None`` besides: the broker side is unknown).
AGREEMENTS: tuple[str, ...] = (AGREE, CLIENT_NOT_THROTTLED, BROKER_NOT_THROTTLED, NO_TELEMETRY)

#: The client's throttle metrics that speak for each quota key.
DIRECTIONS: dict[str, tuple[str, ...]] = {
    "producer_byte_rate": ("produce",),
    "consumer_byte_rate": ("fetch",),
    "request_percentage": ("produce", "fetch"),
    "controller_mutation_rate": (),
}


class Report(Protocol):  # quota_core.telemetry.client_reports.ClientReport
    instance_id: str
    client_id: str
    principal: str | None
    software_name: str | None
    software_version: str | None
    node_id: int
    last_push_age_s: float | None
    produce_throttle_ms_avg: float | None
    produce_throttle_ms_max: float | None
    fetch_throttle_ms_avg: float | None
    fetch_throttle_ms_max: float | None
    request_latency_ms_avg: Mapping[int, float]


def user_of_principal(principal: str | None) -> str:
    """The quota user of a principal as the broker names it (``User:alice`` → ``alice``; the
    broker's quota tag is the principal's name); ``""`` when unknown."""
    if not principal:
        return ""
    kind, sep, name = principal.partition(":")
    return name if sep and kind == "User" else principal


def _max(values: Iterable[float | None]) -> float | None:
    got = [v for v in values if v is not None]
    return max(got) if got else None


@dataclass(frozen=True, slots=True)
class ClientInstance:
    """One client instance of the bucket, as it reports itself (its freshest push)."""

    instance_id: str
    client_id: str
    principal: str | None
    software_name: str | None
    software_version: str | None
    #: The throttle time it reports for the key's direction (ms; None: it pushes none).
    throttle_ms_avg: float | None
    throttle_ms_max: float | None
    last_push_age_s: float | None
    #: Its average request latency per destination broker (node id → ms).
    latency_ms: Mapping[int, float]
    #: The broker whose endpoint showed its push.
    reported_by: int

    @property
    def software(self) -> str:
        """``librdkafka 2.5.0``; ``unknown software`` when it says nothing."""
        text = " ".join(p for p in (self.software_name, self.software_version) if p)
        return text or "unknown software"

    @property
    def waits(self) -> bool:
        return bool(self.throttle_ms_avg and self.throttle_ms_avg > 0) or bool(
            self.throttle_ms_max and self.throttle_ms_max > 0)

    def as_dict(self) -> dict:
        """The shape of docs/interfaces.md, "Client view (KIP-714)"."""
        return {"instance_id": self.instance_id, "client_id": self.client_id,
                "software_name": self.software_name,
                "software_version": self.software_version,
                "throttle_ms_avg": self.throttle_ms_avg, "throttle_ms_max": self.throttle_ms_max,
                "last_push_age_s": self.last_push_age_s,
                "brokers": {str(node): {"request_latency_ms_avg": ms}
                            for node, ms in sorted(self.latency_ms.items())}}


@dataclass(frozen=True)
class ClientView:
    """The client's side of one key of one bucket, and whether it agrees with the broker's."""

    key: str
    #: The broker side: :func:`quota_core.throttling.live.live_verdict` (None: unknown).
    throttled: bool | None
    #: The brokers that throttle the bucket now (node ids or labels).
    throttling: tuple[str, ...]
    instances: tuple[ClientInstance, ...]
    #: One of :data:`AGREEMENTS`, or None when the broker side is unknown.
    agreement: str | None
    sentence: str
    #: Whether the cluster collects client telemetry at all (False: no broker shows any).
    collected: bool = True

    @property
    def reported(self) -> bool:
        """Some instance of the bucket reports a throttle figure for the key's direction."""
        return any(i.throttle_ms_avg is not None or i.throttle_ms_max is not None
                   for i in self.instances)

    @property
    def waited_ms(self) -> float | None:
        """The largest average throttle time an instance reports (ms)."""
        return _max(i.throttle_ms_avg for i in self.instances)

    def as_dict(self) -> dict:
        return {"reported": self.reported, "instances": [i.as_dict() for i in self.instances],
                "agreement": self.agreement, "sentence": self.sentence}


@dataclass(frozen=True)
class ClientSide:
    """Every client report one read of the brokers gave, and whether any endpoint read carries
    the client-telemetry plugin at all (False: "not collected on this cluster")."""

    reports: tuple = ()
    collected: bool = False

    def view(self, key: str, throttled: bool | None, brokers: Sequence, bucket: Tags,
             members: Membership, *, recent: bool = False,
             elsewhere: Sequence[str] = ()) -> "ClientView":
        return client_view(key, throttled, brokers, bucket, self.reports, members,
                           recent=recent, collected=self.collected, elsewhere=elsewhere)


def in_bucket(members: Membership, key: str, bucket: Tags):
    """A test: is a client (user, client id) in ``bucket`` for ``key``."""
    return lambda user, client_id: members.tags(key, user, client_id) == bucket


def _instances(key: str, reports: Iterable[Report], belongs) -> tuple[ClientInstance, ...]:
    directions = DIRECTIONS.get(key, ())
    freshest: dict[str, Report] = {}
    for r in reports:
        if not belongs(user_of_principal(r.principal), r.client_id or ""):
            continue
        seen = freshest.get(r.instance_id)
        age = r.last_push_age_s if r.last_push_age_s is not None else float("inf")
        if seen is None or age < (seen.last_push_age_s if seen.last_push_age_s is not None
                                  else float("inf")):
            freshest[r.instance_id] = r
    out = []
    for r in freshest.values():
        avg = _max(getattr(r, f"{d}_throttle_ms_avg") for d in directions)
        mx = _max(getattr(r, f"{d}_throttle_ms_max") for d in directions)
        out.append(ClientInstance(r.instance_id, r.client_id, r.principal, r.software_name,
                                  r.software_version, avg, mx, r.last_push_age_s,
                                  dict(r.request_latency_ms_avg or {}), r.node_id))
    return tuple(sorted(out, key=lambda i: (i.client_id, i.instance_id)))


def _other_directions(key: str, reports: Iterable[Report],
                      instances: Sequence[ClientInstance]) -> tuple[str, ...]:
    """The directions the bucket's instances report a throttle time for, other than the
    key's (a producer in a ``consumer_byte_rate`` bucket reports produce only)."""
    ids = {i.instance_id for i in instances}
    mine = set(DIRECTIONS.get(key, ()))
    return tuple(d for d in ("produce", "fetch") if d not in mine and any(
        getattr(r, f"{d}_throttle_ms_avg") is not None for r in reports
        if r.instance_id in ids))


def throttled_elsewhere(key: str, verdicts: Mapping[str, bool | None]) -> tuple[str, ...]:
    """The client's other keys that the broker throttles now and whose requests the key's
    throttle time also covers (``verdicts``: key -> the live verdict of the client's own
    bucket of that key). A client's throttle time is one figure per request for all its
    quotas, so a wait can be another key's."""
    mine = set(DIRECTIONS.get(key, ()))
    return tuple(k for k, throttled in verdicts.items()
                 if k != key and throttled and mine & set(DIRECTIONS.get(k, ())))


def client_view(key: str, throttled: bool | None, brokers: Sequence, bucket: Tags,
                reports: Iterable[Report], members: Membership, *, recent: bool = False,
                collected: bool = True, elsewhere: Sequence[str] = ()) -> ClientView:
    """The client view of ``key`` for ``bucket``: ``throttled`` is the bucket's live verdict
    (:func:`quota_core.throttling.live.live_verdict`), ``brokers`` its per-broker figures (anything with
    ``broker`` and ``throttled``), ``reports`` every client report of the cluster, ``members``
    the quota set's membership (which bucket a client is in); ``recent``: the broker throttled
    it recently, not now (a client's average still holds those waits); ``collected``: whether
    any broker shows client telemetry at all; ``elsewhere``: the client's other keys that the
    broker throttles now (:func:`throttled_elsewhere`): a wait is then theirs."""
    from quota_core.domain import wording

    reports = list(reports)
    throttling = tuple(str(b.broker) for b in brokers if b.throttled)
    instances = _instances(key, reports, in_bucket(members, key, bucket))
    reporting = [i for i in instances if i.throttle_ms_avg is not None
                 or i.throttle_ms_max is not None]
    waiting = [i for i in reporting if i.waits]
    if not reporting:
        agreement = NO_TELEMETRY
        sentence = wording.client_no_telemetry(key, bool(instances), collected,
                                               DIRECTIONS.get(key, ()),
                                               _other_directions(key, reports, instances))
    elif throttled is None:
        agreement = None
        sentence = wording.client_broker_unknown(len(reporting), _max(
            i.throttle_ms_avg for i in waiting) if waiting else 0.0)
    elif throttled:
        if waiting:
            agreement = AGREE
            sentence = wording.client_agrees_throttled(
                throttling, len(waiting), len(reporting), _max(i.throttle_ms_avg for i in waiting),
                _max(i.throttle_ms_max for i in waiting))
        else:
            agreement = CLIENT_NOT_THROTTLED
            sentence = wording.client_ignores_throttle(throttling, len(reporting))
    elif waiting:
        if recent:
            agreement = AGREE
            sentence = wording.client_waits_recently(len(waiting),
                                                     _max(i.throttle_ms_avg for i in waiting))
        elif elsewhere:  # its wait is another key's, which the broker throttles
            agreement = AGREE
            sentence = wording.client_waits_for_another_key(
                len(waiting), _max(i.throttle_ms_avg for i in waiting), tuple(elsewhere))
        else:
            agreement = BROKER_NOT_THROTTLED
            sentence = wording.client_waits_elsewhere(len(waiting),
                                                      _max(i.throttle_ms_avg for i in waiting))
    else:
        agreement = AGREE
        sentence = wording.client_agrees_free(len(reporting))
    return ClientView(key, throttled, throttling, instances, agreement, sentence, collected)


def view_for_verdict(verdict, reports: Iterable[Report], members: Membership, *,
                     collected: bool = True, others: Sequence = ()) -> ClientView | None:
    """:func:`client_view` for a :class:`quota_core.throttling.verdict.KeyVerdict` with live figures
    (None without them); ``others``: the client's verdicts of its other keys."""
    if verdict.brokers is None:
        return None
    elsewhere = throttled_elsewhere(verdict.key, {v.key: v.throttled for v in others})
    return client_view(verdict.key, verdict.throttled, verdict.brokers, verdict.bucket,
                       reports, members, recent=verdict.recent, collected=collected,
                       elsewhere=elsewhere)


def bucket_views(rows: Sequence, side: ClientSide, members: Membership,
                 unread: Iterable[str] = (), only: Iterable | None = None
                 ) -> list[tuple[tuple[str, str | None, str | None], ClientView]]:
    """One client view per (key, user tag, client id tag) bucket of the live ``rows``
    (:class:`quota_core.throttling.live.BucketUsage`), each judged by the one live verdict over its
    brokers: ``[((key, user, client_id), view)]``, in the order the buckets first appear
    (``only``: just the buckets of these rows, e.g. Throttled now's)."""
    from quota_core.throttling.live import live_verdict, recent_verdict

    unread = tuple(unread)
    grouped: dict[tuple, list] = {}
    for r in rows:
        grouped.setdefault((r.key, r.user, r.client_id), []).append(r)
    keys = list(grouped) if only is None else list(dict.fromkeys(
        (r.key, r.user, r.client_id) for r in only))
    throttling = [b for b, mine in grouped.items() if live_verdict(mine, unread)]
    out = []
    for bucket in keys:
        mine = grouped.get(bucket, [])
        key, user, client_id = bucket
        out.append((bucket, side.view(key, live_verdict(mine, unread), mine, (user, client_id),
                                      members, recent=recent_verdict(mine),
                                      elsewhere=_shared_elsewhere(bucket, throttling,
                                                                  side.reports, members))))
    return out


def _shared_elsewhere(bucket: tuple, throttling: Sequence[tuple], reports: Sequence[Report],
                      members: Membership) -> tuple[str, ...]:
    """The keys of the throttled buckets (other than ``bucket``) that hold a client instance
    of ``bucket`` and whose requests its key's throttle time covers."""
    key, user, client_id = bucket
    mine = set(DIRECTIONS.get(key, ()))
    others = [b for b in throttling if b[0] != key and mine & set(DIRECTIONS.get(b[0], ()))]
    if not others:
        return ()
    here = in_bucket(members, key, (user, client_id))
    names = {(user_of_principal(r.principal), r.client_id or "") for r in reports}
    names = [n for n in names if here(*n)]
    return tuple(dict.fromkeys(k for k, u, c in others
                               if any(in_bucket(members, k, (u, c))(*n) for n in names)))


def bucket_client_throttle(key: str, bucket: Tags, reports: Iterable[Report],
                           members: Membership | None = None) -> float | None:
    """The largest average throttle time (ms per request, over their last pushes) the client
    instances of ``bucket`` report for ``key``'s direction; None when none of them reports
    one. Without ``members`` (no quota set read yet) a client is in the bucket when its names
    match the bucket's tags."""
    if members is not None:
        belongs = in_bucket(members, key, bucket)
    else:
        u, c = bucket

        def belongs(user: str, client_id: str) -> bool:
            return (u is None or user == u) and (c is None or client_id == c)
    return _max(i.throttle_ms_avg for i in _instances(key, reports, belongs))
