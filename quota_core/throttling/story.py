"""Resolve's story, rendered from one :class:`~quota_core.throttling.verdict.KeyVerdict` per key.

Per key, from the client's point of view: whether *this* client is throttled now, in which
bucket and on which broker; the entry that sets its quota; who shares its allowance; what the
operator can change. Then, apart, the *other* buckets under the same user or client id, and
the entries set back for this client. Each :class:`Sentence` carries the claims it makes
(``subject``, ``bucket``, ``throttled``, ``level``…), taken from the verdict, so a test can
check every sentence against the verdict and against the others.

Names are raw (``repr``-quoted); the page renders the text as text, never as markup.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from quota_core.domain.entities import Entity
from quota_core.throttling.live import broker_name, brokers_text
from quota_core.domain.membership import Tags
from quota_core.domain.units import format_quota, format_rate
from quota_core.throttling.verdict import BrokerFigure, KeyVerdict, tags_entity
from quota_core.domain.wording import against, ms_text

__all__ = ["Sentence", "client_story", "bucket_details", "others_story", "set_back_story",
           "story", "quiet_story", "unknown_story", "has_traffic", "traffic", "is_quiet",
           "is_blind"]

#: Sentence kinds, in the order the page shows them.
STATUS, ENTRY, SHARE, CHANGE, OTHER, SET_BACK = ("status", "entry", "share", "change",
                                                 "other", "set-back")


@dataclass(frozen=True)
class Sentence:
    kind: str
    text: str
    #: What the sentence asserts: ``subject`` ("client" or "other"), ``bucket`` (tags),
    #: ``throttled`` (bool), ``level``, ``limit``, ``brokers``.
    claims: dict = field(default_factory=dict)


def _bucket(tags: Tags) -> str:
    return tags_entity(tags).display()


def _figures(key: str, figures: tuple[BrokerFigure, ...], limit: float | None) -> str:
    return "; ".join(f"{against(key, b.rate, limit, b.utilisation)} on {broker_name(b.broker)}"
                     for b in figures)


def has_traffic(b: BrokerFigure) -> bool:
    """The broker sees this bucket's traffic (as :attr:`quota_core.throttling.spreads.BrokerCell.traffic`):
    a bucket the broker reports at rate 0 is not "0 of 10 on broker 3", it has no traffic
    there."""
    return b.throttled or (b.rate is not None and b.rate > 0)


def traffic(v: KeyVerdict) -> tuple[BrokerFigure, ...]:
    """The brokers that see traffic in the client's bucket (none when not read)."""
    return tuple(b for b in v.brokers or () if has_traffic(b))


def is_quiet(v: KeyVerdict) -> bool:
    """Read, limited, no broker sees traffic in the bucket, and every broker was read: one
    :func:`quiet_story` sentence covers it, not a status of its own."""
    return (v.brokers is not None and v.limit is not None and not traffic(v)
            and v.throttled is False)


def is_blind(v: KeyVerdict) -> bool:
    """As :func:`is_quiet`, but a broker could not be read: the verdict is unknown, and one
    :func:`unknown_story` sentence covers it."""
    return (v.brokers is not None and v.limit is not None and not traffic(v)
            and v.throttled is None)


def _client(v: KeyVerdict) -> str:
    return f"client id {v.client_id!r} of user {v.user!r}"


def _unread(v: KeyVerdict) -> str:
    names = brokers_text(v.unread)
    return (f"{names[0].upper()}{names[1:]} could not be read: whether it is throttled there "
            f"is unknown.")


def _recent(v: KeyVerdict) -> str:
    """Why a throttle time beside a rate under the quota is not "now"."""
    return (f" It was throttled recently, not now: the broker's throttle-time average still "
            f"holds throttles of up to {v.window.throttle_memory_ms / 1000:.0f} s ago "
            f"(metrics.num.samples × metrics.sample.window.ms).")


