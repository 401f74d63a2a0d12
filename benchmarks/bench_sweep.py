"""A sweep of many metrics endpoints, some dead: wall time against the scrape timeout.

    .venv/bin/python benchmarks/bench_sweep.py [--endpoints 500] [--dead 50] [--timeout 5]
        [--closed 0] [--parallel 64]

Issue 29's target: a sweep of 500 endpoints, 50 of them dead with a 5 s timeout, within 2x
the timeout (one after the other, the dead ones alone cost 50 x 5 s = 250 s).

The live endpoints are real HTTP endpoints: ``http.server`` threads on 127.0.0.1 (10 servers,
each endpoint its own path), each answering the real capture tests/fixtures/metrics/ours.txt
(the format our JMX exporter rules write), so every answer is parsed as a real scrape is.
The dead ones are blackholed: a listening socket that never accepts and never answers, so
the connection opens and the scrape waits its whole timeout (the worst kind of dead);
``--closed N`` makes N of them closed ports instead (refused at once). Timed: the CLI's and
the Live page's sweep (``quota_core.telemetry.sweep.scrape_all``) and one round of the
collector (``Collector.scrape_all``: the same pool, plus the usage samples), best of
``--rounds``.
"""
from __future__ import annotations

import argparse
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from quota_core.telemetry.collector import Collector, Endpoint  # noqa: E402
from quota_core.telemetry.scrape import scrape  # noqa: E402
from quota_core.telemetry.sweep import MAX_PARALLEL, scrape_all  # noqa: E402

FIXTURE = (REPO / "tests" / "fixtures" / "metrics" / "ours.txt").read_bytes()
SERVERS = 10


class _Metrics(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(FIXTURE)))
        self.end_headers()
        self.wfile.write(FIXTURE)

    def log_message(self, *args) -> None:  # quiet
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512


def live_servers(n: int) -> list[ThreadingHTTPServer]:
    servers = []
    for _ in range(n):
        server = _Server(("127.0.0.1", 0), _Metrics)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
    return servers


def blackhole(backlog: int) -> socket.socket:
    """A port that accepts connections into its backlog and never answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(backlog)
    return sock


def closed_port() -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now: refused at once
    return port


class _NullSink:
    label = "nowhere"

    def write(self, usage, snapshots) -> None:
        pass


def run_sweep(endpoints: int = 500, dead: int = 50, closed: int = 0, timeout: float = 5.0,
              parallel: int = MAX_PARALLEL, rounds: int = 2) -> dict:
    """The benchmark: the best time of the sweep and of a collector round, as a dict."""
    servers = live_servers(SERVERS)
    hole = blackhole(max(128, dead * 2))
    try:
        eps = []
        for i in range(endpoints - dead):
            port = servers[i % SERVERS].server_address[1]
            eps.append(Endpoint(f"b{i}", f"http://127.0.0.1:{port}/metrics/{i}"))
        for i in range(dead):
            port = closed_port() if i < closed else hole.getsockname()[1]
            eps.append(Endpoint(f"dead{i}", f"http://127.0.0.1:{port}/metrics"))
        # the dead ones spread among the live ones, as a fleet's would be
        eps.sort(key=lambda e: hash(e.label) % 997)
        sweeps, collects = [], []
        for _ in range(rounds):
            start = time.perf_counter()
            series, errors = scrape_all(eps, timeout, max_parallel=parallel)
            sweeps.append(time.perf_counter() - start)
            assert len(errors) == dead, [str(e) for _, e in errors[:3]]
            assert len(series.brokers) == endpoints - dead
            collector = Collector(eps, dict, _NullSink(), scrape, timeout=timeout,
                                  log=lambda line: None)
            start = time.perf_counter()
            collector.scrape_all(time.time())
            collects.append(time.perf_counter() - start)
            assert len(collector.stats.down) == dead
    finally:
        for server in servers:
            server.shutdown()
        hole.close()
    return {"case": "sweep", "endpoints": endpoints, "dead": dead, "blackholed": dead - closed,
            "timeout_s": timeout, "parallel": parallel, "sweep_s": round(min(sweeps), 3),
            "collector_round_s": round(min(collects), 3),
            "ratio": round(max(min(sweeps), min(collects)) / timeout, 2), "target": 2.0,
            "one_after_the_other_s": (dead - closed) * timeout}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--endpoints", type=int, default=500)
    p.add_argument("--dead", type=int, default=50)
    p.add_argument("--closed", type=int, default=0, help="of the dead: closed ports")
    p.add_argument("--timeout", type=float, default=5.0)
    p.add_argument("--parallel", type=int, default=MAX_PARALLEL)
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args()
    r = run_sweep(args.endpoints, args.dead, args.closed, args.timeout, args.parallel,
                  args.rounds)
    print(f"sweep of {r['endpoints']} endpoints, {r['dead']} dead ({r['blackholed']} "
          f"blackholed, {args.closed} closed), timeout {args.timeout:g} s, at most "
          f"{args.parallel} at a time; best of {args.rounds}")
    bound = r["target"] * args.timeout
    for name, best in (("telemetry.sweep.scrape_all", r["sweep_s"]),
                       ("Collector.scrape_all (one round)", r["collector_round_s"])):
        print(f"  {name:<34} {best:6.2f} s = {best / args.timeout:4.2f}x the timeout "
              f"({'within' if best <= bound else 'OVER'} 2x = {bound:g} s)")
    print(f"  one after the other, the dead alone would cost {r['one_after_the_other_s']:g} s")
    return 0 if r["ratio"] <= r["target"] else 1


if __name__ == "__main__":
    sys.exit(main())
