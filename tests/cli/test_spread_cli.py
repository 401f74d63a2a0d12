"""``--throttled`` and ``--resolve --metrics`` over three brokers (three tiny real HTTP
metrics endpoints, one per broker): each bucket on every broker, brokers without its traffic
included, and the sentence that explains the spread; JSON keeps ``live.brokers`` and adds the
brokers with traffic, the summed rate and the ceiling."""
from __future__ import annotations

import http.server
import json
import threading

import pytest

from quota_core import Entity
from tests.cli_steps import run, sandbox_with

MiB = 1024 * 1024
P = "producer_byte_rate"
QUOTAS = {Entity.of(client_id="conc"): {P: 1 * MiB},
          Entity.of(client_id="wide"): {P: 1 * MiB}}
# conc: all its traffic on broker 2, throttled there; wide: ~1 MiB/s on each, under on each.
BODIES = {
    "1": 'kafka_server_produce_byte_rate{client_id="wide"} 1000000.0\n',
    "2": 'kafka_server_produce_byte_rate{client_id="conc"} 1090519.0\n'
         'kafka_server_produce_throttle_time{client_id="conc"} 820.0\n'
         'kafka_server_produce_byte_rate{client_id="wide"} 1040000.0\n',
    "3": 'kafka_server_produce_byte_rate{client_id="wide"} 990000.0\n'
         'kafka_server_produce_byte_rate{client_id="conc"} 0.0\n',
}


def serve(body: str) -> http.server.ThreadingHTTPServer:
    class Handler(http.server.BaseHTTPRequestHandler):
        payload = body.encode()

        def do_GET(self):  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(self.payload)))
            self.end_headers()
            self.wfile.write(self.payload)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                     daemon=True).start()
    return server


@pytest.fixture
def endpoints():
    """One metrics endpoint per broker, labelled by node id (``1=URL,2=URL,3=URL``)."""
    servers = [serve(body) for body in BODIES.values()]
    yield ",".join(f"{label}=http://127.0.0.1:{s.server_address[1]}/metrics"
                   for label, s in zip(BODIES, servers))
    for s in servers:
        s.shutdown()
        s.server_close()


def test_throttled_names_the_one_broker_and_shows_the_others_without_traffic(tmp_path,
                                                                            endpoints):
    store = sandbox_with(tmp_path / "q.sqlite", QUOTAS)
    code, out, err = run("--sandbox", store, "--throttled", "--metrics", endpoints,
                         "--output", "json")
    assert code == 0, err
    rows = json.loads(out)
    # Only conc is throttled, and only on broker 2: wide's 3 MiB/s in total is no throttle.
    assert [(r["broker"], r["bucket"]["client-id"]) for r in rows] == [("2", "conc")]
    spread = rows[0]["spread"]
    assert spread["throttled_on"] == ["2"] and spread["brokers_with_traffic"] == ["2"]
    assert spread["brokers_without_traffic"] == ["1", "3"]
    assert spread["ceiling"] == 1 * MiB and spread["total_rate"] == 1090519.0
    assert spread["sentence"].startswith("Throttled on broker 2 only: 104% of 1 MiB/s there, "
                                         "throttled 820 ms; brokers 1 and 3 see none of its "
                                         "traffic.")

    code, out, _ = run("--sandbox", store, "--throttled", "--metrics", endpoints,
                       "--output", "plain")
    lines = out.splitlines()
    assert lines[0].startswith("2 produce {client-id=conc}: 1.04 MiB/s of 1 MiB/s (104%), "
                               "throttle 820 ms")
    grid = lines[lines.index("{client-id=conc} produce, quota 1 MiB/s on each broker:") + 1:]
    assert grid[0].split() == ["broker", "rate", "use", "throttle"]
    assert grid[1].split() == ["1", "no", "traffic"]
    assert grid[2].split() == ["2", "1.04", "MiB/s", "104%", "820", "ms"]
    assert grid[3].split() == ["3", "no", "traffic"]
    assert grid[4].startswith("  Throttled on broker 2 only")


