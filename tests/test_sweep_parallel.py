"""The sweep scrapes its endpoints at once, on a bounded pool (issue 29): dead endpoints cost
one timeout together, not one each, and the answers keep the endpoints' order."""
from __future__ import annotations

import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from quota_core.telemetry.collector import Collector, Endpoint
from quota_core.telemetry.scrape import scrape
from quota_core.telemetry.sweep import scrape_all

FIXTURE = (Path(__file__).parent / "fixtures" / "metrics" / "ours.txt").read_bytes()
TIMEOUT = 0.6


class _Metrics(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802
        self.send_response(200)
        self.send_header("Content-Length", str(len(FIXTURE)))
        self.end_headers()
        self.wfile.write(FIXTURE)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def endpoints():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Metrics)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    hole = socket.socket()  # accepts into its backlog, never answers: each scrape times out
    hole.bind(("127.0.0.1", 0))
    hole.listen(64)
    live, dead = server.server_address[1], hole.getsockname()[1]
    out = []
    for i in range(12):
        port = dead if i % 2 else live
        out.append(Endpoint(f"b{i}", f"http://127.0.0.1:{port}/metrics/{i}"))
    yield out
    server.shutdown()
    hole.close()


def test_six_dead_endpoints_cost_one_timeout_and_keep_their_order(endpoints):
    heard = []
    start = time.monotonic()
    series, errors = scrape_all(endpoints, TIMEOUT, on_error=lambda e, _: heard.append(e.label))
    took = time.monotonic() - start
    assert took < 2 * TIMEOUT, f"{took:.2f} s: one after the other would be {6 * TIMEOUT} s"
    assert [e.label for e, _ in errors] == heard == [f"b{i}" for i in range(1, 12, 2)]
    assert series.brokers == [f"b{i}" for i in range(0, 12, 2)]


def test_a_bound_of_one_is_one_after_the_other(endpoints):
    start = time.monotonic()
    scrape_all(endpoints[:4], TIMEOUT, max_parallel=1)
    assert time.monotonic() - start >= 2 * TIMEOUT  # two dead, in turn


def test_a_collector_round_is_concurrent_too(endpoints):
    class Sink:
        label = "nowhere"

        def write(self, usage, snapshots):
            pass

    collector = Collector(endpoints, dict, Sink(), scrape, timeout=TIMEOUT, log=lambda _: None)
    start = time.monotonic()
    collector.scrape_all(time.time())
    assert time.monotonic() - start < 2 * TIMEOUT
    assert list(collector.stats.down) == [f"b{i}" for i in range(1, 12, 2)]
