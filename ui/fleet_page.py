"""The Fleet, Drift and cross-cluster Resolve views' Streamlit half: the registry, feeds and
audit logs each cluster's check reads (:mod:`ui.fleet` does the reading, off the script's
thread), and how the rows are drawn."""
from __future__ import annotations

import threading
from typing import Any, Iterator, Mapping

import streamlit as st

from quota_core.changes.audit import AuditLog
from quota_core.domain import ClusterConfig, Fleet

from ui.fleet import (FleetRow, check_cluster, cluster_spec, console_fleet, fleet_rows,
                      over_fleet)
from ui.registry import registry
from ui.settings import cache_ttl
from ui.text import md, md_frame

__all__ = ["page_fleet", "fleet_table_rows", "render_rows", "snapshots_of", "fleet_timeout",
           "promotion_source", "read_cluster_set", "PROMOTE_PARAM", "fleet_resolution",
           "promotion_preview_notes"]

#: Plan's query parameter naming the cluster whose quota set a promotion copies.
PROMOTE_PARAM = "from_cluster"


def page_fleet(ctx, env: Mapping[str, str], secrets: Mapping[str, Any]) -> Fleet:
    """The fleet a page shows: the one the sidebar read, else the configured one. A
    malformed file is its message on the page (never a traceback), and the page stops."""
    try:
        return ctx.fleet if ctx.fleet is not None else console_fleet(env, secrets)
    except Exception as exc:  # noqa: BLE001 - a malformed file: its message, not a traceback
        st.error(md(str(exc)), icon=":material/error:")
        st.stop()


def promotion_source(ctx) -> ClusterConfig | None:
    """The cluster a promotion copies (Plan's ``?from_cluster=NAME``, from the Drift page),
    or None for a plan from a file. Stops the page, saying why, when it names no other
    cluster of the fleet."""
    name = st.query_params.get(PROMOTE_PARAM)
    if name is None:
        return None
    if ctx.fleet is None or ctx.cluster is None:
        st.error(f"A promotion (?{PROMOTE_PARAM}={md(name)}) needs a fleet of clusters: "
                 f"none is configured, or the address names no cluster of it.",
                 icon=":material/error:")
        st.stop()
    names = ctx.fleet.names()
    if name not in names:
        st.error(md(f"The address promotes from cluster {name!r}, which is not in the fleet. "
                    f"Known clusters: {', '.join(names)}."), icon=":material/error:")
        st.stop()
    if name == ctx.cluster.name:
        st.error(md(f"A promotion copies one cluster's quotas to another: {name!r} is the "
                    f"cluster this plan is for. Pick another cluster in the sidebar."),
                 icon=":material/error:")
        st.stop()
    return ctx.fleet.clusters[name]


def read_cluster_set(cluster: ClusterConfig):
    """The cluster's quota set, described now (a promotion copies what it holds now)."""
    return registry().backend(cluster_spec(cluster)).describe()


def promotion_preview_notes(source: ClusterConfig, target: ClusterConfig, target_backend
                            ) -> list[str]:
    """What a promotion's preview must say (:func:`quota_core.planning.drift.promotion_notes`): the two
    clusters run different Kafka versions, or either runs a custom quota callback; and a
    cluster whose brokers' settings could not be read (its callback is then not known)."""
    from quota_core.planning import promotion_notes

    from ui.story import cluster_settings

    backends = {source.name: registry().backend(cluster_spec(source)),
                target.name: target_backend}
    versions, callbacks, notes = {}, {}, []
    for name, backend in backends.items():
        versions[name] = backend.broker_version()
        settings = cluster_settings(backend)
        callbacks[name] = dict(settings.callbacks)
        if backend.info().kind != "sandbox" and not settings.read:
            notes.append(f"Cluster {name!r}: whether it runs a custom quota callback is not "
                         f"known ({settings.source}).")
    return promotion_notes(source.name, target.name, versions, callbacks) + notes


def fleet_timeout(env: Mapping[str, str], secrets: Mapping[str, Any]) -> float:
    from ui.settings import kafka_timeout

    return kafka_timeout(env, secrets)


def _snapshot_reader(env, secrets, *, confirm: bool):
    """A worker-thread function: the cluster's snapshot from the process registry (opened
    and described once per TTL); with ``confirm``, a cached snapshot is backed by asking the
    cluster now, so a row never says "reachable" from memory."""
    reg, ttl = registry(), cache_ttl(env, secrets)

    def read(cluster: ClusterConfig):
        spec = cluster_spec(cluster)
        try:
            snap = reg.snapshot(spec, ttl)
            if confirm and snap.age_s > 1.0:
                reg.backend(spec).info()
        except Exception:
            reg.drop(spec)  # the next look opens a fresh connection
            raise
        return snap

    return read


def snapshots_of(clusters: list[ClusterConfig], env, secrets, timeout_s: float
                 ) -> Iterator[tuple[ClusterConfig, Any, str | None]]:
    """Every cluster's snapshot at once (Drift, Resolve on every cluster), as they answer."""
    reg = registry()
    for cluster, snap, error in over_fleet(clusters, _snapshot_reader(env, secrets,
                                                                      confirm=False),
                                           timeout_s):
        reg.record(cluster_spec(cluster), error)
        yield cluster, snap, error


def _feed(cluster: ClusterConfig, snap):
    from quota_core.throttling import endpoints_from_template

    from ui.live import feed_for

    text = cluster.metrics_arg
    info = snap.info
    if not text and cluster.metrics_template and info.node_ids:
        text = endpoints_from_template(cluster.metrics_template, info.node_ids, info.hosts)
    return feed_for(text) if text else None


#: Lint errors per cluster and described set: (name, id, loaded_at) -> count.
_LINTED: dict[tuple, int] = {}


