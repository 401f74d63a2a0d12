"""Client-metrics subscriptions (KIP-714): which metrics clients push, and how often.

A subscription is a ``CLIENT_METRICS`` config resource (resource type 16) named by the
operator, with three configs, as ``kafka-client-metrics.sh`` writes them:

``metrics``
    a comma-separated list of metric-name prefixes (``*`` for every metric);
``interval.ms``
    the push interval, 100 to 3,600,000 ms (the broker's default: 300,000);
``match``
    a comma-separated list of ``KEY=REGEX`` selectors over the client; a client matches when
    every regex matches its value in full; none: every client.

This module validates what an operator types and turns it into those configs and back. Pure:
no I/O. The wire is :mod:`quota_core.backends.kafka_client_metrics`.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from quota_core.errors import UsageError
from quota_core.domain.wording import TELEMETRY_NOT_COLLECTED as NOT_COLLECTED

__all__ = [
    "ALL_METRICS", "DEFAULT_INTERVAL_MS", "DEFAULT_SUBSCRIPTION", "KAFKA_DEFAULT_INTERVAL_MS",
    "MATCH_KEYS", "MAX_INTERVAL_MS", "MIN_INTERVAL_MS", "NOT_COLLECTED", "Subscription",
    "AUDIT_ACTIONS", "SUBSCRIBE_ACTION", "UNSUBSCRIBE_ACTION", "alter_ops", "check_interval",
    "check_name", "check_prefix", "format_subscriptions", "parse_interval", "parse_match",
    "parse_metrics", "subscription_configs", "subscription_from_configs",
    "subscription_from_input",
]

#: Kafka's match keys (``ClientMetricsConfigs``), in its order.
MATCH_KEYS = ("client_id", "client_instance_id", "client_software_name",
              "client_software_version", "client_source_address", "client_source_port")
ALL_METRICS = "*"
MIN_INTERVAL_MS, MAX_INTERVAL_MS = 100, 3_600_000
KAFKA_DEFAULT_INTERVAL_MS = 300_000
MAX_NAME_CHARS = 255

_PREFIX = re.compile(r"[A-Za-z0-9_.\-]+")


@dataclass(frozen=True)
class Subscription:
    """One ``CLIENT_METRICS`` resource, as the broker holds it."""

    name: str
    metrics: tuple[str, ...] = ()
    match: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    interval_ms: int = KAFKA_DEFAULT_INTERVAL_MS

    def as_dict(self) -> dict:
        """The contract's JSON shape: ``{"name", "metrics", "match", "interval_ms"}``."""
        return {"name": self.name, "metrics": list(self.metrics), "match": dict(self.match),
                "interval_ms": self.interval_ms}


#: What ``telemetry subscribe --default`` writes: the client's throttle times, its request
#: latency to each broker and its connection metrics (Java client and librdkafka names), at 30 s.
DEFAULT_INTERVAL_MS = 30_000
DEFAULT_SUBSCRIPTION = Subscription(
    name="quota-console-default",
    metrics=("org.apache.kafka.producer.produce.throttle.time",
             "org.apache.kafka.consumer.fetch.manager.fetch.throttle.time",
             "org.apache.kafka.producer.node.request.latency",
             "org.apache.kafka.consumer.node.request.latency",
             "org.apache.kafka.producer.connection.",
             "org.apache.kafka.consumer.connection."),
    interval_ms=DEFAULT_INTERVAL_MS)


def check_name(name: str) -> str:
    """A subscription name as typed: any text but empty, control characters or over 255 chars."""
    if not name:
        raise UsageError("subscription name '': give a name (e.g. throttle-watch).")
    if len(name) > MAX_NAME_CHARS:
        raise UsageError(f"subscription name {name[:40]!r}...: at most {MAX_NAME_CHARS} "
                         f"characters; give a shorter name.")
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise UsageError(f"subscription name {name!r}: control characters are not allowed; "
                         f"give a name of printable characters.")
    return name


def check_prefix(prefix: str) -> str:
    """One metric-name prefix: letters, digits, ``_ . -`` (Kafka splits the list on commas and
    trims blanks, so neither can be part of a prefix), or ``*`` for every metric."""
    if prefix == ALL_METRICS or _PREFIX.fullmatch(prefix):
        return prefix
    raise UsageError(f"--metrics prefix {prefix!r}: a prefix is letters, digits, '_', '.' and "
                     f"'-' (e.g. org.apache.kafka.producer.), or '*' for every metric.")


def parse_metrics(text: str) -> tuple[str, ...]:
    """``--metrics P[,P...]`` as a tuple of prefixes (each checked; duplicates dropped)."""
    prefixes = [check_prefix(p) for p in text.split(",")]
    return tuple(dict.fromkeys(prefixes))


def parse_match(texts: Iterable[str]) -> dict[str, str]:
    """``--match KEY=REGEX`` (repeatable) as ``{key: regex}``: a Kafka match key, once each,
    and a regex that compiles and holds no comma (Kafka stores the list comma-separated)."""
    match: dict[str, str] = {}
    for text in texts:
        key, sep, regex = text.partition("=")
        if not sep or key not in MATCH_KEYS:
            raise UsageError(f"--match {text!r}: give KEY=REGEX with KEY one of "
                             f"{', '.join(MATCH_KEYS)}.")
        if key in match:
            raise UsageError(f"--match {key}: given twice; give one regex per key (use | "
                             f"inside it for alternatives).")
        if not regex or "," in regex or regex != regex.strip():
            raise UsageError(f"--match {text!r}: the regex must be non-empty, without ',' "
                             f"and without leading or trailing blanks (Kafka stores the list "
                             f"comma-separated).")
        try:
            re.compile(regex)
        except re.error as exc:
            raise UsageError(f"--match {text!r}: not a regular expression ({exc}).") from None
        match[key] = regex
    return match


