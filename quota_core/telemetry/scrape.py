"""Fetch a metrics endpoint's text: the only I/O in :mod:`quota_core.telemetry`.

An endpoint is untrusted input, so every read is bounded (issue 16):

* ``timeout`` bounds the **whole** scrape (the host name's lookup, connect, redirects,
  headers and body), not each read: a watchdog shuts the socket at the deadline, so an
  endpoint sending one byte a second stops there; the lookup runs on a thread of its own,
  waited for until the deadline (``getaddrinfo`` itself cannot be interrupted);
* the body is read in chunks with the caps applied while reading: at most
  :data:`MAX_BYTES`, no line longer than :data:`MAX_LINE`, at most :data:`MAX_SERIES`
  samples. Past a cap the read stops with one line naming the URL and the cap;
* only http(s), and redirects only to http(s) on the same host, at most
  :data:`MAX_REDIRECTS` (a ``302 Location: ftp://...`` is refused, naming why, before any
  connection is opened to it). A redirect that is followed is not silent: ``on_redirect``
  is called with the URL the metrics were read from (the CLI prints it once per endpoint).

:func:`url_problem` is the one check of an endpoint URL (also used by
:func:`quota_core.telemetry.collector.parse_endpoints`, where a bad URL is a usage error). Every
failure here is translated, by class, into :class:`~quota_core.errors.MetricsError` naming
the URL (:class:`~quota_core.errors.ScrapeLimitExceeded` for a cap).
"""
from __future__ import annotations

import http.client
import socket
import ssl
import threading
import time
from typing import Callable
from urllib.parse import SplitResult, urljoin, urlsplit

from quota_core.errors import MetricsError, ScrapeLimitExceeded
from quota_core.telemetry.parse import parse_metrics
from quota_core.telemetry.series import QuotaSeries

__all__ = ["MAX_BYTES", "MAX_LINE", "MAX_REDIRECTS", "MAX_SERIES", "fetch_text",
           "redirect_note", "scrape", "url_problem"]

#: The most a scrape reads: a broker with 100,000 quota buckets exports well under this.
MAX_BYTES = 64 * 2**20
#: The longest line accepted (a sample with long names is a few KiB at most).
MAX_LINE = 2**20
#: The most samples (non-comment lines) one endpoint may serve, every metric counted.
MAX_SERIES = 200_000
#: Redirects followed (http(s), same host only).
MAX_REDIRECTS = 3

_CHUNK = 1 << 16
# The classic text format; without it a Prometheus server may answer in OpenMetrics/protobuf.
_ACCEPT = "text/plain; version=0.0.4; charset=utf-8, */*; q=0.1"
_FIX = ("check that the broker runs the Prometheus JMX exporter agent on that host and port "
        "(`python -m localkafka status` prints a local broker's metrics URL)")
_REDIRECTS = (301, 302, 303, 307, 308)


def _size(n: int) -> str:
    return f"{n // 2**20} MiB" if n >= 2**20 and n % 2**20 == 0 else f"{n:,} bytes"


def url_problem(url: str) -> str | None:
    """Why ``url`` cannot be a metrics endpoint (``"it is not http(s)"``, ...), or None.

    Refused: anything but http(s); no host; a port that is not a number in 1-65535; spaces,
    control characters, non-ASCII text or a %-escape in the host; credentials
    (``user:password@``), which would put a secret on a command line.
    """
    if not isinstance(url, str) or not url:
        return "it is empty"
    if not url.isascii():
        return "it holds non-ASCII characters (percent-encode them, give the host as punycode)"
    if any(ord(ch) < 33 or ord(ch) == 127 for ch in url):
        return "it holds a space or a control character"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:  # "Invalid IPv6 URL", "Port could not be cast...", out of range
        return f"it does not parse ({exc})"
    if parts.scheme not in ("http", "https"):
        return "it is not an http(s) URL"
    if "@" in parts.netloc:
        return "it holds credentials (user@ or user:password@), which must not be on a command line"
    host = parts.hostname or ""
    if not host:
        return "it has no host"
    if "%" in host or any(ch in host for ch in "[]\\\"'<>^`{|}"):
        return f"its host {host!r} is not a host name or address"
    if port is not None and not 0 < port <= 65535:
        return f"its port {port} is not in 1-65535"
    if parts.netloc.endswith(":"):
        return "its port is empty"
    return None


