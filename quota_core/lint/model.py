"""What lint works on and what it finds. Pure: plain values in, plain values out.

* :class:`LintInput`: the quota set, the brokers' settings (Kafka's defaults in file mode),
  the protected principals, and the usage history as a pandas frame (or None).
* :class:`Finding`: ``rule``, ``severity``, ``entity`` (the entry the fix edits; None for a
  finding about the brokers), ``key``, ``evidence`` (one sentence with figures) and ``fix``
  (the quota set of the entries it writes, as a desired-file fragment ``plan`` accepts).
* :class:`Protected`: a glob over user principals or client ids (``client-id:PATTERN``),
  from ``--protected``, ``[lint] protected`` / ``QUOTA_LINT_PROTECTED``, the brokers'
  ``super.users`` or the table of well-known internal clients.
"""
from __future__ import annotations

import fnmatch
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from quota_core.throttling.brokers import ClusterSettings
from quota_core.domain.entities import CLIENT_ID, USER, Entity
from quota_core.domain.serialization import to_document

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from quota_core.throttling.client_view import ClientView

__all__ = ["SEVERITIES", "Finding", "Protected", "LintInput", "LintOptions", "parse_protected",
           "protected_from_config", "super_users", "WELL_KNOWN", "severity_at_least",
           "request_cap", "exempt_value", "EXEMPT"]

#: Severities, most severe first (docs/interfaces.md: error, warning, info).
SEVERITIES: tuple[str, ...] = ("error", "warning", "info")

QuotaSet = Mapping[Entity, Mapping[str, float]]


def severity_at_least(severity: str, threshold: str) -> bool:
    """``warning`` is at least ``info``; ``info`` is not at least ``warning``."""
    return SEVERITIES.index(severity) <= SEVERITIES.index(threshold)


@dataclass(frozen=True)
class Finding:
    rule: str
    severity: str
    #: The entry the finding is about, the one its fix edits; None: the brokers' settings.
    entity: Entity | None
    #: The quota key (a broker setting for ``brokers-disagree``; None for a whole entry).
    key: str | None
    evidence: str
    #: The entries the fix writes, each with *all* its keys (a desired file is exact per
    #: entry; an empty mapping removes the entry). Empty: no quota change fixes it.
    fix_quotas: Mapping[Entity, Mapping[str, float]] = field(default_factory=dict)

    @property
    def fix(self) -> dict[str, Any]:
        """The desired-file fragment (``quota-console/1``) that ``plan`` / ``apply`` accept."""
        return to_document(self.fix_quotas)

    def as_dict(self) -> dict[str, Any]:
        """As ``--output json`` writes it: raw names, ``null`` for the default."""
        return {"rule": self.rule, "severity": self.severity,
                "entity": None if self.entity is None else self.entity.as_dict(),
                "key": self.key, "evidence": self.evidence, "fix": self.fix}


@dataclass(frozen=True)
class Protected:
    """Principals lint protects from a ``<default>`` entry: ``kind`` is ``user`` or
    ``client-id``, ``pattern`` a glob (``fnmatch``, case-sensitive), ``source`` where it was
    given. ``seen_only``: match only names seen in the history (the well-known clients)."""

    kind: str
    pattern: str
    source: str
    seen_only: bool = False

    def matches(self, name: str) -> bool:
        return fnmatch.fnmatchcase(name, self.pattern)

    @property
    def literal(self) -> bool:
        """A pattern without glob characters names exactly one principal."""
        return not any(c in self.pattern for c in "*?[")


CLIENT_PREFIX = "client-id:"


def parse_protected(text: str, source: str) -> Protected:
    """``PATTERN`` matches user principals; ``client-id:PATTERN`` client ids."""
    if text.startswith(CLIENT_PREFIX):
        return Protected(CLIENT_ID, text[len(CLIENT_PREFIX):], source)
    return Protected(USER, text, source)


def protected_from_config(env: Mapping[str, str], secrets: Mapping | None = None
                          ) -> list[Protected]:
    """``[lint] protected = [...]`` in the dashboard's secrets, and ``QUOTA_LINT_PROTECTED``
    (patterns separated by newlines or commas) for the CLI and the dashboard."""
    out = []
    section = (secrets or {}).get("lint")
    listed = section.get("protected") if isinstance(section, Mapping) else None
    if isinstance(listed, str):
        listed = [listed]
    for item in listed or ():
        if isinstance(item, str) and item:
            out.append(parse_protected(item, "[lint] protected"))
    raw = env.get("QUOTA_LINT_PROTECTED", "")
    for item in raw.replace("\n", ",").split(","):
        if item.strip():
            out.append(parse_protected(item.strip(), "QUOTA_LINT_PROTECTED"))
    return out


