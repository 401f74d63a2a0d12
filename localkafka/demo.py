"""The demo of ``make run``: its quotas, its load and the cluster it runs on. Pure data and
pure functions (the one exception, :func:`attach_local`, reads localkafka's state files),
used by ``scripts/run_dashboard.py``, ``scripts/demo_load.py`` and the tests.

The story on three brokers (node ids 1, 2, 3), with the quotas below (per broker, as Kafka
enforces them):

- every partition of :data:`ONE_BROKER_TOPIC` is led by one broker (node 2): alice's
  batch-export offers 3 MiB/s there against the 2 MiB/s of ``{user=alice}``, and bob's two
  clients 1.4 MiB/s against the 1 MiB/s each user gets from ``{user=<default>}``: both are
  throttled on broker 2 only, and brokers 1 and 3 see none of their traffic;
- :data:`SPREAD_TOPIC` has one partition led by each broker: svc-reports' ingest offers
  2.55 MiB/s in total against the same 1 MiB/s, 0.85 MiB/s on each broker (85 %: Throttled
  now lists it as near its quota on brokers 1, 2 and 3), and is throttled nowhere;
- carol's dashboards consumer reads the one-broker topic back: about 4 MiB/s offered (what
  the producers there get through) against the 2 MiB/s fetch quota each user gets from
  ``{user=<default>}``, so her fetch is throttled on broker 2 too: three throttled buckets;
- alice's checkout-api (8 MiB/s of its own), carol's reports producer and svc-reports'
  reports consumer (50 MiB/s of its own) stay under their quotas.

On one broker (the fallback) every partition sits on node 1, so svc-reports' 2.55 MiB/s all
meet one broker's 1 MiB/s and are throttled there.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from quota_core.domain.entities import Entity, QuotaSet

__all__ = ["demo_quotas", "DEMO_CLIENTS", "DemoProducer", "DEMO_PRODUCERS", "DEMO_CONSUMERS",
           "ONE_BROKER_TOPIC", "SPREAD_TOPIC", "PARTITIONS", "hot_node", "replica_assignment",
           "leaders", "demo_brokers", "BROKER_MEMORY", "OTHER_MEMORY", "history_clients",
           "attach_local", "node_ids_of", "DEMO_PUSH_MS"]

MiB = 1024 * 1024

#: (user, client id) pairs a demo operator would ask about; None = not given.
DEMO_CLIENTS: tuple[tuple[str | None, str | None], ...] = (
    ("alice", "checkout-api"),
    ("alice", "batch-export"),
    ("bob", "checkout-api"),
    ("carol", "reports"),
    ("svc-reports", "reports"),
    ("svc-reports", "ingest"),
    ("dave", "mobile-gateway"),
    (None, "legacy-app"),
    ("<default>", "literal-default-user"),
)


def demo_quotas() -> QuotaSet:
    e = Entity.of
    return {
        e(user="alice", client_id="checkout-api"): {"producer_byte_rate": 8 * MiB},
        e(user="alice", client_id=None): {"consumer_byte_rate": 6 * MiB},
        e(user="alice"): {"producer_byte_rate": 2 * MiB, "consumer_byte_rate": 4 * MiB,
                          "request_percentage": 50.0},
        e(user=None, client_id="reports"): {"consumer_byte_rate": 20 * MiB},
        e(user=None, client_id=None): {"request_percentage": 25.0},
        e(user=None): {"producer_byte_rate": 1 * MiB, "consumer_byte_rate": 2 * MiB,
                       "controller_mutation_rate": 10.0},
        e(client_id="mobile-gateway"): {"producer_byte_rate": 512 * 1024},
        e(client_id=None): {"producer_byte_rate": 256 * 1024, "consumer_byte_rate": 512 * 1024},
        e(user="svc-reports"): {"consumer_byte_rate": 50 * MiB, "request_percentage": 200.0},
        e(user="<default>"): {"producer_byte_rate": 100 * 1024},
        e(user="CN=etl,OU=data"): {"producer_byte_rate": 16 * MiB},
        e(ip="10.0.0.12"): {"connection_creation_rate": 20.0},
        e(ip=None): {"connection_creation_rate": 100.0},
    }


# --------------------------------------------------------------------------- the demo load
#: Every partition led by one broker (:func:`hot_node`).
ONE_BROKER_TOPIC = "quota-console-demo"
#: One partition led by each broker.
SPREAD_TOPIC = "quota-console-demo-spread"
#: Partitions of the one-broker topic (the spread topic has one per broker).
PARTITIONS = 3


@dataclass(frozen=True)
class DemoProducer:
    user: str
    client_id: str
    rate: float  # bytes/s offered in total, over the topic's partitions in turn
    topic: str


#: The producers of the demo load; the comments give the entry that binds each one.
DEMO_PRODUCERS: tuple[DemoProducer, ...] = (
    DemoProducer("alice", "checkout-api", 1.0 * MiB, ONE_BROKER_TOPIC),  # level 1, 8 MiB/s: fine
    DemoProducer("alice", "batch-export", 3.0 * MiB, ONE_BROKER_TOPIC),  # {user=alice} 2 MiB/s
    DemoProducer("bob", "app-a", 0.7 * MiB, ONE_BROKER_TOPIC),           # {user=<default>}: bob's
    DemoProducer("bob", "app-b", 0.7 * MiB, ONE_BROKER_TOPIC),           # 1 MiB/s, shared by both
    DemoProducer("carol", "reports", 0.3 * MiB, ONE_BROKER_TOPIC),       # carol's own 1 MiB/s
    DemoProducer("svc-reports", "ingest", 2.55 * MiB, SPREAD_TOPIC),     # 1 MiB/s on each broker
)
#: Consumers (user, client id), reading the one-broker topic.
DEMO_CONSUMERS: tuple[tuple[str, str], ...] = (("svc-reports", "reports"),
                                               ("carol", "dashboards"))


def hot_node(node_ids: Sequence[int]) -> int:
    """The broker that leads every partition of the one-broker topic: the middle one (2 of
    1, 2, 3), so that "broker 2 only" is neither the first nor the last; the only one of one."""
    ids = sorted(node_ids)
    return ids[len(ids) // 2]


def replica_assignment(topic: str, node_ids: Sequence[int]) -> list[list[int]]:
    """The explicit replica assignment of a demo topic (one replica each: the leader)."""
    ids = sorted(node_ids)
    if topic == ONE_BROKER_TOPIC:
        return [[hot_node(ids)] for _ in range(PARTITIONS)]
    if topic == SPREAD_TOPIC:
        return [[n] for n in ids]
    raise ValueError(f"{topic!r} is not a demo topic")


def leaders(topic: str, node_ids: Sequence[int]) -> tuple[int, ...]:
    """The brokers that lead the topic's partitions, each once, in node order."""
    return tuple(sorted({replicas[0] for replicas in replica_assignment(topic, node_ids)}))


