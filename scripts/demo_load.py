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

MiB = 1024 * 1024
TOPIC = "quota-console-demo"
#: (user, client id, bytes per second offered). Quotas are in localkafka.demo.
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
    parser.add_argument("--log-every", type=float, default=LOG_EVERY["seconds"],
                        help="at most one log line per client this often (seconds)")
    args = parser.parse_args(argv)
    LOG_EVERY["seconds"] = args.log_every
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
