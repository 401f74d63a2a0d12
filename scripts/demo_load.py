"""Demo load for ``make run``: real producers and consumers as the demo users, some over quota.

    python scripts/demo_load.py [--broker-dir DIR] [--seconds N]

It reads the local SASL broker's address and the demo users' SCRAM passwords from that
broker's state (``localkafka``; the file is readable only by you), never from a command line.
Each client is a confluent-kafka (librdkafka) client authenticated with SCRAM as its user, so
the broker's quota metrics show real buckets: alice's batch-export over the 2 MiB/s that
``{user=alice}`` gives all her clients, bob's two clients sharing the 1 MiB/s each user gets
from ``{user=<default>}``, alice's checkout-api well under its own 8 MiB/s, and consumers
reading it all back. Bounded: fixed rates (about 6 MiB/s offered in all), a topic that keeps
one minute of data, and it stops when its parent (the dashboard) stops, on SIGTERM, or after
``--seconds``.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import signal
import sys
import threading
import time
from pathlib import Path

MiB = 1024 * 1024
TOPIC = "quota-console-demo"
#: (user, client id, bytes per second offered). Quotas are in quota_core.demo.
PRODUCERS = (
    ("alice", "checkout-api", 1.0 * MiB),   # level 1, 8 MiB/s of its own: fine
    ("alice", "batch-export", 3.0 * MiB),   # level 3 {user=alice}, 2 MiB/s: throttled
    ("bob", "app-a", 0.7 * MiB),            # level 6 {user=<default>}: bob's 1 MiB/s ...
    ("bob", "app-b", 0.7 * MiB),            # ... shared by both: throttled together
    ("carol", "reports", 0.3 * MiB),        # level 6 too, carol's own 1 MiB/s: fine
)
CONSUMERS = (("svc-reports", "reports"), ("carol", "dashboards"))


def _die_with_parent() -> None:
    """Ask the kernel for SIGTERM when the parent (streamlit) exits."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def _conf(bootstrap: str, user: str, password: str, client_id: str) -> dict:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": user, "sasl.password": password,
            "client.id": client_id, "log_level": 3}


def produce(stop: threading.Event, bootstrap: str, user: str, password: str, client_id: str,
            rate: float) -> None:
    from confluent_kafka import Producer

    producer = Producer({**_conf(bootstrap, user, password, client_id), "linger.ms": 20,
                         "queue.buffering.max.kbytes": 4096, "acks": 1})
    payload = os.urandom(16 * 1024)
    per_tick = max(1, int(rate / len(payload) / 10))  # ten ticks a second
    try:
        while not stop.is_set():
            started = time.monotonic()
            for _ in range(per_tick):
                try:
                    producer.produce(TOPIC, payload)
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
    consumer.subscribe([TOPIC])
    try:
        while not stop.is_set():
            consumer.poll(0.5)
    finally:
        consumer.close()


def ensure_topic(bootstrap: str, password: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(_conf(bootstrap, "admin", password, "demo-load-admin"))
    if TOPIC not in admin.list_topics(timeout=20).topics:
        futures = admin.create_topics([NewTopic(TOPIC, 1, config={
            "retention.ms": "60000", "segment.bytes": str(8 * MiB)})])
        try:
            futures[TOPIC].result(20)
        except Exception as exc:  # noqa: BLE001 - created meanwhile is fine
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--broker-dir", default=None,
                        help="the local broker's state folder (default: localkafka's)")
    parser.add_argument("--seconds", type=float, default=None, help="stop after this long")
    args = parser.parse_args(argv)
    _die_with_parent()
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from localkafka import LocalBroker
    from localkafka.daemon import DEFAULT_DIR

    broker = LocalBroker.attach(Path(args.broker_dir) if args.broker_dir else DEFAULT_DIR)
    if broker is None or not broker.sasl:
        print("demo_load: no local SASL broker is running (python -m localkafka up --sasl)",
              file=sys.stderr)
        return 1
    args.bootstrap, passwords = broker.bootstrap, dict(broker.users)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    ensure_topic(args.bootstrap, passwords["admin"])
    threads = [threading.Thread(target=produce, args=(stop, args.bootstrap, u, passwords[u], c, r),
                                daemon=True) for u, c, r in PRODUCERS]
    threads += [threading.Thread(target=consume, args=(stop, args.bootstrap, u, passwords[u], c),
                                 daemon=True) for u, c in CONSUMERS]
    for t in threads:
        t.start()
    print(f"demo_load: {len(PRODUCERS)} producers and {len(CONSUMERS)} consumers on "
          f"{args.bootstrap}", file=sys.stderr, flush=True)
    stop.wait(args.seconds)
    stop.set()
    for t in threads:
        t.join(5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