def _status(v: KeyVerdict) -> Sentence | None:
    claims = {"subject": "client", "bucket": v.bucket, "unread": v.unread}
    who = _client(v)
    who = who[0].upper() + who[1:]
    seen = traffic(v)
    if v.brokers is None or (not seen and v.limit is None):
        return None  # no live figures, or an unlimited key nobody uses: nothing to say
    if v.throttled is None and not seen:
        return Sentence(STATUS, f"No broker that was read reports traffic of {_client(v)} on "
                                f"{v.key} in its bucket {_bucket(v.bucket)}. {_unread(v)}",
                        {**claims, "throttled": None, "brokers": ()})
    if v.throttled is None:
        return Sentence(STATUS, f"{who} is not throttled on {v.key} on the brokers read: its "
                                f"bucket {_bucket(v.bucket)} runs at "
                                f"{_figures(v.key, seen, v.limit)}. {_unread(v)}"
                                + (_recent(v) if v.recent else ""),
                        {**claims, "throttled": None, "recent": v.recent,
                         "brokers": tuple(b.broker for b in seen)})
    if not seen:
        return Sentence(STATUS, f"{who} is not throttled on {v.key} now: no broker reports "
                                f"traffic in its bucket {_bucket(v.bucket)}.",
                        {**claims, "throttled": False, "brokers": ()})
    hot = [b for b in seen if b.throttled]
    if hot:
        waits = [b.throttle_ms if b.throttle_ms else b.estimated_ms for b in hot]
        told = " as the broker reports" if all(b.throttle_ms for b in hot) else ""
        return Sentence(STATUS, f"{who} is throttled now on {v.key}, in its bucket "
                                f"{_bucket(v.bucket)}: {_figures(v.key, tuple(hot), v.limit)}; each request waits "
                                f"≈ {ms_text(max(waits))}{told}.",
                        {**claims, "throttled": True,
                         "brokers": tuple(b.broker for b in hot)})
    if v.limit is None:
        text = (f"{who} is not throttled on {v.key}: no entry limits its bucket "
                f"{_bucket(v.bucket)} (sending {_figures(v.key, seen, None)}).")
    else:
        text = (f"{who} is not throttled on {v.key}: its bucket {_bucket(v.bucket)} runs at "
                f"{_figures(v.key, seen, v.limit)}.")
    if v.recent:
        text += _recent(v)
    return Sentence(STATUS, text, {**claims, "throttled": False, "recent": v.recent,
                                   "brokers": tuple(b.broker for b in seen)})


def bucket_details(v: KeyVerdict) -> list[Sentence]:
    """Per broker, the client's own bucket in the broker's terms: who shares what, how much
    they send and what the broker does about it (the figures of :func:`_status`)."""
    u, c = v.bucket
    q = format_quota(v.key, v.limit)
    entry = ("no entry limits it" if v.entry is None
             else f"set for {v.entry.display()} (level {v.level})")
    if u is not None and c is not None:
        who, verb = f"Client id {c!r} of user {u!r} has {q} to itself", "sends"
    elif u is not None:
        who, verb = f"The client ids of user {u!r} share {q}", "together they send"
    else:
        who, verb = f"Every user running client id {c!r} shares {q}", "together they send"
    out = []
    for b in traffic(v):
        rate = format_rate(v.key, b.rate) if b.rate is not None else "nothing measured"
        text = f"{who}, {entry}; {verb} {rate} on {broker_name(b.broker)}"
        if v.limit is None:
            text += ": never throttled."
        elif b.throttled:
            wait = b.throttle_ms if b.throttle_ms else b.estimated_ms
            told = " as the broker reports" if b.throttle_ms else ""
            text += f", so each request waits ≈ {ms_text(wait)}{told}."
        else:
            share = "" if b.utilisation is None else f" ({b.utilisation:.0%} of it)"
            text += f"{share}: " + ("throttled recently, not now." if b.recent
                                    else "not throttled.")
        out.append(Sentence(STATUS, text, {"subject": "client", "bucket": v.bucket,
                                           "throttled": b.throttled, "recent": b.recent,
                                           "brokers": (b.broker,), "detail": True,
                                           "unread": v.unread}))
    return out


def _entry(v: KeyVerdict) -> Sentence:
    if v.level is None:
        return Sentence(ENTRY, f"No entry on its ladder sets {v.key}: it is unlimited.",
                        {"subject": "client", "level": None, "limit": None})
    return Sentence(ENTRY, f"Its {v.key} quota is {format_quota(v.key, v.limit)} on each broker, "
                           f"set by {v.entry.display()} (level {v.level}).",  # type: ignore[union-attr]
                    {"subject": "client", "level": v.level, "limit": v.limit})


def _share(v: KeyVerdict) -> Sentence:
    claims = {"subject": "client", "bucket": v.bucket, "shared": v.shared}
    if not v.shared:
        return Sentence(SHARE, f"It has this allowance to itself: its bucket is "
                               f"{_bucket(v.bucket)}.", claims)
    return Sentence(SHARE, f"It shares this allowance with {v.sharers}: its bucket is "
                           f"{_bucket(v.bucket)}.", claims)


