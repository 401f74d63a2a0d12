"""The audit log: every applied quota change, one JSON object per line, append-only.

Who, when, on which cluster, which entity, what it held before and after (as read back).

A change is recorded in two lines. The *intent* (``phase: "intent"``, ``outcome:
"intent"``, ``after`` = what the writer means to write) is appended and fsync-ed before
anything is sent; the *outcome* (``phase: "outcome"``, ``ref`` = the intent's id, ``outcome``
``applied`` / ``refused`` / ``conflict`` / ``unknown`` / ``not sent``, ``after`` as read back)
is appended after. A writer killed in between leaves an intent without an outcome, never a
change without a record: :meth:`AuditLog.read` shows such an intent with the outcome
``unknown`` and the note :data:`WRITER_STOPPED`. Logs written before hold one line per change
(no ``phase``), which read as they are.
Appends are durable and safe between processes: the file is opened with ``O_APPEND``, each
record is written by a single ``write`` under an exclusive ``flock`` and then ``fsync``-ed.
A torn last line (a crash mid-write) is skipped on reading and counted, never fatal.

Nothing is ever rewritten or deleted here; rotate the file with the usual tools.
"""
from __future__ import annotations

import csv
import fcntl
import io
import json
import os
import uuid
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable, Mapping

from quota_core.domain.alterations import Alteration
from quota_core.domain.entities import Entity, entity_from_json
from quota_core.domain.keys import json_number
from quota_core.errors import ConfigError

__all__ = ["WRITER_STOPPED", "NOTHING_CHANGED", "UNKNOWN_STORE", "merge_records",
           "outcome_record", "AuditRecord", "AuditLog", "records_csv", "records_jsonl",
           "new_record", "default_audit_path", "state_audit_path", "os_user", "cluster_fields",
           "store_fields", "same_store", "for_store", "store_text", "config_record",
           "config_outcome"]


def state_audit_path(env: Mapping[str, str]) -> Path:
    """Where every writer (the dashboard, the CLI's --alter / --import / apply, the
    kafka-configs.sh dialect) appends by default: the user's state directory, as the XDG
    Base Directory spec puts it, ``$XDG_STATE_HOME/quota-console/audit.jsonl``, and
    ``~/.local/state/quota-console/audit.jsonl`` when that is unset (or not absolute, which
    the spec says to ignore). Never inside the package (an installed one is site-packages)."""
    state = env.get("XDG_STATE_HOME") or ""
    if not os.path.isabs(state):
        home = env.get("HOME") or os.path.expanduser("~")
        state = os.path.join(home, ".local", "state")
    return Path(state) / "quota-console" / "audit.jsonl"


def default_audit_path(env: Mapping[str, str], secrets: Mapping | None = None) -> Path:
    """The audit log every writer shares: ``QUOTA_AUDIT_LOG``, else ``[audit] path`` from
    the dashboard's secrets, else :func:`state_audit_path`."""
    section = (secrets or {}).get("audit")
    path = env.get("QUOTA_AUDIT_LOG") or (section.get("path")
                                          if isinstance(section, Mapping) else None)
    return Path(str(path)) if path else state_audit_path(env)


def os_user() -> str:
    """Who runs this process, for CLI records without ``--actor``."""
    import getpass

    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no login name (a container without passwd entry)
        return f"uid {os.getuid()}"


#: How a record without a store identity (no cluster id: logs written before issue 27, or a
#: sandbox that had none) is shown; it matches no store.
UNKNOWN_STORE = "unknown store"


def _location(kind: str | None, location: str | None) -> str | None:
    """A sandbox's path made absolute (the same file, whatever directory the writer ran
    in); a cluster's bootstrap servers as they are."""
    if kind == "sandbox" and location:
        return os.path.realpath(location)
    return location