def fleet_table_rows(fleet: Fleet, ctx, env, secrets, timeout_s: float) -> Iterator[FleetRow]:
    """The Fleet page's rows, as the clusters answer."""
    from quota_core.lint import LintInput, LintOptions, protected_from_config, run_lint

    from ui.story import cluster_settings

    reg = registry()
    read = _snapshot_reader(env, secrets, confirm=True)
    protected = protected_from_config(env, secrets)
    logs: dict[str, list] = {}
    lock = threading.Lock()

    class _Records:
        """One read of each audit log per page run, shared by the clusters that use it."""

        def __init__(self, path) -> None:
            self.path = str(path)

        def read(self):
            with lock:
                if self.path not in logs:
                    try:
                        logs[self.path] = AuditLog(self.path).read()
                    except Exception:  # noqa: BLE001 - an unreadable log: no last change
                        logs[self.path] = []
                return logs[self.path]

    def lint(cluster, snap, backend) -> int:
        # Once per described set (the brokers' settings are cached a minute on their own).
        key = (cluster.name, id(snap), snap.loaded_at)
        hit = _LINTED.get(key)
        if hit is not None:
            return hit
        report = run_lint(LintInput(snap.quotas, cluster.display_name,
                                    cluster_settings(backend), protected, None, None,
                                    LintOptions()))
        errors = sum(1 for f in report.findings if f.severity == "error")
        with lock:
            for old in [k for k in _LINTED if k[0] == cluster.name]:
                _LINTED.pop(old, None)
            _LINTED[key] = errors
        return errors

    snaps: dict[str, Any] = {}

    def snapshot(cluster):
        snaps[cluster.name] = read(cluster)
        return snaps[cluster.name]

    def check(cluster):
        return check_cluster(
            cluster, snapshot=snapshot,
            backend=lambda c: reg.backend(cluster_spec(c)),
            feed=lambda c: _feed(c, snaps[c.name]),
            audit=lambda c: _Records(c.audit_log or ctx.audit.path),
            lint=lint)

    def health(cluster, error):
        spec = cluster_spec(cluster)
        reg.record(spec, error)
        return reg.health(spec)

    yield from fleet_rows(list(fleet), check, health, timeout_s)


def _pending(cluster: ClusterConfig) -> dict[str, Any]:
    return {"cluster": cluster.name, "label": cluster.display_name,
            "where": ", ".join(cluster.location.split(",")), "state": "checking…", "brokers": "",
            "quota entries": "", "throttled now": "", "lint errors": "",
            "last change": "", "by": "", "read-only": "yes" if cluster.read_only else "",
            "why": ""}


def render_rows(slot, fleet: Fleet, rows: dict[str, FleetRow]) -> None:
    """The table in file order: a cluster not answered yet says "checking…"."""
    import pandas as pd

    data = [rows[c.name].as_dict() if c.name in rows else _pending(c) for c in fleet]
    frame = pd.DataFrame(data)

    def tone(row):
        state = str(row["state"])
        color = ("background-color: #fde2e1" if state.startswith("unreachable") else
                 "background-color: #e6f4ea" if state.startswith("reachable") else "")
        return [color if col == "state" else "" for col in row.index]

    # A static table (a fleet is tens of rows): readable at a glance; md_frame keeps its
    # text text (st.table renders markdown in cells).
    slot.table(md_frame(frame).style.apply(tone, axis=1).hide(axis="index"))


#: Clusters that just failed to answer: a keystroke on Resolve does not wait for them again.
_FAILED: dict[str, tuple[float, str]] = {}
_FAILED_LOCK = threading.Lock()
_FAILED_KEEP_S = 15.0


def _remembered_failure(cluster: ClusterConfig) -> str | None:
    import time

    with _FAILED_LOCK:
        hit = _FAILED.get(cluster.name)
    if hit is not None and time.monotonic() - hit[0] < _FAILED_KEEP_S:
        return hit[1]
    return None


def fleet_resolution(fleet: Fleet, query: Mapping[str, str], env, secrets,
                     timeout_s: float) -> tuple[list[dict[str, str]], list[str]]:
    """Resolve one client on every cluster: one row per cluster (in the fleet's order), each
    key's winning value and the entry that sets it, or why the cluster could not be read; and
    the keys whose effective value differs between the clusters that answered."""
    import time

    from quota_core import resolve, resolve_ip

    from ui.fleet import winner_text
    from ui.render import KEY_ORDER

    reg, rows, values = registry(), {}, {}
    ask = []
    for cluster in fleet:
        failed = _remembered_failure(cluster)
        if failed is not None:
            rows[cluster.name] = {"cluster": cluster.display_name,
                                  "state": f"unreachable: {failed}"}
        else:
            ask.append(cluster)
    for cluster, snap, error in over_fleet(ask, _snapshot_reader(env, secrets, confirm=False),
                                           timeout_s):
        reg.record(cluster_spec(cluster), error)
        if error is not None:
            with _FAILED_LOCK:
                _FAILED[cluster.name] = (time.monotonic(), error)
            rows[cluster.name] = {"cluster": cluster.display_name,
                                  "state": f"unreachable: {error}"}
            continue
        if query.get("ip"):
            res = resolve_ip(snap.quotas, query["ip"])
        else:
            res = resolve(snap.quotas, query.get("user") or None, query.get("client_id") or None)
        row = {"cluster": cluster.display_name, "state": f"{len(snap.quotas):,} entries"}
        for key in KEY_ORDER:
            if key in res.keys:
                row[key] = winner_text(res.keys[key])
                values.setdefault(key, set()).add(res.keys[key].value)
        rows[cluster.name] = row
    differ = [k for k in KEY_ORDER if len(values.get(k, ())) > 1]
    return [rows[c.name] for c in fleet if c.name in rows], differ
