"""Demo load for ``make run``: real producers and consumers as the demo users, some over quota.

    python scripts/demo_load.py [--broker-dir DIR] [--seconds N]

It reads the local SASL cluster's address and the demo users' SCRAM passwords from that
cluster's state (``localkafka``; the file is readable only by you), never from a command line.
Each client is a confluent-kafka (librdkafka) client authenticated with SCRAM as its user, so
the brokers' quota metrics show real buckets. Who does what, and on which broker, is
``localkafka.demo`` (DEMO_PRODUCERS, the topics' explicit replica assignments): on three
brokers alice's batch-export and bob's two clients are throttled on broker 2 only (every
leader of their topic is there), svc-reports' ingest is over its quota in total and under it
on every broker (one leader each), alice's checkout-api and carol's producer stay under
theirs, and consumers read the one-broker topic back: carol's (2 MiB/s from
``{user=<default>}``) is throttled there too, svc-reports' (50 MiB/s) is not. A producer writes its topic's partitions in turn,
so each leader gets an even share. Bounded: fixed rates (about 8 MiB/s offered in all),
topics that keep one minute of data, and it stops when its parent (the dashboard) stops, on
SIGTERM, or after ``--seconds``.

When the broker stops, every librdkafka client reports each failed reconnect; that was
about 3,800 lines in 90 s. Each client's log and error lines go through :class:`QuietLog`:
at most one line per client every ``--log-every`` seconds (30), with a count of the lines
held back since the last one.
"""
from __future__ import annotations

import argparse
import ctypes
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from localkafka.demo import (DEMO_CONSUMERS, DEMO_PRODUCERS, ONE_BROKER_TOPIC,  # noqa: E402
                             SPREAD_TOPIC, attach_local, replica_assignment)

MiB = 1024 * 1024
TOPICS = (ONE_BROKER_TOPIC, SPREAD_TOPIC)


def _die_with_parent() -> None:
    """Ask the kernel for SIGTERM when the parent (streamlit) exits."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


class QuietLog:
    """One client's log lines, at most one every ``every_s`` seconds: a line in between is
    counted, and the next line printed says how many were held back."""

    def __init__(self, name: str, every_s: float = 30.0, out=None, clock=time.monotonic):
        self.name, self.every_s, self.out, self.clock = name, every_s, out, clock
        self.last: float | None = None
        self.held = 0
        self._lock = threading.Lock()

    def __call__(self, text: str) -> None:
        with self._lock:
            now = self.clock()
            if self.last is not None and now - self.last < self.every_s:
                self.held += 1
                return
            held, self.held, self.last = self.held, 0, now
        more = f" ({held} more line{'s' if held != 1 else ''} held back)" if held else ""
        print(f"demo_load: {self.name}: {text}{more}", file=self.out or sys.stderr, flush=True)

    def config(self) -> dict:
        """librdkafka settings that send this client's logs and errors here, not to stderr."""
        logger = logging.getLogger(f"demo_load.{self.name}")
        logger.propagate = False
        logger.handlers[:] = [_Forward(self)]
        return {"logger": logger, "error_cb": lambda err: self(f"error: {err}")}


class _Forward(logging.Handler):
    def __init__(self, quiet: QuietLog) -> None:
        super().__init__()
        self.quiet = quiet

    def emit(self, record: logging.LogRecord) -> None:
        self.quiet(record.getMessage())


#: Seconds between two lines of one client (--log-every).
LOG_EVERY = {"seconds": 30.0}


def _conf(bootstrap: str, user: str, password: str, client_id: str) -> dict:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": user, "sasl.password": password,
            "client.id": client_id, "log_level": 3,
            **QuietLog(f"{user}/{client_id}", LOG_EVERY["seconds"]).config()}


def ticks(rate: float, size: int, per_second: int = 10):
    """Messages of ``size`` bytes to send at each tick, ``per_second`` ticks a second, for
    ``rate`` bytes/s. The fraction of a message a tick owes is carried to the next one, so the
    rate offered is the rate asked (0.3 MiB/s of 16 KiB messages was 0.16 MiB/s when each tick
    sent a whole number of them, rounded down)."""
    per_tick, credit = rate / size / per_second, 0.0
    while True:
        credit += per_tick
        due = int(credit)
        credit -= due
        yield due


