"""Every broker's quota settings, read with DescribeConfigs from each broker of the cluster.

A broker answers DescribeConfigs for its own BROKER resource only (any other node id is
"Unexpected broker id"), so the cluster's brokers are listed with DescribeCluster and each is
asked on its own connection. A broker that cannot be reached or refuses is recorded as unread
(:attr:`quota_core.brokers.BrokerSettings.error`): the others still count. Only a refusal of
the DESCRIBE_CONFIGS right fails the whole read, since it holds for every broker.

Called through :meth:`quota_core.backends.kafka.KafkaBackend.broker_settings`; kafka-python is
reached through the backend's own connection manager (set up by :mod:`.kafka_wire`).
"""
from __future__ import annotations

import time

from ..brokers import CONFIG_SOURCES, SETTINGS, BrokerSettings, ClusterSettings
from ..errors import RequestRejected
from .kafka_wire import Errors

__all__ = ["read_broker_settings", "cluster_nodes"]

_BROKER_RESOURCE = 4
_CLUSTER_AUTHORIZATION_FAILED = 31


def cluster_nodes(backend) -> list[tuple[str, bool]]:
    """The cluster's brokers (DescribeCluster, fenced ones included) as ``(node id, fenced)``
    in numeric order; the node id as a string, as the console labels brokers."""
    from kafka.protocol.admin import DescribeClusterRequest

    response = backend._call(lambda: DescribeClusterRequest(
        include_cluster_authorized_operations=False, include_fenced_brokers=True),
        "listing the cluster's brokers")
    if response.error_code:
        if response.error_code == _CLUSTER_AUTHORIZATION_FAILED:
            raise backend._not_authorized("DESCRIBE", "list the cluster's brokers",
                                          "DescribeCluster")
        error = Errors.for_code(response.error_code)
        raise RequestRejected(f"The broker refused to describe the cluster ({error.message}): "
                              f"{response.error_message or ''}", broker_error=error.message)
    return [(str(b.broker_id), bool(getattr(b, "is_fenced", False)))
            for b in sorted(response.brokers, key=lambda b: b.broker_id)]


def _request(node: str):
    from kafka.protocol.admin import DescribeConfigsRequest

    resource = DescribeConfigsRequest.DescribeConfigsResource
    return DescribeConfigsRequest(resources=[resource(
        resource_type=_BROKER_RESOURCE, resource_name=node, configuration_keys=list(SETTINGS))],
        include_synonyms=False, include_documentation=False)


async def _ask(backend, node: str, deadline: float):
    """One DescribeConfigs to broker ``node`` on its own connection, retrying a connection in
    back-off until ``deadline``."""
    manager, last = backend._manager, None
    while True:
        remaining_ms = (deadline - time.monotonic()) * 1000
        if remaining_ms <= 0:
            raise last or Errors.KafkaTimeoutError(f"no answer from broker {node}")
        try:
            conn = manager.get_connection(int(node))
            if conn.initializing:
                await manager.wait_for(conn.init_future, remaining_ms)
                remaining_ms = max(1.0, (deadline - time.monotonic()) * 1000)
            future = conn.send_request(_request(node), request_timeout_ms=remaining_ms)
            return await manager.wait_for(future, remaining_ms)
        except Errors.NodeNotReadyError as exc:
            last = exc
            await backend._net.sleep(min(0.05, max(0.0, deadline - time.monotonic())))


def _broker(backend, node: str, response) -> BrokerSettings:
    values: dict[str, str | None] = {}
    sources: dict[str, str] = {}
    for result in response.results or ():
        if result.error_code == _CLUSTER_AUTHORIZATION_FAILED:
            raise backend._not_authorized("DESCRIBE_CONFIGS", "read broker configs",
                                          "DescribeConfigs")
        if result.error_code:
            error = Errors.for_code(result.error_code)
            return BrokerSettings(node, error=f"{error.message}: {result.error_message or ''}"
                                  .rstrip(": "))
        for config in result.configs or ():
            values[config.name] = config.value
            sources[config.name] = CONFIG_SOURCES.get(config.config_source, "unknown")
            if config.is_sensitive and config.value is None:
                # e.g. super.users: the broker has no definition of it, so hides its value
                sources[config.name] += ", value hidden by the broker"
    return BrokerSettings(node, values, sources)


async def _ask_all(backend, nodes: list[str], deadline: float) -> dict:
    """Each node's answer, or the error that kept it from answering: ``{node: response or
    exception}``; the requests leave together, then the answers are awaited."""
    pending = {}
    for node in nodes:
        try:
            conn = backend._manager.get_connection(int(node))
        except (Errors.KafkaError, OSError) as exc:
            pending[node] = exc
            continue
        if conn.initializing:
            pending[node] = None  # asked below, once connected
        else:
            pending[node] = conn.send_request(_request(node), request_timeout_ms=max(
                1.0, (deadline - time.monotonic()) * 1000))
    answers = {}
    for node, sent in pending.items():
        try:
            if isinstance(sent, BaseException):
                raise sent
            if sent is None:
                answers[node] = await _ask(backend, node, deadline)
            else:
                answers[node] = await backend._manager.wait_for(
                    sent, max(1.0, (deadline - time.monotonic()) * 1000))
        except (Errors.KafkaError, OSError) as exc:
            answers[node] = exc
    return answers


def read_broker_settings(backend) -> ClusterSettings:
    """:data:`quota_core.brokers.SETTINGS` of every broker of the cluster ``backend`` (a
    :class:`~quota_core.backends.kafka.KafkaBackend`) is connected to, within its timeout."""
    nodes = cluster_nodes(backend)
    deadline = time.monotonic() + backend.timeout_s
    serving = [node for node, fenced in nodes if not fenced]
    answers = backend._net.run(_ask_all, backend, serving, deadline)
    brokers = []
    for node, fenced in nodes:
        answer = answers.get(node)
        if fenced:  # registered, but not serving (stopped, or not caught up yet)
            brokers.append(BrokerSettings(node, error="fenced by the controller: not serving"))
        elif isinstance(answer, BaseException):
            brokers.append(BrokerSettings(node, error=backend._reason(answer)))
        else:
            brokers.append(_broker(backend, node, answer))
    return ClusterSettings(tuple(brokers), f"the cluster's brokers ({len(nodes)})")