def cluster_fields(info: object, label: str | None = None) -> dict:
    """What a record says about the store (as the dashboard's ``ctx.cluster_fields()``),
    from a backend's :class:`~quota_core.domain.entities.ClusterInfo`: its kind, label, location
    (a sandbox's absolute path) and ``cluster_id`` (Kafka's cluster id, or the sandbox's
    stored id): the store's identity, which :func:`same_store` matches."""
    kind = getattr(info, "kind", None)
    return {"kind": kind, "label": label,
            "location": _location(kind, getattr(info, "location", None)),
            "cluster_id": getattr(info, "cluster_id", None)}


def store_fields(backend: object, label: str | None = None) -> dict:
    """:func:`cluster_fields` of the store a writer is about to change, its identity read
    now: Kafka's cluster id, or the sandbox's stored id (made now for a file that has none,
    and the file made for a path that has no file yet: the write would make it anyway)."""
    fields = cluster_fields(backend.info(), label)
    cluster_id = fields["cluster_id"] or backend.identity()
    if cluster_id is None and fields["kind"] == "sandbox" and hasattr(backend, "init"):
        backend.init()
        cluster_id = backend.identity()
    return {**fields, "cluster_id": cluster_id}


def same_store(recorded: Mapping, here: Mapping) -> bool:
    """Whether a record's ``cluster`` fields name the store ``here`` (:func:`cluster_fields`
    of the store shown): the same cluster id, and for a sandbox the same file too (a copied
    sandbox keeps its id). A record without an id matches no store."""
    recorded = recorded if isinstance(recorded, Mapping) else {}
    cluster_id = recorded.get("cluster_id")
    if not cluster_id or cluster_id != here.get("cluster_id"):
        return False
    kind = here.get("kind")
    if recorded.get("kind") and kind and recorded.get("kind") != kind:
        return False
    if kind == "sandbox":
        return _location("sandbox", recorded.get("location")) == \
            _location("sandbox", here.get("location"))
    return True


def for_store(records: Iterable["AuditRecord"], here: Mapping) -> list["AuditRecord"]:
    """The records of the store ``here`` (:func:`same_store`)."""
    return [r for r in records if same_store(r.cluster, here)]


def store_text(recorded: Mapping) -> str:
    """Which store a record is about, for a person: its label or location, else
    :data:`UNKNOWN_STORE` when it carries no identity."""
    recorded = recorded if isinstance(recorded, Mapping) else {}
    if not recorded.get("cluster_id"):
        return UNKNOWN_STORE
    return str(recorded.get("label") or recorded.get("location") or recorded["cluster_id"])


#: Outcomes of an attempt that changed nothing.
NOTHING_CHANGED = ("refused", "not sent")
#: How a reader shows an intent whose outcome line never came.
WRITER_STOPPED = "outcome unknown (the writer stopped)"


def _quotas(q: Mapping[str, float]) -> dict[str, float | int | str]:
    return {k: json_number(v) for k, v in sorted(q.items())}


@dataclass(frozen=True)
class AuditRecord:
    """One applied change. ``entity`` is the entity's JSON object (raw names, null: default;
    see :func:`~quota_core.domain.entities.entity_to_json`); logs written before hold
    ``[[type, name-or-null], ...]``, which is read too."""

    id: str
    ts: str
    actor: str
    cluster: dict
    entity: dict | list
    entity_text: str
    action: str
    ops: list
    before: dict
    after: dict
    outcome: str = "applied"
    note: str = ""
    extra: dict = field(default_factory=dict)
    #: "intent", "outcome", or "" (a complete record, as every log before issue 16 holds).
    phase: str = ""
    #: For an outcome line: the id of its intent.
    ref: str = ""

    def to_json(self) -> str:
        """One line: ``"cluster"`` is the fleet's name for the cluster (the contract's
        ``"cluster": NAME``), ``"store"`` the store's identity (:func:`cluster_fields`).
        In memory both stay in :attr:`cluster` (the name under ``"name"``)."""
        # The fields hold plain JSON values: a shallow dict, not asdict's deep copy (a tenth
        # of the time; a 100k import writes 200k lines).
        line = {name: getattr(self, name) for name in self.__dataclass_fields__}
        store = dict(self.cluster)
        line["cluster"] = store.pop("name", None)
        line["store"] = store
        return json.dumps(line, ensure_ascii=False, separators=(",", ":"), allow_nan=False)

    @classmethod
    def from_dict(cls, d: Mapping) -> "AuditRecord":
        known = {f for f in cls.__dataclass_fields__}
        fields = {k: v for k, v in d.items() if k in known}
        store = d.get("store")
        if isinstance(store, Mapping):  # written since the fleet: name and store apart
            name = d.get("cluster")
            fields["cluster"] = {**store, "name": name} if isinstance(name, str) else dict(store)
        elif not isinstance(fields.get("cluster"), Mapping):  # before issue 27: no identity
            fields["cluster"] = {}
        return cls(**fields)

    def entity_obj(self) -> Entity:
        return entity_from_json(self.entity)


