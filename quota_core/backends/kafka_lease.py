"""The write lease of a Kafka cluster: one writer of this tool at a time, on any host.

Kafka has no compare-and-set for client quotas, so the writers of this tool serialise
themselves through the cluster. The lease is an *open transaction* on the single partition
of the topic :data:`LEASE_TOPIC`:

1. a writer starts a transaction (its own ``transactional.id``) and writes one record to the
   partition, its ticket: who it is, on which host, since when; the ticket's offset is ``T``;
2. it holds the lease when the partition's last stable offset (LSO: ``ListOffsets`` with
   ``read_committed``) equals ``T``. The LSO is the first offset of the oldest transaction
   still open, so it equals ``T`` exactly when every ticket written before ``T`` is committed
   or aborted and this writer's own transaction is the oldest open one. Only one transaction
   can be the oldest: that is the mutual exclusion, decided by the partition leader's log
   order, with no clocks involved;
3. it releases the lease by aborting its transaction (the LSO moves to the next ticket).

Expiry is Kafka's own: a transaction open longer than ``transaction.timeout.ms`` (here the
wait plus :data:`HOLD_S`) is aborted by the transaction coordinator (it checks every
``transaction.abort.timed.out.transaction.cleanup.interval.ms``, 10 s by default), so a killed
writer blocks the others for at most that long. A live holder stops itself before its
transaction's deadline (:class:`~quota_core.backends.base.WriteLease.ensure`): the deadline is counted
from before the ticket was sent, so it is never later than the coordinator's. A waiting writer
that gives up aborts its ticket and names the holder (the ticket at the LSO).

Why not ``init_transactions`` fencing alone: fencing *pre-empts* the previous holder of a
``transactional.id``; it does not make the next one wait, so two writers would both go ahead.
Why not a compacted topic replayed from the start: compaction and retention drop the records
that decided who held it, and a replay could then disagree with what the holder saw.
The topic is made by the first writer with min(3, brokers) replicas and
``min.insync.replicas`` 2 of 3 (:func:`lease_replication`, :func:`lease_min_isr`), so the lease
outlives one broker: a ticket counts once two brokers hold it, and the partition's leadership
moves on when its leader dies. It is looked up with DescribeTopics, never a metadata request
naming it, which a cluster with ``auto.create.topics.enable`` would answer by creating it with
its own defaults. The ACLs a writer needs: see docs/plan-apply.md ("The write lease").
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import time
import uuid
from typing import Iterator, Mapping

from quota_core.backends.base import WriteLease
from quota_core.errors import ConnectionFailed, LeaseUnavailable

__all__ = ["LEASE_TOPIC", "HOLD_S", "kafka_write_lease", "lease_holder", "break_lease",
           "lease_replication", "lease_min_isr"]

LEASE_TOPIC = "__quota_console_lease"
#: How long a holder may keep the lease once it has it (``QUOTA_LEASE_SECONDS`` overrides).
HOLD_S = 60.0
_TICKETS_KEPT_MS = 7 * 24 * 3600 * 1000
_MAX_TXN_S = 900.0
#: librdkafka's log lines (e.g. "coordinator load in progress: retrying") go here, not stderr.
_rdkafka_log = logging.getLogger(__name__ + ".rdkafka")
_rdkafka_log.addHandler(logging.NullHandler())


def hold_seconds(env: Mapping[str, str] = os.environ) -> float:
    try:
        value = float(env.get("QUOTA_LEASE_SECONDS", HOLD_S))
    except ValueError:
        return HOLD_S
    return value if 1 <= value <= 800 else HOLD_S


def _kafka_error(exc: BaseException):
    err = exc.args[0] if getattr(exc, "args", None) else None
    return err if hasattr(err, "code") else None


def _refusal(exc: BaseException, principal: str | None) -> LeaseUnavailable | None:
    """A LeaseUnavailable naming the missing ACL, for an authorisation error; else None."""
    err = _kafka_error(exc)
    if err is None:
        return None
    from confluent_kafka import KafkaError

    who = f"User:{principal}" if principal else "User:<principal>"
    acls = {
        KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: (
            "Write and Describe on the transactional ids quota-console-lease-* ",
            "--operation Write --operation Describe --transactional-id quota-console-lease- "
            "--resource-pattern-type prefixed"),
        KafkaError.TOPIC_AUTHORIZATION_FAILED: (
            f"Create, Write, Read and Describe on the topic {LEASE_TOPIC} ",
            f"--operation Create --operation Write --operation Read --operation Describe "
            f"--topic {LEASE_TOPIC}"),
        KafkaError.CLUSTER_AUTHORIZATION_FAILED: (
            f"Create on the cluster (or a topic {LEASE_TOPIC} made by an admin) ",
            "--operation Create --cluster"),
    }
    if err.code() not in acls:
        return None
    what, flags = acls[err.code()]
    return LeaseUnavailable(
        f"Cannot take the write lease: {who} lacks {what}({err.name()}). Nothing was written. "
        f"Grant it with kafka-acls.sh --add --allow-principal {who} {flags}", acl=what.strip())


def lease_replication(brokers: int) -> int:
    """The lease topic's replication factor: min(3, brokers), so the lease outlives a broker."""
    return max(1, min(3, brokers))


