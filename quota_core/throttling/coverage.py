"""Which brokers the console watches: each enforces quotas on its own, so a broker without a
metrics endpoint is a broker whose throttling nobody sees. Pure: node ids in, sentences out.

Also the endpoint template (``--metrics-template 'http://{host}:7071/metrics'``): one line
for a cluster of fifty brokers, filled in from the cluster's own broker list.
"""
from __future__ import annotations

import string
from urllib.parse import urlsplit
from collections.abc import Iterable, Sequence

from quota_core.errors import ParseError

__all__ = ["TEMPLATE_FIELDS", "check_endpoint_flags", "check_template", "endpoint_address",
           "endpoints_from_template", "unread_brokers", "unwatched", "unwatched_sentence"]

#: The placeholders a metrics template may use: the broker's advertised host, its node id.
TEMPLATE_FIELDS = ("host", "id")


def endpoint_address(url: str) -> str:
    """How an endpoint that cannot be read is named: its URL's ``host:port`` (it has no node
    id then; docs/interfaces.md, "Labels and shapes")."""
    parts = urlsplit(url)
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    return f"{parts.hostname}:{port}" if parts.hostname else url


def unwatched(cluster: Sequence[str], answered: Iterable[str]) -> list[str]:
    """The cluster's node ids that no answering endpoint covers, in the cluster's order."""
    seen = set(answered)
    return [node for node in cluster if node not in seen]


def unread_brokers(cluster: Sequence[str], answered: Iterable[str],
                   failed: Sequence[tuple[str, str | None]]) -> tuple[str, ...]:
    """Every broker whose figures are unknown, each once: by node id where it is known, by
    ``host:port`` otherwise (docs/interfaces.md, "Live verdicts").

    ``cluster`` the node ids the cluster lists (empty for a sandbox); ``answered`` the node ids
    (or labels) of the endpoints that answered; ``failed`` each endpoint that did not, as
    ``(host:port, node id or None)``: the node id is known when the endpoint answered before
    (the live feed remembers it). A failed endpoint with no known node id is one of the
    brokers no answering endpoint covers when their numbers match (every broker has one
    endpoint, and those that failed are the brokers not covered): the broker is then named
    once, by its node id; otherwise it keeps its ``host:port``."""
    answered = set(answered)
    known = [node for _, node in failed if node]
    missing = [n for n in cluster if n not in answered and n not in known]
    anonymous = [address for address, node in failed if not node]
    labels = [*known, *missing]
    if len(anonymous) != len(missing):
        labels += anonymous
    return tuple(sorted(dict.fromkeys(labels),
                        key=lambda b: (0, int(b), "") if b.isdigit() else (1, 0, b)))


def unwatched_sentence(node_id: str, failed: Sequence[str] = ()) -> str:
    """Why a broker's figures are missing. With endpoints that failed, one of them may be it
    (an endpoint that cannot be read has no node id), so the sentence says so."""
    if failed:
        return (f"broker {node_id}: no metrics endpoint answered for it (not answering: "
                f"{', '.join(failed)}): its throttling is not visible")
    return f"broker {node_id}: no metrics endpoint given: its throttling is not visible"


def check_template(template: str) -> None:
    """Refuse a malformed template (a usage error: :class:`ParseError`), before connecting."""
    try:
        fields = [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]
    except ValueError as exc:
        raise ParseError(f"--metrics-template {template!r}: {exc}; write placeholders as "
                         "{host} and {id}, e.g. http://{host}:7071/metrics.") from None
    odd = [name for name in fields if name not in TEMPLATE_FIELDS]
    if odd or not fields:
        what = f"has {{{odd[0]}}}" if odd else "has no placeholder"
        raise ParseError(f"--metrics-template {template!r} {what}: use {{host}} (a broker's "
                         "advertised host) and/or {id} (its node id), e.g. "
                         "http://{host}:7071/metrics.")
    if not template.startswith(("http://", "https://")):
        raise ParseError(f"--metrics-template {template!r}: give an http(s) URL such as "
                         "http://{host}:7071/metrics.")


def check_endpoint_flags(metrics: str | None, template: str | None,
                         bootstrap_server: str | None) -> None:
    """The flags every command with endpoints shares (the main command, ``collect``,
    ``serve-metrics``): one of ``--metrics`` / ``--metrics-template``, and a template only with
    a cluster to fill it in from. A :class:`ParseError` (a usage error) before connecting."""
    if metrics and template:
        raise ParseError("--metrics and --metrics-template name the same endpoints: give one.")
    if template:
        if not bootstrap_server:
            raise ParseError("--metrics-template needs --bootstrap-server: the cluster lists the "
                             "brokers the template is filled in for.")
        check_template(template)


def endpoints_from_template(template: str, node_ids: Sequence[str], hosts: Sequence[str]) -> str:
    """``URL[,URL...]`` (the ``--metrics`` form): the template filled in for every broker.
    A malformed template is a :class:`ParseError` naming it and the placeholders it may use."""
    check_template(template)
    return ",".join(template.format(host=f"[{host}]" if ":" in host else host, id=node)
                    for node, host in zip(node_ids, hosts))
