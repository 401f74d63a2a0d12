"""The console as a Prometheus exporter: the limit, the entry and the use of every bucket.

Kafka's brokers export a bucket's rate and throttle time but not its limit, nor the entry that
set it (KIP-786 was abandoned). The console knows both: the live join
(:func:`quota_core.live.join_usage`) names, per broker and bucket, the quota, the entry and its
ladder level. :class:`QuotaExporter` is a ``prometheus_client`` collector that, on every
scrape, reads the quota set (``describe``), sweeps the brokers' endpoints
(:func:`~quota_core.telemetry.sweep.scrape_all`), joins them, and yields gauge families.
Nothing here writes the exposition format: ``prometheus_client`` does.

Series (docs/monitoring.md has the table):

* per broker and bucket (``broker`` node id, ``quota_type``, ``key``, the bucket's ``user``
  and ``client_id``, the ``entry`` that sets the limit and its ``level``):
  ``kafka_client_quota_limit_<unit>``, ``kafka_client_quota_rate_<unit>``,
  ``kafka_client_quota_utilisation_ratio``, ``kafka_client_quota_throttle_time_seconds``,
  ``kafka_client_quota_throttled`` (0/1);
* per entry and key, the configured value: ``kafka_client_quota_configured_<unit>``;
* the console's own health: ``quota_console_endpoint_up``, ``quota_console_broker_scraped``,
  ``quota_console_quota_set_age_seconds``, ``quota_console_quota_entries``,
  ``quota_console_scrape_duration_seconds``.

Names in labels are in Kafka's sanitised form (as its metric tags are): the default is
``<default>``, a user literally named ``<default>`` is ``%3Cdefault%3E``.

Cardinality: one bucket series set per (broker, quota type, bucket) the brokers report, and
only for buckets a client is in with today's quota set (an old-shape bucket lingering in the
broker's metrics is left out: see :mod:`quota_core.membership`); one configured series per
(entry, key); one health series per endpoint and per broker. See :func:`series_count`.
"""
from __future__ import annotations

import ipaddress
import math
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Mapping, Sequence

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector as _PromCollector

from ..entities import CLIENT_ID, DEFAULT_TEXT, IP, USER, Entity, sanitize
from ..errors import ParseError, QuotaError
from ..live import BucketUsage, join_usage

__all__ = ["BUCKET_LABELS", "ENTRY_LABELS", "UNIT_OF_KEY", "Health", "QuotaExporter",
           "FleetExporter", "CLUSTER_LABEL", "with_cluster", "families", "label_name",
           "parse_listen", "serve", "series_count"]

#: The unit each quota key is counted in, as Prometheus names units (the value is Kafka's own
#: number, so a limit series equals the configured quota: request_percentage stays in percent
#: of one request-handler thread, 100 = one thread busy).
UNIT_OF_KEY: dict[str, str] = {
    "producer_byte_rate": "bytes_per_second",
    "consumer_byte_rate": "bytes_per_second",
    "request_percentage": "percent",
    "controller_mutation_rate": "mutations_per_second",
    "connection_creation_rate": "connections_per_second",
}
BUCKET_LABELS = ("broker", "quota_type", "key", "user", "client_id", "entry", "level")
ENTRY_LABELS = ("entry", "user", "client_id", "ip", "key")
#: Per bucket: limit and rate (one family per unit), utilisation, throttle time, throttled.
SERIES_PER_BUCKET = 5
PREFIX, HEALTH = "kafka_client_quota", "quota_console"
DEFAULT_LISTEN = ("127.0.0.1", 9464)


def label_name(name: str | None) -> str:
    """A name as a label value: Kafka's sanitised form; the default is ``<default>``."""
    return DEFAULT_TEXT if name is None else sanitize(name)


def _bucket_labels(row: BucketUsage) -> list[str]:
    return [row.broker, row.quota_type, row.key,
            "" if row.user is None else sanitize(row.user),
            "" if row.client_id is None else sanitize(row.client_id),
            "" if row.source is None else str(row.source),
            "" if row.level is None else str(row.level)]