def lease_min_isr(replicas: int) -> int:
    """Its ``min.insync.replicas``: 2 of 3, so a ticket is on two brokers before it counts and
    one broker may die; 1 with fewer replicas (2 of 2 would stop the lease when one dies)."""
    return 2 if replicas >= 3 else 1


def _transient(exc: BaseException) -> bool:
    """A librdkafka error worth asking again (a moved leader or controller, a timeout, a lost
    connection), not a refusal. ``_DESTROY_BROKER`` is a request that was on a broker handle
    librdkafka dropped: it drops the bootstrap handle once metadata names the real
    brokers (librdkafka#4557), so a client's first request can fail so (a CI run saw it)."""
    from confluent_kafka import KafkaError

    err = _kafka_error(exc)
    return err is not None and _refusal(exc, None) is None and (
        err.retriable() or err.code() in (KafkaError._TIMED_OUT, KafkaError._TRANSPORT,
                                          KafkaError._DESTROY_BROKER))


def _new_admin(conf: Mapping[str, object]):
    from confluent_kafka.admin import AdminClient

    return AdminClient({**conf, "client.id": "quota-console-lease"}, logger=_rdkafka_log)


def _ensure_topic(conf: Mapping[str, object], admin, wait_s: float):
    """Make the lease topic unless it exists, and wait (within ``wait_s``) until its partition
    has a leader. Every request is a short try: after a failed one a new admin client looks
    the cluster up again (librdkafka's keeps asking a broker that died until its request
    times out). Returns the admin client to use next."""
    from confluent_kafka import KafkaError, KafkaException, TopicCollection
    from confluent_kafka.admin import NewTopic

    deadline = time.monotonic() + wait_s
    box = {"admin": admin}

    def short() -> float:
        return max(0.5, min(3.0, deadline - time.monotonic()))

    def led() -> bool | None:
        """True: the partition has a leader; False: not yet (or no answer); None: no such
        topic.

        DescribeTopics, not a metadata request naming the topic: on a cluster with
        ``auto.create.topics.enable`` that request creates the topic with the broker's
        defaults (one replica, perhaps), before ours could be made with its own settings."""
        left = short()
        try:
            topic = box["admin"].describe_topics(TopicCollection([LEASE_TOPIC]),
                                                 request_timeout=left)[LEASE_TOPIC].result(left)
        except KafkaException as exc:
            err = _kafka_error(exc)
            if err is not None and err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                return None
            if not _transient(exc):
                raise
            box["admin"] = _new_admin(conf)
            return False
        except TimeoutError:
            box["admin"] = _new_admin(conf)
            return False
        if not topic.partitions:
            return False
        return all(p.leader is not None and p.leader.id >= 0 for p in topic.partitions)

    created = False
    while True:
        state = led()
        if state or time.monotonic() >= deadline:
            return box["admin"]
        if state is None and not created:
            try:
                brokers = len(box["admin"].list_topics(timeout=short()).brokers)
            except KafkaException:
                box["admin"] = _new_admin(conf)
                continue
            replicas = lease_replication(brokers)
            new = NewTopic(LEASE_TOPIC, num_partitions=1, replication_factor=replicas, config={
                "cleanup.policy": "delete", "retention.ms": str(_TICKETS_KEPT_MS),
                "min.insync.replicas": str(lease_min_isr(replicas))})
            left = short()
            try:
                box["admin"].create_topics([new], operation_timeout=left,
                                           request_timeout=left)[LEASE_TOPIC].result(left + 1)
            except KafkaException as exc:
                err = _kafka_error(exc)
                if err is not None and err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                    created = True
                elif _transient(exc) and time.monotonic() < deadline:
                    box["admin"] = _new_admin(conf)  # asked again: led() sees if it was made
                else:
                    raise
            except TimeoutError:  # sent to a broker that died? asked again, as above
                if time.monotonic() >= deadline:
                    raise
                box["admin"] = _new_admin(conf)
            else:
                created = True
            continue
        # A topic just created has no leader for a moment; list_offsets then fails with "No
        # leaders found" (the first writer on a fresh cluster). Wait for one, within wait_s.
        time.sleep(0.1)


