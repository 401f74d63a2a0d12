"""Every broker's quota settings, read with DescribeConfigs from each broker of the cluster.

A broker answers DescribeConfigs for its own BROKER resource only (any other node id is
"Unexpected broker id"), so each of the cluster's brokers (the node ids the backend's
``info()`` lists) is asked on its own connection; the requests leave together. A broker that
cannot be reached or refuses is recorded as unread (:attr:`quota_core.throttling.brokers.BrokerSettings.
error`): the others still count. Only a refusal of
the DESCRIBE_CONFIGS right fails the whole read, since it holds for every broker.

Called through :meth:`quota_core.backends.kafka.KafkaBackend.broker_settings`; kafka-python is
reached through the backend's own connection manager (set up by :mod:`.kafka_wire`).
"""
from __future__ import annotations

import time

from quota_core.throttling.brokers import CONFIG_SOURCES, SETTINGS, BrokerSettings, ClusterSettings
from quota_core.backends.kafka_wire import Errors

__all__ = ["read_broker_settings"]

_BROKER_RESOURCE = 4
_CLUSTER_AUTHORIZATION_FAILED = 31


def _request(node: str):
    from kafka.protocol.admin.configs import DescribeConfigsRequest

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
    """:data:`quota_core.throttling.brokers.SETTINGS` of every broker of the cluster ``backend`` (a
    :class:`~quota_core.backends.kafka.KafkaBackend`) is connected to, within its timeout.
    The brokers are the cluster's node ids as the backend lists them (``info().node_ids``)."""
    nodes = list(backend.info().node_ids)
    deadline = time.monotonic() + backend.timeout_s
    answers = backend._net.run(_ask_all, backend, nodes, deadline)
    brokers = []
    for node in nodes:
        answer = answers.get(node)
        if isinstance(answer, BaseException):
            brokers.append(BrokerSettings(node, error=backend._reason(answer)))
        else:
            brokers.append(_broker(backend, node, answer))
    return ClusterSettings(tuple(brokers), f"the cluster's brokers ({len(nodes)})")
