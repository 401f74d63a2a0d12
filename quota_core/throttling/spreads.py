"""One client's bucket across brokers: where its traffic goes, where it is throttled, and the
one sentence that explains the spread. Pure: figures in, a :class:`Spread` out.

Kafka enforces each client quota **per broker, on its own** (QUOTA_SEMANTICS "Several
brokers"): a broker measures only the traffic it receives (produce: the leaders of the
partitions written; fetch: the replicas read) and throttles against the full quota. So a
client whose traffic reaches one broker has one quota in all; spread over N brokers it may
send up to N × quota and be throttled nowhere. The figures here are never summed into one
"cluster" throttle: the summed rate and the ceiling (quota × brokers with traffic) are told
*beside* the per-broker figures, to explain them.

The sentence carries its claims (:class:`quota_core.throttling.story.Sentence`), so tests can parse it
back and check it against the figures and against the other sentences.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from quota_core.throttling.live import broker_order, brokers_text
from quota_core.throttling.story import Sentence
from quota_core.domain.units import format_quota, format_rate

__all__ = ["BrokerCell", "Spread", "Reach", "spread", "bucket_spreads", "judged_spread",
           "broker_order", "brokers_text", "SPREAD"]

#: The sentence kind of a spread sentence (shown with the status sentences).
SPREAD = "spread"

#: Where a key's traffic lands on a broker, for the concentrated case.
_WHERE = {
    "producer_byte_rate": "where the leaders of the partitions it writes are",
    "consumer_byte_rate": "where the replicas it reads are",
    "request_percentage": "the brokers it sends requests to",
}


@dataclass(frozen=True, slots=True)
class Reach:
    """The brokers a read of the metrics covers: ``read``, those whose endpoint answered (by
    node id, even with no quota figures at all), and ``unread``, those whose figures are
    unknown (an endpoint that failed, by host:port; a broker of the cluster no endpoint
    covers, by node id)."""

    read: tuple[str, ...] = ()
    unread: tuple[str, ...] = ()


def _verb(labels, one: str, many: str) -> str:
    return one if len(labels) == 1 else many


def _pct(u: float | None) -> str:
    return "?" if u is None else f"{u:.0%}"


def _wait(cell: "BrokerCell", listed: bool = False) -> str:
    """What the broker does there: the throttle it reports; under the quota now but still
    throttling (its window still holds the traffic that went over) is said as such.
    ``listed``: one of several brokers, in parentheses."""
    if not cell.throttle_ms:
        return ""
    ms = (f"{cell.throttle_ms / 1000:.1f} s" if cell.throttle_ms >= 1000
          else f"{cell.throttle_ms:.0f} ms")
    if cell.utilisation is not None and cell.utilisation <= 1:
        if listed:
            return f" (under it now; the broker still reports a {ms} throttle)"
        return f" now, and the broker still reports a {ms} throttle on its recent requests"
    return f" (throttled {ms})" if listed else f", throttled {ms}"


@dataclass(frozen=True, slots=True)
class BrokerCell:
    """One broker's figures for the bucket; ``rate`` None when it reports no such bucket."""

    broker: str
    rate: float | None
    quota: float | None
    throttle_ms: float | None
    throttled: bool
    #: Throttled recently, not now (quota_core.throttling.live.BucketUsage.recent).
    recent: bool = False

    @property
    def utilisation(self) -> float | None:
        if self.rate is None or not self.quota:
            return None
        return self.rate / self.quota

    @property
    def traffic(self) -> bool:
        """The broker sees this bucket's traffic (a throttled bucket always has some)."""
        return self.throttled or (self.rate is not None and self.rate > 0)

    def as_dict(self) -> dict:
        return {"broker": self.broker, "rate": self.rate, "quota": self.quota,
                "utilisation": self.utilisation, "throttle_ms": self.throttle_ms,
                "throttled": self.throttled, "recent": self.recent, "traffic": self.traffic}


