"""The dashboard over a fleet of clusters (issue 29): which cluster a run shows, and what the
Fleet, Drift and cross-cluster Resolve views read from every cluster at once.

The fleet itself is :mod:`quota_core.domain.fleet` (a ``QUOTA_CONFIG`` file or ``[clusters.*]`` in
``.streamlit/secrets.toml``, read by :func:`quota_core.backends.fleet_config.load_fleet`).
Without either, the console keeps today's single connection (:func:`ui.settings.connections`).

Each cluster is a :class:`~ui.settings.ConnectionSpec` carrying its fleet name, so the
process-wide registry (:mod:`ui.registry`) keeps one connection, one snapshot and one health
record per cluster. Reading many clusters is concurrent (a thread pool) and each is bounded
by a timeout: a dead cluster is a row that says so, never a page that waits for it.
"""
from __future__ import annotations

import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterator, Mapping

from quota_core.backends.fleet_config import CONFIG_ENV, load_fleet
from quota_core.errors import QuotaError
from quota_core.domain import ClusterConfig, Fleet, read_only_refused

from ui.settings import AccessPolicy, ConnectionSpec

__all__ = ["CLUSTER_PARAM", "fleet_configured", "console_fleet", "cluster_spec", "pick_cluster",
           "unknown_cluster", "read_only_refusal", "cluster_policy", "FleetRow",
           "check_cluster", "fleet_rows", "over_fleet", "clock", "error_text", "winner_text"]

#: The query parameter that names the cluster a page shows (``?cluster=NAME``).
CLUSTER_PARAM = "cluster"


def fleet_configured(env: Mapping[str, str], secrets: Mapping[str, Any]) -> bool:
    """Whether a fleet is configured (``QUOTA_CONFIG``, or ``[clusters.*]`` in secrets);
    otherwise the console keeps today's single connection and its "Use" choice."""
    return bool(env.get(CONFIG_ENV)) or (isinstance(secrets, Mapping)
                                         and secrets.get("clusters") is not None)


def console_fleet(env: Mapping[str, str], secrets: Mapping[str, Any]) -> Fleet:
    """The configured fleet (:func:`load_fleet`); a :class:`QuotaError` (a usage error naming
    the line or key) when its file is malformed."""
    return load_fleet(env=env, secrets=secrets)


def cluster_spec(cluster: ClusterConfig) -> ConnectionSpec:
    """The connection of one cluster of the fleet, keyed by its name (its own connection)."""
    return ConnectionSpec(
        cluster.kind, cluster.display_name, "fleet",
        bootstrap_servers=cluster.bootstrap_servers, command_config=cluster.command_config,
        properties=tuple(sorted((str(k), str(v)) for k, v in cluster.properties.items())),
        sandbox_path=cluster.sandbox, cluster=cluster.name)


def unknown_cluster(asked: str, names: list[str]) -> str:
    """The error for an address whose ``?cluster=`` names no cluster of the fleet."""
    known = ", ".join(names) if names else "none"
    return (f"The address names cluster {asked!r} (?cluster={asked}), which is not in the "
            f"fleet. Known clusters: {known}. Pick one in the sidebar.")


def read_only_refusal(cluster: str) -> str:
    """The one line that refuses a write to a ``read_only = true`` cluster: the CLI's
    sentence (:func:`quota_core.domain.read_only_refused`), one definition."""
    return read_only_refused(cluster, "the fleet's configuration")


def pick_cluster(names: list[str], asked: str | None, remembered: str | None
                 ) -> tuple[str | None, str | None]:
    """Which cluster this run shows, and the error when there is none to show.

    The address wins (a pasted link opens the same view); an address naming no cluster of
    the fleet shows nothing but the error (never another cluster's data). Without
    ``?cluster=``, the one this session picked last, else the fleet's first."""
    if asked is not None:
        if asked in names:
            return asked, None
        return None, unknown_cluster(asked, names)
    if remembered in names:
        return remembered, None
    return (names[0] if names else None), None


def cluster_policy(policy: AccessPolicy, cluster: ClusterConfig) -> AccessPolicy:
    """The console's access policy for this cluster: its own ``editors`` when it has them."""
    if cluster.editors is None:
        return policy
    return replace(policy, editors=frozenset(cluster.editors))


def clock(t: float | None) -> str:
    return "—" if t is None else time.strftime("%H:%M:%S", time.localtime(t))


def error_text(exc: BaseException) -> str:
    return str(exc) if isinstance(exc, QuotaError) else f"{type(exc).__name__}: {exc}"


# -- reading every cluster at once ---------------------------------------------------------
def over_fleet(clusters: list[ClusterConfig], work: Callable[[ClusterConfig], Any],
               timeout_s: float) -> Iterator[tuple[ClusterConfig, Any, str | None]]:
    """``work(cluster)`` on every cluster at once, yielding ``(cluster, result, None)`` as each
    answers and ``(cluster, None, why)`` for each that failed or did not answer within
    ``timeout_s`` (counted from the start: the whole fleet costs one timeout, not one per dead
    cluster). A thread still waiting on a dead cluster is left behind, never waited for."""
    if not clusters:
        return
    pool = ThreadPoolExecutor(max_workers=min(32, len(clusters)),
                              thread_name_prefix="quota-fleet")
    futures = {pool.submit(work, c): c for c in clusters}
    deadline = time.monotonic() + timeout_s
    pending = set(futures)
    try:
        while pending:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            done, pending = wait(pending, timeout=left, return_when=FIRST_COMPLETED)
            for fut in done:
                exc = fut.exception()
                if exc is None:
                    yield futures[fut], fut.result(), None
                else:
                    yield futures[fut], None, error_text(exc)
        for fut in sorted(pending, key=lambda f: futures[f].name):
            yield futures[fut], None, f"no answer within {timeout_s:g} s"
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def _count(n: int | None) -> str:
    return "—" if n is None else f"{n:,}"