def _lso(admin, wait_s: float, committed: bool = True) -> int:
    """The partition's last stable offset (or, ``committed=False``, its high watermark)."""
    from confluent_kafka import IsolationLevel, TopicPartition
    from confluent_kafka.admin import OffsetSpec

    tp = TopicPartition(LEASE_TOPIC, 0)
    level = IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED
    result = admin.list_offsets({tp: OffsetSpec.latest()}, isolation_level=level,
                                request_timeout=wait_s)
    return result[tp].result(wait_s).offset


def _lso_until(conf: Mapping[str, object], admin, deadline: float) -> tuple[int, object]:
    """The LSO, asked until ``deadline`` (then TimeoutError): a broker that died leaves
    librdkafka's admin client asking the partition's old leader until its request times out,
    so each try is short, and after a failed one a new client looks the leader up again
    (Kafka moves the leadership once the dead broker's session expires, ~9 s). Returns the
    offset and the admin client to use next."""
    from confluent_kafka import KafkaException

    while True:
        left = deadline - time.monotonic()
        try:
            offset = _lso(admin, max(0.5, min(3.0, left)))
            if offset >= 0:
                return offset, admin
        except (KafkaException, TimeoutError) as exc:
            if isinstance(exc, KafkaException) and _refusal(exc, None) is not None:
                raise
            log_reason = exc
        else:
            log_reason = f"offset {offset}"  # the new leader does not know it yet
        if time.monotonic() >= deadline:
            raise TimeoutError(f"the lease partition's offsets were not available ({log_reason})")
        _rdkafka_log.info("lease: list offsets failed (%s); asking again", log_reason)
        time.sleep(0.2)
        admin = _new_admin(conf)