@dataclass(frozen=True)
class Spread:
    """One bucket of one key on every broker known: the facts the sentence rests on."""

    key: str
    quota: float | None
    #: One cell per broker known (reporting the bucket or not), in broker order.
    cells: tuple[BrokerCell, ...]
    #: Brokers whose metrics could not be read (host:port): their figures are unknown.
    unread: tuple[str, ...] = ()

    @property
    def brokers(self) -> tuple[str, ...]:
        return tuple(c.broker for c in self.cells)

    @property
    def with_traffic(self) -> tuple[str, ...]:
        return tuple(c.broker for c in self.cells if c.traffic)

    @property
    def without_traffic(self) -> tuple[str, ...]:
        return tuple(c.broker for c in self.cells if not c.traffic)

    @property
    def throttled_on(self) -> tuple[str, ...]:
        return tuple(c.broker for c in self.cells if c.throttled)

    @property
    def throttled(self) -> bool | None:
        """Throttled on at least one broker (each on its own; never a summed verdict); None
        (unknown) when none read is and a broker could not be read: the one rule,
        :func:`quota_core.throttling.live.live_verdict`."""
        from quota_core.throttling.live import live_verdict

        return live_verdict(self.cells, self.unread)

    @property
    def recent_on(self) -> tuple[str, ...]:
        """Brokers that throttled it recently, not now."""
        return tuple(c.broker for c in self.cells if c.recent and not c.throttled)

    @property
    def total_rate(self) -> float:
        """The rates summed over the brokers: what the client sends in all, *not* what any
        broker judges."""
        return sum(c.rate or 0.0 for c in self.cells)

    @property
    def ceiling(self) -> float | None:
        """quota × brokers with traffic: the most it can send in all without a throttle,
        with its traffic where it goes today (None: unlimited)."""
        if self.quota is None:
            return None
        return self.quota * len(self.with_traffic)

    @property
    def potential(self) -> float | None:
        """quota × brokers known: the ceiling were its traffic spread over every broker."""
        return None if self.quota is None else self.quota * len(self.cells)

    def as_dict(self) -> dict:
        """What the sentence rests on (``--resolve --metrics`` and ``--throttled`` JSON)."""
        return {"brokers_with_traffic": list(self.with_traffic),
                "brokers_without_traffic": list(self.without_traffic),
                "throttled_on": list(self.throttled_on), "throttled": self.throttled,
                "recent_on": list(self.recent_on), "total_rate": self.total_rate,
                "ceiling": self.ceiling, "unread": list(self.unread),
                "sentence": self.sentence().text}

    # ------------------------------------------------------------------ the sentence
    def sentence(self) -> Sentence:
        claims = {"subject": "client", "key": self.key, "throttled": self.throttled,
                  "brokers": self.throttled_on, "traffic": self.with_traffic,
                  "quiet": self.without_traffic, "total": self.total_rate,
                  "ceiling": self.ceiling, "unread": self.unread, "recent": self.recent_on}
        text = self._text()
        if self.unread and not self.throttled_on and text.startswith("not throttled"):
            # Unknown, not "not throttled": only the brokers read are (live_verdict).
            text = "not throttled on the brokers read" + text[len("not throttled"):]
        if self.recent_on and not self.throttled_on:
            recent = self.recent_on
            text += (f" {brokers_text(recent)[0].upper()}{brokers_text(recent)[1:]} still "
                     f"{_verb(recent, 'reports', 'report')} a throttle time from earlier "
                     f"metric samples: throttled recently, not now.")
        if self.unread:
            text += (f" B{brokers_text(self.unread)[1:]} could not be read: "
                     f"{_verb(self.unread, 'its', 'their')} figures are unknown.")
        return Sentence(SPREAD, text[0].upper() + text[1:], claims)

    def _rates(self, cells) -> str:
        return ", ".join(f"{format_rate(self.key, c.rate)} on broker {c.broker}" for c in cells)

    def _text(self) -> str:
        key, q = self.key, format_quota(self.key, self.quota)
        traffic = [c for c in self.cells if c.traffic]
        quiet = self.without_traffic
        if not traffic and self.unread:
            return f"no broker that was read sees its {key} traffic."
        if not traffic:
            return f"no broker sees its {key} traffic, so none throttles it."
        # With a broker not read, the sum over the brokers read is a lower bound and no
        # ceiling "in all" follows from them (ui.spread.total_text says "at least" too).
        least = "at least " if self.unread else ""
        if self.quota is None:
            return (f"not throttled on any broker: no entry limits {key}; it sends {least}"
                    f"{format_rate(key, self.total_rate)} in total ({self._rates(traffic)}).")
        hot = [c for c in self.cells if c.throttled]
        none_there = (f"; {brokers_text(quiet)} {_verb(quiet, 'sees', 'see')} none of its "
                      f"traffic" if quiet else "")
        if hot:
            only = " only" if len(hot) < len(self.cells) else ""
            if len(hot) == 1:
                figures = f"{_pct(hot[0].utilisation)} of {q} there{_wait(hot[0])}"
            else:
                figures = (", ".join(f"{_pct(c.utilisation)} on broker {c.broker}{_wait(c, True)}"
                                     for c in hot) + f", each of {q}")
            text = f"throttled on {brokers_text(c.broker for c in hot)}{only}: {figures}"
            cool = [c for c in traffic if not c.throttled]
            if cool:
                text += ("; it stays under the quota on "
                         + " and ".join(f"broker {c.broker} ({format_rate(key, c.rate)}, "
                                        f"{_pct(c.utilisation)})" for c in cool))
            text += none_there + "."
            if self.unread and len(traffic) > 1:
                text += (f" Each broker enforces {q} on its own: at least "
                         f"{format_rate(key, self.total_rate)} in total over the brokers "
                         f"read.")
            elif self.unread:
                pass  # the unread broker may carry its traffic: no allowance "in all"
            elif quiet and key in _WHERE:
                text += (f" Its traffic reaches {brokers_text(c.broker for c in traffic)} only "
                         f"({_WHERE[key]}), so its whole allowance is "
                         f"{format_quota(key, self.ceiling)}; spread over {len(self.cells)} "
                         f"brokers it could be up to {format_quota(key, self.potential)}.")
            elif len(traffic) > 1:
                text += (f" Each broker enforces {q} on its own: "
                         f"{format_rate(key, self.total_rate)} in total, against up to "
                         f"{format_quota(key, self.ceiling)} over {len(traffic)} brokers.")
            return text
        # Throttled nowhere.
        top = max(traffic, key=lambda c: c.rate or 0.0)
        if len(traffic) == 1:
            return (f"not throttled: {format_rate(key, top.rate)} on broker {top.broker} "
                    f"({_pct(top.utilisation)} of {q}){none_there}.")
        total = format_rate(key, self.total_rate)
        if self.unread:
            over = brokers_text(c.broker for c in traffic)
            return (f"not throttled: at least {total} in total over the brokers read ({over}); "
                    f"each sees at most {format_rate(key, top.rate)} "
                    f"({_pct(top.utilisation)} of {q}) and enforces on its own{none_there}.")
        if self.total_rate > self.quota:
            head = f"{total} in total against a {q} quota, and not throttled:"
        else:
            over = brokers_text(c.broker for c in traffic)
            head = f"not throttled: {total} in total over {over};"
        return (f"{head} each broker sees at most {format_rate(key, top.rate)} "
                f"({_pct(top.utilisation)} of {q}) and enforces on its own, so over "
                f"{len(traffic)} brokers it may send up to {format_quota(key, self.ceiling)} "
                f"in all{none_there}.")


