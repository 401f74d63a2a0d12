"""Which quota applies to a client, and why (ClientQuotaManager's default callback).

Each quota key is resolved on its own down the ladder of :mod:`quota_core.domain.ladder` (the one
definition of rungs, buckets and the empty-name narrowing); this module adds the
explanation: every rung with what it holds, which keys it wins and which it shadows.
For ip: {ip=X}, then {ip=<default>}.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from quota_core.domain.entities import CLIENT_ID, IP, USER, Entity
from quota_core.domain.keys import CLIENT_KEYS, IP_KEYS
from quota_core.domain import ladder
from quota_core.domain.ladder import CLIENT_BUCKET, LADDER, PAIR, USER_BUCKET, Rung, active_levels

__all__ = [
    "ANONYMOUS",
    "LADDER",
    "Rung",
    "Client",
    "Bucket",
    "KeyResolution",
    "LadderStep",
    "Resolution",
    "ladder_entities",
    "active_levels",
    "resolve",
    "resolve_ip",
    "resolve_values",
]

#: The user principal of a client that did not authenticate.
ANONYMOUS = "ANONYMOUS"

@dataclass(frozen=True, slots=True)
class Client:
    """Who is being resolved. ``user`` / ``client_id`` are what the broker sees."""

    user: str | None = None
    client_id: str | None = None
    ip: str | None = None
    #: True when the user was not given and ANONYMOUS is assumed.
    user_assumed: bool = False
    #: True when the client id was not given and the empty client id is assumed.
    client_id_assumed: bool = False

    @classmethod
    def of(cls, user: str | None = None, client_id: str | None = None) -> "Client":
        return cls(user=ANONYMOUS if user is None else user,
                   client_id="" if client_id is None else client_id,
                   user_assumed=user is None, client_id_assumed=client_id is None)

    @property
    def is_ip(self) -> bool:
        return self.ip is not None

    def assumptions(self) -> list[str]:
        notes = []
        if self.user_assumed:
            notes.append("No user was given, so this is an unauthenticated client: its user "
                         "principal is ANONYMOUS.")
        if self.client_id_assumed:
            notes.append("No client id was given, so an empty client id is assumed. Kafka then "
                         "applies only {user=U} and {user=<default>}; real clients always send "
                         "one (Java: producer-1 / consumer-<group>-1, librdkafka: rdkafka), so "
                         "name the client id to resolve a real client.")
        return notes

    def as_dict(self) -> dict[str, str]:
        if self.is_ip:
            return {IP: self.ip}  # type: ignore[dict-item]
        return {USER: self.user, CLIENT_ID: self.client_id}  # type: ignore[dict-item]


@dataclass(frozen=True, slots=True)
class Bucket:
    """The quota bucket a client falls in: the broker's metric tags and who shares it."""

    kind: str                 # "user+client-id", "user", "client-id", "ip"
    tags: tuple[tuple[str, str], ...]

    @property
    def shared_by(self) -> str:
        t = dict(self.tags)
        if self.kind == "user+client-id":
            return (f"only client id {t[CLIENT_ID]!r} of user {t[USER]!r} (one allowance per "
                    f"user and client id)")
        if self.kind == "user":
            return f"every client id of user {t[USER]!r} together (one allowance per user)"
        if self.kind == "ip":
            return f"every connection from {t[IP]}"
        return (f"every user running client id {t[CLIENT_ID]!r} together (one allowance per "
                f"client id)")

    def as_dict(self) -> dict:
        return {"kind": self.kind, "tags": dict(self.tags), "shared_by": self.shared_by}


@dataclass(frozen=True, slots=True)
class KeyResolution:
    key: str
    #: The effective quota, or None for unlimited.
    value: float | None
    level: int | None
    source: Entity | None
    bucket: Bucket

    @property
    def unlimited(self) -> bool:
        return self.level is None


@dataclass(frozen=True, slots=True)
class LadderStep:
    level: int
    pattern: str
    entity: Entity
    #: What this entity holds (every key configured on it).
    quotas: Mapping[str, float]
    #: Keys this rung decides.
    wins: tuple[str, ...]
    #: Keys configured here but decided by a higher rung.
    shadowed: tuple[str, ...]
    #: False when Kafka never consults this rung for the client (an empty client id or user).
    applies: bool = True


@dataclass(frozen=True, slots=True)
class Resolution:
    client: Client
    keys: Mapping[str, KeyResolution]
    ladder: tuple[LadderStep, ...]

    def effective(self) -> dict[str, float]:
        """Only the limited keys: ``{key: value}``."""
        return {k: r.value for k, r in self.keys.items() if r.value is not None}


