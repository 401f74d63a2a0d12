"""A long-lived local broker shared across commands (``make kafka-up``, ``make run``).

The broker's workdir (default ``<repo>/.cache/local-broker``) doubles as its state
directory: ``state.json`` there records pid, bootstrap, metrics URL, SASL flag and users,
so a later command can find, reuse or stop the broker started by an earlier one. A cluster
(``up --brokers N``) keeps one such directory per node under it and ``cluster.json`` on top.
"""

from __future__ import annotations

import fcntl
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from .broker import LocalBroker
from .cluster import LocalCluster
from .errors import LocalBrokerError
from .jars import REPO_ROOT

DEFAULT_DIR = REPO_ROOT / ".cache" / "local-broker"


@contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """Serialise up/down on one directory (e.g. two make targets racing)."""
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def running_broker(directory: Path | str = DEFAULT_DIR) -> LocalBroker | None:
    """The broker recorded in ``directory`` if its JVM is alive and answers, else None."""
    broker = LocalBroker.attach(directory)
    if broker is not None and broker.running() and broker.answers():
        return broker
    return None


def running_cluster(directory: Path | str = DEFAULT_DIR) -> LocalCluster | None:
    """The cluster recorded in ``directory`` if all its nodes are alive and answer, else None."""
    cluster = LocalCluster.attach(directory)
    if cluster is not None and cluster.running() and cluster.answers():
        return cluster
    return None


def ensure_running(
    directory: Path | str = DEFAULT_DIR,
    sasl: bool = False,
    port: int | None = None,
    timeout: float = 90,
    progress: Callable[[str], None] = lambda msg: None,
    brokers: int = 1,
) -> tuple[str, bool]:
    """Return ``(bootstrap, started_now)``, starting a detached broker (``brokers`` > 1: a
    cluster) only if none answers.

    A live broker of the other flavour (SASL vs PLAINTEXT, one broker vs a cluster of another
    size) or on another port is an error rather than silently replaced: something may be using it.
    """
    directory = Path(directory).resolve()
    if brokers > 1 and port:
        raise LocalBrokerError("--port fixes one broker's port; a cluster picks free ports")
    with _locked(directory):
        cluster = LocalCluster.attach(directory)
        single = LocalBroker.attach(directory)
        if cluster is not None and any(node.running() for node in cluster.nodes):
            if brokers != len(cluster.nodes) or cluster.sasl != sasl:
                raise LocalBrokerError(
                    f"a {len(cluster.nodes)}-broker {'SASL' if cluster.sasl else 'PLAINTEXT'} cluster is "
                    f"already running on {cluster.bootstrap} from {directory}; stop it first "
                    "(python -m localkafka down)")
            if cluster.running() and cluster.answers():
                return cluster.bootstrap, False
            progress("the cluster recorded there is not whole or not answering; restarting it")
            cluster.stop()
        if brokers > 1:
            if single is not None and single.running():
                raise LocalBrokerError(
                    f"a single broker is already running on {single.bootstrap} from {directory}; "
                    "stop it first (python -m localkafka down)")
            new = LocalCluster(directory, brokers=brokers, sasl=sasl, detached=True)
            progress(f"starting a {brokers}-broker {'SASL' if sasl else 'PLAINTEXT'} Kafka cluster in {directory}")
            new.start(timeout=timeout)
            for node in new.nodes:
                progress(f"node {node.node_id}: pid {node.pid} on {node.bootstrap}, metrics on "
                         f"{node.metrics_url} (log: {node.log_path})")
            return new.bootstrap, True
        existing = single
        if existing is not None and existing.running():
            if existing.sasl != sasl or (port and existing.port != port):
                raise LocalBrokerError(
                    f"a {'SASL' if existing.sasl else 'PLAINTEXT'} broker is already running on "
                    f"{existing.bootstrap} from {directory}; stop it first (python -m localkafka down)")
            if existing.answers():
                return existing.bootstrap, False
            progress(f"broker pid {existing.pid} is alive but not answering; restarting it")
            existing.stop()
        broker = LocalBroker(directory, sasl=sasl, port=port, detached=True)
        progress(f"starting {'SASL' if sasl else 'PLAINTEXT'} Kafka broker in {directory}")
        broker.start(timeout=timeout)
        progress(f"broker pid {broker.pid} ready on {broker.bootstrap}, metrics on {broker.metrics_url} "
                 f"(log: {broker.log_path})")
        return broker.bootstrap, True


def stop_running(directory: Path | str = DEFAULT_DIR) -> bool:
    """Stop the broker or every node of the cluster recorded in ``directory``; True if one was
    running."""
    directory = Path(directory).resolve()
    with _locked(directory):
        cluster = LocalCluster.attach(directory)
        if cluster is not None:
            was_running = any(node.running() for node in cluster.nodes)
            cluster.stop()
            return was_running
        broker = LocalBroker.attach(directory)
        if broker is None:
            return False
        was_running = broker.running()
        broker.stop()  # also removes the state file of a broker that died on its own
        return was_running
