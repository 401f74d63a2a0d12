"""Read Prometheus text from a JMX exporter into :class:`QuotaSeries` records.

Parsing is prometheus_client's (``text_string_to_metric_families``), never by hand; this
module only decides, through :func:`~quota_core.telemetry.rules.rule_for`, which samples are
client-quota series and decodes their tags. Pure: text in, records out.
"""
from __future__ import annotations

import dataclasses
import re

from prometheus_client.parser import text_string_to_metric_families

from ..errors import MetricsError
from .client_reports import is_client_sample
from .names import decode_client_id, decode_user, jmx_unquote
from .rules import MBEAN_TYPES, NODE_ID_LABEL, NODE_ID_METRIC, SeriesRule, rule_for
from .series import ATTRIBUTES, EndpointSeries, QuotaSeries

__all__ = ["parse_metrics"]

# The jmx_exporter example before 2023 matched `type=(.+), client-id=(.+)` first, so a pair
# bucket's "type" swallowed the user tag: resource="Produce, user=CN%3Da".
_LEGACY_RESOURCE = re.compile(r"^(\w+), user=([^,]+)$")


def parse_metrics(text: str, broker: str, *, by_node_id: bool = False) -> EndpointSeries:
    """Every client-quota series in ``text`` (Prometheus text format), in the order exported.

    ``broker`` labels the records (the endpoint they came from); with ``by_node_id`` the
    broker's node id labels them instead, when the endpoint exports it (``NODE_ID_METRIC``),
    since a node id is what Kafka's own tools and logs call a broker. Series no rule reads are
    ignored (jvm_*, other Kafka metrics), and so are broker-wide values without bucket tags.
    The client-telemetry plugin's samples (``kafka_client_telemetry_*``) are kept apart, in
    ``client_samples``, for :func:`~quota_core.telemetry.client_reports.client_reports`.
    Raises :class:`~quota_core.errors.MetricsError` if the text is not Prometheus text or a
    tag is not the JMX-quoted form Kafka writes.
    """
    found: list[QuotaSeries] = []
    clients: list = []
    node_id: str | None = None
    families = text_string_to_metric_families(text)  # lazily: one family held at a time
    while True:
        try:
            family = next(families, None)
        except (ValueError, TypeError, IndexError) as exc:
            first = next((ln for ln in str(text).splitlines() if ln.strip()), "")[:80]
            raise MetricsError(
                f"The metrics from {broker} are not Prometheus text ({exc or 'a line does not parse'}; "
                f"it starts {first!r}): point the scrape at the JMX exporter's /metrics endpoint.",
                broker=broker) from exc
        if family is None:
            if by_node_id and node_id is not None:
                found = [dataclasses.replace(s, broker=node_id) for s in found]
            return EndpointSeries(found, node_id, clients)
        for sample in family.samples:
            if sample.name == NODE_ID_METRIC and sample.labels.get(NODE_ID_LABEL, "").isdigit():
                node_id = sample.labels[NODE_ID_LABEL]
            if is_client_sample(sample.name):
                clients.append(sample)
                continue
            rule = rule_for(sample.name)
            if rule is not None:
                series = _read(rule, sample.labels, float(sample.value), broker)
                if series is not None:
                    found.append(series)


def _read(rule: SeriesRule, labels: dict[str, str], value: float, broker: str) -> QuotaSeries | None:
    """One sample as a series, or None when it is not a quota bucket of a known type."""
    user_tag = labels.get(rule.user_label) if rule.user_label else None
    quota_type = rule.quota_type
    if quota_type is None:
        mbean_type = labels.get(rule.type_label or "", "")
        legacy = _LEGACY_RESOURCE.match(mbean_type)
        if legacy and not user_tag:
            mbean_type, user_tag = legacy.groups()
        quota_type = MBEAN_TYPES.get(mbean_type)
        if quota_type is None:  # e.g. the example rules also catch type=app-info,client-id=..
            return None
    if rule.attribute not in ATTRIBUTES[quota_type]:
        return None
    client_tag = labels.get(rule.client_label) if rule.client_label else None
    ip_tag = labels.get(rule.ip_label) if rule.ip_label else None
    if quota_type == "connection" and not ip_tag:
        return None  # the per-listener connection-accept-rate is not an ip's
    if quota_type != "connection" and not (user_tag or client_tag):
        return None  # a broker-wide aggregate: no bucket tags at all
    return QuotaSeries(
        broker=broker, quota_type=quota_type, attribute=rule.attribute,
        user=decode_user(user_tag) if user_tag else None,
        client_id=decode_client_id(client_tag) if client_tag else None,
        ip=jmx_unquote(ip_tag) if ip_tag else None,
        value=value,
    )