def test_above_shows_the_spread_client_as_not_throttled_on_any_broker(tmp_path, endpoints):
    store = sandbox_with(tmp_path / "q.sqlite", QUOTAS)
    code, out, err = run("--sandbox", store, "--throttled", "--above", "90", "--metrics",
                         endpoints, "--output", "json")
    assert code == 0, err
    wide = [r for r in json.loads(out) if r["bucket"]["client-id"] == "wide"]
    assert sorted(r["broker"] for r in wide) == ["1", "2", "3"]
    spread = wide[0]["spread"]
    assert spread["throttled_on"] == [] and spread["brokers_with_traffic"] == ["1", "2", "3"]
    assert spread["total_rate"] == 3030000.0 and spread["ceiling"] == 3 * MiB
    assert spread["sentence"].startswith("2.89 MiB/s in total against a 1 MiB/s quota, and not "
                                         "throttled: each broker sees at most")
    assert "enforces on its own" in spread["sentence"]


@pytest.mark.parametrize("client, throttled, traffic, ceiling", [
    ("conc", True, ["2"], 1 * MiB), ("wide", False, ["1", "2", "3"], 3 * MiB)])
def test_resolve_metrics_keeps_the_brokers_and_adds_the_spread(tmp_path, endpoints, client,
                                                               throttled, traffic, ceiling):
    store = sandbox_with(tmp_path / "q.sqlite", QUOTAS)
    code, out, err = run("--sandbox", store, "--resolve", "--client-id", client, "--metrics",
                         endpoints, "--output", "json")
    assert code == 0, err
    live = json.loads(out)["quotas"][P]["live"]
    assert live["throttled"] is throttled
    # live.brokers: the client's own bucket where a broker reports it (broker 3's conc is
    # a lingering 0.0, still reported).
    assert [b["broker"] for b in live["brokers"]] == (["2", "3"] if client == "conc"
                                                       else ["1", "2", "3"])
    assert live["brokers_with_traffic"] == traffic and live["ceiling"] == ceiling
    assert live["total_rate"] == sum(b["rate"] for b in live["brokers"])
    assert live["throttled_on"] == (["2"] if throttled else [])

    code, out, _ = run("--sandbox", store, "--resolve", "--client-id", client, "--metrics",
                       endpoints, "--output", "plain")
    lines = out.splitlines()
    live_lines = [line for line in lines if line.startswith("  live ")]
    assert [line.split(":")[0] for line in live_lines] == ["  live 1", "  live 2", "  live 3"]
    [across] = [line for line in lines if line.startswith("  across brokers: ")]
    assert across.removeprefix("  across brokers: ") == live["sentence"]
    if client == "conc":
        assert live_lines[0] == "  live 1: no traffic in this bucket"


def test_a_broker_without_any_quota_figures_still_counts(tmp_path, endpoints):
    """A fourth broker whose endpoint answers with its node id and no quota series at all
    (nobody sends to it): it is a broker without conc's traffic, so 'spread over 4'."""
    quiet = serve('kafka_server_app_info_start_time_ms{node_id="4"} 1.7e12\n')
    try:
        store = sandbox_with(tmp_path / "q.sqlite", QUOTAS)
        metrics = f"{endpoints},http://127.0.0.1:{quiet.server_address[1]}/metrics"
        code, out, err = run("--sandbox", store, "--resolve", "--client-id", "conc",
                             "--metrics", metrics, "--output", "json")
    finally:
        quiet.shutdown()
        quiet.server_close()
    assert code == 0, err
    live = json.loads(out)["quotas"][P]["live"]
    assert live["brokers_without_traffic"] == ["1", "3", "4"]
    assert "spread over 4 brokers it could be up to 4 MiB/s" in live["sentence"]


def test_an_endpoint_that_fails_is_named_unread(tmp_path, endpoints):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    store = sandbox_with(tmp_path / "q.sqlite", QUOTAS)
    code, out, err = run("--sandbox", store, "--resolve", "--client-id", "wide", "--metrics",
                         f"{endpoints},http://127.0.0.1:{closed}/metrics", "--output", "plain")
    assert code == 1 and f"127.0.0.1:{closed}" in err
    lines = out.splitlines()
    assert f"  live 127.0.0.1:{closed}: not read, its figures are unknown" in lines
    [across] = [line for line in lines if line.startswith("  across brokers: ")]
    assert across.endswith(f"Broker 127.0.0.1:{closed} could not be read: its figures are "
                           f"unknown.")
