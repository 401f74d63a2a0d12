"""After a quota change: when throttling should end, and which buckets changed lately.

A broker applies a new quota to the next request at once (it rewrites the quota of the
bucket's sensor), but the rate it compares is measured over the last ``quota.window.num`` ×
``quota.window.size.seconds`` (at least one sample fewer: Rate.windowSize), so traffic sent
before the change counts until it ages out of that window. A client the broker already
delayed also waits out that delay (produce and fetch delays are not capped). So after a
change that frees a bucket, throttling ends within ``window + the last delay handed out``
(plus the moments the brokers take to apply the metadata record).

Pure: figures in, figures out. The pages call :func:`settle_text` after applying a change, and
:func:`recent_changes` with :func:`changed_lately` to mark buckets on Throttled now.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Iterable, Mapping, Sequence

from quota_core.domain import ladder
from quota_core.domain.entities import Entity
from quota_core.throttling.throttle import DEFAULT_WINDOW, QuotaWindow

__all__ = ["SettleTime", "throttling_ends", "settle_text", "RecentChange", "recent_changes",
           "changed_lately", "after_change"]


@dataclass(frozen=True, slots=True)
class SettleTime:
    """When throttling should end after a change made at ``changed_at`` (epoch seconds)."""

    changed_at: float
    #: The next request is judged against the new quota at once.
    earliest: float
    #: Old traffic has left the measured window and the last delay has run out.
    latest: float
    window: QuotaWindow

    @property
    def seconds(self) -> float:
        return self.latest - self.changed_at


def throttling_ends(changed_at: float, window: QuotaWindow = DEFAULT_WINDOW,
                    last_throttle_ms: float | None = None) -> SettleTime:
    """The span in which a freed bucket stops being throttled: from the change (the next
    request is checked against the new quota) to ``samples × size`` later, plus the longest
    delay a broker gave the client just before (``last_throttle_ms``: the broker's
    ``throttle-time``, or the client's ``produce-throttle-time-max``)."""
    extra = max(0.0, float(last_throttle_ms or 0.0)) / 1000.0
    return SettleTime(changed_at, changed_at,
                      changed_at + window.measured_ms[1] / 1000.0 + extra, window)


def settle_text(settle: SettleTime, last_throttle_ms: float | None = None) -> str:
    """What the Edit result says under a change that raises or removes a quota."""
    w = settle.window
    delay = "" if not last_throttle_ms else \
        f", plus the {last_throttle_ms / 1000:.1f} s delay a broker already gave a client"
    return (f"Throttling should end within about {settle.seconds:.0f} s: each broker checks "
            f"the next request against the new quota at once, but traffic of the last "
            f"{w.measured_ms[1] / 1000:.0f} s still counts in its rate (quota window "
            f"{w.text()}){delay}. The brokers' throttle-time average keeps earlier throttles "
            f"for up to {w.throttle_memory_ms / 1000:.0f} s (metrics.num.samples × "
            f"metrics.sample.window.ms): Throttled now shows such a bucket as throttled "
            f"recently, not now.")


@dataclass(frozen=True, slots=True)
class RecentChange:
    entity: Entity
    keys: frozenset[str]
    at: float  # epoch seconds


def _epoch(ts: str | float | datetime) -> float:
    if isinstance(ts, (int, float)):
        return float(ts)
    if isinstance(ts, str):
        ts = datetime.fromisoformat(ts.replace("Z", "+00:00"))
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=timezone.utc)
    return ts.timestamp()


def recent_changes(records: Iterable[object], now: float, window: QuotaWindow = DEFAULT_WINDOW,
                   last_throttle_ms: float = 0.0) -> list[RecentChange]:
    """The changes made within the last window: from audit records
    (:class:`quota_core.changes.audit.AuditRecord`, read with ``AuditLog.read()``) or any objects /
    mappings with ``entity`` (an Entity or its JSON), ``ts`` and ``ops`` (``[{"key": …}]``)
    or ``keys``. ``last_throttle_ms`` widens the span by the longest delay in force."""
    from quota_core.domain.client_metrics import AUDIT_ACTIONS
    from quota_core.domain.entities import entity_from_json

    span = window.measured_ms[1] / 1000.0 + max(0.0, last_throttle_ms) / 1000.0
    out = []
    for r in records:
        get = r.get if isinstance(r, Mapping) else (lambda k, r=r: getattr(r, k, None))
        if get("outcome") not in (None, "applied") or get("action") in AUDIT_ACTIONS:
            continue  # refused, or a subscription change (it names no quota entity)
        at = _epoch(get("ts"))
        if not (now - span <= at <= now + 1.0):
            continue
        entity = get("entity")
        entity = entity if isinstance(entity, Entity) else entity_from_json(entity)
        keys = get("keys")
        if keys is None:
            keys = [op["key"] for op in (get("ops") or [])]
        out.append(RecentChange(entity, frozenset(keys), at))
    return out


def changed_lately(rows: Sequence[object], changes: Sequence[RecentChange]
                   ) -> dict[int, RecentChange]:
    """Which rows (:class:`quota_core.throttling.live.BucketUsage`, by index) had their quota changed by
    one of ``changes``: a change of ``key`` to an entry consulted for the bucket's tags, at or
    above the level that sets its quota now (a change below the winner cannot move it)."""
    marked: dict[int, RecentChange] = {}
    for i, row in enumerate(rows):
        user, client_id = getattr(row, "user"), getattr(row, "client_id")
        levels = ladder.levels_for_tags(user is not None, client_id is not None)
        level = getattr(row, "level")
        for change in sorted(changes, key=lambda c: -c.at):
            if getattr(row, "key") not in change.keys:
                continue
            hit = [lv for lv in levels if (level is None or lv <= level)
                   and ladder.source_entity(lv, user or "", client_id or "") == change.entity]
            if hit:
                marked[i] = change
                break
    return marked


def after_change(entity: Entity, keys: Iterable[str], rows: Sequence[object],
                 window: QuotaWindow = DEFAULT_WINDOW, changed_at: float | None = None
                 ) -> tuple[SettleTime, str]:
    """What the Edit result says after ``entity``'s ``keys`` changed: when throttling of the
    buckets it decides should end, counting the longest delay a broker is giving them now
    (``rows``: the live :class:`~quota_core.throttling.live.BucketUsage` rows, may be empty)."""
    import time

    at = time.time() if changed_at is None else changed_at
    hit = changed_lately(rows, [RecentChange(entity, frozenset(keys), at)])
    worst = max((getattr(rows[i], "throttle_ms") or 0.0 for i in hit), default=0.0)
    settle = throttling_ends(at, window, worst)
    return settle, settle_text(settle, worst or None)
