"""Fetch a metrics endpoint's text: the only I/O in :mod:`quota_core.metrics`.

urllib (no extra dependency), every wait bounded by ``timeout``, and every failure
translated here, by class, into :class:`~quota_core.errors.MetricsError` naming the URL.
"""
from __future__ import annotations

import socket
import urllib.error
import urllib.request
from urllib.parse import urlsplit

from ..errors import MetricsError
from .parse import parse_metrics
from .series import QuotaSeries

__all__ = ["fetch_text", "scrape"]

# The classic text format; without it a Prometheus server may answer in OpenMetrics/protobuf.
_ACCEPT = "text/plain; version=0.0.4; charset=utf-8, */*; q=0.1"
_FIX = ("check that the broker runs the Prometheus JMX exporter agent on that host and port "
        "(`python -m localkafka status` prints a local broker's metrics URL)")


def fetch_text(url: str, timeout: float = 5.0) -> str:
    """GET ``url`` (``http://HOST:PORT/metrics``) and return the body as text.

    Raises :class:`~quota_core.errors.MetricsError` when the URL is not http(s), the
    endpoint cannot be reached, answers an HTTP error, is slower than ``timeout`` seconds,
    or sends bytes that are not UTF-8.
    """
    if urlsplit(url).scheme not in ("http", "https"):
        raise MetricsError(f"{url!r} is not an http(s) URL: give the endpoint as "
                           "http://HOST:PORT/metrics.", url=url)
    request = urllib.request.Request(url, headers={"Accept": _ACCEPT})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - scheme checked
            body: bytes = response.read()
    except urllib.error.HTTPError as exc:  # before URLError: it is one
        raise MetricsError(f"The metrics endpoint {url} answered HTTP {exc.code} {exc.reason}: "
                           "use the exporter's /metrics path.", url=url, status=exc.code) from exc
    except (TimeoutError, socket.timeout) as exc:
        raise MetricsError(f"The metrics endpoint {url} did not answer within {timeout:g} s; "
                           f"{_FIX}, or raise the timeout.", url=url) from exc
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, (TimeoutError, socket.timeout)):
            raise MetricsError(f"The metrics endpoint {url} did not answer within {timeout:g} s; "
                               f"{_FIX}, or raise the timeout.", url=url) from exc
        raise MetricsError(f"Cannot reach the metrics endpoint {url} ({exc.reason}): {_FIX}.",
                           url=url) from exc
    except (OSError, ValueError) as exc:  # reset mid-read, a malformed host or port
        raise MetricsError(f"Cannot read the metrics endpoint {url} ({exc}): {_FIX}.", url=url) from exc
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MetricsError(f"The metrics endpoint {url} sent text that is not UTF-8 ({exc}): "
                           "it is not a Prometheus exporter.", url=url) from exc


def scrape(url: str, broker: str | None = None, timeout: float = 5.0) -> list[QuotaSeries]:
    """:func:`fetch_text` then :func:`~quota_core.metrics.parse_metrics`, labelled ``broker`` (default: the URL)."""
    return parse_metrics(fetch_text(url, timeout), broker or url)