def _checked(url: str) -> SplitResult:
    problem = url_problem(url)
    if problem is not None:
        if problem == "it is not an http(s) URL":
            raise MetricsError(f"{url!r} is not an http(s) URL: give the endpoint as "
                               "http://HOST:PORT/metrics.", url=url)
        raise MetricsError(f"The metrics endpoint {url!r} is not a usable URL: {problem}. Give "
                           "it as http://HOST:PORT/metrics.", url=url)
    return urlsplit(url)


class _Watchdog:
    """Shuts the connection's socket when the scrape's deadline passes, whatever read is
    blocked at that moment (a socket timeout bounds one read, not the whole scrape)."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.expired = False
        self.socks: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(max(0.0, deadline - time.monotonic()), self._expire)
        self._timer.daemon = True
        self._timer.start()

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self.socks:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def watch(self, sock: socket.socket) -> None:
        """Shut ``sock`` at the deadline (at once if it has passed already)."""
        with self._lock:
            self.socks.append(sock)
            expired = self.expired
        if expired:
            self._expire()

    def release(self) -> None:
        """Forget (and close) the sockets of a finished connection."""
        with self._lock:
            socks, self.socks = self.socks, []
        for sock in socks:
            sock.close()

    def left(self) -> float:
        """Seconds to the deadline (at least a millisecond: 0 would mean non-blocking)."""
        return max(0.001, self.deadline - time.monotonic())

    def cancel(self) -> None:
        self._timer.cancel()


class _Reader:
    """The body, chunk by chunk, with the caps checked as it arrives."""

    def __init__(self, url: str, max_bytes: int, max_line: int, max_series: int) -> None:
        self.url, self.max_bytes, self.max_line, self.max_series = url, max_bytes, max_line, max_series
        self.chunks: list[bytes] = []
        self.size = self.series = 0
        self.partial = b""

    def cap(self, what: str, fix: str) -> ScrapeLimitExceeded:
        return ScrapeLimitExceeded(f"The metrics endpoint {self.url} {what}; the scrape stopped "
                                   f"there: {fix}.", url=self.url)

    def too_large(self) -> ScrapeLimitExceeded:
        return self.cap(f"sent more than {_size(self.max_bytes)}, the most a scrape reads",
                        "point the scrape at an endpoint that exports only the quota metrics "
                        "(the JMX exporter's rules)")

    def feed(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self.size > self.max_bytes:
            raise self.too_large()
        self.chunks.append(chunk)
        lines = (self.partial + chunk).split(b"\n")
        self.partial = lines.pop()
        if len(self.partial) > self.max_line or any(len(ln) > self.max_line for ln in lines):
            raise self.cap(f"sent a line longer than {_size(self.max_line)}, the longest a "
                           f"scrape accepts", "it is not a Prometheus exporter")
        self.series += sum(1 for ln in lines if ln.strip() and not ln.lstrip().startswith(b"#"))
        if self.series > self.max_series:
            raise self.too_many()

    def too_many(self) -> ScrapeLimitExceeded:
        return self.cap(f"serves more than {self.max_series:,} samples, the most a scrape "
                        f"reads", "export only the quota metrics from it (the JMX exporter's "
                        "rules), or scrape fewer buckets")

    def body(self) -> bytes:
        """Everything read (the caps held); a last line without a newline counts too."""
        if self.partial.strip() and not self.partial.lstrip().startswith(b"#"):
            self.series += 1
            if self.series > self.max_series:
                raise self.too_many()
        return b"".join(self.chunks)


class _LookupTimeout(TimeoutError):
    """The host name's lookup did not finish before the scrape's deadline."""

    def __init__(self, host: str) -> None:
        super().__init__(host)
        self.host = host


def _resolve(host: str, port: int, watchdog: _Watchdog) -> list:
    """``getaddrinfo`` for ``host``, on a daemon thread, waited for until the deadline (a
    resolver that hangs would otherwise hold the scrape past ``timeout``)."""
    answer: dict = {}
    done = threading.Event()

    def lookup() -> None:
        try:
            answer["infos"] = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)
        except BaseException as exc:  # noqa: BLE001 - handed to the scraping thread
            answer["error"] = exc
        finally:
            done.set()

    threading.Thread(target=lookup, name=f"scrape-lookup-{host}", daemon=True).start()
    if not done.wait(watchdog.left()) or watchdog.expired:
        raise _LookupTimeout(host)
    if "error" in answer:
        raise answer["error"]
    return answer["infos"]


def _open_socket(host: str, port: int, watchdog: _Watchdog) -> socket.socket:
    """A TCP connection to the first of ``host``'s addresses that accepts, every step
    (lookup, each connect) inside the scrape's deadline."""
    last: OSError | None = None
    for family, kind, proto, _, address in _resolve(host, port, watchdog):
        sock = socket.socket(family, kind, proto)
        watchdog.watch(sock)
        try:
            sock.settimeout(watchdog.left())
            sock.connect(address)
            return sock
        except OSError as exc:
            last = exc
            if watchdog.expired:
                break
    raise last if last is not None else OSError(f"no address for {host}")


