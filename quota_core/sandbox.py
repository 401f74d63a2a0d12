"""The sandbox store: quotas in one SQLite file, with a KRaft broker's semantics.

For trying changes without a cluster, for demos, and as the second implementation that keeps
the backend interface honest (the same tests run against it and a real broker). Several
processes may write at once: each alter runs in one ``BEGIN IMMEDIATE`` transaction (WAL
mode), so a request is applied whole or not at all, never interleaved with another.
"""
from __future__ import annotations

import socket
import sqlite3
import threading
import time
import uuid
from pathlib import Path
from typing import Sequence

from .alterations import AlterOutcome, Alteration, EntityResult
from .backend import ClusterInfo, QuotaBackend, QuotaSet
from .entities import Entity, entity_from_json, entity_to_json
from .errors import ConnectionFailed
from .filters import EntityFilter, filter_quotas
from .validation import _java_entity, broker_rejection, is_ip_literal

__all__ = ["SandboxBackend", "host_resolves"]


def host_resolves(name: str) -> bool:
    """What the broker's ``InetAddress.getByName`` accepts: an ip literal or a resolvable host."""
    if is_ip_literal(name):
        return True
    try:
        socket.getaddrinfo(name, None)
        return True
    except (OSError, UnicodeError):
        return False

_SCHEMA = """
CREATE TABLE IF NOT EXISTS quotas (
    entity TEXT NOT NULL,   -- entities.entity_to_json (older files: [[type, name], ...])
    key    TEXT NOT NULL,
    value  TEXT NOT NULL,   -- repr() of the float: SQLite REAL would turn NaN into NULL
    PRIMARY KEY (entity, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


def _migrate_legacy_keys(conn: sqlite3.Connection) -> None:
    """Rewrite rows keyed by the older ``[[type, name], ...]`` entity form to
    :func:`entity_to_json`'s (inside a write transaction: reads never write)."""
    legacy = conn.execute("SELECT entity, key, value FROM quotas WHERE entity LIKE '[%'").fetchall()
    if legacy:
        conn.execute("DELETE FROM quotas WHERE entity LIKE '[%'")
        conn.executemany("INSERT OR REPLACE INTO quotas VALUES (?, ?, ?)",
                         ((entity_to_json(entity_from_json(raw)), key, value)
                          for raw, key, value in legacy))


def _set_wal(conn: sqlite3.Connection, deadline: float) -> None:
    """``PRAGMA journal_mode=WAL``, retried while another process holds the file.

    Switching a new file to WAL needs an exclusive lock and SQLite does not wait for it (the
    busy timeout is not consulted): two processes opening a new store at once would see
    "database is locked" straight away.
    """
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            busy = "locked" in str(exc) or "busy" in str(exc)
            if not busy or time.monotonic() > deadline:
                raise
            time.sleep(0.005)