def lease_holder(conf: Mapping[str, object], offset: int | None = None,
                 wait_s: float = 5.0) -> dict | None:
    """The ticket at ``offset`` (default: the LSO, i.e. the holder's), or None."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient

    if offset is None:
        admin = AdminClient(dict(conf), logger=_rdkafka_log)
        offset = _lso(admin, wait_s)
        if offset >= _lso(admin, wait_s, committed=False):
            return None  # no transaction open: nobody holds it
    consumer = Consumer({**conf, "group.id": f"quota-console-lease-{uuid.uuid4().hex}",
                         "isolation.level": "read_uncommitted", "enable.auto.commit": False},
                        logger=_rdkafka_log)
    try:
        consumer.assign([TopicPartition(LEASE_TOPIC, 0, offset)])
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            if msg.offset() != offset:
                return None
            try:
                return json.loads(msg.value())
            except (TypeError, ValueError):
                return None
        return None
    finally:
        consumer.close()


def _holder_text(ticket: dict | None) -> str:
    if not ticket:
        return "another writer (its ticket could not be read)"
    return (f"{ticket.get('holder')} (pid {ticket.get('pid')} on {ticket.get('host')}, since "
            f"{ticket.get('since')})")


def break_lease(conf: Mapping[str, object], wait_s: float = 10.0) -> dict | None:
    """Abort the transaction of the writer that holds the lease now (a dead one: check that
    first), by starting one with its ``transactional.id``; returns its ticket."""
    from confluent_kafka import Producer

    ticket = lease_holder(conf, wait_s=wait_s)
    if not ticket or not ticket.get("tid"):
        return ticket
    fence = Producer({**conf, "transactional.id": ticket["tid"]}, logger=_rdkafka_log)
    fence.init_transactions(wait_s)  # aborts the open transaction of that id
    return ticket


@contextlib.contextmanager
def kafka_write_lease(conf: Mapping[str, object], holder: str, wait_s: float,
                      principal: str | None = None,
                      hold_s: float | None = None) -> Iterator[WriteLease]:
    """Hold the cluster's write lease (see the module docstring), waiting up to ``wait_s``."""
    from confluent_kafka import KafkaException, Producer
    from confluent_kafka.admin import AdminClient

    hold = hold_s if hold_s is not None else hold_seconds()
    # A broker refuses a transaction timeout over transaction.max.timeout.ms (15 min default).
    txn_s = min(wait_s + hold, _MAX_TXN_S)
    conf = {k: v for k, v in conf.items() if k != "client.id"}
    deadline = time.monotonic() + wait_s
    tid = f"quota-console-lease-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({**conf, "client.id": "quota-console-lease"}, logger=_rdkafka_log)
    producer = None
    started = holding = False
    try:
        admin = _ensure_topic(conf, admin, wait_s)
        producer = Producer({**conf, "client.id": "quota-console-lease",
                             "transactional.id": tid, "linger.ms": 0,
                             "transaction.timeout.ms": int(txn_s * 1000)},
                            logger=_rdkafka_log)
        while True:  # a retriable failure may be asked again (librdkafka's own rule)
            try:
                producer.init_transactions(max(0.5, deadline - time.monotonic()))
                break
            except KafkaException as exc:
                if not _transient(exc) or time.monotonic() >= deadline:
                    raise
                time.sleep(0.1)
        producer.begin_transaction()
        since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        t0 = time.monotonic()  # before the ticket leaves: never later than the coordinator's
        started = True
        sent: dict = {}
        producer.produce(LEASE_TOPIC, partition=0, key=b"lease", value=json.dumps({
            "holder": holder, "host": socket.gethostname(), "pid": os.getpid(),
            "since": since, "tid": tid}).encode("utf-8"),
            on_delivery=lambda err, msg: sent.update(err=err, offset=msg.offset()))
        producer.flush(max(0.5, deadline - time.monotonic()))
        if sent.get("err") is not None or "offset" not in sent:
            raise KafkaException(sent.get("err")) if sent.get("err") else ConnectionFailed(
                f"The write lease's ticket was not written to {LEASE_TOPIC} within {wait_s:g} "
                f"s: nothing was written. Check that the cluster is up.")
        ticket = sent["offset"]
        delay = 0.02
        while True:
            lso, admin = _lso_until(conf, admin, deadline)
            if lso == ticket:
                break
            if lso > ticket:
                raise LeaseUnavailable(
                    f"The write lease's ticket was aborted before its turn came (its "
                    f"transaction outlived {txn_s:g} s): nothing was written. Try "
                    f"again.", holder=holder)
            if time.monotonic() + delay > deadline:
                who = _holder_text(lease_holder(conf, lso, wait_s=3.0))
                raise LeaseUnavailable(
                    f"The cluster's write lease is held by {who} and was not free within "
                    f"{wait_s:g} s: nothing was written. Try again when that writer is done "
                    f"(--timeout waits longer; a writer that died frees it within "
                    f"{txn_s + 10:g} s).", holder=who)
            time.sleep(delay)
            delay = min(delay * 2, 0.2)
        holding = True
        yield WriteLease(holder, t0 + txn_s - 1.0)
    except KafkaException as exc:
        if holding:
            raise  # from the body, not from taking the lease
        refusal = _refusal(exc, principal)
        if refusal is not None:
            raise refusal from None
        raise ConnectionFailed(f"Cannot take the cluster's write lease ({LEASE_TOPIC}): "
                               f"{exc}. Nothing was written.") from None
    except TimeoutError as exc:  # a librdkafka future that did not complete in time
        if holding:
            raise
        raise ConnectionFailed(
            f"Cannot take the cluster's write lease ({LEASE_TOPIC}): the cluster did not answer "
            f"within {wait_s:g} s{f' ({exc})' if str(exc) else ''}. Nothing was written. When a broker has "
            f"just died, Kafka moves its partitions after its session expires: try again, or "
            f"give a longer --timeout.") from None
    finally:
        if producer is not None:
            if started:
                with contextlib.suppress(Exception):
                    # up to 15 s: when the coordinator's broker died, Kafka moves it once
                    # that broker's session expires (~9 s); else the lease stays taken until
                    # the transaction times out
                    producer.abort_transaction(max(1.0, min(15.0, wait_s)))
            with contextlib.suppress(Exception):
                producer.flush(0)
