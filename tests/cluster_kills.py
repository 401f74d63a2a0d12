"""A broker of a real 3-node cluster SIGKILLed while an alter is in flight: what the console
reports, compared with what every broker holds once the killed one is back.

One round (:func:`kill_round`): a backend connected to the cluster sends one alter of
``entities`` entities; right after the request leaves (``KafkaBackend._after_alter_sent``, in
the client's IO thread), or ``delay`` seconds later, one node is SIGKILLed: the broker the
request went to (``"sent-to"``), the active controller (``"controller"``, found with
DescribeQuorum before the alter), or a node that is neither (``"bystander"``). While it is
dead the same backend describes again and a new one connects with the bootstrap list
starting at the dead node (the console carries on with another broker). Then the node is
restarted on its storage and every broker is asked what it holds.

Truthful means: "applied" only if every broker holds every change; "refused" only for an
entity no broker holds; for "unknown", the entities confirmed applied are held. The brokers
must agree with each other after the restart. ``tests/changes/test_cluster_writes.py`` runs one round,
``scripts/faults.py --brokers 3`` many.
"""
from __future__ import annotations

import os
import signal
import threading
import time
import zlib

from quota_core import Alteration, Entity, Op
from quota_core.backends.kafka import KafkaBackend
from quota_core.errors import OutcomeUnknown, QuotaError

PBR = "producer_byte_rate"
VICTIMS = ("sent-to", "controller", "bystander")


def active_controller(backend: KafkaBackend) -> int | None:
    """The quorum leader (DescribeQuorum, forwarded by a broker to the controllers)."""
    from quota_core.backends import kafka_wire  # noqa: F401 - sets kafka-python up first
    from kafka.protocol.admin import DescribeQuorumRequest

    topic = DescribeQuorumRequest.TopicData
    try:
        response = backend._call(lambda: DescribeQuorumRequest(topics=[topic(
            topic_name="__cluster_metadata", partitions=[topic.PartitionData(
                partition_index=0)])]), "describing the metadata quorum")
    except QuotaError:
        return None
    for t in response.topics or ():
        for p in t.partitions or ():
            if p.error_code == 0 and p.leader_id >= 0:
                return p.leader_id
    return None


def held_everywhere(cluster, entities, timeout_s: float = 30) -> dict[int, dict]:
    """Per node id, what that broker holds for ``entities`` (asked directly)."""
    with KafkaBackend(cluster.bootstrap, timeout_s=timeout_s) as b:
        out = {}
        for node, _ in b.brokers():
            everything = b._describe(node=node, wait_refused=True)
            out[node] = {e: everything.get(e, {}) for e in entities}
        return out


def _cli_alter(bootstrap: str, user: str, value: float, timeout_s: float, audit_dir) -> tuple:
    import io
    import tempfile

    from quota_core.cli.main import main

    with tempfile.TemporaryDirectory(dir=audit_dir) as tmp:
        err = io.StringIO()
        started = time.monotonic()
        code = main(["--bootstrap-server", bootstrap, "--timeout", str(timeout_s), "--alter",
                     "--user", user, "--add", f"{PBR}={value:g}", "--audit-log",
                     f"{tmp}/audit.jsonl"], out=io.StringIO(), err=err)
        seconds = round(time.monotonic() - started, 1)
        if code == 0:
            main(["--bootstrap-server", bootstrap, "--alter", "--user", user, "--delete", PBR,
                  "--audit-log", f"{tmp}/audit.jsonl"], out=io.StringIO(), err=io.StringIO())
    return code, err.getvalue().strip()[-300:], seconds


