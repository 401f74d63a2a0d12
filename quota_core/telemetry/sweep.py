"""Scrape every endpoint once: the one loop the CLI (``--throttled``, ``--resolve``, ``plan``),
the Live page and the collector share.

:func:`scrape_endpoint` is one endpoint's step (its series, or the :class:`QuotaError` that
made it fail); :func:`scrape_all` runs it for each endpoint in turn. The collector runs the
step on a thread per endpoint instead, so a slow endpoint never delays the others.
"""
from __future__ import annotations

from typing import Callable, Protocol, Sequence

from ..errors import QuotaError
from .scrape import scrape as http_scrape
from .series import QuotaSeries

__all__ = ["scrape_endpoint", "scrape_all", "Swept"]


class Swept(list):
    """Every series of a sweep, and :attr:`brokers`: the node id of each endpoint that answered
    (its label when it exports none), so an endpoint with no buckets still counts as watched."""

    def __init__(self) -> None:
        super().__init__()
        self.brokers: list[str] = []
        #: URL → the broker's node id, for each endpoint that answered with one (and has no
        #: label of the user's): a feed remembers it to name the broker once it stops
        #: answering (quota_core.coverage.unread_brokers).
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
    from .client_reports import client_reports, telemetry_collected

    samples = getattr(answer, "client_samples", None) or ()
    if not samples:
        return
    series.telemetry = series.telemetry or telemetry_collected(samples)
    series.clients.extend(client_reports(samples, int(label) if label.isdigit() else -1))


def scrape_all(endpoints: Sequence[_Endpoint], timeout: float,
               on_redirect: Callable[[str, str], None] | None = None,
               on_error: Callable[[_Endpoint, QuotaError], None] | None = None
               ) -> tuple[Swept, list[tuple[_Endpoint, QuotaError]]]:
    """Every endpoint in turn: ``(the series of those that answered, [(endpoint, error)] for
    those that did not)``. ``on_error`` hears of each failure as it happens (so a CLI's lines
    keep the endpoints' order, redirect notes included)."""
    series = Swept()
    errors: list[tuple[_Endpoint, QuotaError]] = []
    for endpoint in endpoints:
        answer = scrape_endpoint(endpoint, timeout, on_redirect=on_redirect)
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
