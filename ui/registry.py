"""The process-wide registry: open backends and their latest described snapshot, per
connection (``st.cache_resource``), and how fresh that snapshot is.
"""
from __future__ import annotations

import gc
import threading
import time
from dataclasses import dataclass, replace
from typing import Any
import streamlit as st

from quota_core.domain import ClusterInfo, QuotaSet
from quota_core.backends.base import QuotaBackend
from ui.browse import ALL_KEYS, quota_frame
from quota_core.backends.open import open_backend
from quota_core.errors import QuotaError
from quota_core.planning import clients_from_entries
from quota_core.throttling import broker_order
from ui.membership import SharedMembership
from ui.settings import ConnectionSpec
from quota_core.backends.locked import LockedBackend

__all__ = ["Snapshot", "Health", "stale_notice", "Registry", "registry"]


def _keep_out_of_gc(collect: bool = False) -> None:
    """Move every object alive now (the described set, its frame, the per-snapshot caches)
    out of reach of Python's cyclic garbage collector.

    Streamlit runs a full ``gc.collect()`` after every script run (``runner.postScriptGC``),
    holding the GIL: it walks every tracked object, and 100,000 entries (Entity objects and
    the caches built from them) made that 0.1–0.8 s per rerun on a busy 2-core machine, a
    pause the browser waits through before the page settles. ``gc.freeze()`` parks them in
    the permanent generation (reference counting still frees them); :meth:`Registry.snapshot`
    unfreezes before the next describe, so a replaced snapshot's cycles are collected then.
    """
    if collect:
        gc.collect()
    gc.freeze()


@dataclass
class Snapshot:
    """One describe of the whole set, with the Browse frame built from it."""

    quotas: QuotaSet
    frame: Any  # pandas.DataFrame
    info: ClusterInfo
    loaded_at: float
    took_s: float

    _clients: list | None = None
    _dead: dict | None = None
    _display: Any = None
    _members: SharedMembership | None = None

    @property
    def age_s(self) -> float:
        return time.time() - self.loaded_at

    def known_clients(self) -> list[tuple[str, str]]:
        """The clients the entries name (computed once per snapshot: 100k entries ~0.5 s)."""
        if self._clients is None:
            self._clients = clients_from_entries(self.quotas)
            _keep_out_of_gc()
        return self._clients

    def members(self) -> SharedMembership:
        """The bucket rules over this set (:class:`SharedMembership`), one per snapshot."""
        if self._members is None:
            members = SharedMembership(self.quotas)
            members.warm(ALL_KEYS)  # built together, then parked out of the collector's reach
            self._members = members
            _keep_out_of_gc()
        return self._members

    def dead_keys(self) -> dict:
        """Entries with keys that never bind any client (quota_core.domain.shadows), once per snapshot."""
        if self._dead is None:
            from quota_core.domain import dead_keys

            self._dead = dead_keys(self.quotas)
            _keep_out_of_gc()
        return self._dead

    def display(self):
        """Browse's shown columns for every row (with "never applies"), built once per
        snapshot; a filter change only selects rows of it (``.loc[shown.index]``)."""
        if self._display is None:
            from ui.browse import display_frame

            dead = self.dead_keys()
            table = display_frame(self.frame, exact=False)
            table["never applies"] = [
                "; ".join(f"{d.key} ({d.winner.display()} first)" for d in dead[e])
                if e in dead else "" for e in self.frame["_entity"]]
            self._display = table
            _keep_out_of_gc()
        return self._display


@dataclass(frozen=True)
class Health:
    """What the background watch last learnt of a connection: when it last answered, and
    since when (and why) it has not (None: it answers)."""

    last_ok: float | None = None
    failing_since: float | None = None
    error: str | None = None
    #: Since when it has answered without a failure in between (None: it does not answer).
    up_since: float | None = None
    #: The brokers the cluster's metadata named in its last answer (empty: not known, or a
    #: sandbox).
    node_ids: tuple[str, ...] = ()
    #: node id → since when: a broker this process saw in the cluster's metadata that its
    #: last answer no longer names (stopped, fenced after a crash, or removed).
    missing: tuple[tuple[str, float], ...] = ()


def _clock(t: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t))


def stale_notice(snapshot: "Snapshot | None", health: Health, now: float | None = None
                 ) -> str | None:
    """The banner of a page that shows ``snapshot`` while the cluster does not answer (None
    while it does): since when it has not answered, and when the set shown was read."""
    if snapshot is None or health.failing_since is None:
        return None
    now = time.time() if now is None else now
    last = health.last_ok if health.last_ok is not None else snapshot.loaded_at
    return (f"The cluster has not answered since {_clock(last)} ({now - last:.0f} s ago). "
            f"This page shows the quota set as read at {_clock(snapshot.loaded_at)} "
            f"({now - snapshot.loaded_at:.0f} s ago): it may be stale. ({health.error})")