def check_interval(value: int) -> int:
    """``--interval-ms``: Kafka's bounds, 100 to 3,600,000 ms."""
    if isinstance(value, bool) or not isinstance(value, int) or not (
            MIN_INTERVAL_MS <= value <= MAX_INTERVAL_MS):
        raise UsageError(f"--interval-ms {value}: give a whole number of milliseconds from "
                         f"{MIN_INTERVAL_MS} to {MAX_INTERVAL_MS:,} (1 hour).")
    return value


def parse_interval(text: str | None) -> int | None:
    """``--interval-ms`` as typed: None when not given, else a whole number of milliseconds
    within Kafka's bounds (:func:`check_interval`)."""
    if text is None:
        return None
    try:
        value = int(str(text).strip())
    except ValueError:
        raise UsageError(f"--interval-ms {text!r}: give a whole number of milliseconds from "
                         f"{MIN_INTERVAL_MS} to {MAX_INTERVAL_MS:,} (1 hour).") from None
    return check_interval(value)


def subscription_from_input(name: str | None, metrics: str | None, match: Iterable[str],
                            interval: str | None, default: bool = False) -> Subscription:
    """The subscription an operator asks for, checked (a :class:`UsageError`, one line,
    else): ``telemetry subscribe``'s NAME, ``--metrics``, ``--match`` (each ``KEY=REGEX``),
    ``--interval-ms`` and ``--default``, as the CLI and the Client telemetry page take them.
    With ``default``, :data:`DEFAULT_SUBSCRIPTION`, each given field overriding its own."""
    interval_ms = parse_interval(interval)
    matched = parse_match(match)
    if default:
        base = DEFAULT_SUBSCRIPTION
        return Subscription(check_name(name) if name is not None else base.name,
                            parse_metrics(metrics) if metrics is not None else base.metrics,
                            matched or base.match,
                            interval_ms if interval_ms is not None else base.interval_ms)
    if name is None:
        raise UsageError("subscribe: give a NAME (or --default for the shipped subscription).")
    if metrics is None:
        raise UsageError(f"subscribe {name}: give --metrics P[,P...] (metric-name "
                         f"prefixes, or '*'), or --default.")
    return Subscription(check_name(name), parse_metrics(metrics), matched,
                        interval_ms if interval_ms is not None else KAFKA_DEFAULT_INTERVAL_MS)


#: The audit log's actions for subscription changes (not quota changes: they name no entity).
SUBSCRIBE_ACTION, UNSUBSCRIBE_ACTION = "telemetry-subscribe", "telemetry-unsubscribe"
AUDIT_ACTIONS = (SUBSCRIBE_ACTION, UNSUBSCRIBE_ACTION)


def subscription_configs(sub: Subscription | None) -> dict[str, str]:
    """The configs the broker holds for ``sub`` ({} for none), as the audit log records a
    subscription before and after: ``{"metrics", "interval.ms", "match"}``, unset ones left out."""
    if sub is None:
        return {}
    return {k: v for k, v in alter_ops(sub) if v is not None}


def alter_ops(sub: Subscription) -> list[tuple[str, str | None]]:
    """The IncrementalAlterConfigs ops that make the resource exactly ``sub``: ``(config,
    value)`` to SET, ``(config, None)`` to DELETE (back to Kafka's default)."""
    return [("metrics", ",".join(sub.metrics)),
            ("interval.ms", str(sub.interval_ms)),
            ("match", ",".join(f"{k}={v}" for k, v in sub.match.items()) or None)]


def subscription_from_configs(name: str, configs: Mapping[str, str | None]) -> Subscription:
    """A subscription from the broker's describe of its resource (values as strings)."""
    def items(key: str) -> list[str]:
        return [p.strip() for p in (configs.get(key) or "").split(",") if p.strip()]

    match: dict[str, str] = {}
    for entry in items("match"):
        key, _, regex = entry.partition("=")
        match[key.strip()] = regex.strip()
    try:
        interval = int(configs.get("interval.ms") or KAFKA_DEFAULT_INTERVAL_MS)
    except ValueError:
        interval = KAFKA_DEFAULT_INTERVAL_MS
    return Subscription(name, tuple(items("metrics")), MappingProxyType(match), interval)


def format_subscriptions(subs: Sequence[Subscription]) -> str:
    """The text of ``telemetry list``: one block per subscription, raw names."""
    if not subs:
        return "no client-metrics subscriptions\n"
    blocks = []
    for s in subs:
        match = ", ".join(f"{k}={v}" for k, v in s.match.items()) or "every client"
        blocks.append(f"{s.name}\n  metrics: {', '.join(s.metrics) or '(none)'}\n"
                      f"  match: {match}\n  interval: {s.interval_ms} ms\n")
    return "".join(blocks)
