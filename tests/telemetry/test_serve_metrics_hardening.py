"""serve-metrics under hostile input and hostile clients (issue 32, findings 3, 4 and 9).

* ``--listen`` is parsed strictly, without a lookup of a malformed host: every malformed
  value is one line on stderr naming it, the rule and the fix, exit 2.
* A ``--sandbox`` path that does not exist is the usage error ``--describe`` gives.
* One scrape serves the requests of the next few seconds; clients that never read, never
  finish their request or say nothing are timed out, and a normal scrape stays fast beside
  them at 100,000 entries. Nothing listens beyond 127.0.0.1.
"""
from __future__ import annotations

import os
import socket
import threading
import time
import urllib.request
from io import StringIO

import pytest
from prometheus_client.parser import text_string_to_metric_families

from quota_core import Entity
from quota_core.backends.sandbox import SandboxBackend
from quota_core.cli.main import main
from quota_core.cli.serve_metrics import build_parser, start
from quota_core.telemetry import serving
from quota_core.telemetry.exporter import parse_listen

PROG = "kafka-client-quotas serve-metrics"
FIX = "give HOST:PORT, e.g. 127.0.0.1:9464 (or [::1]:9464; a port alone listens on 127.0.0.1)."


@pytest.fixture
def sandbox(tmp_path) -> str:
    path = tmp_path / "q.sqlite"
    with SandboxBackend(path) as store:
        store.init()
    return str(path)


@pytest.fixture
def no_lookups(monkeypatch):
    """Any name lookup fails the test: a malformed host must never reach a resolver."""
    def refuse(*args, **kwargs):
        raise AssertionError(f"a name lookup for {args!r}")

    for name in ("getaddrinfo", "gethostbyname", "gethostbyname_ex", "getfqdn"):
        monkeypatch.setattr(socket, name, refuse)


@pytest.mark.parametrize("listen, rule", [
    # the values: "internal error" before, or a lookup, or accepted as port 0
    ("127.0.0.1:²", "the port must be a number from 0 to 65535 in ASCII digits"),
    ("127.0.0.1:٠", "the port must be a number from 0 to 65535 in ASCII digits"),
    ("127.0.0.1:０", "the port must be a number from 0 to 65535 in ASCII digits"),
    ("０", "the port must be a number from 0 to 65535 in ASCII digits"),
    ("127.0.0.1:+80", "the port must be a number from 0 to 65535 in ASCII digits"),
    ("127.0.0.1:000009464", "the port must be a number from 0 to 65535 in ASCII digits"),
    (f"{'a' * 70}.example:1", "(a label is 70 characters long)"),
    ("..:0", "(it has an empty label, from two dots in a row or a leading dot)"),
    ("a\x01b:9464", "(it holds a character other than an ASCII letter, digit, hyphen or dot"),
    ("%:9464", "(it holds a character other than an ASCII letter, digit, hyphen or dot"),
    ("exämple.com:9464", "(it holds a character other than an ASCII letter, digit, hyphen"),
    ("-host:9464", "or a label starts or ends with a hyphen)"),
    ("999.1.1.1:9464", "(it is not an IPv4 address)"),
    ("1.2.3:9464", "(it is not an IPv4 address)"),
    (f"{'a.' * 127}b:1", "(it is 255 characters long)"),
    ("[::1%\x01]:9464", "(its IPv6 zone (after %) is not an interface name)"),
    ("[]:9464", "(it is not an IPv6 address)"),
])
def test_a_malformed_listen_exits_2_in_one_line_without_a_lookup(sandbox, no_lookups, listen,
                                                                  rule):
    out, err = StringIO(), StringIO()
    code = main(["serve-metrics", "--sandbox", sandbox, f"--listen={listen}"], out, err)
    text = err.getvalue()
    assert code == 2, text
    assert text.count("\n") == 1 and "\r" not in text and "\x01" not in text
    assert text.startswith(f"{PROG}: error: --listen {listen!r}: ")
    assert rule in text and text.endswith(f"; {FIX}\n")
    assert "internal error" not in text and "Traceback" not in text


@pytest.mark.parametrize("listen, expected", [
    ("localhost:9464", ("localhost", 9464)), ("metrics-1.example.com.:80", ("metrics-1.example.com.", 80)),
    ("[fe80::1%eth0]:9464", ("fe80::1%eth0", 9464)), ("[::ffff:127.0.0.1]:0", ("::ffff:127.0.0.1", 0)),
    (" 127.0.0.1:65535 ", ("127.0.0.1", 65535)), ("0", ("127.0.0.1", 0)),
    (f"{'a' * 63}.example:1", (f"{'a' * 63}.example", 1)),
])
def test_well_formed_listen_values_are_taken_without_a_lookup(no_lookups, listen, expected):
    assert parse_listen(listen) == expected


def test_a_missing_sandbox_is_the_usage_error_describe_gives(tmp_path):
    missing = str(tmp_path / "typo.sqlite")
    out, err = StringIO(), StringIO()
    assert main(["--sandbox", missing, "--describe"], out, err) == 2
    describe = err.getvalue().split(": error: ", 1)[1]
    assert describe == (f"No sandbox file at {missing}: it is created by --alter, --import or "
                        f"--init. Check the path.\n")
    out, err = StringIO(), StringIO()
    assert main(["serve-metrics", "--sandbox", missing, "--listen", "127.0.0.1:0"], out, err) == 2
    assert err.getvalue() == f"{PROG}: error: {describe}"
    assert not (tmp_path / "typo.sqlite").exists()  # nothing created on the way