class SandboxBackend(QuotaBackend):
    """A quota store in the SQLite file ``path`` (created on first use)."""

    def __init__(self, path: str | Path, resolvable=host_resolves) -> None:
        self.path = Path(path)
        self._resolvable = resolvable
        self._lock = threading.Lock()
        self._cache: tuple[int, QuotaSet] | None = None
        try:
            if self.path.parent and not self.path.parent.exists():
                self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(self.path, timeout=30, isolation_level=None,
                                         check_same_thread=False)
            self._conn.execute("PRAGMA busy_timeout=30000")
            _set_wal(self._conn, deadline=time.monotonic() + 30)
            self._conn.executescript(_SCHEMA)
            self._conn.execute("INSERT OR IGNORE INTO meta VALUES ('cluster_id', ?)",
                               (f"sandbox-{uuid.uuid4().hex[:12]}",))
        except (sqlite3.Error, OSError) as exc:
            raise ConnectionFailed(
                f"Cannot open the sandbox store {self.path}: {exc}. Check that the folder "
                f"exists and is writable, or pick another --sandbox path.",
                path=str(self.path)) from exc

    # -- reading --------------------------------------------------------------------------
    def _data_version(self) -> int:
        return self._conn.execute("PRAGMA data_version").fetchone()[0]

    def _load(self) -> QuotaSet:
        """Every entity, cached until any connection commits a change."""
        with self._lock:
            version = self._data_version()
            if self._cache is not None and self._cache[0] == version:
                return self._cache[1]
            quotas: QuotaSet = {}
            decoded: dict[str, Entity] = {}
            try:
                rows = self._conn.execute("SELECT entity, key, value FROM quotas").fetchall()
            except sqlite3.Error as exc:
                raise ConnectionFailed(f"Cannot read the sandbox store {self.path}: {exc}",
                                       path=str(self.path)) from exc
            for raw, key, value in rows:
                entity = decoded.get(raw)
                if entity is None:
                    entity = decoded[raw] = entity_from_json(raw)
                quotas.setdefault(entity, {})[key] = float(value)
            self._cache = (version, quotas)
            return quotas

    def describe(self, entity_filter: EntityFilter | None = None) -> QuotaSet:
        return filter_quotas(self._load(), entity_filter or EntityFilter.all())

    # -- writing --------------------------------------------------------------------------
    def alter(self, alterations: Sequence[Alteration],
              validate_only: bool = False) -> AlterOutcome:
        # One result per entity, as a broker answers: a repeated entity's single result
        # carries the error even though its first alteration was applied.
        results: dict[Entity, EntityResult] = {}
        seen: set[Entity] = set()
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                try:
                    _migrate_legacy_keys(self._conn)
                    for alteration in alterations:
                        results[alteration.entity] = self._alter_one(alteration, seen,
                                                                     validate_only)
                    self._conn.execute("COMMIT")
                except BaseException:
                    self._conn.execute("ROLLBACK")
                    raise
            except sqlite3.Error as exc:
                raise ConnectionFailed(f"Cannot write the sandbox store {self.path}: {exc}",
                                       path=str(self.path)) from exc
            self._cache = None  # our own commits do not change PRAGMA data_version
        return AlterOutcome(tuple(results.values()), validate_only)

    def _alter_one(self, alteration: Alteration, seen: set[Entity],
                   validate_only: bool) -> EntityResult:
        entity = alteration.entity
        if entity in seen:
            # A broker applies the first alteration of an entity and refuses the second, naming
            # the entity as Java prints it (ClientQuotaControlManager.alterClientQuotas).
            return EntityResult(entity, f"Ignoring duplicate entity {_java_entity(entity)}",
                                "INVALID_REQUEST")
        seen.add(entity)
        error = broker_rejection(alteration, resolvable=self._resolvable)
        if error:
            return EntityResult(entity, error, "INVALID_REQUEST")
        if not validate_only:
            raw = entity_to_json(entity)
            for op in alteration.ops:
                if op.value is None:
                    self._conn.execute("DELETE FROM quotas WHERE entity=? AND key=?",
                                       (raw, op.key))
                else:
                    self._conn.execute("INSERT OR REPLACE INTO quotas VALUES (?, ?, ?)",
                                       (raw, op.key, repr(op.value)))
        return EntityResult(entity)

    def replace_all(self, quotas: QuotaSet) -> None:
        """Make the store hold exactly ``quotas`` (demo seeding, imports with --replace)."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                self._conn.execute("DELETE FROM quotas")
                self._conn.executemany(
                    "INSERT INTO quotas VALUES (?, ?, ?)",
                    ((entity_to_json(e), k, repr(float(v))) for e, q in quotas.items()
                     for k, v in q.items()))
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._cache = None

    def info(self) -> ClusterInfo:
        row = self._conn.execute("SELECT value FROM meta WHERE name='cluster_id'").fetchone()
        return ClusterInfo("sandbox", str(self.path), row[0] if row else None, 1)

    def close(self) -> None:
        self._conn.close()
