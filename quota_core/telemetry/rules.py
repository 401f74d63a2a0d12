"""The one table from exported metric names to quota series: three rule sets, one lookup.

A broker's quota MBeans reach Prometheus text through a JMX exporter rules file, and each
rules file names them differently. Each row of :data:`RULES` says, for one exported metric
name, which Kafka attribute it carries, which quota type (fixed, or read from a label holding
the MBean ``type``), and which labels hold the ``user`` / ``client-id`` / ``ip`` tags.
The rows come from these real files:

``quota-console``
    ``scripts/kafka/jmx-quota-rules.yaml`` in this repository (what localkafka brokers run):
    ``kafka_quota_byte_rate{quota_type="produce",user="..",client_id=".."}``, ...
``jmx_exporter``
    prometheus/jmx_exporter ``examples/kafka-2_0_0.yml`` (``example_configs/`` before 1.1):
    ``kafka_server_quota_<attr>{resource="Produce",user="..",clientId=".."}`` with
    ``lowercaseOutputName``. Until commit 24f2a096 ("fix ordering for quota patterns", 2023)
    the client-id-only rule came first and caught pair buckets too, giving
    ``resource="Produce, user=alice"``: read as well. Its ``kafka-kraft-3_0_0.yml`` has the
    same quota rules, but a generic ``kafka.server<type=(.+)><>([a-z-]+)`` rule ahead of them
    catches the quota MBeans first (seen on a 4.3.1 broker): the tags end up lowercased and
    mangled inside the metric name (``kafka_server_produce_user_space_20user_byte_rate``), which
    cannot be decoded, so nothing here reads them.
``confluent``
    confluentinc/jmx-monitoring-stacks ``shared-assets/jmx-exporter/kafka_broker.yml``
    ("# Quotas" rules, ``lowercaseOutputName`` and ``lowercaseOutputLabelNames``):
    ``kafka_server_produce_byte_rate{user="..",client_id=".."}`` (the rule's ``client-id``
    label name is made ``client_id`` by the exporter). Only Produce, Fetch and Request;
    confluentinc/cp-helm-charts' cp-kafka rules export no quota metrics at all.
"""
from __future__ import annotations

from dataclasses import dataclass

from quota_core.telemetry.series import ATTRIBUTES

__all__ = ["MBEAN_TYPES", "NODE_ID_LABEL", "NODE_ID_METRIC", "RULES", "SeriesRule", "rule_for"]

#: Which broker an endpoint is: our rules export Kafka's ``kafka.server:type=app-info,id=N``
#: MBean as this gauge, labelled with the node.id (the other rule sets do not export it).
NODE_ID_METRIC = "kafka_server_app_info_start_time_ms"
NODE_ID_LABEL = "node_id"


@dataclass(frozen=True, slots=True)
class SeriesRule:
    """How to read one exported metric name as :class:`~quota_core.telemetry.QuotaSeries`."""

    rule_set: str                   # "quota-console" | "jmx_exporter" | "confluent"
    metric: str                     # the sample name in the exposition text
    attribute: str                  # Kafka's MBean attribute ("byte-rate", ...)
    quota_type: str | None = None   # fixed quota type, or None: read it from type_label
    type_label: str | None = None   # label holding the MBean type ("Produce") or ours ("produce")
    user_label: str | None = None
    client_label: str | None = None
    ip_label: str | None = None


#: MBean ``type`` (as exporters copy it) → quota type; our own label values map to themselves.
MBEAN_TYPES: dict[str, str] = {
    "Produce": "produce", "Fetch": "fetch", "Request": "request",
    "ControllerMutation": "controller_mutation", **{t: t for t in ATTRIBUTES},
}


def _ours(metric: str, attribute: str, quota_type: str | None = None) -> SeriesRule:
    return SeriesRule("quota-console", metric, attribute, quota_type,
                      None if quota_type else "quota_type", "user", "client_id")


def _jmx_exporter(attribute: str) -> SeriesRule:
    return SeriesRule("jmx_exporter", "kafka_server_quota_" + attribute.replace("-", "_"),
                      attribute, None, "resource", "user", "clientId")


def _confluent(quota_type: str, attribute: str) -> SeriesRule:
    return SeriesRule("confluent", f"kafka_server_{quota_type}_{attribute.replace('-', '_')}",
                      attribute, quota_type, None, "user", "client_id")


RULES: tuple[SeriesRule, ...] = (
    _ours("kafka_quota_byte_rate", "byte-rate"),
    _ours("kafka_quota_throttle_time_ms", "throttle-time"),
    _ours("kafka_quota_request_time_percent", "request-time", "request"),
    _ours("kafka_quota_mutation_rate", "mutation-rate", "controller_mutation"),
    _ours("kafka_quota_tokens", "tokens", "controller_mutation"),
    SeriesRule("quota-console", "kafka_connection_accept_rate", "connection-accept-rate",
               "connection", ip_label="ip"),
    *(_jmx_exporter(a) for a in ("byte-rate", "throttle-time", "request-time", "mutation-rate", "tokens")),
    *(_confluent(t, a) for t in ("produce", "fetch", "request") for a in ATTRIBUTES[t]),
)

_BY_METRIC: dict[str, SeriesRule] = {rule.metric: rule for rule in RULES}
assert len(_BY_METRIC) == len(RULES), "two rows of RULES read the same metric name"


def rule_for(metric: str) -> SeriesRule | None:
    """The row reading ``metric`` (an exposition sample name), or None for unrelated series."""
    return _BY_METRIC.get(metric)