@dataclass(frozen=True)
class FleetRow:
    """One row of the Fleet page: what one cluster answered (or why it did not)."""

    name: str
    label: str
    location: str
    read_only: bool
    reachable: bool
    #: Since when it answers (reachable) or has not answered (unreachable); None: unknown.
    since: float | None
    brokers: int | None = None
    entries: int | None = None
    #: "3", "0", or "unknown (why)": never a false all-clear.
    throttled: str = "unknown"
    lint_errors: int | None = None
    last_change: str | None = None
    last_by: str | None = None
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        state = "reachable" if self.reachable else "unreachable"
        return {"cluster": self.name, "label": self.label,
                "where": ", ".join(self.location.split(",")),
                "state": f"{state} since {clock(self.since)}" if self.since else state,
                "brokers": _count(self.brokers), "quota entries": _count(self.entries),
                "throttled now": self.throttled if self.reachable else "—",
                "lint errors": _count(self.lint_errors),
                "last change": self.last_change or "—", "by": self.last_by or "—",
                "read-only": "yes" if self.read_only else "",
                "why": self.error or ""}


@dataclass(frozen=True)
class ClusterFacts:
    """What one cluster's check read (a worker thread's result)."""

    brokers: int | None
    entries: int
    throttled: str
    lint_errors: int | None
    last_change: str | None
    last_by: str | None


def throttled_count(frame, quotas) -> str:
    """Buckets throttled now in one scrape round, or ``unknown (why)`` when the round does
    not hold every broker (no all-clear from part of the cluster)."""
    if frame is None:
        return "unknown (no scrape yet)"
    if not frame.complete:
        return f"unknown ({len(frame.down)} of the metrics endpoints not read)"
    from quota_core.throttling import join_usage

    return str(sum(1 for r in join_usage(frame.series, quotas) if r.throttled))


def last_change(audit, cluster: ClusterConfig, store: Mapping | None) -> tuple[str | None,
                                                                             str | None]:
    """The newest audit record of this cluster (its ``"cluster"`` name, else the same store),
    as ``(when, who)``."""
    if audit is None:
        return None, None
    from quota_core.changes.audit import same_store

    for record in reversed(audit.read()):
        recorded = record.cluster if isinstance(record.cluster, Mapping) else {}
        if recorded.get("name") == cluster.name or (store and same_store(recorded, store)):
            return record.ts, record.actor
    return None, None


def check_cluster(cluster: ClusterConfig, *, snapshot: Callable, backend: Callable,
                  feed: Callable, audit: Callable, lint: Callable) -> ClusterFacts:
    """Read one cluster for its row: its described set (the registry's snapshot), its brokers,
    buckets throttled now (its metrics feed), lint errors and its last audited change. Runs in
    a worker thread: everything it needs is passed in (no Streamlit call here)."""
    from quota_core.changes.audit import cluster_fields

    snap = snapshot(cluster)
    live = feed(cluster)
    if live is None:
        throttled = "unknown (no metrics configured)"
    else:
        throttled = throttled_count(live.latest(wait_s=3.0), snap.quotas)
    try:
        errors = lint(cluster, snap, backend(cluster))
    except QuotaError:
        errors = None
    when, who = last_change(audit(cluster), cluster,
                            cluster_fields(snap.info, cluster.display_name))
    return ClusterFacts(snap.info.broker_count, len(snap.quotas), throttled, errors, when, who)


def fleet_rows(clusters: list[ClusterConfig], check: Callable[[ClusterConfig], ClusterFacts],
               health: Callable[[ClusterConfig, str | None], Any], timeout_s: float
               ) -> Iterator[FleetRow]:
    """The Fleet page's rows as the clusters answer (see :func:`over_fleet`); ``health``
    records the answer and returns the cluster's :class:`ui.registry.Health`."""
    for cluster, facts, error in over_fleet(clusters, check, timeout_s):
        h = health(cluster, error)
        base = dict(name=cluster.name, label=cluster.display_name, location=cluster.location,
                    read_only=cluster.read_only)
        if error is not None:
            yield FleetRow(**base, reachable=False, since=h.failing_since, error=error)
        else:
            yield FleetRow(**base, reachable=True, since=h.up_since, brokers=facts.brokers,
                           entries=facts.entries, throttled=facts.throttled,
                           lint_errors=facts.lint_errors, last_change=facts.last_change,
                           last_by=facts.last_by)


def winner_text(kr) -> str:
    """One key's answer on one cluster: ``1 MiB/s — {user=alice} (level 2)``, or
    ``unlimited — no entry sets it``."""
    from quota_core.domain import format_quota

    if kr.source is None:
        return f"{format_quota(kr.key, kr.value)} (no entry)"
    return f"{format_quota(kr.key, kr.value)} — {kr.source.display()} (level {kr.level})"