class Registry:
    """Open backends and their latest snapshot, per connection key; thread-safe. A daemon
    thread per connection (:meth:`watch`) asks the cluster every few seconds whether it
    answers, so a page can say that what it shows may be stale (:func:`stale_notice`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._key_locks: dict[str, threading.Lock] = {}
        self._backends: dict[str, QuotaBackend] = {}
        self._snapshots: dict[str, Snapshot] = {}
        self._health: dict[str, Health] = {}
        self._watchers: dict[str, threading.Thread] = {}

    def health(self, spec: ConnectionSpec) -> Health:
        with self._lock:
            return self._health.get(spec.key, Health())

    def _record(self, key: str, error: str | None,
                node_ids: tuple[str, ...] | None = None) -> None:
        """Note an answer (``error`` None; ``node_ids``: the brokers it named, None when the
        answer did not say) or a failure. A broker seen before and absent now is kept in
        :attr:`Health.missing`, with the time it was first found absent."""
        now = time.time()
        with self._lock:
            old = self._health.get(key, Health())
            if error is not None:
                self._health[key] = replace(old, failing_since=old.failing_since or now,
                                            error=error, up_since=None)
                return
            up = old.up_since if old.up_since is not None and old.failing_since is None else now
            nodes = old.node_ids if node_ids is None else tuple(node_ids)
            since = dict(old.missing)
            seen = {*old.node_ids, *since, *nodes}  # every broker an answer named
            missing = tuple((n, since.get(n, now))
                            for n in sorted(seen - set(nodes), key=broker_order))
            self._health[key] = Health(now, up_since=up, node_ids=nodes, missing=missing)

    def record(self, spec: ConnectionSpec, error: str | None,
               node_ids: tuple[str, ...] | None = None) -> None:
        """Note that the cluster answered (``error`` None) or did not, and why: what the
        Fleet page learns when it reads a cluster, kept with what the watch learns."""
        self._record(spec.key, error, node_ids)

    def watch(self, spec: ConnectionSpec, every_s: float) -> None:
        """Start (once per connection and process) the thread that asks the open backend
        for the cluster's id every ``every_s`` seconds and records the answer."""
        with self._lock:
            if spec.key in self._watchers:
                return
            thread = threading.Thread(target=self._watch, args=(spec.key, every_s),
                                      name=f"quota-watch-{spec.label}", daemon=True)
            self._watchers[spec.key] = thread
        thread.start()

    def _watch(self, key: str, every_s: float) -> None:
        while True:
            time.sleep(every_s)
            with self._lock:
                backend = self._backends.get(key)
            if backend is None:
                continue  # not open (a failed connection shows its own banner)
            try:
                info = backend.info()
            except Exception as exc:  # noqa: BLE001 - any failure means "not answering"
                self._record(key, str(exc) if isinstance(exc, QuotaError)
                             else f"{type(exc).__name__}: {exc}")
            else:
                self._record(key, None, info.node_ids)

    def _key_lock(self, key: str) -> threading.Lock:
        with self._lock:
            return self._key_locks.setdefault(key, threading.Lock())

    #: Seconds a Kafka connection may take to answer (QUOTA_KAFKA_TIMEOUT).
    timeout_s: float | None = None

    def backend(self, spec: ConnectionSpec) -> QuotaBackend:
        with self._key_lock(spec.key):
            backend = self._backends.get(spec.key)
            if backend is None:
                backend = LockedBackend(open_backend(
                    sandbox=spec.sandbox_path, bootstrap_servers=spec.bootstrap_servers,
                    command_config=spec.command_config,
                    client_properties=dict(spec.properties) or None,
                    timeout_s=self.timeout_s if spec.kind == "kafka" else None))
                self._backends[spec.key] = backend
            return backend

    def snapshot(self, spec: ConnectionSpec, ttl: float) -> Snapshot:
        backend = self.backend(spec)
        with self._key_lock(spec.key):
            snap = self._snapshots.get(spec.key)
            if snap is not None and snap.age_s < ttl:
                return snap
            started = time.perf_counter()
            gc.unfreeze()  # the snapshot this one replaces may be collected again
            quotas = backend.describe()
            info = backend.info()
            frame = quota_frame(quotas)
            snap = Snapshot(quotas, frame, info, time.time(), time.perf_counter() - started)
            self._snapshots[spec.key] = snap
            self._record(spec.key, None, info.node_ids)
            _keep_out_of_gc(collect=True)
            return snap

    def invalidate(self, spec: ConnectionSpec) -> None:
        """Describe again on the next request (after a change, or Refresh)."""
        with self._key_lock(spec.key):
            self._snapshots.pop(spec.key, None)

    def drop(self, spec: ConnectionSpec) -> None:
        """Forget (and close) the backend: Retry opens a fresh connection."""
        with self._key_lock(spec.key):
            self._snapshots.pop(spec.key, None)
            backend = self._backends.pop(spec.key, None)
        if backend is not None:
            try:
                backend.close()
            except Exception:  # noqa: BLE001 - closing a broken connection is best effort
                pass


@st.cache_resource(show_spinner=False)
def registry() -> Registry:
    return Registry()
