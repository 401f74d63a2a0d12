"""The HTTP side of ``serve-metrics``: one scrape shared by concurrent requests, on threads,
with every connection timed out.

Why not ``prometheus_client.start_http_server``: it runs the whole scrape (the quota set, the
brokers' endpoints, the join, the lint rules, the text) once per request, and never times a
connection out. At 100,000 entries a scrape takes seconds; five clients that sent a request
and never read the answer pushed a normal scrape past 30 s (issue 32, finding 9). Here:

* **one scrape serves concurrent requests**: a request reuses the last result while it is at
  most :data:`CACHE_S` seconds old (the scrape's own ``quota_console_scrape_duration_seconds``
  and ``quota_console_quota_set_age_seconds`` are as of that scrape); a request that comes
  while a scrape is in flight waits for it and takes its result, rather than starting another;
* **threads**: a slow client holds only its own thread, never the scrape;
* **timeouts**: every read and write on a connection gives up after :data:`IO_TIMEOUT_S`
  seconds (an idle connection, a request that never ends, a client that never reads the
  answer), and at most :data:`MAX_CONNECTIONS` connections are served at once (more are
  closed at once).

The exposition text is ``prometheus_client``'s own (its encoder, chosen from the request's
``Accept`` header as its server does), rendered once per scrape and content type.
"""
from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Sequence
from urllib.parse import urlsplit

from quota_core.errors import BackendError

__all__ = ["CACHE_S", "IO_TIMEOUT_S", "MAX_CONNECTIONS", "MetricsServer", "serve"]

#: A scrape's result is served to every request for this many seconds after it was made.
CACHE_S = 5.0
#: A connection's read or write that makes no progress for this long ends the connection.
IO_TIMEOUT_S = 10.0
#: Connections served at once; more are closed without an answer.
MAX_CONNECTIONS = 64


class _Fixed:
    """A registry stand-in for ``prometheus_client``'s encoders: the families of one scrape."""

    def __init__(self, families: Sequence) -> None:
        self._families = families

    def collect(self):
        return iter(self._families)


class _Handler(BaseHTTPRequestHandler):
    server: "MetricsServer"
    protocol_version = "HTTP/1.0"  # one request per connection: no idle keep-alive to hold

    def setup(self) -> None:
        self.timeout = self.server.io_timeout  # StreamRequestHandler: settimeout on the socket
        super().setup()

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        if urlsplit(self.path).path not in ("/metrics", "/"):
            self.send_error(404, "serve-metrics serves /metrics only")
            return
        body, content_type = self.server.render(self.headers.get("Accept"))
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - quiet, as before
        pass


class MetricsServer(ThreadingHTTPServer):
    """``/metrics`` over ``scrape()`` (a list of metric families), cached for ``cache_s``."""

    daemon_threads = True
    request_queue_size = 64

    def __init__(self, address: tuple[str, int], scrape: Callable[[], Sequence], *,
                 cache_s: float | None = None, io_timeout: float | None = None,
                 max_connections: int | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._scrape, self.clock = scrape, clock
        self.cache_s = CACHE_S if cache_s is None else cache_s
        self.io_timeout = IO_TIMEOUT_S if io_timeout is None else io_timeout
        self.max_connections = MAX_CONNECTIONS if max_connections is None else max_connections
        self._lock = threading.Lock()  # held by the one scrape in flight; waiters reuse it
        self._families: Sequence | None = None
        self._made_at = 0.0
        self._texts: dict[str, bytes] = {}
        self._slots = threading.BoundedSemaphore(self.max_connections)
        self._open, self._count_lock = 0, threading.Lock()
        self.scrapes = 0  # how many scrapes ran (tests, and docs/monitoring.md's claim)
        self.address_family = _family(*address)
        super().__init__(address, _Handler)

    def render(self, accept: str | None) -> tuple[bytes, str]:
        """The exposition text for one request: the cached scrape's, or a new scrape's."""
        from prometheus_client.exposition import choose_encoder

        encoder, content_type = choose_encoder(accept or "")
        with self._lock:
            if self._families is None or self.clock() - self._made_at > self.cache_s:
                self._families, self._texts = self._scrape(), {}
                self._made_at = self.clock()
                self.scrapes += 1
            if content_type not in self._texts:
                self._texts[content_type] = encoder(_Fixed(self._families))
            return self._texts[content_type], content_type

    @property
    def open_connections(self) -> int:
        """Connections being served now (each on its thread)."""
        return self._open

    # A slot per connection: a flood of connections cannot start unbounded threads.
    def process_request(self, request, client_address) -> None:
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)
            return
        with self._count_lock:
            self._open += 1
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._release()
            raise

    def process_request_thread(self, request, client_address) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._release()

    def _release(self) -> None:
        with self._count_lock:
            self._open -= 1
        self._slots.release()

    def handle_error(self, request, client_address) -> None:
        pass  # a client that timed out or went away: nothing to report, nothing to fix


def _family(host: str, port: int):
    """The address family to listen with (as ``prometheus_client`` chooses it). ``host`` was
    checked by :func:`~quota_core.telemetry.exporter.parse_listen`: only a well-formed name
    is looked up."""
    import socket

    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    return infos[0][0]


def serve(scrape: Callable[[], Sequence], host: str, port: int, **options) -> MetricsServer:
    """Serve ``scrape`` on ``host:port`` (``/metrics``) on a daemon thread; returns the server
    (``.shutdown()`` then ``.server_close()`` stop it; ``.server_address`` is where it
    listens). An address that cannot be bound is a :class:`BackendError` naming it."""
    try:
        server = MetricsServer((host, port), scrape, **options)
    except (OSError, UnicodeError) as exc:
        raise BackendError(f"Cannot listen on {host}:{port} "
                           f"({getattr(exc, 'strerror', None) or exc}): give another address "
                           f"(HOST:PORT), or stop what holds it.",
                           listen=f"{host}:{port}") from None
    threading.Thread(target=server.serve_forever, name="serve-metrics", daemon=True).start()
    return server
