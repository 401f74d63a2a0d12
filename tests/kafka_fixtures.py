"""Pytest plugin: real local Kafka brokers, started once per test session.

Enable with ``pytest_plugins = ["tests.kafka_fixtures"]`` in ``tests/conftest.py``.

* ``kafka_broker``: PLAINTEXT, no auth.
* ``kafka_sasl_broker``: SASL_PLAINTEXT/SCRAM-SHA-256 + StandardAuthorizer; ``admin``
  is super user, ``alice``/``bob``/``carol``/``svc-reports`` may use any topic/group
  but not the cluster (so they are refused quota describe/alter).
* ``kafka_cluster``: a PLAINTEXT 3-node KRaft cluster (node ids 1..3, every node a voter),
  shared by every multi-broker test. A test that kills a node restarts it before it ends.

Brokers start lazily (only if a selected test needs one), are stopped at session end
even on failures or Ctrl-C, and an ``atexit`` hook plus the kernel's parent-death
signal catch the rest. A failing test that used a broker gets the broker's log tail
as a report section. Tests using them are auto-marked ``kafka`` (``-m "not kafka"``).
Set ``LOCALKAFKA_START_TIMEOUT`` (seconds, default 120) for slow machines.
"""

from __future__ import annotations

import atexit
import os
from collections.abc import Generator, Iterator

import pytest

from localkafka import LocalBroker, LocalCluster

BROKER_FIXTURES = ("kafka_broker", "kafka_sasl_broker", "kafka_cluster")
_live: dict[str, LocalBroker | LocalCluster] = {}  # fixture name -> started broker


def _stop_all() -> None:
    """Last resort at interpreter exit, for runs whose fixture teardown never happened."""
    for broker in list(_live.values()):
        try:
            broker.stop(timeout=10)
        except Exception:  # noqa: BLE001 - best effort at exit
            pass


atexit.register(_stop_all)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "kafka: needs a real local Kafka broker (started once per session)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if set(BROKER_FIXTURES) & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.kafka)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report: pytest.TestReport = yield
    if report.failed:
        for name in BROKER_FIXTURES:
            broker = _live.get(name)
            if broker is not None and name in getattr(item, "fixturenames", ()):
                report.sections.append((f"{name} log tail ({broker.log_path})", broker.log_tail(60)))
    return report


def _session_broker(name: str, factory: pytest.TempPathFactory, sasl: bool) -> Iterator[LocalBroker]:
    broker = LocalBroker(factory.mktemp(name), sasl=sasl)
    _live[name] = broker
    try:
        broker.start(timeout=float(os.environ.get("LOCALKAFKA_START_TIMEOUT", "120")))
        yield broker
    finally:
        _live.pop(name, None)
        broker.stop()


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalBroker]:
    """A PLAINTEXT single-node Kafka on 127.0.0.1 (``.bootstrap``, ``.client_config()``)."""
    yield from _session_broker("kafka_broker", tmp_path_factory, sasl=False)


@pytest.fixture(scope="session")
def kafka_sasl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalBroker]:
    """A SASL/SCRAM single-node Kafka with ACLs (``.users``, ``.client_config(user)``)."""
    yield from _session_broker("kafka_sasl_broker", tmp_path_factory, sasl=True)


@pytest.fixture(scope="session")
def kafka_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A PLAINTEXT 3-broker KRaft cluster on 127.0.0.1 (``.nodes``, ``.node(id)``,
    ``.bootstrap`` listing all three, ``.metrics_urls``, ``.kill(id)``/``.restart(id)``)."""
    cluster = LocalCluster(tmp_path_factory.mktemp("kafka_cluster"), brokers=3)
    _live["kafka_cluster"] = cluster
    try:
        cluster.start(timeout=float(os.environ.get("LOCALKAFKA_START_TIMEOUT", "120")))
        yield cluster
    finally:
        _live.pop("kafka_cluster", None)
        cluster.stop()