# --------------------------------------------------------------------------- client telemetry
#: When the brokers collect client telemetry, ``make run`` writes the default subscription
#: (``quota_core.domain.client_metrics.DEFAULT_SUBSCRIPTION``: throttle times, request latency and
#: connection metrics) before the load starts, so every demo client pushes them (KIP-714) and
#: Resolve and Throttled now show them beside the brokers' figures.
#: The demo's push interval: shorter than a production default (30 s), so that a page shows
#: what the clients report within seconds of the demo's start.
DEMO_PUSH_MS = 10_000


# --------------------------------------------------------------------------- the cluster size
#: What one broker of the demo takes: its JVM's 512 MiB heap, plus metaspace, code cache,
#: direct buffers, page cache for its logs and the metrics agent.
BROKER_MEMORY = 1024 * MiB
#: What the rest of ``make run`` takes: Streamlit, the demo load's clients and the Spark
#: analysis of the demo history (a JVM of its own).
OTHER_MEMORY = 2048 * MiB


def demo_brokers(mem_available: int | None, cpus: int | None) -> tuple[int, str]:
    """How many brokers the demo starts on this machine, and why (one line).

    Three when the memory available (``/proc/meminfo``'s MemAvailable, bytes) holds three
    brokers and the rest (3 × BROKER_MEMORY + OTHER_MEMORY = 5 GiB) and there are at least
    two cores; otherwise one."""
    need = 3 * BROKER_MEMORY + OTHER_MEMORY
    if mem_available is None:
        return 1, "the memory available is unknown (no /proc/meminfo)"
    if mem_available < need:
        return 1, (f"{mem_available / 2**30:.1f} GiB of memory available, 3 brokers and the rest "
                   f"need {need / 2**30:.0f} GiB")
    if (cpus or 1) < 2:
        return 1, f"{cpus or 1} core, 3 brokers need at least 2"
    return 3, (f"{mem_available / 2**30:.1f} GiB of memory available (3 brokers and the rest "
               f"need {need / 2**30:.0f} GiB), {cpus} cores")


# --------------------------------------------------------------------------- the demo history
def history_clients(node_ids: Sequence[int]) -> list[dict]:
    """The demo load's clients as the history generator takes them
    (``pipeline.demo_history.Client(**row)``), placed where the live load puts them: a
    producer's rate split evenly over the leaders of its topic (``base``: the rate on each
    of those brokers, named by node id as a string); a consumer reads all that is offered
    on the one-broker topic. Steady, as the live load is: a small daily swing (``amp``), no
    bursts."""
    def row(user, client_id, quota_type, base, on):
        return {"user": user, "client_id": client_id, "quota_type": quota_type, "base": base,
                "amp": 0.1, "burst": 0.0, "brokers": tuple(str(n) for n in on)}

    out = [row(p.user, p.client_id, "produce", p.rate / len(on), on)
           for p in DEMO_PRODUCERS for on in [leaders(p.topic, node_ids)]]
    offered = sum(p.rate for p in DEMO_PRODUCERS if p.topic == ONE_BROKER_TOPIC)
    on = leaders(ONE_BROKER_TOPIC, node_ids)
    out += [row(user, client_id, "fetch", offered / len(on), on)
            for user, client_id in DEMO_CONSUMERS]
    return out


# --------------------------------------------------------------------------- the running cluster
def attach_local(directory: Path | str):
    """What ``python -m localkafka up`` runs from ``directory``: the :class:`LocalCluster`
    (``--brokers N``), else the single :class:`LocalBroker`, else None. Both have
    ``bootstrap``, ``users``, ``sasl`` and ``write_command_config``."""
    from .broker import LocalBroker
    from .cluster import LocalCluster

    return LocalCluster.attach(directory) or LocalBroker.attach(directory)


def node_ids_of(local) -> list[int]:
    """The node ids of a :class:`LocalCluster` or of a single :class:`LocalBroker`."""
    ids = getattr(local, "node_ids", None)
    return list(ids) if ids else [local.node_id]
