"""scripts/demo_load.py's logs when the broker stops (issue 15): at most a line per client per
``--log-every`` seconds, with a count of the lines held back. Before: librdkafka printed each
failed reconnect, about 3,800 lines in 90 s."""
from __future__ import annotations

import importlib.util
import io
import socket
import time
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "demo_load.py"
spec = importlib.util.spec_from_file_location("demo_load", SCRIPT)
demo_load = importlib.util.module_from_spec(spec)
spec.loader.exec_module(demo_load)


def test_one_line_per_interval_with_a_count_of_the_rest():
    out, now = io.StringIO(), [0.0]
    quiet = demo_load.QuietLog("alice/app", every_s=30, out=out, clock=lambda: now[0])
    for t in range(0, 90):  # a line a second for 90 s
        now[0] = float(t)
        quiet(f"Connect to ipv4#127.0.0.1:9092 failed ({t})")
    lines = out.getvalue().splitlines()
    assert len(lines) == 3  # at 0, 30 and 60 s
    assert lines[0] == "demo_load: alice/app: Connect to ipv4#127.0.0.1:9092 failed (0)"
    assert lines[1].endswith("failed (30) (29 more lines held back)")
    assert lines[2].endswith("(29 more lines held back)")


def test_a_real_client_against_a_stopped_broker_stays_quiet(capfd):
    pytest.importorskip("confluent_kafka")
    from confluent_kafka import Producer

    with socket.socket() as s:  # a port nothing listens on: the broker has stopped
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = io.StringIO()
    quiet = demo_load.QuietLog("bob/app-a", every_s=30, out=out)
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "client.id": "app-a",
                         "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 100,
                         "log_level": 7, **quiet.config()})
    end = time.monotonic() + 4
    while time.monotonic() < end:
        producer.produce("t", b"x")
        producer.poll(0.1)
    producer.flush(0.5)
    lines = out.getvalue().splitlines()
    assert 1 <= len(lines) <= 2, lines  # librdkafka logged many more than that
    assert quiet.held > 10  # ... and they were counted
    assert "127.0.0.1" not in capfd.readouterr().err  # nothing went to stderr behind our back