def ladder_entities(user: str, client_id: str) -> list[tuple[Rung, Entity]]:
    return [(r, r.entity_for(user, client_id)) for r in ladder.LADDER]


def _bucket(kind: str, user: str, client_id: str) -> Bucket:
    if kind == PAIR:
        return Bucket(kind, ((USER, user), (CLIENT_ID, client_id)))
    if kind == USER_BUCKET:
        return Bucket(kind, ((USER, user), (CLIENT_ID, "")))
    return Bucket(CLIENT_BUCKET, ((USER, ""), (CLIENT_ID, client_id)))


def resolve(quotas: Mapping[Entity, Mapping[str, float]], user: str | None = None,
            client_id: str | None = None, keys: tuple[str, ...] = CLIENT_KEYS) -> Resolution:
    """Resolve every quota key for a user and client id over a described quota set.

    ``user=None`` means an unauthenticated client (ANONYMOUS); ``client_id=None`` the empty
    client id. Both assumptions are recorded in :attr:`Resolution.client`.
    """
    client = Client.of(user, client_id)
    u, c = client.user, client.client_id
    rungs = ladder_entities(u, c)  # type: ignore[arg-type]
    held = [quotas.get(entity) or {} for _, entity in rungs]
    active = ladder.active_levels(u, c)  # type: ignore[arg-type]
    results: dict[str, KeyResolution] = {}
    for key in keys:
        for (rung, entity), q in zip(rungs, held):
            if rung.level in active and key in q:
                results[key] = KeyResolution(key, q[key], rung.level, entity,
                                             _bucket(rung.bucket, u, c))  # type: ignore[arg-type]
                break
        else:
            results[key] = KeyResolution(key, None, None, None, _bucket(CLIENT_BUCKET, u, c))  # type: ignore[arg-type]
    steps = []
    for (rung, entity), q in zip(rungs, held):
        wins = tuple(k for k in keys if results[k].level == rung.level)
        applies = rung.level in active
        shadowed = tuple(k for k in sorted(q) if k in keys and k not in wins) if applies else ()
        steps.append(LadderStep(rung.level, rung.pattern, entity, dict(q), wins, shadowed,
                                applies))
    return Resolution(client, results, tuple(steps))


def resolve_ip(quotas: Mapping[Entity, Mapping[str, float]], ip: str) -> Resolution:
    """Resolve ``connection_creation_rate`` for an ip: the exact ip, then the ip default."""
    client = Client(ip=ip)
    # A broker keys connection quotas by InetAddress, so any spelling of this address
    # matches, and ::ffff:1.2.3.4 is 1.2.3.4 (Java makes it an Inet4Address).
    own = Entity(((IP, ip),))
    if own not in quotas:
        from quota_core.domain.validation import same_address

        own = next((e for e in quotas if e.is_ip and e.name(IP) is not None
                    and same_address(ip, e.name(IP))), own)  # type: ignore[arg-type]
    rungs = [(1, "{ip=X}", own), (2, "{ip=<default>}", Entity(((IP, None),)))]
    bucket = Bucket("ip", ((IP, ip),))
    results: dict[str, KeyResolution] = {}
    for key in IP_KEYS:
        results[key] = KeyResolution(key, None, None, None, bucket)
        for level, _, entity in rungs:
            q = quotas.get(entity) or {}
            if key in q:
                results[key] = KeyResolution(key, q[key], level, entity, bucket)
                break
    steps = []
    for level, pattern, entity in rungs:
        q = dict(quotas.get(entity) or {})
        wins = tuple(k for k in IP_KEYS if results[k].level == level)
        steps.append(LadderStep(level, pattern, entity, q, wins,
                                tuple(k for k in sorted(q) if k not in wins)))
    return Resolution(client, results, tuple(steps))


def resolve_values(quotas: Mapping[Entity, Mapping[str, float]], user: str | None,
                   client_id: str | None, keys: tuple[str, ...] = CLIENT_KEYS
                   ) -> dict[str, tuple[float, int] | None]:
    """The lean per-pair resolver: ``{key: (value, level) or None}``. No explanation."""
    u = ANONYMOUS if user is None else user
    c = "" if client_id is None else client_id
    active = ladder.active_levels(u, c)
    held = [(r.level, quotas.get(e)) for r, e in ladder_entities(u, c) if r.level in active]
    out: dict[str, tuple[float, int] | None] = {}
    for key in keys:
        out[key] = None
        for level, q in held:
            if q and key in q:
                out[key] = (q[key], level)
                break
    return out
