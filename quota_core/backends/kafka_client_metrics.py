"""Client-metrics subscriptions (``CLIENT_METRICS`` config resources) over the Admin protocol.

List with ListConfigResources (API 74; version 0 is 3.7's ListClientMetricsResources, which
lists only these), read with DescribeConfigs (32) and write with IncrementalAlterConfigs (44),
all with resource type 16, as ``kafka-client-metrics.sh`` does. confluent-kafka's admin client
has no CLIENT_METRICS resource type, so the requests go through the backend's own kafka-python
connection (:mod:`.kafka_wire`), like the broker settings (:mod:`.kafka_brokers`).

Whether the cluster *collects* what clients push is another matter: a broker advertises
GetTelemetrySubscriptions (API 71) only when a client-telemetry plugin is loaded (KIP-714).
"""
from __future__ import annotations

from collections.abc import Sequence

from ..client_metrics import NOT_COLLECTED, Subscription, alter_ops, subscription_from_configs
from ..errors import RequestRejected, UnsupportedBroker
from .kafka_wire import Errors

__all__ = ["CLIENT_METRICS", "alter_subscription", "delete_subscription", "describe_subscriptions",
           "list_subscription_names", "telemetry_collected"]

CLIENT_METRICS = 16
_GET_TELEMETRY_SUBSCRIPTIONS = 71
_SET, _DELETE = 0, 1
_CONFIGS = ("metrics", "interval.ms", "match")
_CLUSTER_AUTHORIZATION_FAILED = 31


def _check(backend, error_code: int, message: str | None, action: str, operation: str) -> None:
    if not error_code:
        return
    if error_code == _CLUSTER_AUTHORIZATION_FAILED:
        raise backend._not_authorized(operation, action, "ClusterResource")
    error = Errors.for_code(error_code)
    if error_code == 42:  # INVALID_REQUEST: e.g. a broker before 3.7 knows no resource type 16
        raise UnsupportedBroker(f"The cluster refused {action}: {message or error.message}. "
                                f"{NOT_COLLECTED[0].upper()}{NOT_COLLECTED[1:]} (Kafka 3.7+ is "
                                f"needed for client-metrics subscriptions).")
    raise RequestRejected(f"The cluster refused {action}: {error.__name__} "
                          f"({message or error.message}).")


def list_subscription_names(backend) -> list[str]:
    """The names of every ``CLIENT_METRICS`` resource, sorted."""
    from kafka.protocol.admin.configs import ListConfigResourcesRequest

    try:
        response = backend._call(lambda: ListConfigResourcesRequest(resource_types=[CLIENT_METRICS]),
                                 "listing client-metrics subscriptions")
    except UnsupportedBroker as exc:
        raise UnsupportedBroker(f"{NOT_COLLECTED[0].upper()}{NOT_COLLECTED[1:]}: the broker "
                                f"has no client-metrics subscriptions (Kafka 3.7+ is needed).") \
            from exc
    _check(backend, response.error_code, None, "listing client-metrics subscriptions",
           "DESCRIBE_CONFIGS")
    return sorted({r.resource_name for r in response.config_resources
                   if getattr(r, "resource_type", CLIENT_METRICS) == CLIENT_METRICS})


def describe_subscriptions(backend, names: Sequence[str]) -> list[Subscription]:
    """Each named subscription as the broker holds it (a name it does not know: left out)."""
    if not names:
        return []
    from kafka.protocol.admin.configs import DescribeConfigsRequest

    resource = DescribeConfigsRequest.DescribeConfigsResource
    response = backend._call(lambda: DescribeConfigsRequest(resources=[
        resource(resource_type=CLIENT_METRICS, resource_name=n, configuration_keys=None)
        for n in names], include_synonyms=False, include_documentation=False),
        "reading client-metrics subscriptions")
    subs = []
    for result in response.results or ():
        if result.error_code == 3:  # UNKNOWN_TOPIC_OR_PARTITION-like "not found": skip
            continue
        _check(backend, result.error_code, result.error_message,
               f"reading client-metrics subscription {result.resource_name!r}", "DESCRIBE_CONFIGS")
        configs = {c.name: c.value for c in result.configs or () if c.name in _CONFIGS}
        subs.append(subscription_from_configs(result.resource_name, configs))
    return sorted(subs, key=lambda s: s.name)


def _alter(backend, name: str, ops: list[tuple[str, str | None]], action: str) -> None:
    from kafka.protocol.admin.configs import IncrementalAlterConfigsRequest

    resource = IncrementalAlterConfigsRequest.AlterConfigsResource
    config = resource.AlterableConfig
    response = backend._call(lambda: IncrementalAlterConfigsRequest(resources=[resource(
        resource_type=CLIENT_METRICS, resource_name=name, configs=[
            config(name=k, config_operation=_SET if v is not None else _DELETE, value=v)
            for k, v in ops])], validate_only=False), action)
    for result in response.responses or ():
        _check(backend, result.error_code, result.error_message, action, "ALTER_CONFIGS")


def alter_subscription(backend, sub: Subscription) -> None:
    """Make the resource ``sub.name`` exactly ``sub`` (created if new)."""
    _alter(backend, sub.name, alter_ops(sub), f"writing client-metrics subscription {sub.name!r}")


def delete_subscription(backend, name: str) -> None:
    """Remove the resource: every config back to its default (``kafka-client-metrics.sh
    --delete`` does the same); the broker then lists it no more."""
    _alter(backend, name, [(k, None) for k in _CONFIGS],
           f"removing client-metrics subscription {name!r}")


def telemetry_collected(backend) -> bool:
    """Whether the broker in use advertises GetTelemetrySubscriptions: a plugin collects pushes."""
    data = getattr(backend._manager, "broker_version_data", None)
    versions = getattr(data, "api_versions", None) or {}
    return _GET_TELEMETRY_SUBSCRIPTIONS in versions
