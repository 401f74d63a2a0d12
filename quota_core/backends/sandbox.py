"""The sandbox store: quotas in one SQLite file, with a KRaft broker's semantics.

For trying changes without a cluster, for demos, and as the second implementation that keeps
the backend interface honest (the same tests run against it and a real broker). Several
processes may write at once: each alter runs in one ``BEGIN IMMEDIATE`` transaction (WAL
mode), so a request is applied whole or not at all, never interleaved with another.

:meth:`SandboxBackend.write_lease` is the sandbox's write lease: one ``BEGIN IMMEDIATE``
transaction held around a writer's re-read, alter and read-back (each alter inside it is a
savepoint), committed on release. SQLite admits one such transaction per file, and a killed
writer's lock goes with its process, so nobody waits for a dead one.

A sandbox's id (:meth:`SandboxBackend.identity`, what binds a plan to its store) belongs to
one file: the file's device and inode are kept beside it. A byte copy (``cp a.sqlite
b.sqlite``) carries the id but not the inode, so the copy gets an id of its own on its first
write, or when a plan or apply asks for its identity (issue 32): a plan made on ``a.sqlite``
is refused on ``b.sqlite``. Renaming or moving a file within its file system keeps its inode,
and so its id.
"""
from __future__ import annotations

import contextlib
import json
import os
import socket
import sqlite3
import stat
import threading
import time
import uuid
from pathlib import Path
from urllib.parse import quote
from typing import Iterator, Sequence

from quota_core.domain.alterations import AlterOutcome, Alteration, EntityResult
from quota_core.domain.entities import ClusterInfo, QuotaSet
from quota_core.backends.base import QuotaBackend, WriteLease
from quota_core.domain.entities import Entity, entity_from_json, entity_to_json
from quota_core.errors import ConnectionFailed, LeaseUnavailable, QuotaError
from quota_core.domain.keys import QUOTA_KEYS
from quota_core.domain.filters import EntityFilter, filter_quotas
from quota_core.domain.limits import (MAX_RECORDS_PER_REQUEST, POLICY_VIOLATION_MESSAGE,
                                      request_batches)
from quota_core.domain.validation import broker_rejection, is_ip_literal, java_entity_text

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


def _tables(conn: sqlite3.Connection) -> list[str]:
    return [r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' "
        "ORDER BY name")]


def _not_a_sandbox(conn: sqlite3.Connection, tables: list[str]) -> str | None:
    """Why a database is not a sandbox (None when it is one, or holds no tables at all)."""
    if not tables:
        return None
    if "quotas" not in tables:
        shown = ", ".join(tables[:8]) + (f" and {len(tables) - 8} more" if len(tables) > 8 else "")
        return (f"it is an SQLite database with table{'s' if len(tables) > 1 else ''} {shown} "
                f"but no quota-console tables")
    columns = {r[1] for r in conn.execute("PRAGMA table_info(quotas)")}
    if not {"entity", "key", "value"} <= columns:
        return (f"it is an SQLite database whose quotas table has the columns "
                f"{', '.join(sorted(columns))}, not quota console's (entity, key, value)")
    return None


def _decode_rows(rows, path: Path) -> QuotaSet:
    """The quota set in the rows, or :class:`ConnectionFailed` naming the first bad row."""
    quotas: QuotaSet = {}
    decoded: dict[str, Entity] = {}
    for raw, key, value in rows:
        try:
            entity = decoded.get(raw) if isinstance(raw, str) else None
            if entity is None:
                if not isinstance(raw, str):
                    raise ValueError(f"the entity is {type(raw).__name__}, not JSON text")
                entity = decoded[raw] = entity_from_json(raw)
            if not isinstance(key, str) or key not in QUOTA_KEYS:
                raise ValueError(f"{key!r} is not a quota key")
            if not isinstance(value, (str, int, float)) or isinstance(value, bool):
                raise ValueError(f"the value is {type(value).__name__}")
            number = float(value)
        except (ValueError, TypeError, OverflowError, QuotaError) as exc:
            raise ConnectionFailed(
                f"The sandbox store {path} has a damaged row (entity {raw!r}, key {key!r}, "
                f"value {value!r}): {str(exc).rstrip('.')}. Delete or fix that row with the sqlite3 shell, or "
                f"restore the file from an --export.", path=str(path)) from None
        quotas.setdefault(entity, {})[key] = number
    return quotas