def super_users(settings: ClusterSettings) -> tuple[list[Protected], str]:
    """The brokers' ``super.users`` (``User:admin;User:connect``) as protected users, with a
    sentence saying where they came from (or why there are none)."""
    if not settings.read:
        return [], "super.users: not read (no brokers)"
    raw = settings.value("super.users")
    if raw is None:
        return [], "super.users: hidden or not set by the brokers"
    out = []
    for principal in raw.split(";"):
        kind, _, name = principal.strip().partition(":")
        if kind == "User" and name:
            out.append(Protected(USER, name, "super.users"))
    return out, f"super.users: {len(out)} user{'' if len(out) == 1 else 's'}"


#: The clients of the cluster's own tools, by the names they use by default; matched only
#: against names seen in the history (the issue: "seen in the metrics or history").
WELL_KNOWN: tuple[Protected, ...] = tuple(Protected(kind, pattern, f"well-known: {what}", True)
                                          for kind, pattern, what in (
    (CLIENT_ID, "connect-*", "Kafka Connect"),
    (CLIENT_ID, "connector-producer-*", "Kafka Connect / MirrorMaker 2"),
    (CLIENT_ID, "connector-consumer-*", "Kafka Connect / MirrorMaker 2"),
    (CLIENT_ID, "connector-adminclient-*", "Kafka Connect / MirrorMaker 2"),
    (CLIENT_ID, "CruiseControl*", "Cruise Control"),
    (CLIENT_ID, "KafkaStore-reader-*", "Schema Registry"),
    (CLIENT_ID, "schema-registry*", "Schema Registry"),
    (USER, "CN=*-entity-topic-operator*", "Strimzi Topic Operator"),
    (USER, "CN=*-entity-user-operator*", "Strimzi User Operator"),
    (USER, "CN=*-cruise-control*", "Strimzi Cruise Control"),
))


def request_cap(settings: ClusterSettings) -> tuple[float, str]:
    """What a broker's threads can use together, in request_percentage's unit:
    (``num.io.threads`` + ``num.network.threads``) × 100, with where the figures come from."""
    io = _int(settings.value("num.io.threads"), 8)
    net = _int(settings.value("num.network.threads"), 3)
    return float((io + net) * 100), f"num.io.threads {io} + num.network.threads {net}"


#: A quota no client reaches (1 EB/s, 10^18 mutations/s), exact as a double and as JSON.
EXEMPT = 1e18


def exempt_value(key: str, settings: ClusterSettings) -> float:
    """A value that never throttles: :data:`EXEMPT`, and for ``request_percentage`` exactly
    what the threads can use (above it lint would call the entry ``cannot-bind``)."""
    if key == "request_percentage":
        return request_cap(settings)[0]
    return EXEMPT


def _int(text: str | None, default: int) -> int:
    try:
        value = int(str(text).strip())
    except ValueError:
        return default
    return value if value > 0 else default


@dataclass(frozen=True)
class LintOptions:
    stale_days: float = 7.0
    chronic_pct: float = 10.0
    chronic_days: float = 7.0
    churn_users: int = 10


@dataclass(frozen=True)
class LintInput:
    """Everything the rules read. ``quotas_source`` / ``settings.source`` /
    ``history_source`` say where each part came from (the empty state names them)."""

    quotas: QuotaSet
    quotas_source: str
    settings: ClusterSettings = field(default_factory=ClusterSettings.defaults)
    protected: Sequence[Protected] = ()
    #: Usage samples (the collector's columns), or None without a history.
    usage: "pd.DataFrame | None" = None
    history_source: str | None = None
    options: LintOptions = field(default_factory=LintOptions)
    #: What the clients report beside the broker's live verdict (KIP-714), per live bucket:
    #: ``[((key, user tag, client id tag), quota_core.throttling.client_view.ClientView)]``; None
    #: without live figures (no --metrics).
    clients: "Sequence[tuple[tuple, ClientView]] | None" = None
    #: Whether any broker endpoint read carries the client-telemetry plugin, and how many
    #: client instances pushed (None: no live figures).
    telemetry: bool | None = None
    client_instances: int = 0
    live_source: str | None = None

    @property
    def brokers_read(self) -> bool:
        return bool(self.settings.read)


def finite(value: float) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)