def _change(v: KeyVerdict) -> Sentence:
    own = Entity.of(user=v.user, client_id=v.client_id).display() if v.user and v.client_id \
        else None
    claims = {"subject": "client"}
    if v.level is None:
        where = f"{own} (this client alone)" if own else "an entry on its ladder"
        return Sentence(CHANGE, f"To limit it, set {v.key} on {where} or on "
                                f"{Entity.of(user=v.user).display()} (all of user "
                                f"{v.user!r}'s client ids together).", claims)
    entry = v.entry.display()  # type: ignore[union-attr]
    if v.level == 1:
        return Sentence(CHANGE, f"To change it, edit {entry}: it is this client's own entry.",
                        claims)
    scope = ("the allowance the whole bucket shares" if v.shared
             else "the quota of every client it covers")
    alone = f"set {v.key} on {own} to change it for this client alone" if own else \
        "add a more specific entry to change it for this client alone"
    return Sentence(CHANGE, f"To change it, {alone}; editing {entry} changes {scope}.", claims)


def client_story(v: KeyVerdict) -> list[Sentence]:
    """The sentences about this client, for one key."""
    return [s for s in (_status(v), _entry(v), _share(v), _change(v)) if s is not None]


def others_story(v: KeyVerdict) -> list[Sentence]:
    """Other buckets under the same user or client id: never this client's figures."""
    out = []
    for o in v.others:
        entry = ("no entry limits it" if o.entry is None
                 else f"{format_quota(v.key, o.limit)} set by {o.entry.display()} "
                      f"(level {o.level})")
        hot = [b for b in o.brokers if b.throttled]
        if hot:
            state = f"it is throttled: {_figures(v.key, tuple(hot), o.limit)}"
        elif o.throttled is None:
            state = "it is not throttled on the brokers read"
        else:
            state = "it is not throttled"
        out.append(Sentence(OTHER, f"For {v.key}, another bucket, {_bucket(o.tags)}, is "
                                   f"{o.members} ({entry}); {state}. {_client(v)[0].upper()}"
                                   f"{_client(v)[1:]} is not in it for {v.key}.",
                            {"subject": "other", "bucket": o.tags, "throttled": bool(hot)}))
    return out


def set_back_story(v: KeyVerdict) -> list[Sentence]:
    """Entries on this client's ladder that hold the key but do not decide it, per client."""
    out = []
    for level, entity, value, elsewhere in v.set_back:
        subject = _client(v) if elsewhere else f"user {v.user!r}"
        if v.limit is None or value != value or v.limit != v.limit:
            compare = ""
        elif v.limit > value:
            compare = ", so it gets more than this entry's cap"
        elif v.limit < value:
            compare = ", so it gets less than this entry would give"
        else:
            compare = " (the same value)"
        verb = "does not set" if elsewhere else "never sets"
        text = (f"{entity.display()} {format_quota(v.key, value)} (level {level}) {verb} "
                f"{v.key} for {subject}: {v.entry.display()} at level {v.level} sets it first "  # type: ignore[union-attr]
                f"({format_quota(v.key, v.limit)}){compare}.")
        if elsewhere:
            text += (f" It still sets {v.key} for the client ids of user {v.user!r} without "
                     f"an entry of their own.")
        out.append(Sentence(SET_BACK, text, {"subject": "client", "level": v.level,
                                             "set_back_level": level, "elsewhere": elsewhere}))
    return out


def story(v: KeyVerdict) -> list[Sentence]:
    """Everything Resolve says about one key, in page order."""
    return client_story(v)[:1] + bucket_details(v) + client_story(v)[1:] + others_story(v) \
        + set_back_story(v)


def _listed(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]


def quiet_story(found: list[KeyVerdict]) -> Sentence | None:
    """One sentence for every key whose bucket no broker reports traffic in (instead of one
    per key): the client is not throttled on them. None when there is no such key."""
    quiet = [v for v in found if is_quiet(v)]
    if not quiet:
        return None
    return Sentence(STATUS, f"No broker reports traffic of {_on_keys(quiet)}: it is not "
                            f"throttled there.",
                    {"subject": "client", "throttled": False, "brokers": (),
                     "keys": tuple(v.key for v in quiet)})


def _on_keys(verdicts: list[KeyVerdict]) -> str:
    """``client id 'x' of user 'y' on k1 ({bucket}) or k2 ({bucket})``: the client and keys
    one sentence speaks of."""
    keys = [f"{v.key} ({_bucket(v.bucket)})" for v in verdicts]
    return f"{_client(verdicts[0])} on {_listed(keys)}"


def unknown_story(found: list[KeyVerdict]) -> Sentence | None:
    """One sentence for every key whose bucket no broker that was read reports traffic in,
    while a broker could not be read: the verdict is unknown, never "not throttled"."""
    blind = [v for v in found if is_blind(v)]
    if not blind:
        return None
    return Sentence(STATUS, f"No broker that was read reports traffic of {_on_keys(blind)}. "
                            f"{_unread(blind[0])}",
                    {"subject": "client", "throttled": None, "brokers": (),
                     "unread": blind[0].unread, "keys": tuple(v.key for v in blind)})