def _connect(parts: SplitResult, watchdog: _Watchdog) -> http.client.HTTPConnection:
    """A connection to ``parts``' host whose socket the watchdog shuts at the deadline, from
    the host name's lookup on: the TLS handshake (https) is bounded by the same deadline."""
    host, https = parts.hostname or "", parts.scheme == "https"
    port = parts.port or (443 if https else 80)
    raw = _open_socket(host, port, watchdog)
    sock = raw
    if https:  # wrap_socket takes the descriptor over; the watchdog's shutdown still reaches it
        watchdog.watch(raw.dup())
        sock = ssl.create_default_context().wrap_socket(raw, server_hostname=host)
    conn = (http.client.HTTPSConnection if https else http.client.HTTPConnection)(host, port)
    conn.sock = sock  # connected already: request() sends on it
    return conn


def _redirect_problem(origin: SplitResult, target: str) -> str | None:
    problem = url_problem(target)
    if problem is not None:
        return problem
    parts = urlsplit(target)
    if (parts.hostname or "").lower() != (origin.hostname or "").lower():
        return f"it leads to another host ({parts.hostname}); only the same host is followed"
    return None


def fetch_text(url: str, timeout: float = 5.0, *, max_bytes: int = MAX_BYTES,
               max_line: int = MAX_LINE, max_series: int = MAX_SERIES,
               on_redirect: Callable[[str], None] | None = None) -> str:
    """GET ``url`` (``http://HOST:PORT/metrics``) and return the body as text.

    Raises :class:`~quota_core.errors.MetricsError` when the URL is not http(s) (or not a
    URL), the endpoint cannot be reached, answers an HTTP error, redirects elsewhere than
    http(s) on the same host (or more than :data:`MAX_REDIRECTS` times), takes longer than
    ``timeout`` seconds in all, passes a cap (:class:`~quota_core.errors.ScrapeLimitExceeded`),
    or sends bytes that are not UTF-8. After a redirect was followed, ``on_redirect`` is
    called once with the URL the metrics were read from.
    """
    origin = _checked(url)
    watchdog = _Watchdog(time.monotonic() + timeout)
    answered = False
    try:
        current, parts = url, origin
        for hop in range(MAX_REDIRECTS + 1):
            conn = response = None
            try:
                conn = _connect(parts, watchdog)
                sock = conn.sock
                target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
                conn.request("GET", target, headers={"Accept": _ACCEPT,
                                                     "Accept-Encoding": "identity"})
                sock.settimeout(watchdog.left())
                response = conn.getresponse()  # (it may drop conn.sock; the file keeps it)
                answered = True
                if response.status in _REDIRECTS:
                    location = response.getheader("Location") or ""
                    nxt = urljoin(current, location.strip())
                    why = ("it redirects more than 3 times" if hop == MAX_REDIRECTS else
                           _redirect_problem(origin, nxt) if location.strip()
                           else "the redirect has no Location")
                    if why:
                        raise MetricsError(
                            f"The metrics endpoint {url} answered HTTP {response.status} "
                            f"redirecting to {nxt!r}, which is not followed: {why}. Give the "
                            f"exporter's own URL (http(s)://HOST:PORT/metrics).", url=url,
                            status=response.status)
                    current, parts = nxt, urlsplit(nxt)
                    continue
                if response.status >= 300 or response.status < 200:
                    raise MetricsError(f"The metrics endpoint {url} answered HTTP "
                                       f"{response.status} {response.reason}: use the "
                                       f"exporter's /metrics path.", url=url,
                                       status=response.status)
                reader = _Reader(url, max_bytes, max_line, max_series)
                length = response.getheader("Content-Length")
                if length and length.strip().isdigit() and int(length) > max_bytes:
                    raise reader.too_large()  # refused on the header alone, nothing read
                while True:
                    sock.settimeout(watchdog.left())
                    chunk = response.read1(_CHUNK)
                    if watchdog.expired:
                        raise TimeoutError
                    if not chunk:
                        break
                    reader.feed(chunk)
                body = reader.body()
                break
            finally:
                if conn is not None:
                    conn.close()
                if response is not None:
                    response.close()
                watchdog.release()
        else:  # pragma: no cover - the loop always breaks or raises
            raise AssertionError
    except MetricsError:
        raise
    except _LookupTimeout as exc:
        raise MetricsError(f"The metrics endpoint {url}: its host name {exc.host} was not "
                           f"resolved within {timeout:g} s; check the name and the DNS "
                           f"server, or raise the timeout.", url=url) from None
    except (TimeoutError, socket.timeout, OSError, http.client.HTTPException) as exc:
        if watchdog.expired or isinstance(exc, (TimeoutError, socket.timeout)):
            what = "did not finish sending its metrics" if answered else "did not answer"
            raise MetricsError(f"The metrics endpoint {url} {what} within {timeout:g} s; "
                               f"{_FIX}, or raise the timeout.", url=url) from None
        if isinstance(exc, OSError) and not answered:
            reason = str(exc) or type(exc).__name__
            raise MetricsError(f"Cannot reach the metrics endpoint {url} ({reason}): {_FIX}.",
                               url=url) from None
        reason = str(exc) or type(exc).__name__
        raise MetricsError(f"Cannot read the metrics endpoint {url} ({reason}): {_FIX}.",
                           url=url) from None
    except (ValueError, UnicodeError) as exc:  # a host the resolver refuses (idna), ...
        raise MetricsError(f"Cannot read the metrics endpoint {url} ({exc}): {_FIX}.",
                           url=url) from None
    finally:
        watchdog.cancel()
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MetricsError(f"The metrics endpoint {url} sent text that is not UTF-8 ({exc}): "
                           "it is not a Prometheus exporter.", url=url) from exc
    if current != url and on_redirect is not None:
        on_redirect(current)
    return text


def scrape(url: str, broker: str | None = None, timeout: float = 5.0, *,
           max_bytes: int = MAX_BYTES, max_line: int = MAX_LINE,
           max_series: int = MAX_SERIES,
           on_redirect: Callable[[str], None] | None = None) -> list[QuotaSeries]:
    """:func:`fetch_text` then :func:`~quota_core.telemetry.parse_metrics`, labelled ``broker``
    (default: the broker's node id when the endpoint exports it, else the URL's host:port);
    the caps and ``on_redirect`` are :func:`fetch_text`'s."""
    return parse_metrics(fetch_text(url, timeout, max_bytes=max_bytes, max_line=max_line,
                                    max_series=max_series, on_redirect=on_redirect),
                         broker or urlsplit(url).netloc or url, by_node_id=broker is None)


def redirect_note(url: str, final: str) -> str:
    """The one line a CLI prints when ``url``'s scrape followed a redirect to ``final``."""
    return (f"note: the metrics endpoint {url} redirected to {final}; the metrics were read "
            f"there (give that URL to skip the redirect)")
