"""Bounded scrapes (issue 16, findings 4 and 6): a hostile metrics endpoint, served for real.

A tiny ``http.server`` on 127.0.0.1 plays every endpoint the probe found: one that drips a
line a second, an endless body, one giant line, a million series, redirects to ftp:// and
to another host, a redirect loop. Each scrape stops in bounded time and memory, with one
line naming the URL and the cap; no connection is ever opened to a refused redirect.
"""
from __future__ import annotations

import http.server
import socket
import threading
import time
import tracemalloc
from typing import Iterator

import pytest

from quota_core.errors import MetricsError, ScrapeLimitExceeded
from quota_core.telemetry import scrape
from quota_core.telemetry.scrape import MAX_BYTES, MAX_LINE, MAX_SERIES, fetch_text, url_problem

from tests import ROOT

SAMPLE = 'kafka_quota_byte_rate{{quota_type="produce",user="u{i}",client_id="app"}} 1.0\n'
STOP = threading.Event()


class Hostile(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def _start(self, status: int = 200, **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.end_headers()

    def _forever(self, make, pause: float = 0.0) -> None:
        """Write ``make(i)`` for i = 0, 1, ... until the scraper hangs up."""
        i = 0
        try:
            while not STOP.is_set():
                self.wfile.write(make(i))
                i += 1
                if pause:
                    self.wfile.flush()
                    time.sleep(pause)
        except OSError:  # the scraper hung up: what the test wants
            pass

    def do_GET(self):  # noqa: N802 - http.server's naming
        path = self.path
        if path == "/metrics":
            self._start()
            self.wfile.write(SAMPLE.format(i=1).encode())
        elif path == "/drip":  # one line a second, forever
            self._start()
            self._forever(lambda i: SAMPLE.format(i=i).encode(), pause=1.0)
        elif path == "/drip-headers":  # the headers themselves, a byte every 0.2 s
            self.wfile.write(b"HTTP/1.0 200 OK\r\n")
            self._forever(lambda i: b"X", pause=0.2)
        elif path == "/endless":  # comment lines (no samples) forever
            self._start()
            self._forever(lambda i: b"# " + b"x" * 8190 + b"\n")
        elif path == "/giant":  # one 50 MB line
            self._start()
            self._forever(lambda i: b"x" * 65536 if i < 800 else b"\n")
        elif path == "/million":  # 1,000,000 series, sent as fast as the scraper reads
            self._start()
            self._forever(lambda i: "".join(SAMPLE.format(i=i * 1000 + j)
                                            for j in range(1000)).encode()
                          if i < 1000 else b"")
        elif path == "/declared-huge":  # says so up front
            self._start(Content_Length=str(MAX_BYTES + 1))
            self._forever(lambda i: b"# padding\n")
        elif path.startswith("/redirect/"):
            self._start(302, Location=self.server.redirects[path])
        else:
            self._start(404)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def ftp() -> Iterator[dict]:
    """A listening socket standing for an FTP server: it records whether anything connected."""
    seen = {"connections": 0}
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(4)
    sock.settimeout(0.2)

    def accept() -> None:
        while not STOP.is_set():
            try:
                conn, _ = sock.accept()
            except OSError:
                continue
            seen["connections"] += 1
            conn.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    seen["port"] = sock.getsockname()[1]
    yield seen
    STOP.set()
    thread.join(5)
    sock.close()


@pytest.fixture(scope="module")
def server(ftp) -> Iterator[str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hostile)
    httpd.daemon_threads = True
    port = httpd.server_address[1]
    base = f"http://127.0.0.1:{port}"
    httpd.redirects = {
        "/redirect/ftp": f"ftp://127.0.0.1:{ftp['port']}/etc/passwd",
        "/redirect/other-host": f"http://localhost:{port}/metrics",
        "/redirect/same-host": "/metrics",
        "/redirect/loop": "/redirect/loop",
        "/redirect/chain1": "/redirect/chain2", "/redirect/chain2": "/redirect/chain3",
        "/redirect/chain3": f"{base}/metrics",
        "/redirect/empty": "",
    }
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield base
    finally:
        STOP.set()
        httpd.shutdown()
        httpd.server_close()


def timed(call) -> tuple[BaseException | None, float, int]:
    """(the exception raised, seconds taken, peak bytes allocated) for ``call()``."""
    tracemalloc.start()
    started = time.monotonic()
    try:
        call()
        raised = None
    except BaseException as exc:  # noqa: BLE001 - returned to the test
        raised = exc
    took = time.monotonic() - started
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return raised, took, peak


def test_a_dripping_endpoint_stops_at_the_deadline_of_the_whole_scrape(server):
    url = f"{server}/drip"
    raised, took, _ = timed(lambda: scrape(url, "b1", timeout=2.5))
    assert isinstance(raised, MetricsError), raised
    assert str(raised).startswith(f"The metrics endpoint {url} did not finish sending its "
                                  f"metrics within 2.5 s; check that")
    assert took < 15  # today: past 40 s with --timeout 3


def test_dripping_headers_stop_at_the_deadline_too(server):
    url = f"{server}/drip-headers"
    raised, took, _ = timed(lambda: fetch_text(url, timeout=1.5))
    assert isinstance(raised, MetricsError) and "within 1.5 s" in str(raised), raised
    assert took < 15


@pytest.mark.parametrize("path, cap", [
    ("/endless", f"sent more than {MAX_BYTES // 2**20} MiB, the most a scrape reads"),
    ("/declared-huge", f"sent more than {MAX_BYTES // 2**20} MiB, the most a scrape reads"),
    ("/giant", f"sent a line longer than {MAX_LINE // 2**20} MiB, the longest a scrape accepts"),
    ("/million", f"serves more than {MAX_SERIES:,} samples, the most a scrape reads"),
])
def test_a_cap_stops_the_read_with_one_line_naming_the_url_and_the_cap(server, path, cap):
    url = f"{server}{path}"
    raised, took, peak = timed(lambda: scrape(url, "b1", timeout=60))
    assert isinstance(raised, ScrapeLimitExceeded), raised
    message = str(raised)
    assert message.startswith(f"The metrics endpoint {url} {cap}; the scrape stopped there: ")
    assert "\n" not in message and raised.context == {"url": url}
    assert took < 30  # today: an endless body reached 2.4 GB in 15 s
    assert peak < 3 * MAX_BYTES  # the body is never read past the cap


def test_small_caps_are_keyword_arguments(server):
    with pytest.raises(ScrapeLimitExceeded, match="serves more than 10 samples"):
        scrape(f"{server}/million", max_series=10)
    assert len(scrape(f"{server}/metrics", max_series=1)) == 1


def test_a_redirect_to_ftp_is_refused_and_nothing_connects(server, ftp):
    url = f"{server}/redirect/ftp"
    with pytest.raises(MetricsError) as info:
        scrape(url, timeout=5)
    assert str(info.value) == (
        f"The metrics endpoint {url} answered HTTP 302 redirecting to "
        f"'ftp://127.0.0.1:{ftp['port']}/etc/passwd', which is not followed: it is not an "
        f"http(s) URL. Give the exporter's own URL (http(s)://HOST:PORT/metrics).")
    time.sleep(0.5)  # time for a connection, had one been made, to be accepted
    assert ftp["connections"] == 0


@pytest.mark.parametrize("name, why", [
    ("other-host", "it leads to another host (localhost); only the same host is followed"),
    ("loop", "it redirects more than 3 times"),
    ("empty", "the redirect has no Location"),
])
def test_other_redirects_are_refused_naming_the_reason(server, name, why):
    with pytest.raises(MetricsError) as info:
        scrape(f"{server}/redirect/{name}", timeout=5)
    assert f"which is not followed: {why}." in str(info.value)


@pytest.mark.parametrize("name", ["same-host", "chain1"])
def test_up_to_three_redirects_on_the_same_host_are_followed(server, name):
    assert [s.user for s in scrape(f"{server}/redirect/{name}", "b1", timeout=5)] == ["u1"]


def test_a_refused_connection_names_its_reason():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(MetricsError) as info:
        fetch_text(f"http://127.0.0.1:{port}/metrics", timeout=2)
    assert "()" not in str(info.value) and "Connection refused" in str(info.value)


@pytest.mark.parametrize("url, problem", [
    ("http://[::1", "it does not parse (Invalid IPv6 URL)"),
    ("https://127.0.0.1:abc/", "it does not parse (Port could not be cast to integer value as 'abc')"),
    ("http://127.0.0.1%00:1/", "its host '127.0.0.1%00' is not a host name or address"),
    ("http://127.0.0.1:1/\x00", "it holds a space or a control character"),
    ("http://a b/", "it holds a space or a control character"),
    ("http://127.0.0.1:99999/", "it does not parse (Port out of range 0-65535)"),
    ("http://:80/", "it has no host"),
    ("http://h:/", "its port is empty"),
    ("ftp://h/", "it is not an http(s) URL"),
    ("http://u:secret@h:1/", "it holds credentials (user@ or user:password@), which must not be "
                             "on a command line"),
    ("http://hé:1/", "it holds non-ASCII characters (percent-encode them, give the host as "
                     "punycode)"),
    ("http://127.0.0.1:7071/metrics", None),
    ("https://[::1]:7071/metrics?x=%00", None),
])
def test_url_problem(url, problem):
    assert url_problem(url) == problem
    if problem:  # the scrape refuses it before any I/O, as a MetricsError naming it
        with pytest.raises(MetricsError):
            fetch_text(url)


# -- https: the TLS handshake is inside the deadline; a certificate that does not verify is named

def test_a_stalled_tls_handshake_stops_at_the_deadline():
    with socket.socket() as server:  # accepts, never sends a ServerHello
        server.bind(("127.0.0.1", 0))
        server.listen(4)
        url = f"https://127.0.0.1:{server.getsockname()[1]}/metrics"
        raised, took, _ = timed(lambda: fetch_text(url, timeout=1.0))
    assert isinstance(raised, MetricsError) and "did not answer within 1 s" in str(raised), raised
    assert took < 15


@pytest.fixture
def tls_server(tmp_path) -> Iterator[str]:
    import shutil
    import ssl
    import subprocess

    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hostile)
    httpd.daemon_threads = True
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"https://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_an_untrusted_certificate_is_one_clear_line(tls_server):
    url = f"{tls_server}/metrics"
    with pytest.raises(MetricsError) as info:
        fetch_text(url, timeout=10)
    message = str(info.value)
    assert message.startswith(f"Cannot reach the metrics endpoint {url} ([SSL: "
                              f"CERTIFICATE_VERIFY_FAILED] certificate verify failed")
    assert "\n" not in message


# -- the host name's lookup is inside the deadline; a followed redirect is said ----------------

def test_a_hanging_host_name_lookup_stops_at_the_deadline(monkeypatch):
    """A resolver that never answers (a fault no real endpoint can show on demand: the
    lookup is replaced, for this one name only) no longer holds the scrape past --timeout."""
    real, release = socket.getaddrinfo, threading.Event()

    def hanging(host, *args, **kwargs):
        if host == "slow-dns.invalid":
            release.wait(60)
            raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", hanging)
    url = "http://slow-dns.invalid:7071/metrics"
    try:
        raised, took, _ = timed(lambda: fetch_text(url, timeout=1.0))
    finally:
        release.set()
    assert isinstance(raised, MetricsError), raised
    assert str(raised) == (f"The metrics endpoint {url}: its host name slow-dns.invalid was "
                           f"not resolved within 1 s; check the name and the DNS server, or "
                           f"raise the timeout.")
    assert took < 15


@pytest.mark.parametrize("name", ["same-host", "chain1"])
def test_a_followed_redirect_names_where_the_metrics_were_read(server, name):
    seen: list[str] = []
    text = fetch_text(f"{server}/redirect/{name}", timeout=5, on_redirect=seen.append)
    assert "u1" in text and seen == [f"{server}/metrics"]
    seen.clear()
    fetch_text(f"{server}/metrics", timeout=5, on_redirect=seen.append)
    assert seen == []  # no redirect, nothing said


def test_the_cli_says_once_per_endpoint_that_it_followed_a_redirect(server, tmp_path):
    from quota_core import Entity

    from tests.cli_steps import run, sandbox_with

    store = sandbox_with(tmp_path / "q.sqlite", {Entity.of(user="u1", client_id="app"): {
        "producer_byte_rate": 1.0}})
    code, out, err = run("--sandbox", store, "--throttled", "--metrics",
                         f"b1={server}/redirect/chain1,b2={server}/metrics")
    assert code == 0, err
    assert err == (f"kafka-client-quotas: note: the metrics endpoint {server}/redirect/chain1 "
                   f"redirected to {server}/metrics; the metrics were read there (give that "
                   f"URL to skip the redirect)\n")
    _, plain_out, plain_err = run("--sandbox", store, "--throttled", "--metrics",
                                  f"b1={server}/metrics,b2={server}/metrics")
    assert plain_err == "" and plain_out == out  # the same metrics, only the note added


def test_collect_says_a_followed_redirect_once(server, tmp_path):
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    from quota_core import Entity

    from tests.cli_steps import sandbox_with

    store = sandbox_with(tmp_path / "q.sqlite", {Entity.of(user="u1"): {
        "producer_byte_rate": 1.0}})
    root = ROOT
    proc = subprocess.Popen(
        [sys.executable, "-m", "quota_core", "collect", "--sandbox", store, "--metrics",
         f"b1={server}/redirect/same-host", "--to", str(tmp_path / "out"), "--every", "0.2",
         "--status-every", "3600"],
        env={**os.environ, "PYTHONPATH": str(root)}, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True)
    try:
        lines = [proc.stderr.readline(), proc.stderr.readline()]  # the start line, the note
        time.sleep(1.5)  # several more scrapes through the same redirect
    finally:
        proc.send_signal(signal.SIGTERM)
        _, rest = proc.communicate(timeout=30)
    text = "".join(lines) + rest
    note = (f"collect: note: the metrics endpoint {server}/redirect/same-host redirected to "
            f"{server}/metrics; the metrics were read there")
    assert text.count(note) == 1, text
    assert proc.returncode == 0, text


def test_scrape_all_answers_for_every_endpoint_in_order(server):
    """The one "scrape every endpoint" loop: the series of those that answered (with their
    labels), each failure in endpoint order, and redirect notes naming the endpoint."""
    from quota_core.telemetry.collector import parse_endpoints
    from quota_core.telemetry.sweep import scrape_all

    endpoints = parse_endpoints(f"b1={server}/metrics,b2={server}/nothing,"
                                f"b3={server}/redirect/same-host,b4=http://127.0.0.1:9/m")
    heard: list = []
    series, errors = scrape_all(endpoints, 5, on_redirect=lambda *a: heard.append(("moved", *a)),
                                on_error=lambda e, exc: heard.append(("down", e.label)))
    assert sorted({s.broker for s in series}) == ["b1", "b3"]
    assert [(e.label, type(exc).__name__) for e, exc in errors] == [
        ("b2", "MetricsError"), ("b4", "MetricsError")]
    assert heard == [("down", "b2"), ("moved", f"{server}/redirect/same-host",
                                      f"{server}/metrics"), ("down", "b4")]


def test_the_cli_the_live_page_and_the_collector_share_the_scrape_step():
    """No interface writes its own loop over the endpoints: each calls telemetry.sweep."""
    import inspect

    from quota_core.cli import main, plan
    from quota_core.telemetry import collector
    from ui import live

    for module in (main, plan, live):
        source = inspect.getsource(module)
        assert "scrape_all(" in source and "telemetry import scrape\n" not in source, module
    assert "scrape_endpoint(" in inspect.getsource(collector._scrape_one)
