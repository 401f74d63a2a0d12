"""Scrape every endpoint once: the one loop the CLI (``--throttled``, ``--resolve``, ``plan``),
the Live page and the collector share.

:func:`scrape_endpoint` is one endpoint's step (its series, or the :class:`QuotaError` that
made it fail); :func:`scrape_all` runs it for every endpoint at once, at most
:data:`MAX_PARALLEL` at a time, so a sweep of many endpoints with some dead costs about one
``timeout`` rather than one per dead endpoint (issue 29: 50 dead endpoints at 5 s each were
250 s one after the other). What it reports (series, errors, redirect notes) keeps the
endpoints' order. The collector runs the same step on the same bounded pool, one round
after another.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Protocol, Sequence

from quota_core.errors import QuotaError
from quota_core.telemetry.scrape import scrape as http_scrape
from quota_core.telemetry.series import QuotaSeries

__all__ = ["scrape_endpoint", "scrape_all", "Swept", "MAX_PARALLEL", "sweep_pool"]

#: The most endpoints scraped at the same time. A scrape is a blocking socket read, so threads
#: (not processes) fit; 64 covers a large cluster's brokers in one round, and bounds the
#: threads (and sockets) a fleet of hundreds of endpoints opens at once.
MAX_PARALLEL = 64


def sweep_pool(n: int, max_parallel: int = MAX_PARALLEL) -> ThreadPoolExecutor:
    """The bounded pool a sweep of ``n`` endpoints runs on (its threads named
    ``sweep-N``)."""
    return ThreadPoolExecutor(max_workers=max(1, min(max_parallel, n)),
                              thread_name_prefix="sweep")


class Swept(list):
    """Every series of a sweep, and :attr:`brokers`: the node id of each endpoint that answered
    (its label when it exports none), so an endpoint with no buckets still counts as watched."""

    def __init__(self) -> None:
        super().__init__()
        self.brokers: list[str] = []
        #: URL → the broker's node id, for each endpoint that answered with one (and has no
        #: label of the user's): a feed remembers it to name the broker once it stops
        #: answering (quota_core.throttling.coverage.unread_brokers).
        self.node_of: dict[str, str] = {}
        #: What the clients pushed (KIP-714), one report per client instance and endpoint
        #: (:func:`quota_core.telemetry.client_reports.client_reports`).
        self.clients: list = []
        #: Whether any endpoint that answered carries the client-telemetry plugin's series.
        self.telemetry: bool = False


class _Endpoint(Protocol):  # telemetry.collector.Endpoint
    label: str
    url: str
    named: bool


def scrape_endpoint(endpoint: _Endpoint, timeout: float, *,
                    on_redirect: Callable[[str, str], None] | None = None,
                    scrape: Callable[..., list] | None = None) -> list[QuotaSeries] | QuotaError:
    """``endpoint``'s series, labelled with its label (one the user gave), else with the
    broker's node id (the scrape reads it from the endpoint), or the error that made it fail.
    ``on_redirect(url, final)`` hears of a followed redirect; ``scrape`` replaces the HTTP
    scrape (the collector's is injected)."""
    extra = {} if on_redirect is None else {
        "on_redirect": lambda final: on_redirect(endpoint.url, final)}
    try:
        label = endpoint.label if endpoint.named else None
        return (scrape or http_scrape)(endpoint.url, label, timeout=timeout, **extra)
    except QuotaError as exc:
        return exc


def _add_clients(series: Swept, answer, label: str) -> None:
    """The client reports of one endpoint's answer, labelled with its broker's node id (-1
    when the endpoint names none)."""
    from quota_core.telemetry.client_reports import client_reports, telemetry_collected

    samples = getattr(answer, "client_samples", None) or ()
    if not samples:
        return
    series.telemetry = series.telemetry or telemetry_collected(samples)
    series.clients.extend(client_reports(samples, int(label) if label.isdigit() else -1))


def scrape_all(endpoints: Sequence[_Endpoint], timeout: float,
               on_redirect: Callable[[str, str], None] | None = None,
               on_error: Callable[[_Endpoint, QuotaError], None] | None = None,
               max_parallel: int = MAX_PARALLEL
               ) -> tuple[Swept, list[tuple[_Endpoint, QuotaError]]]:
    """Every endpoint at once (at most ``max_parallel`` at a time), each bounded by
    ``timeout``: ``(the series of those that answered, [(endpoint, error)] for those that
    did not)``, in the endpoints' order. ``on_redirect`` and ``on_error`` hear of each
    redirect and failure in that order too, once the sweep is done (so a CLI's lines keep
    the endpoints' order, redirect notes included, whichever answered first)."""
    def one(endpoint: _Endpoint) -> tuple[list, list | QuotaError]:
        moved: list[tuple[str, str]] = []
        answer = scrape_endpoint(endpoint, timeout, on_redirect=None if on_redirect is None
                                 else lambda url, final: moved.append((url, final)))
        return moved, answer

    endpoints = list(endpoints)
    if len(endpoints) <= 1:
        answers = [one(e) for e in endpoints]
    else:
        with sweep_pool(len(endpoints), max_parallel) as pool:
            answers = list(pool.map(one, endpoints))
    series = Swept()
    errors: list[tuple[_Endpoint, QuotaError]] = []
    for endpoint, (moved, answer) in zip(endpoints, answers):
        for url, final in moved:
            on_redirect(url, final)  # type: ignore[misc] - moved is empty without it
        if isinstance(answer, QuotaError):
            errors.append((endpoint, answer))
            if on_error is not None:
                on_error(endpoint, answer)
        else:
            series.extend(answer)
            node = getattr(answer, "node_id", None)
            series.brokers.append(node or endpoint.label)
            if node and not endpoint.named:
                series.node_of[endpoint.url] = node
            _add_clients(series, answer, node or endpoint.label)
    return series, errors