def new_record(*, actor: str, cluster: Mapping[str, object], alteration: Alteration,
               before: Mapping[str, float], after: Mapping[str, float],
               action: str = "alter", outcome: str = "applied", note: str = "",
               now: datetime | None = None, extra: Mapping | None = None,
               phase: str = "") -> AuditRecord:
    """Build a record for an applied ``alteration`` (``after`` as read back); with
    ``phase="intent"``, the intent line written before sending (``after`` as meant)."""
    ts = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
    return AuditRecord(
        id=uuid.uuid4().hex,
        ts=ts.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        actor=actor,
        cluster=dict(cluster),
        entity=alteration.entity.as_dict(),
        entity_text=str(alteration.entity),
        action=action,
        ops=[{"key": op.key, "value": None if op.value is None else json_number(op.value)}
             for op in alteration.ops],
        before=_quotas(before),
        after=_quotas(after),
        outcome=outcome,
        note=note,
        extra=dict(extra or {}),
        phase=phase,
    )


def config_record(*, actor: str, cluster: Mapping[str, object], subject: str, action: str,
                  before: Mapping[str, str], after: Mapping[str, str], extra: Mapping,
                  phase: str = "intent", now: datetime | None = None) -> AuditRecord:
    """The intent of a change to something that is not a quota entity (a client-metrics
    subscription): ``entity`` is empty, ``entity_text`` names the ``subject``, ``before`` /
    ``after`` hold its configs as text. :func:`outcome_record` closes it as any intent."""
    ts = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
    return AuditRecord(id=uuid.uuid4().hex,
                       ts=ts.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
                       actor=actor, cluster=dict(cluster), entity={}, entity_text=subject,
                       action=action, ops=[], before=dict(before), after=dict(after),
                       outcome="intent" if phase == "intent" else "applied",
                       extra=dict(extra), phase=phase)


def config_outcome(intent: AuditRecord, outcome: str, after: Mapping[str, str], *,
                   note: str = "", now: datetime | None = None) -> AuditRecord:
    """The line that closes a :func:`config_record` intent (``after``: configs as text)."""
    done = outcome_record(intent, outcome, {}, note=note, now=now)
    return replace(done, after=dict(after))


def outcome_record(intent: AuditRecord, outcome: str, after: Mapping[str, float], *,
                   note: str = "", now: datetime | None = None) -> AuditRecord:
    """The line that closes ``intent``: what happened, and ``after`` as read back."""
    ts = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
    return replace(intent, id=uuid.uuid4().hex,
                   ts=ts.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
                   outcome=outcome, after=_quotas(after), note=note, phase="outcome",
                   ref=intent.id)


def merge_records(raw: Iterable[AuditRecord]) -> list[AuditRecord]:
    """One record per change, in the order the intents were written: an intent with its
    outcome line folded in (its ``ts`` stays the intent's), an intent without one as
    ``unknown`` with
    :data:`WRITER_STOPPED`; records of older logs as they are."""
    raw = list(raw)
    outcomes = {r.ref: r for r in raw if r.phase == "outcome" and r.ref}
    merged = []
    for r in raw:
        if r.phase == "outcome":
            continue
        if r.phase == "intent":
            done = outcomes.get(r.id)
            if done is None:
                r = replace(r, outcome="unknown", note=WRITER_STOPPED)
            else:
                r = replace(r, outcome=done.outcome, after=done.after, note=done.note)
        merged.append(r)
    return merged


