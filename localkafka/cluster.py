"""A real KRaft cluster of N nodes on 127.0.0.1: what a production cluster is, in small.

Every node is broker and controller (N voters), so one node may die and the others keep
the cluster working: the fault tests kill one. Each node is a :class:`LocalBroker` with its
own workdir, ports and JMX exporter endpoint; they share the cluster id and, on SASL, the
SCRAM users. Kafka enforces client quotas per broker, which is why the console needs this.

Storage is formatted in parallel (short tool JVMs), the nodes are launched from the calling
thread (the kernel's parent-death signal follows the thread that forked them), then waited
for in parallel until the metadata lists all N brokers.
"""

from __future__ import annotations

import json
import os
import secrets
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import Any

from .broker import ADMIN, DEFAULT_USERS, HOST, LocalBroker, free_port, new_cluster_id
from .errors import LocalBrokerError
from .jars import ensure_jars

CLUSTER_FILE = "cluster.json"
MAX_BROKERS = 5


def _free_ports(count: int) -> list[int]:
    ports: list[int] = []
    while len(ports) < count:
        port = free_port()
        if port not in ports:
            ports.append(port)
    return ports


class LocalCluster:
    """``brokers`` KRaft nodes (ids 1..N) on 127.0.0.1; the API of :class:`LocalBroker` where
    it makes sense for a cluster (``bootstrap``, ``client_config``, ``admin``, ``users``).

    ``node_overrides={2: {"num.io.threads": "3"}}`` gives one node its own server.properties
    values (a rolling change half done); ``overrides`` apply to every node.
    """

    def __init__(
        self,
        workdir: Path | str,
        brokers: int = 3,
        sasl: bool = False,
        *,
        users: Mapping[str, str] | None = None,
        overrides: Mapping[str, str] | None = None,
        node_overrides: Mapping[int, Mapping[str, str]] | None = None,
        detached: bool = False,
    ) -> None:
        if not 1 <= brokers <= MAX_BROKERS:
            raise LocalBrokerError(f"--brokers {brokers}: a local cluster has 1 to {MAX_BROKERS} brokers")
        self.workdir = Path(workdir).resolve()
        self.sasl = sasl
        self.detached = detached
        self.cluster_id = new_cluster_id()
        if not sasl:
            self.users: dict[str, str] = {}
        else:
            self.users = dict(users) if users is not None else \
                {name: secrets.token_urlsafe(12) for name in DEFAULT_USERS}
        self._overrides = dict(overrides or {})
        self._node_overrides = {int(k): dict(v) for k, v in (node_overrides or {}).items()}
        unknown = set(self._node_overrides) - set(range(1, brokers + 1))
        if unknown:
            raise LocalBrokerError(f"node_overrides for node ids {sorted(unknown)}: nodes are 1..{brokers}")
        self.nodes: list[LocalBroker] = []
        self._count = brokers

    # ----------------------------------------------------------------- info
    @property
    def node_ids(self) -> list[int]:
        return [node.node_id for node in self.nodes]

    def node(self, node_id: int) -> LocalBroker:
        for node in self.nodes:
            if node.node_id == node_id:
                return node
        raise LocalBrokerError(f"no node {node_id} in this cluster (nodes {self.node_ids})")

    @property
    def bootstrap(self) -> str:
        """Every node's client address, comma-separated (what a client's bootstrap list is)."""
        if not self.nodes:
            raise LocalBrokerError("cluster not started: call start() first")
        return ",".join(node.bootstrap for node in self.nodes)

    @property
    def metrics_urls(self) -> list[str]:
        return [node.metrics_url for node in self.nodes if node.metrics_url]

    @property
    def ordinary_users(self) -> list[str]:
        return [u for u in self.users if u != ADMIN]

    @property
    def log_path(self) -> Path:  # for the fixtures' failure report: the first node's log
        return self.nodes[0].log_path if self.nodes else self.workdir / "node-1" / "broker.log"

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(f"=== node {n.node_id} ===\n{n.log_tail(lines)}" for n in self.nodes)

    def __repr__(self) -> str:  # never shows passwords
        return f"LocalCluster(workdir={str(self.workdir)!r}, brokers={self._count}, sasl={self.sasl})"

    def client_config(self, user: str | None = None) -> dict[str, Any]:
        conf = self._any_node().client_config(user)
        conf["bootstrap.servers"] = self.bootstrap
        return conf

    def write_command_config(self, path: Path | str, user: str | None = None) -> Path:
        return self._any_node().write_command_config(path, user)

    def admin(self, user: str | None = None, **extra: Any) -> Any:
        from confluent_kafka.admin import AdminClient

        from .broker import _rdkafka_log
        return AdminClient({**self.client_config(user), **extra}, logger=_rdkafka_log)

    def _any_node(self) -> LocalBroker:
        if not self.nodes:
            raise LocalBrokerError("cluster not started: call start() first")
        return self.nodes[0]

    # ----------------------------------------------------------------- lifecycle
    def _make_nodes(self) -> None:
        ports = _free_ports(3 * self._count)
        quorum = ",".join(f"{i + 1}@{HOST}:{ports[3 * i + 1]}" for i in range(self._count))
        self.nodes = [
            LocalBroker(
                self.workdir / f"node-{i + 1}", sasl=self.sasl, port=ports[3 * i],
                users=self.users if self.sasl else None,
                overrides={**self._overrides, **self._node_overrides.get(i + 1, {})},
                detached=self.detached, metrics_port=ports[3 * i + 2], node_id=i + 1,
                quorum=quorum, controller_port=ports[3 * i + 1], cluster_id=self.cluster_id,
                replication=min(3, self._count))
            for i in range(self._count)
        ]

    def start(self, timeout: float = 120) -> str:
        """Format, launch and wait for every node; returns the bootstrap list."""
        if any(node.running() for node in self.nodes):
            raise LocalBrokerError(f"{self!r} is already running")
        libs = ensure_jars()
        self.workdir.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + timeout
        self._make_nodes()
        try:
            with ThreadPoolExecutor(self._count) as pool:
                list(pool.map(lambda n: n.prepare(False), self.nodes))
            for node in self.nodes:
                node.launch(libs)
            with ThreadPoolExecutor(self._count) as pool:
                list(pool.map(lambda n: n.wait_ready(deadline), self.nodes))
            self.wait_all_registered(deadline)
            if self.sasl:
                for user in self.ordinary_users:
                    self.nodes[0].grant_all(user)
        except BaseException:  # a failed or interrupted start leaves no JVM behind
            self.stop()
            raise
        for node in self.nodes:
            node.started()
        self._write_state()
        return self.bootstrap

    def wait_all_registered(self, deadline: float) -> None:
        """Until the metadata lists every node as a broker (a node answers before its peers)."""
        admin = self.admin(**{"socket.connection.setup.timeout.ms": "2000"})
        seen: set[int] = set()
        while time.monotonic() < deadline:
            try:
                seen = set(admin.list_topics(timeout=3).brokers)
            except Exception:  # noqa: BLE001 - retried until the deadline
                seen = set()
            if seen >= set(self.node_ids):
                return
            time.sleep(0.2)
        raise LocalBrokerError(f"cluster {self.bootstrap}: metadata lists brokers {sorted(seen)}, "
                               f"not all of {self.node_ids}, in time")

    def kill(self, node_id: int) -> None:
        """SIGKILL one node, as a crash would; its storage stays for :meth:`restart`."""
        self.node(node_id).kill()

    def restart(self, node_id: int, timeout: float = 90) -> None:
        """Start a stopped or killed node again on its own storage and ports, and wait until
        the metadata lists it again."""
        node = self.node(node_id)
        node.start(timeout=timeout, keep_data=True)
        self.wait_all_registered(time.monotonic() + timeout)

    def running(self) -> bool:
        """True while every node's JVM is alive."""
        return bool(self.nodes) and all(node.running() for node in self.nodes)

    def answers(self, timeout: float = 5) -> bool:
        return bool(self.nodes) and all(node.answers(timeout) for node in self.nodes)

    def stop(self, timeout: float = 30) -> None:
        """Stop every node (controlled shutdown, in parallel: a lone voter cannot shut down
        cleanly while it waits for its quorum, so none is left for last)."""
        # Plain threads, not a pool: stop() also runs from atexit hooks, where a thread pool
        # takes no more work ("cannot schedule new futures after interpreter shutdown").
        failures: list[BaseException] = []

        def stop(node) -> None:
            try:
                node.stop(timeout)
            except BaseException as exc:  # noqa: BLE001 - raised below, once all are stopped
                failures.append(exc)

        stoppers = [threading.Thread(target=stop, args=(node,), name=f"stop-{i}")
                    for i, node in enumerate(self.nodes)]
        for thread in stoppers:
            thread.start()
        for thread in stoppers:
            thread.join()
        if failures:
            raise failures[0]
        (self.workdir / CLUSTER_FILE).unlink(missing_ok=True)

    # ----------------------------------------------------------------- state file
    def _write_state(self) -> None:
        state = {"brokers": self._count, "sasl": self.sasl, "cluster_id": self.cluster_id,
                 "nodes": [str(node.workdir) for node in self.nodes]}
        path = self.workdir / CLUSTER_FILE
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(state, f, indent=2)

    @classmethod
    def attach(cls, workdir: Path | str) -> LocalCluster | None:
        """The cluster recorded in ``workdir/cluster.json`` (by ``python -m localkafka up
        --brokers N``), or None; its nodes may not be running any more."""
        path = Path(workdir).resolve() / CLUSTER_FILE
        try:
            state = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        nodes = [LocalBroker.attach(node_dir) for node_dir in state["nodes"]]
        cluster = cls(workdir, brokers=int(state["brokers"]), sasl=bool(state["sasl"]), detached=True)
        cluster.cluster_id = state["cluster_id"]
        cluster.nodes = [node for node in nodes if node is not None]
        if cluster.nodes:
            cluster.users = dict(cluster.nodes[0].users)
        return cluster

    # ----------------------------------------------------------------- context manager
    def __enter__(self) -> LocalCluster:
        if not self.running():
            self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