def _limit(figure) -> float | None:
    # BucketUsage calls it quota, verdict.BrokerFigure limit.
    return figure.quota if hasattr(figure, "quota") else figure.limit


def spread(key: str, figures: Iterable, brokers: Iterable[str] = (),
           quota: float | None = None, unread: Iterable[str] = ()) -> Spread:
    """The spread of one bucket of ``key``: ``figures`` are its rows, at most one per broker
    (:class:`quota_core.throttling.live.BucketUsage` or :class:`quota_core.throttling.verdict.BrokerFigure`);
    ``brokers`` every broker known to exist (those the scrape read), so a broker that
    reports nothing for the bucket shows as one without its traffic; ``quota`` the bucket's
    quota when no figure carries it; ``unread`` brokers whose metrics could not be read."""
    figures = list(figures)
    limit = next((_limit(f) for f in figures if _limit(f) is not None), quota)
    cells = {f.broker: BrokerCell(f.broker, f.rate, _limit(f), f.throttle_ms, bool(f.throttled),
                                  bool(getattr(f, "recent", False)))
             for f in figures}
    unread = tuple(sorted(dict.fromkeys(u for u in unread if u not in cells), key=broker_order))
    for b in brokers:
        if b not in cells and b not in unread:
            cells[b] = BrokerCell(b, None, limit, None, False)
    return Spread(key, limit, tuple(sorted(cells.values(), key=lambda c: broker_order(c.broker))),
                  unread)


def bucket_spreads(rows: Iterable, brokers: Iterable[str] | None = None,
                   unread: Iterable[str] = ()) -> dict[tuple, Spread]:
    """Every bucket in ``rows`` (:class:`quota_core.throttling.live.BucketUsage`, any brokers) spread
    over the brokers: ``{(quota_type, user, client_id): Spread}``. ``brokers`` defaults to
    every broker the rows come from (those whose metrics were read)."""
    rows = list(rows)
    known = sorted({r.broker for r in rows} if brokers is None else set(brokers),
                   key=broker_order)
    grouped: dict[tuple, list] = {}
    for r in rows:
        grouped.setdefault((r.quota_type, r.user, r.client_id), []).append(r)
    unread = tuple(unread)
    return {b: spread(rs[0].key, rs, known, unread=unread) for b, rs in grouped.items()}


def judged_spread(rows: Iterable, brokers: Iterable[str] = (),
                  unread: Iterable[str] = ()) -> Spread:
    """One bucket's rows judged by their rate against their quota only (a preview at today's
    rates: the broker's throttle time today belongs to the old quota, so it is left out);
    ``unread`` the brokers whose figures are unknown (the verdict is then never False)."""
    rows = list(rows)
    return spread(rows[0].key, [BrokerCell(r.broker, r.rate, r.quota, None, r.over_quota)
                                for r in rows], brokers, unread=unread)