def produce(stop: threading.Event, bootstrap: str, user: str, password: str, client_id: str,
            rate: float, topic: str, partitions: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({**_conf(bootstrap, user, password, client_id), "linger.ms": 20,
                         "queue.buffering.max.kbytes": 4096, "acks": 1})
    payload = os.urandom(16 * 1024)
    sent = 0
    try:
        for due in ticks(rate, len(payload)):
            if stop.is_set():
                break
            started = time.monotonic()
            for _ in range(due):
                try:  # the partitions in turn: each leader gets the same share
                    producer.produce(topic, payload, partition=sent % partitions)
                    sent += 1
                except BufferError:  # throttled by the broker: the queue is full
                    break
            producer.poll(0)
            stop.wait(max(0.0, 0.1 - (time.monotonic() - started)))
    finally:
        producer.flush(2)


def consume(stop: threading.Event, bootstrap: str, user: str, password: str,
            client_id: str) -> None:
    from confluent_kafka import Consumer

    consumer = Consumer({**_conf(bootstrap, user, password, client_id),
                         "group.id": f"demo-{client_id}", "auto.offset.reset": "latest"})
    consumer.subscribe([ONE_BROKER_TOPIC])
    try:
        while not stop.is_set():
            consumer.poll(0.5)
    finally:
        consumer.close()


def ensure_topics(admin, timeout: float = 20) -> dict[str, dict[int, int]]:
    """Create the demo topics that are missing, each with its explicit replica assignment
    over the cluster's brokers (localkafka.demo), and return what the cluster holds: topic ->
    {partition: leader node id}. A topic that already exists is left as it is (its leaders
    are what the caller reports)."""
    from confluent_kafka.admin import NewTopic

    metadata = admin.list_topics(timeout=timeout)
    nodes = sorted(metadata.brokers)
    # librdkafka wants the partition count beside an explicit assignment, and no replication
    # factor (-1, the default here).
    new = [NewTopic(t, len(assign), replica_assignment=assign, config={
        "retention.ms": "60000", "segment.bytes": str(8 * MiB)})
        for t in TOPICS if t not in metadata.topics
        for assign in [replica_assignment(t, nodes)]]
    for topic, future in (admin.create_topics(new, request_timeout=timeout) if new else {}).items():
        try:
            future.result(timeout)
        except Exception as exc:  # noqa: BLE001 - created meanwhile is fine
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise
    deadline = time.monotonic() + timeout
    while True:  # the leaders are known once every partition has one
        topics = admin.list_topics(timeout=timeout).topics
        placed = {t: {p.id: p.leader for p in topics[t].partitions.values()}
                  for t in TOPICS if t in topics}
        if (len(placed) == len(TOPICS) and all(
                leader >= 0 for parts in placed.values() for leader in parts.values())) \
                or time.monotonic() > deadline:
            return placed
        time.sleep(0.2)


def placement_line(placed: dict[str, dict[int, int]]) -> str:
    """``quota-console-demo: every leader on broker 2; quota-console-demo-spread: leaders on
    brokers 1, 2, 3``."""
    def one(topic: str, parts: dict[int, int]) -> str:
        nodes = sorted(set(parts.values()))
        if len(nodes) == 1:
            return f"{topic}: every leader on broker {nodes[0]}"
        return f"{topic}: leaders on brokers {', '.join(map(str, nodes))}"
    return "; ".join(one(t, parts) for t, parts in sorted(placed.items()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--broker-dir", default=None,
                        help="the local broker's state folder (default: localkafka's)")
    parser.add_argument("--seconds", type=float, default=None, help="stop after this long")
    parser.add_argument("--log-every", type=float, default=LOG_EVERY["seconds"],
                        help="at most one log line per client this often (seconds)")
    args = parser.parse_args(argv)
    LOG_EVERY["seconds"] = args.log_every
    _die_with_parent()
    from localkafka.daemon import DEFAULT_DIR

    broker = attach_local(Path(args.broker_dir) if args.broker_dir else DEFAULT_DIR)
    if broker is None or not broker.sasl:
        print("demo_load: no local SASL broker is running (python -m localkafka up --sasl)",
              file=sys.stderr)
        return 1
    args.bootstrap, passwords = broker.bootstrap, dict(broker.users)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    from confluent_kafka.admin import AdminClient

    placed = ensure_topics(AdminClient(_conf(args.bootstrap, "admin", passwords["admin"],
                                             "demo-load-admin")))
    print(f"demo_load: {placement_line(placed)}", file=sys.stderr, flush=True)
    threads = [threading.Thread(target=produce, daemon=True, args=(
        stop, args.bootstrap, p.user, passwords[p.user], p.client_id, p.rate, p.topic,
        len(placed[p.topic]))) for p in DEMO_PRODUCERS]
    threads += [threading.Thread(target=consume, args=(stop, args.bootstrap, u, passwords[u], c),
                                 daemon=True) for u, c in DEMO_CONSUMERS]
    for t in threads:
        t.start()
    print(f"demo_load: {len(DEMO_PRODUCERS)} producers and {len(DEMO_CONSUMERS)} consumers on "
          f"{args.bootstrap}", file=sys.stderr, flush=True)
    stop.wait(args.seconds)
    stop.set()
    for t in threads:
        t.join(5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
