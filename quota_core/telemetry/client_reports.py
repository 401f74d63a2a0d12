"""What clients push (KIP-714), as the console's telemetry plugin shows it on a broker's endpoint.

Clients (the Java client since 3.7, librdkafka since 2.5) push their own metrics to a broker
under the ``CLIENT_METRICS`` subscriptions; the broker hands them to a plugin. Ours
(``scripts/kafka/telemetry-plugin``) registers what each client instance pushed as JMX MBeans on
the broker, and the JMX exporter agent that already serves the quota series serves them too:

``kafka_client_telemetry_value{metric, client_instance_id, client_id, principal,
client_software_name, client_software_version[, destination_node_id]}``
    the last value the instance pushed for one metric (``metric`` is the OTLP name the client
    uses, e.g. ``org.apache.kafka.producer.produce.throttle.time.avg``; per-node metrics carry
    the broker the client measured in ``destination_node_id``);
``kafka_client_telemetry_push_age_seconds{client_instance_id, client_id, principal,
client_software_name, client_software_version}``
    seconds since that instance's last push to this broker;
``kafka_client_telemetry_plugin_instances``
    how many instances the plugin holds: present whenever the plugin is loaded, so an endpoint
    without it says "client telemetry is not collected here".

A label whose value is empty is dropped by the exporter (so ``principal`` may be missing), and
values are the MBean's tag values, JMX-quoted like the quota series' client ids: decoded here
with :func:`~quota_core.telemetry.names.jmx_unquote`. Pure: samples in, records out.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from prometheus_client.parser import text_string_to_metric_families

from .names import jmx_unquote

__all__ = [
    "CLIENT_SERIES_PREFIX", "INSTANCES_METRIC", "PUSH_AGE_METRIC", "VALUE_METRIC", "ClientReport",
    "client_reports", "client_samples", "is_client_sample", "telemetry_collected",
]

#: Every series the plugin exports starts with this (and nothing else on the endpoint does).
CLIENT_SERIES_PREFIX = "kafka_client_telemetry_"
VALUE_METRIC = "kafka_client_telemetry_value"
PUSH_AGE_METRIC = "kafka_client_telemetry_push_age_seconds"
INSTANCES_METRIC = "kafka_client_telemetry_plugin_instances"

#: The OTLP metric names (Java client and librdkafka alike) each field reads.
PRODUCE_THROTTLE_AVG = "org.apache.kafka.producer.produce.throttle.time.avg"
PRODUCE_THROTTLE_MAX = "org.apache.kafka.producer.produce.throttle.time.max"
FETCH_THROTTLE_AVG = "org.apache.kafka.consumer.fetch.manager.fetch.throttle.time.avg"
FETCH_THROTTLE_MAX = "org.apache.kafka.consumer.fetch.manager.fetch.throttle.time.max"
REQUEST_LATENCY_AVG = ("org.apache.kafka.producer.node.request.latency.avg",
                       "org.apache.kafka.consumer.node.request.latency.avg")

_INSTANCE_LABELS = ("client_instance_id", "client_id", "principal", "client_software_name",
                    "client_software_version")
#: Real brokers' node ids; a client's bootstrap (negative) and coordinator (2^31-1-id)
#: connections are not brokers of the cluster.
_MAX_NODE_ID = 2**30


@dataclass(frozen=True)
class ClientReport:
    """One client instance, as seen by one broker's endpoint (the broker it pushes to)."""

    instance_id: str           # KIP-714 client_instance_id
    client_id: str
    principal: str | None
    software_name: str | None
    software_version: str | None
    node_id: int               # broker whose endpoint showed it (the broker the client pushed to)
    last_push_age_s: float | None
    produce_throttle_ms_avg: float | None
    produce_throttle_ms_max: float | None
    fetch_throttle_ms_avg: float | None
    fetch_throttle_ms_max: float | None
    #: per destination node id, when the client reports it
    request_latency_ms_avg: Mapping[int, float] = field(default_factory=lambda: MappingProxyType({}))


def is_client_sample(name: str) -> bool:
    """Whether an exported sample name is one of the plugin's."""
    return name.startswith(CLIENT_SERIES_PREFIX)


def client_samples(text: str) -> list:
    """The plugin's samples in Prometheus ``text`` (prometheus_client's parser), others skipped."""
    return [s for family in text_string_to_metric_families(text) for s in family.samples
            if is_client_sample(s.name)]


def _samples(parsed) -> Iterable:
    """Samples from prometheus_client families or samples (either may be given)."""
    for item in parsed or ():
        samples = getattr(item, "samples", None)
        if samples is not None:
            yield from samples
        else:
            yield item


def telemetry_collected(parsed_samples) -> bool:
    """Whether this endpoint carries the plugin's series at all (even with no client yet)."""
    return any(is_client_sample(s.name) for s in _samples(parsed_samples))


def _label(labels: Mapping[str, str], key: str) -> str | None:
    raw = labels.get(key)
    return jmx_unquote(raw) if raw else None


def _number(value) -> float | None:
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _node(raw: str | None) -> int | None:
    """``"2"`` (librdkafka) or ``"node-2"`` (the Java client's tag) → 2; anything else → None."""
    if not raw:
        return None
    text = raw[5:] if raw.startswith("node-") else raw
    if not text.isdigit():
        return None
    node = int(text)
    return node if node < _MAX_NODE_ID else None


def client_reports(parsed_samples, node_id: int) -> list[ClientReport]:
    """One :class:`ClientReport` per client instance in one endpoint's samples, by instance id.

    ``parsed_samples``: prometheus_client samples or metric families of one scrape (e.g.
    ``EndpointSeries.client_samples`` or :func:`client_samples`); ``node_id``: that endpoint's
    broker. A field the client does not push is ``None`` (a producer has no fetch throttle).
    """
    values: dict[str, dict[str, float]] = {}
    latency: dict[str, dict[int, float]] = {}
    meta: dict[str, dict[str, str | None]] = {}
    ages: dict[str, float] = {}
    for s in _samples(parsed_samples):
        if s.name not in (VALUE_METRIC, PUSH_AGE_METRIC):
            continue
        instance = _label(s.labels, "client_instance_id")
        value = _number(s.value)
        if not instance:
            continue
        if instance not in meta:
            meta[instance] = {k: _label(s.labels, k) for k in _INSTANCE_LABELS}
        if value is None:
            continue
        if s.name == PUSH_AGE_METRIC:
            ages[instance] = value
            continue
        metric = s.labels.get("metric", "")
        if metric in REQUEST_LATENCY_AVG:
            node = _node(_label(s.labels, "destination_node_id"))
            if node is not None:
                latency.setdefault(instance, {})[node] = value
        elif "destination_node_id" not in s.labels:
            values.setdefault(instance, {})[metric] = value
    reports = []
    for instance in sorted(meta):
        m, v = meta[instance], values.get(instance, {})
        reports.append(ClientReport(
            instance_id=instance, client_id=m["client_id"] or "", principal=m["principal"],
            software_name=m["client_software_name"], software_version=m["client_software_version"],
            node_id=int(node_id), last_push_age_s=ages.get(instance),
            produce_throttle_ms_avg=v.get(PRODUCE_THROTTLE_AVG),
            produce_throttle_ms_max=v.get(PRODUCE_THROTTLE_MAX),
            fetch_throttle_ms_avg=v.get(FETCH_THROTTLE_AVG),
            fetch_throttle_ms_max=v.get(FETCH_THROTTLE_MAX),
            request_latency_ms_avg=MappingProxyType(dict(sorted(latency.get(instance, {}).items()))),
        ))
    return reports