def _entry_labels(entity: Entity, key: str) -> list[str]:
    names = entity.as_dict()
    parts = [label_name(names[t]) if t in names else "" for t in (USER, CLIENT_ID, IP)]
    return [str(entity), *parts, key]


@dataclass
class Health:
    """What the console itself knows about its sources at one scrape."""

    #: endpoint label (its host:port, or the LABEL the user gave) -> answered (True/False).
    endpoints: dict[str, bool] = field(default_factory=dict)
    #: node id -> some answering endpoint covers it (the cluster's brokers; none for a sandbox).
    brokers: dict[str, bool] = field(default_factory=dict)
    #: seconds since the quota set was last read; None before the first read.
    quota_set_age_s: float | None = None
    scrape_duration_s: float = 0.0


#: One series per lint finding (docs/monitoring.md: the findings as a gauge); ``entry`` is
#: the entry its fix edits ("" for a broker setting), ``key`` the quota key or broker setting.
LINT_LABELS = ("rule", "severity", "entry", "user", "client_id", "ip", "key")


def _finding_labels(finding) -> list[str]:
    if finding.entity is None:
        return [finding.rule, finding.severity, "", "", "", "", finding.key or ""]
    return [finding.rule, finding.severity, *_entry_labels(finding.entity, finding.key or "")]


def families(rows: Sequence[BucketUsage], quotas: Mapping[Entity, Mapping[str, float]],
             health: Health, findings: Sequence = ()) -> list[GaugeMetricFamily]:
    """The gauge families for one scrape: pure, rows, the quota set and the lint findings
    (:class:`quota_core.lint.Finding`) in, families out."""
    out: dict[str, GaugeMetricFamily] = {}

    def family(name: str, doc: str, labels: Sequence[str] = ()) -> GaugeMetricFamily:
        if name not in out:
            out[name] = GaugeMetricFamily(name, doc, labels=list(labels))
        return out[name]

    for row in rows:
        if not row.current:  # nobody is in it with this quota set: not anyone's figure
            continue
        labels, unit = _bucket_labels(row), UNIT_OF_KEY[row.key]
        if row.quota is not None:
            family(f"{PREFIX}_limit_{unit}", "The quota this bucket runs against on this broker "
                   "(the entry and level that set it are labels).", BUCKET_LABELS
                   ).add_metric(labels, row.quota)
        if row.rate is not None:
            family(f"{PREFIX}_rate_{unit}", "The rate the broker measures for this bucket over "
                   "its quota window.", BUCKET_LABELS).add_metric(labels, row.rate)
        if row.utilisation is not None:
            family(f"{PREFIX}_utilisation_ratio", "rate / limit for this bucket on this broker "
                   "(1 = exactly at its quota).", BUCKET_LABELS).add_metric(labels, row.utilisation)
        family(f"{PREFIX}_throttle_time_seconds", "The broker's own throttle time for this bucket "
               "(0 when it throttled nobody lately).", BUCKET_LABELS
               ).add_metric(labels, (row.throttle_ms or 0.0) / 1000.0)
        family(f"{PREFIX}_throttled", "1 when the bucket is throttled now (the broker reports a "
               "throttle time, or it is over its quota), else 0.", BUCKET_LABELS
               ).add_metric(labels, 1.0 if row.throttled else 0.0)
    for entity in sorted(quotas, key=Entity.sort_key):
        for key, value in sorted(quotas[entity].items()):
            if key in UNIT_OF_KEY:
                family(f"{PREFIX}_configured_{UNIT_OF_KEY[key]}", "The quota value configured "
                       "for this entry and key (Kafka does not export it).", ENTRY_LABELS
                       ).add_metric(_entry_labels(entity, key), float(value))
    lint = family(f"{HEALTH}_lint_finding", "1 per finding of kafka-client-quotas lint on the "
                  "quota set and the brokers' settings (rule, severity, the entry its fix edits).",
                  LINT_LABELS)
    for finding in findings:
        lint.add_metric(_finding_labels(finding), 1.0)
    up = family(f"{HEALTH}_endpoint_up", "1 when the metrics endpoint answered the last sweep.",
                ["endpoint"])
    for label, ok in health.endpoints.items():
        up.add_metric([label], 1.0 if ok else 0.0)
    scraped = family(f"{HEALTH}_broker_scraped", "1 when an answering endpoint covers this "
                     "broker of the cluster, 0 when its throttling is not visible.", ["broker"])
    for node, ok in health.brokers.items():
        scraped.add_metric([node], 1.0 if ok else 0.0)
    age = family(f"{HEALTH}_quota_set_age_seconds", "Seconds since the quota set was last read "
                 "from the cluster.")
    age.add_metric([], math.nan if health.quota_set_age_s is None else health.quota_set_age_s)
    family(f"{HEALTH}_quota_entries", "Entries in the quota set last read.").add_metric(
        [], float(len(quotas)))
    family(f"{HEALTH}_scrape_duration_seconds", "How long this scrape took (quota set, "
           "brokers' endpoints, join).").add_metric([], health.scrape_duration_s)
    return list(out.values())