def kill_round(cluster, tag: str, victim: str = "sent-to", entities: int = 50,
               delay: float = 0.0, timeout_s: float = 20, with_cli: bool = True,
               audit_dir=None, send_to: int | None = None, cli_timeout_s: float = 30) -> dict:
    """One kill while an alter is in flight; returns the row of figures (see the module).
    ``send_to``: the node the alter request goes to (else the backend's choice).
    ``cli_timeout_s``: the CLI alter's ``--timeout``; its write lease waits for Kafka to move
    the lease partition and the transaction coordinator off a dead broker, which happens once
    the broker's session expires (``broker.session.timeout.ms``, 9 s): ~13 s measured."""
    assert victim in VICTIMS, victim
    value = float(1000 + zlib.crc32(tag.encode()) % 100_000)
    alterations = [Alteration(Entity.of(user=f"{tag}-{i:05d}"), (Op.set(PBR, value),))
                   for i in range(entities)]
    names = [a.entity for a in alterations]
    backend = KafkaBackend(cluster.bootstrap, timeout_s=timeout_s)
    controller = active_controller(backend)
    if victim == "controller" and controller is not None:  # the request goes to another node,
        backend._node_id = next(n for n in cluster.node_ids if n != controller)  # forwarded
    if send_to is not None:
        backend._node_id = send_to
    killed: dict = {}
    done = threading.Event()

    def pick(sent_to: int) -> int:
        if victim == "sent-to":
            return sent_to
        if victim == "controller" and controller is not None:
            return controller
        others = [n for n in cluster.node_ids if n not in (sent_to, controller)]
        return others[0] if others else sent_to

    def kill(node: int) -> None:
        os.kill(cluster.node(node).pid, signal.SIGKILL)
        killed.update(node=node, at=time.monotonic())
        done.set()

    def after_sent() -> None:  # in the client's IO thread, right after the request left
        if "node" in killed or "picked" in killed:
            return
        killed["picked"] = node = pick(backend.alter_node)
        if delay:
            threading.Timer(delay, kill, (node,)).start()
        else:
            kill(node)

    report: dict = {}

    def alter() -> None:
        started = time.monotonic()
        try:
            outcome = backend.alter(alterations)
            report["reported"] = "applied" if outcome.ok else "refused"
            report["refused"] = {r.entity for r in outcome.failed}
        except OutcomeUnknown as exc:
            report.update(reported="unknown", unknown=set(exc.unknown), confirmed={
                r.entity for r in exc.outcome.results if r.ok} if exc.outcome else set(),
                refused={r.entity for r in exc.outcome.results if not r.ok}
                if exc.outcome else set(), message=str(exc)[:300])
        except Exception as exc:  # noqa: BLE001 - reported as it is
            report["reported"] = f"{type(exc).__name__}: {exc}"[:300]
        report["seconds"] = round(time.monotonic() - started, 1)

    # one backend per node, bootstrapped at that node alone and opened before the kill: the
    # one of the dead node must carry on with the brokers it learned from the metadata
    solo = {n.node_id: KafkaBackend(n.bootstrap, timeout_s=timeout_s) for n in cluster.nodes}
    backend._after_alter_sent = after_sent  # this backend only
    worker = threading.Thread(target=alter)
    worker.start()
    node = None
    try:
        if not done.wait(60):
            raise AssertionError("the alter was never sent")
        node = killed["node"]
        worker.join(timeout_s * 4 + 30)
        backend._after_alter_sent = None
        # The console carries on while the node is down: the same backend, and a new one
        # whose bootstrap list starts with the dead node.
        carried = []
        for name, b in (("same backend", backend), ("backend bootstrapped there", solo[node])):
            try:
                b.describe()
                carried.append(name)
            except QuotaError as exc:
                carried.append(f"{name} failed: {exc}")
        dead = cluster.node(node).bootstrap
        rest = [a for a in cluster.bootstrap.split(",") if a != dead]
        try:
            with KafkaBackend(",".join([dead] + rest), timeout_s=timeout_s) as fresh:
                fresh.describe()
            carried.append("new backend")
        except QuotaError as exc:
            carried.append(f"new backend failed: {exc}")
        if with_cli:  # a whole guarded write: the lease (its topic may have lost its leader)
            code, err, report["cli seconds"] = _cli_alter(
                ",".join([dead] + rest), f"{tag}-cli", value, cli_timeout_s, audit_dir)
            carried.append("cli alter" if code == 0 else f"cli alter failed ({code}): {err}")
    finally:
        backend.close()
        for b in solo.values():
            b.close()
        if "picked" in killed:
            done.wait(max(10.0, delay + 5))  # a delayed kill still comes
            node = killed["picked"]
            cluster.kill(node)  # reaps the JVM killed above (kills it if the timer did not)
            cluster.restart(node)
    truth = held_everywhere(cluster, names)
    there = {n: {e for e, q in held.items() if q.get(PBR) == value} for n, held in truth.items()}
    every = set.intersection(*there.values()) if there else set()
    some = set.union(*there.values()) if there else set()
    reported = report.get("reported", "no report")
    row = {"victim": f"{victim} (node {node}; request to {backend.alter_node}, controller "
                     f"{controller})", "delay s": delay, "entities": entities,
           "reported": reported, "seconds": report.get("seconds"),
           "held on every broker": len(every), "held on some broker": len(some),
           "brokers agree": len({frozenset(s) for s in there.values()}) == 1,
           "carried on": carried, "cli seconds": report.get("cli seconds")}
    wrong = []
    if reported == "applied" and len(every) != entities:
        wrong.append(f"reported applied, but {entities - len(every)} not held everywhere")
    if reported in ("applied", "refused", "unknown"):
        refused_held = report.get("refused", set()) & some
        if refused_held:
            wrong.append(f"{len(refused_held)} reported refused but held")
    if reported == "unknown":
        if not report["confirmed"] <= every:
            wrong.append("an entity confirmed applied is not held everywhere")
        if report["unknown"] | report["confirmed"] | report["refused"] != set(names):
            wrong.append("not every entity is accounted for")
        row["unknown"], row["confirmed"] = len(report["unknown"]), len(report["confirmed"])
    if reported not in ("applied", "refused", "unknown"):
        wrong.append(f"not an outcome: {reported}")
    if not row["brokers agree"]:
        wrong.append("the brokers disagree after the restart")
    if any("failed" in c for c in carried):
        wrong.append("the console did not carry on without the dead node")
    row["wrong"] = wrong
    with KafkaBackend(cluster.bootstrap, timeout_s=timeout_s) as b:  # leave nothing behind
        b.alter([Alteration(e, (Op.remove(PBR),)) for e in names])
    return row