def test_concurrent_requests_wait_for_the_one_scrape_in_flight():
    from prometheus_client.core import GaugeMetricFamily

    calls, gate = [], threading.Event()

    def scrape():
        calls.append(time.monotonic())
        gate.wait(5)  # a slow scrape: every request below arrives while it is in flight
        family = GaugeMetricFamily("scrape_number", "which scrape this is")
        family.add_metric([], len(calls))
        return [family]

    server = serving.serve(scrape, "127.0.0.1", 0, cache_s=0.5)
    url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
    try:
        bodies: list[bytes] = []
        threads = [threading.Thread(target=lambda: bodies.append(
            urllib.request.urlopen(url, timeout=10).read())) for _ in range(8)]
        for t in threads:
            t.start()
        time.sleep(0.3)
        gate.set()
        for t in threads:
            t.join(10)
        assert len(calls) == 1 and len(bodies) == 8 and len(set(bodies)) == 1
        assert b"scrape_number 1.0" in bodies[0]
        time.sleep(0.6)  # older than cache_s: the next request scrapes again
        assert b"scrape_number 2.0" in urllib.request.urlopen(url, timeout=10).read()
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(url.replace("/metrics", "/other"), timeout=10)
        assert info.value.code == 404
    finally:
        server.shutdown()
        server.server_close()


def _sandbox_of(path, entries: int) -> str:
    """``entries`` user entries, written in one transaction (the sandbox's bulk path); values
    a real cluster would use, so the lint rules find nothing to say about each one."""
    quotas = {Entity.of(user=f"user-{i:06d}"): {"producer_byte_rate": 1_048_576.0 + i}
              for i in range(entries)}
    with SandboxBackend(path) as store:
        store.init()
        store.replace_all(quotas)
    return str(path)


def _hostile_clients(port: int) -> list[socket.socket]:
    """5 clients that send a whole request and never read the answer, 5 that never finish
    their request, 5 that say nothing."""
    clients = []
    for kind in ["never-reads"] * 5 + ["partial"] * 5 + ["idle"] * 5:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(("127.0.0.1", port))
        if kind == "never-reads":
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        elif kind == "partial":
            s.sendall(b"GET /metrics HTTP/1.1\r\nHo")
        clients.append(s)
    return clients


#: The issue's size runs in ``make faults`` (about 13 s); ``make test`` keeps a tenth of it.
FULL_SIZE = pytest.param(100_000, marks=[pytest.mark.slow, pytest.mark.skipif(
    not os.environ.get("QUOTA_SLOW_TESTS"), reason="100k entries: make faults runs it "
                                                   "(QUOTA_SLOW_TESTS=1)")])


@pytest.mark.parametrize("entries", [10_000, FULL_SIZE])
def test_a_normal_scrape_stays_fast_beside_slow_and_idle_clients(tmp_path, monkeypatch, entries):
    """Issue 32, finding 9: five clients that never read the reply pushed a normal scrape to
    32.5 s at 100k entries (a whole scrape per request, one at a time). The one timed
    assertion: under 5 s, while the requests of the clients that never read share the one
    scrape with it. Then every hostile connection is closed by the server's timeout."""
    monkeypatch.setattr(serving, "IO_TIMEOUT_S", 1.0)
    path = _sandbox_of(tmp_path / "big.sqlite", entries)
    args = build_parser().parse_args(["--sandbox", path])
    lines: list[str] = []
    with SandboxBackend(path) as backend:
        server = start(backend, args, "127.0.0.1", 0, lines.append, 5.0)
        port = server.server_address[1]
        clients = _hostile_clients(port)
        try:
            started = time.monotonic()
            text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics",
                                          timeout=30).read().decode()
            elapsed = time.monotonic() - started
            got = {f.name: f.samples for f in text_string_to_metric_families(text)}
            assert got["quota_console_quota_entries"][0].value == entries
            assert len(got["kafka_client_quota_configured_bytes_per_second"]) == entries
            assert elapsed < 5.0, f"a normal scrape took {elapsed:.1f} s beside slow clients"
            assert server.scrapes == 1  # the never-read clients and ours shared one scrape
            deadline = time.monotonic() + 10
            while server.open_connections and time.monotonic() < deadline:
                time.sleep(0.1)
            assert server.open_connections == 0, "a slow or idle connection was never closed"
            for s in clients[5:]:  # the server hung up: the partial and idle ones read EOF
                s.settimeout(2)
                assert s.recv(65536) == b""
        finally:
            for s in clients:
                s.close()
            server.shutdown()
            server.server_close()
    assert lines[-1].startswith("serve-metrics: serving http://127.0.0.1:")


def test_collect_on_a_missing_sandbox_is_the_same_usage_error(tmp_path):
    """collect (and collect --serve) snapshotted a mistyped sandbox path as an empty quota set."""
    missing = str(tmp_path / "typo.sqlite")
    out, err = StringIO(), StringIO()
    code = main(["collect", "--sandbox", missing, "--metrics", "http://127.0.0.1:9/m", "--to",
                 str(tmp_path / "history"), "--serve", "127.0.0.1:0"], out, err)
    assert code == 2
    assert err.getvalue() == (f"kafka-client-quotas collect: error: No sandbox file at {missing}: "
                              f"it is created by --alter, --import or --init. Check the path.\n")
    assert not (tmp_path / "typo.sqlite").exists() and not (tmp_path / "history").exists()