def series_count(fams: Iterable[GaugeMetricFamily]) -> int:
    """How many series the families hold (what Prometheus stores per scrape)."""
    return sum(len(f.samples) for f in fams)


class QuotaExporter(_PromCollector):
    """A ``prometheus_client`` collector: each :meth:`collect` is one fresh scrape.

    ``describe()`` reads the quota set (a backend's); ``endpoints()`` gives the metrics
    endpoints to sweep (fixed, or filled in from the cluster's brokers each time);
    ``node_ids()`` the cluster's brokers (empty for a sandbox). A quota set that cannot be read
    keeps the last one read, and its age grows (the stale-quota-set alert); an endpoint that
    does not answer is ``endpoint_up 0``; ``log`` hears of each change of state once."""

    def __init__(self, describe: Callable[[], Mapping[Entity, Mapping[str, float]]],
                 endpoints: Callable[[], Sequence] = lambda: (),
                 node_ids: Callable[[], Sequence[str]] = lambda: (), *, timeout: float = 5.0,
                 lint: Callable[[Mapping[Entity, Mapping[str, float]]], Sequence] | None = None,
                 log: Callable[[str], None] = lambda line: None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._describe, self._endpoints, self._node_ids = describe, endpoints, node_ids
        self._lint = lint
        self.timeout, self.log, self.clock = timeout, log, clock
        self._lock = threading.Lock()  # the HTTP server answers on threads: one sweep at a time
        self._quotas: Mapping[Entity, Mapping[str, float]] = {}
        self._read_at: float | None = None
        self._down: set = set()  # what is down now: "quota set", "brokers", ("endpoint", label)
        self._nodes: tuple[str, ...] = ()
        self._endpoints_last: list = []

    @property
    def quota_set_read(self) -> bool:
        """Whether the last scrape read the quota set (False: it served the last one read, or
        none has been read yet)."""
        return self._read_at is not None and "quota set" not in self._down

    def read_quotas(self) -> None:
        """Read the quota set now (the CLI calls it once at start, so a cluster that cannot be
        read fails the start with its own error)."""
        self._quotas = self._describe()
        self._read_at = self.clock()

    def describe(self) -> list:  # prometheus_client: no families known before a scrape
        return []

    def collect(self) -> Iterator[GaugeMetricFamily]:
        with self._lock:
            yield from self.scrape()

    def scrape(self) -> list[GaugeMetricFamily]:
        from .sweep import scrape_all

        started = self.clock()
        try:
            self.read_quotas()
            self._state("quota set", True, "the quota set is read again")
        except QuotaError as exc:
            self._state("quota set", False, f"cannot read the quota set, serving the last one "
                        f"read: {exc}")
        try:  # the cluster's brokers (and, with a template, their endpoints)
            self._nodes = tuple(self._node_ids())
            endpoints = list(self._endpoints())
            self._endpoints_last = endpoints
            self._state("brokers", True, "the cluster's brokers are listed again")
        except QuotaError as exc:  # keep the last list
            self._state("brokers", False, f"cannot list the cluster's brokers, keeping the "
                        f"last list: {exc}")
            endpoints = self._endpoints_last
        series, errors = scrape_all(endpoints, self.timeout) if endpoints else ([], [])
        failed = {e.label for e, _ in errors}
        for endpoint, exc in errors:
            self._state(("endpoint", endpoint.label), False,
                        f"{endpoint.label} does not answer: {exc}")
        for endpoint in endpoints:
            if endpoint.label not in failed:
                self._state(("endpoint", endpoint.label), True,
                            f"{endpoint.label} answers again")
        answered = set(getattr(series, "brokers", ()))
        health = Health({e.label: e.label not in failed for e in endpoints},
                        {node: node in answered for node in self._nodes},
                        None if self._read_at is None else self.clock() - self._read_at)
        rows = join_usage(series, self._quotas)
        findings = self._lint(self._quotas) if self._lint is not None else ()
        health.scrape_duration_s = self.clock() - started
        return families(rows, self._quotas, health, findings)

    def _state(self, what, ok: bool, line: str) -> None:
        if ok and what in self._down:
            self._down.discard(what)
            self.log(f"serve-metrics: {line}")
        elif not ok and what not in self._down:
            self._down.add(what)
            self.log(f"serve-metrics: {line}")


#: The label ``serve-metrics --all-clusters`` puts first on every series: the cluster's name
#: in the fleet file (issue 29).
CLUSTER_LABEL = "cluster"


def with_cluster(by_cluster: Mapping[str, Sequence[GaugeMetricFamily]]
                 ) -> list[GaugeMetricFamily]:
    """The families of several clusters as one exposition: each family once, every series
    labelled ``cluster="NAME"`` first, the clusters in the order given. Pure."""
    docs: dict[str, str] = {}
    out: dict[str, GaugeMetricFamily] = {}
    for cluster, fams in by_cluster.items():
        for fam in fams:
            docs.setdefault(fam.name, fam.documentation)
            for sample in fam.samples:
                merged = out.get(fam.name)
                if merged is None:  # its labels: the first series' (every series has them)
                    merged = out[fam.name] = GaugeMetricFamily(
                        fam.name, docs[fam.name], labels=[CLUSTER_LABEL, *sample.labels])
                merged.add_metric([cluster, *sample.labels.values()], sample.value)
    return [out[name] if name in out else GaugeMetricFamily(name, doc, labels=[CLUSTER_LABEL])
            for name, doc in docs.items()]


class FleetExporter:
    """Every cluster of the fleet in one exporter (``serve-metrics --all-clusters``): each
    scrape runs every cluster's :class:`QuotaExporter` at once (a thread each, at most
    :data:`~quota_core.telemetry.sweep.MAX_PARALLEL`), so a dead or slow cluster holds no
    other back, and serves them as one exposition labelled by cluster (:func:`with_cluster`),
    with ``quota_console_cluster_up{cluster}``: 1 when that cluster's quota set was read at
    this scrape."""

    def __init__(self, exporters: Mapping[str, QuotaExporter]) -> None:
        self.exporters = dict(exporters)

    def scrape(self) -> list[GaugeMetricFamily]:
        from .sweep import sweep_pool

        def one(exporter: QuotaExporter) -> list[GaugeMetricFamily]:
            return list(exporter.collect())  # one scrape, under that exporter's lock

        with sweep_pool(len(self.exporters)) as pool:
            fams = dict(zip(self.exporters, pool.map(one, self.exporters.values())))
        up = GaugeMetricFamily(f"{HEALTH}_cluster_up", "1 when the cluster's quota set was "
                               "read at this scrape, 0 when it could not be (its last one is "
                               "served).", labels=[CLUSTER_LABEL])
        for name, exporter in self.exporters.items():
            up.add_metric([name], 1.0 if exporter.quota_set_read else 0.0)
        return with_cluster(fams) + [up]


#: One label of a host name (RFC 1123): ASCII letters, digits and hyphens, 1 to 63 of them,
#: neither first nor last a hyphen. ``re.ASCII``: ``\w``-like classes never take "²" or "０".
_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?", re.ASCII)
#: An IPv6 zone (``[fe80::1%eth0]``): an interface name or number, nothing else.
_ZONE = re.compile(r"[A-Za-z0-9_.-]{1,64}", re.ASCII)
_LISTEN_FIX = ("give HOST:PORT, e.g. 127.0.0.1:9464 (or [::1]:9464; a port alone listens on "
               "127.0.0.1)")
_HOST_RULE = ("a host is a name of dot-separated labels of 1 to 63 ASCII letters, digits or "
              "hyphens (253 characters at most), an IPv4 address, or an IPv6 address in "
              "brackets")


def _host_problem(host: str, bracketed: bool) -> str | None:
    """Why ``host`` is not a host to listen on (None: it is one). Pure: no DNS lookup, so a
    malformed name never reaches a resolver."""
    if bracketed:
        address, _, zone = host.partition("%")
        if "%" in host and not _ZONE.fullmatch(zone):
            return "its IPv6 zone (after %) is not an interface name"
        try:
            ipaddress.IPv6Address(address)
        except ValueError:
            return "it is not an IPv6 address"
        return None
    if ":" in host:
        return "an IPv6 address goes in brackets"
    name = host[:-1] if host.endswith(".") else host  # one trailing dot: a rooted name
    labels = name.split(".")
    if labels[-1].isascii() and labels[-1].isdigit():  # 1.2.3 or 999.1.1.1: an address or nothing
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            return "it is not an IPv4 address"
        return None
    if len(name) > 253:
        return f"it is {len(name)} characters long"
    for label in labels:
        if not label:
            return "it has an empty label, from two dots in a row or a leading dot"
        if len(label) > 63:
            return f"a label is {len(label)} characters long"
        if not _LABEL.fullmatch(label):
            return ("it holds a character other than an ASCII letter, digit, hyphen or dot, "
                    "or a label starts or ends with a hyphen")
    return None


def parse_listen(text: str, flag: str = "--listen") -> tuple[str, int]:
    """``HOST:PORT``, ``[V6]:PORT``, ``:PORT`` or ``PORT`` (host 127.0.0.1; port 0: any free
    one). Any well-formed host is taken (0.0.0.0 too: the user's choice). Strict, and without
    a lookup: the port is ASCII digits (``²``, ``٠`` or a full-width ``０`` are not digits
    here), the host an RFC 1123 name, an IPv4 address or a bracketed IPv6 address. Anything
    else is a :class:`ParseError` naming the value, the rule and the fix."""
    value = text.strip()
    host, sep, port = value.rpartition(":")
    if not sep:
        host, port = "", value
    if not (port.isascii() and port.isdigit() and len(port) <= 5 and int(port) < 65536):
        raise ParseError(f"{flag} {text!r}: the port must be a number from 0 to 65535 in "
                         f"ASCII digits; {_LISTEN_FIX}.", value=text)
    bracketed = host.startswith("[") and host.endswith("]") and len(host) >= 2
    if bracketed:
        host = host[1:-1]
    problem = _host_problem(host, bracketed) if host or bracketed else None
    if problem:
        raise ParseError(f"{flag} {text!r}: {host!r} is not a host name or address ({problem}): "
                         f"{_HOST_RULE}; {_LISTEN_FIX}.", value=text)
    return host or DEFAULT_LISTEN[0], int(port)


def serve(exporter: QuotaExporter, host: str, port: int, **options):
    """Serve ``exporter`` on ``host:port`` (``/metrics``) on a daemon thread; returns the HTTP
    server (``.shutdown()`` stops it; ``.server_address`` is where it listens). One scrape
    serves the requests of the next few seconds, each connection is timed out
    (:mod:`quota_core.telemetry.serving`). An address that cannot be bound is a
    :class:`BackendError` naming it."""
    from .serving import serve as serve_scrapes

    return serve_scrapes(exporter.scrape, host, port, **options)