class AuditLog:
    """The JSON-lines file at ``path`` (created, with its folder, on the first append)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        #: Lines that could not be read on the last :meth:`read` (e.g. a torn last line).
        self.skipped = 0

    def _open(self) -> int:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            return os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
        except OSError as exc:
            raise ConfigError(
                f"Cannot open the audit log {self.path} for appending: {exc}. Set "
                f"QUOTA_AUDIT_LOG (or [audit] path in secrets, or the CLI's --audit-log) to a "
                f"writable file.", path=str(self.path)) from exc

    def size(self) -> int:
        """The file's size in bytes (0 before the first append): a writer compares it to
        say whether it wrote here."""
        try:
            return self.path.stat().st_size
        except OSError:
            return 0

    def ensure_writable(self) -> None:
        """Raise :class:`ConfigError` now if records could not be appended: writers check
        this before changing anything, so a change is never applied unrecorded."""
        os.close(self._open())

    def append(self, record: AuditRecord) -> None:
        self.append_many([record])

    def append_many(self, records: Iterable[AuditRecord]) -> None:
        """Append the records in one ``write`` and one ``fsync``: durable when this returns."""
        line = "".join(r.to_json() + "\n" for r in records).encode("utf-8")
        if not line:
            return
        fd = self._open()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                # A torn line left by a crash must not glue itself to this record.
                size = os.fstat(fd).st_size
                if size:
                    with open(self.path, "rb") as f:
                        f.seek(size - 1)
                        if f.read(1) != b"\n":
                            line = b"\n" + line
                view = memoryview(line)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def read(self, refused: bool = False) -> list[AuditRecord]:
        """Every change, oldest first ([] when the file does not exist yet): intents merged
        with their outcomes (:func:`merge_records`). Attempts that changed nothing (outcome
        ``refused`` or ``not sent``) only with ``refused=True``."""
        merged = merge_records(self.read_lines())
        return merged if refused else [r for r in merged if r.outcome not in NOTHING_CHANGED]

    def read_lines(self) -> list[AuditRecord]:
        """Every line of the log as it is (intents and outcomes apart), oldest first."""
        self.skipped = 0
        try:
            data = self.path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise ConfigError(f"Cannot read the audit log {self.path}: {exc}",
                              path=str(self.path)) from exc
        records = []
        for line in data.splitlines():
            if not line.strip():
                continue
            try:
                records.append(AuditRecord.from_dict(json.loads(line)))
            except (ValueError, TypeError):
                self.skipped += 1
        return records


_CSV_FIELDS = ("ts", "actor", "cluster", "entity", "action", "ops", "before", "after",
               "outcome", "note", "id")


def _ops_text(ops: Iterable[Mapping]) -> str:
    return ", ".join(f"{o['key']}={o['value']}" if o["value"] is not None else f"-{o['key']}"
                     for o in ops)


def _q_text(q: Mapping) -> str:
    return ", ".join(f"{k}={v}" for k, v in q.items())


def records_csv(records: Iterable[AuditRecord]) -> str:
    """A CSV for spreadsheets: one row per record, quotas as ``k=v`` lists."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(_CSV_FIELDS)
    for r in records:
        cluster = r.cluster.get("cluster_id") or r.cluster.get("location") or ""
        w.writerow([r.ts, r.actor, cluster, r.entity_text, r.action, _ops_text(r.ops),
                    _q_text(r.before), _q_text(r.after),
                    WRITER_STOPPED if r.note == WRITER_STOPPED else r.outcome, r.note, r.id])
    return buf.getvalue()


def records_jsonl(records: Iterable[AuditRecord]) -> str:
    """The records as JSON lines (one per change: an intent with its outcome folded in)."""
    return "".join(r.to_json() + "\n" for r in records)