class SandboxBackend(QuotaBackend):
    """A quota store in the SQLite file ``path``.

    The file is the user's data: reading never writes it (no tables created, no journal mode
    changed, a read-only file opened read-only), a file that is not a sandbox is refused
    naming what it is, and the file is created by the first write (or :meth:`init`).
    """

    def __init__(self, path: str | Path, resolvable=host_resolves) -> None:
        self.path = Path(path)
        self._resolvable = resolvable
        self._lock = threading.RLock()
        #: True while :meth:`write_lease` holds the file's write transaction.
        self._leased = False
        self._cache: tuple[int, QuotaSet] | None = None
        self._reader: sqlite3.Connection | None = None
        self._writer: sqlite3.Connection | None = None
        #: The connection of the write transaction under way (set by :meth:`_begin`).
        self._conn: sqlite3.Connection | None = None
        self._open_reader()

    # -- opening: what is at the path -------------------------------------------------------
    def _fail(self, what: str, fix: str = "Give the path of a sandbox file, or a new path "
              "to create one.") -> ConnectionFailed:
        return ConnectionFailed(f"Cannot open the sandbox store {self.path}: {what}. {fix}",
                                path=str(self.path))

    def _stat(self) -> os.stat_result | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise self._fail(exc.strerror or type(exc).__name__) from None
        if not stat.S_ISREG(st.st_mode):
            kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
            raise self._fail(f"it is {kind}, not a sandbox file")
        return st

    def _read_only(self, st: os.stat_result) -> bool:
        """True when we may not write the file (its mode says so even to root) or its folder
        (where SQLite keeps the -wal and -shm files)."""
        folder = self.path.parent if str(self.path.parent) else Path(".")
        return (not st.st_mode & 0o222 or not os.access(self.path, os.W_OK)
                or not os.access(folder, os.W_OK | os.X_OK))

    def _uri(self, mode: str) -> str:
        return f"file:{quote(os.fsencode(os.path.abspath(self.path)))}?mode={mode}"

    def _open_reader(self) -> None:
        """Open the file for reading if it exists, after checking it is a sandbox."""
        st = self._stat()
        if st is None or st.st_size == 0:
            return  # nothing there yet: reads find nothing, the first write creates it
        with open(self.path, "rb") as f:
            header = f.read(100)
        if not header.startswith(b"SQLite format 3\0"):
            looks = header.lstrip()[:1]
            hint = (" (it looks like JSON or YAML text: an export? Load it into a sandbox "
                    "with --import)") if looks in (b"{", b"[") or header.startswith(
                    (b"format:", b"entries:")) else ""
            raise self._fail(f"it is not an SQLite file{hint}, so not a quota console sandbox")
        if self._read_only(st):
            # mode=ro alone makes SQLite create -wal/-shm beside a WAL file and leave them
            # behind; immutable=1 reads it as it is (only when no -wal holds newer pages).
            wal = header[18:20] == b"\2\2"
            immutable = wal and not os.path.exists(f"{self.path}-wal")
            uri = self._uri("ro" + ("&immutable=1" if immutable else ""))
        else:
            # Read-write but never create: a reading connection leaves no -wal/-shm behind
            # when it closes (a read-only one cannot remove them).
            uri = self._uri("rw")
        try:
            conn = sqlite3.connect(uri, uri=True, timeout=30, isolation_level=None,
                                   check_same_thread=False)
            conn.execute("PRAGMA busy_timeout=30000")
            tables = _tables(conn)
        except sqlite3.Error as exc:
            raise self._fail(f"it is not a readable SQLite database ({exc})") from None
        problem = _not_a_sandbox(conn, tables)
        if problem:
            conn.close()
            raise self._fail(problem)
        self._reader = conn if tables else None  # an empty database: nothing to read yet
        if not tables:
            conn.close()

    def _read_conn(self) -> sqlite3.Connection | None:
        if self._writer is not None:
            return self._writer
        if self._reader is None:  # another process may have created it since
            self._open_reader()
        return self._reader

    # -- creating ---------------------------------------------------------------------------
    def init(self) -> bool:
        """Make the file a sandbox (``--init``): True if it was created or initialised now,
        False if it already was one. Refuses a file that is something else."""
        with self._lock:
            existed = self._read_conn() is not None
            self._begin(validate_only=False)
            self._conn.execute("COMMIT")  # type: ignore[union-attr]
            self._cache = None
            return not existed

    def _open_writer(self) -> sqlite3.Connection:
        if self._writer is not None:
            return self._writer
        st = self._stat()
        if st is not None and self._read_only(st):
            raise ConnectionFailed(
                f"Cannot write the sandbox store {self.path}: the file (or its folder) is "
                f"read-only. Make it writable (chmod u+w {self.path}), or copy it and give "
                f"the copy.", path=str(self.path))
        try:
            if st is None and str(self.path.parent):
                self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self._uri("rwc"), uri=True, timeout=30, isolation_level=None,
                                   check_same_thread=False)
            conn.execute("PRAGMA busy_timeout=30000")
            if not _tables(conn):  # a new (or empty) file becomes ours: WAL, for writers at once
                _set_wal(conn, deadline=time.monotonic() + 30)
        except (sqlite3.Error, OSError) as exc:
            raise ConnectionFailed(
                f"Cannot open the sandbox store {self.path}: {exc}. Check that the folder "
                f"exists and is writable, or pick another --sandbox path.",
                path=str(self.path)) from exc
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        self._writer = conn
        return conn

    def _begin(self, validate_only: bool) -> None:
        """Start the transaction of an alteration in :attr:`_conn`, the schema in place.

        Validate-only on a store that does not exist yet (or is read-only) runs on an
        in-memory copy: checking an alteration never creates or changes the file."""
        if validate_only and (self._writer is None and (
                self._read_conn() is None or self._read_only(os.stat(self.path)))):
            self._conn = sqlite3.connect(":memory:", isolation_level=None,
                                         check_same_thread=False)
            self._conn.executescript(_SCHEMA)
            reader = self._read_conn()
            if reader is not None:
                self._conn.executemany("INSERT INTO quotas VALUES (?, ?, ?)", reader.execute(
                    "SELECT entity, key, value FROM quotas").fetchall())
            self._conn.execute("BEGIN IMMEDIATE")
            return
        self._conn = self._open_writer()
        if self._leased:  # inside write_lease's transaction: a savepoint of it
            self._conn.execute("SAVEPOINT alter_")
            return
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            problem = _not_a_sandbox(self._conn, _tables(self._conn))  # checked under the lock
            if problem:
                raise self._fail(problem)
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    self._conn.execute(statement)
            self._claim_id(self._conn)
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise

    # -- reading --------------------------------------------------------------------------
    def _load(self) -> QuotaSet:
        """Every entity, cached until any connection commits a change."""
        with self._lock:
            conn = self._read_conn()
            if conn is None:
                return {}
            try:
                version = conn.execute("PRAGMA data_version").fetchone()[0]
                if self._cache is not None and self._cache[0] == version:
                    return self._cache[1]
                rows = conn.execute("SELECT entity, key, value FROM quotas").fetchall()
            except sqlite3.Error as exc:
                raise ConnectionFailed(f"Cannot read the sandbox store {self.path}: {exc}",
                                       path=str(self.path)) from exc
            quotas = _decode_rows(rows, self.path)
            self._cache = (version, quotas)
            return quotas

    def describe(self, entity_filter: EntityFilter | None = None) -> QuotaSet:
        return filter_quotas(self._load(), entity_filter or EntityFilter.all())

    # -- writing --------------------------------------------------------------------------
    def alter(self, alterations: Sequence[Alteration],
              validate_only: bool = False) -> AlterOutcome:
        # Split into the requests the Kafka backend sends (limits.request_batches), each with
        # a broker's per-request rules; all of them in one transaction.
        return self._alter(request_batches(alterations), validate_only)

    def alter_request(self, alterations: Sequence[Alteration],
                      validate_only: bool = False) -> AlterOutcome:
        """The alterations as one request, unsplit, answered as a broker answers it (over
        10,000 changed keys: every entity refused with POLICY_VIOLATION, nothing applied)."""
        return self._alter([list(alterations)], validate_only)

    def _alter(self, requests: Sequence[Sequence[Alteration]],
               validate_only: bool) -> AlterOutcome:
        results: dict[Entity, EntityResult] = {}
        with self._lock:
            try:
                self._begin(validate_only)  # BEGIN IMMEDIATE, the file created if need be
                try:
                    _migrate_legacy_keys(self._conn)
                    for request in requests:
                        results.update(self._request(request, validate_only))
                    self._end(commit=True)
                except BaseException:
                    self._end(commit=False)
                    raise
            except sqlite3.Error as exc:
                raise ConnectionFailed(f"Cannot write the sandbox store {self.path}: {exc}",
                                       path=str(self.path)) from exc
            self._cache = None  # our own commits do not change PRAGMA data_version
        return AlterOutcome(tuple(results.values()), validate_only)

    def _end(self, commit: bool) -> None:
        """End :meth:`_begin`'s transaction (or, under the write lease, its savepoint)."""
        leased = self._leased and self._conn is self._writer
        if commit:
            self._conn.execute("RELEASE alter_" if leased else "COMMIT")
        elif leased:
            self._conn.execute("ROLLBACK TO alter_")
            self._conn.execute("RELEASE alter_")
        else:
            self._conn.execute("ROLLBACK")

    @property
    def _holder_path(self) -> Path:
        return self.path.with_name(self.path.name + "-lease")

    @contextlib.contextmanager
    def write_lease(self, holder: str, wait_s: float,
                    hold_s: float | None = None) -> Iterator[WriteLease]:
        """The file's write transaction, held (``BEGIN IMMEDIATE``, waiting up to ``wait_s``)
        until the block ends: committed then, rolled back if it raises (it never expires, so
        ``hold_s`` changes nothing). Who holds it is written beside the file (``PATH-lease``)
        so a writer that waits can name them."""
        with self._lock:
            if self._leased:
                raise LeaseUnavailable("This sandbox connection already holds its write lease.")
            conn = self._open_writer()
            conn.execute(f"PRAGMA busy_timeout={max(1, int(wait_s * 1000))}")
            try:
                self._begin(validate_only=False)
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise ConnectionFailed(f"Cannot write the sandbox store {self.path}: "
                                           f"{exc}", path=str(self.path)) from exc
                raise LeaseUnavailable(
                    f"The sandbox {self.path} is being written by {self._holder_text()} and "
                    f"was not free within {wait_s:g} s: nothing was written. Try again when "
                    f"that writer is done (--timeout waits longer).", holder=self._holder_text()
                ) from None
            finally:
                conn.execute("PRAGMA busy_timeout=30000")
            self._leased = True
            try:
                _migrate_legacy_keys(conn)
                with contextlib.suppress(OSError):
                    self._holder_path.write_text(json.dumps(
                        {"holder": holder, "host": socket.gethostname(), "pid": os.getpid(),
                         "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}))
                self._cache = None
                yield WriteLease(holder)
            except BaseException:
                self._leased = False
                self._holder_path.unlink(missing_ok=True)
                conn.execute("ROLLBACK")
                self._cache = None
                raise
            self._leased = False
            self._holder_path.unlink(missing_ok=True)  # before COMMIT: the next holder's stays
            conn.execute("COMMIT")
            self._cache = None

    def _holder_text(self) -> str:
        try:
            h = json.loads(self._holder_path.read_text())
            return f"{h['holder']} (pid {h['pid']} on {h['host']}, since {h['since']})"
        except (OSError, ValueError, KeyError, TypeError):
            return "another writer"

    def _file_id(self) -> str | None:
        """This file's device and inode ("dev:ino"), None when it does not exist."""
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return f"{st.st_dev}:{st.st_ino}"

    def _claim_id(self, conn: sqlite3.Connection) -> None:
        """Inside a write transaction: give the file an id unless it has one of its own. An id
        recorded with another file's inode came with a byte copy: the copy gets a new id."""
        here = self._file_id()
        rows = dict(conn.execute(
            "SELECT name, value FROM meta WHERE name IN ('cluster_id', 'file')").fetchall())
        if "cluster_id" not in rows or rows.get("file", here) != here:
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('cluster_id', ?)",
                         (f"sandbox-{uuid.uuid4().hex[:12]}",))
        if here is not None and rows.get("file") != here:
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('file', ?)", (here,))

    def identity(self) -> str | None:
        """The sandbox's id. Made now (in the file) for an older file that lacks one, and for
        a byte copy of another sandbox (its id was the original's); None for a file that
        does not exist yet, or a copy that cannot be written."""
        info = self.info()
        if self._read_conn() is not None and self._own_id() is not True:
            try:
                self.init()
            except QuotaError:  # cannot be written: an older file keeps its id, a copy has none
                return info.cluster_id
            info = self.info()
        return info.cluster_id

    def _own_id(self) -> bool | None:
        """Whether the stored id was made in this file: True, False (a copy), or None (no
        id, or an older file that did not record its inode)."""
        with self._lock:
            conn = self._read_conn()
            try:
                row = conn.execute("SELECT value FROM meta WHERE name='file'").fetchone() \
                    if conn is not None else None
            except sqlite3.Error:
                row = None
        if row is None:
            return None
        return row[0] == self._file_id()

    def _request(self, request: Sequence[Alteration],
                 validate_only: bool) -> dict[Entity, EntityResult]:
        """One AlterClientQuotas request as a KRaft controller handles it: one result per
        entity (a repeated entity's single result carries the error although its first
        alteration was applied); over MAX_RECORDS_PER_REQUEST records, none applied."""
        results: dict[Entity, EntityResult] = {}
        seen: set[Entity] = set()
        accepted: list[Alteration] = []
        for alteration in request:
            result = self._check_one(alteration, seen)
            if result.ok:
                accepted.append(alteration)
            results[alteration.entity] = result
        if sum(self._records(a) for a in accepted) > MAX_RECORDS_PER_REQUEST:
            return {e: EntityResult(e, POLICY_VIOLATION_MESSAGE, "POLICY_VIOLATION")
                    for e in results}
        if not validate_only:
            for alteration in accepted:
                self._write_one(alteration)
        return results

    def _records(self, alteration: Alteration) -> int:
        """The metadata records a broker writes: a key set to a new value, a set key removed."""
        rows = self._conn.execute("SELECT key, value FROM quotas WHERE entity=?",
                                  (entity_to_json(alteration.entity),)).fetchall()
        current = {k: float(v) for k, v in rows}
        final = {op.key: op.value for op in alteration.ops}
        return sum(1 for k, v in final.items()
                   if (k in current if v is None else repr(current.get(k)) != repr(float(v))))

    def _check_one(self, alteration: Alteration, seen: set[Entity]) -> EntityResult:
        entity = alteration.entity
        if entity in seen:
            # A broker applies the first alteration of an entity and refuses the second, naming
            # the entity as Java prints it (ClientQuotaControlManager.alterClientQuotas).
            return EntityResult(entity, f"Ignoring duplicate entity {java_entity_text(entity)}",
                                "INVALID_REQUEST")
        seen.add(entity)
        error = broker_rejection(alteration, resolvable=self._resolvable)
        if error:
            return EntityResult(entity, error, "INVALID_REQUEST")
        return EntityResult(entity)

    def _write_one(self, alteration: Alteration) -> None:
        raw = entity_to_json(alteration.entity)
        for op in alteration.ops:
            if op.value is None:
                self._conn.execute("DELETE FROM quotas WHERE entity=? AND key=?", (raw, op.key))
            else:
                self._conn.execute("INSERT OR REPLACE INTO quotas VALUES (?, ?, ?)",
                                   (raw, op.key, repr(op.value)))

    def replace_all(self, quotas: QuotaSet) -> None:
        """Make the store hold exactly ``quotas`` (demo seeding, imports with --replace)."""
        with self._lock:
            self._begin(validate_only=False)
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
        """The cluster id is made when the file is created: None before the first write, and
        for a byte copy of another sandbox until its first write (its id is the original's)."""
        with self._lock:
            conn = self._read_conn()
            try:
                rows = dict(conn.execute("SELECT name, value FROM meta WHERE name IN "
                                         "('cluster_id', 'file')").fetchall()) \
                    if conn is not None else {}
            except sqlite3.Error:  # an older file without the meta table
                rows = {}
        cluster_id = rows.get("cluster_id")
        if "file" in rows and rows["file"] != self._file_id():
            cluster_id = None
        return ClusterInfo("sandbox", str(self.path), cluster_id, 1)

    def close(self) -> None:
        for conn in (self._reader, self._writer):
            if conn is not None:
                conn.close()
        self._reader = self._writer = self._conn = None
