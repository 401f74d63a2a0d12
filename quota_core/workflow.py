"""The one apply workflow: preview, guarded apply, read-back and audit.

Every writer goes through here (the Edit page, the CLI's alter and import, plan/apply), so
all of them validate the same way, refuse the same concurrent changes and write the same
audit log. :func:`preview` is ``checked_alter(validate_only=True)`` plus the diff and the
client impact; :func:`apply_change` re-reads the entity, refuses with
:class:`~quota_core.errors.ConcurrentChange` if it moved since the form was loaded, applies,
reads the result back, and appends the audit record. :func:`apply_changes` is the same for
several entities at once (the CLI's alter / import, plan apply): one read, one request with a
result per entity, one read-back, one audit record per applied entity.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from .alterations import AlterOutcome, Alteration, EntityResult, apply_ops
from .audit import AuditLog, AuditRecord, new_record
from .backend import QuotaBackend, checked_alter
from .entities import Entity
from .validation import validate_alterations
from .errors import BackendError, ConcurrentChange, OutcomeUnknown, QuotaError
from .keys import same_value
from .live import TrafficChange, traffic_impact
from .impact import (ClientChange, KeyChange, apply_alteration, client_impact,
                               entity_diff, ensure_unchanged, ip_impact)

__all__ = ["Preview", "Applied", "AppliedSet", "preview", "apply_change", "apply_changes",
           "read_back", "read_back_set"]


@dataclass(frozen=True)
class Preview:
    alteration: Alteration
    before: dict[str, float]
    after: dict[str, float]
    outcome: AlterOutcome
    diff: list[KeyChange]
    impact: list[ClientChange]
    clients_checked: int
    #: Buckets the brokers report whose quota changes, judged at today's rates (empty without
    #: live metrics).
    traffic: list[TrafficChange] = field(default_factory=list)

    @property
    def accepted(self) -> bool:
        return self.outcome.ok


@dataclass(frozen=True)
class Applied:
    alteration: Alteration
    before: dict[str, float]
    after: dict[str, float]
    record: AuditRecord
    settled: bool


@dataclass(frozen=True)
class AppliedSet:
    """What :func:`apply_changes` did: the backend's answer per entity, the entities applied
    (read back and audited), the ones refused (nothing changed there), and an audit-log
    failure after applying (the changes stand, their records are missing)."""

    outcome: AlterOutcome
    applied: list[Applied]
    refused: list[EntityResult]
    audit_error: QuotaError | None = None

    @property
    def ok(self) -> bool:
        return not self.refused and self.audit_error is None


def preview(backend: QuotaBackend, quotas: Mapping, alteration: Alteration,
            before: Mapping[str, float], clients: Sequence[tuple[str, str]],
            series: Sequence | None = None) -> Preview:
    """Ask the backend to validate (nothing is written) and work out what would change: for
    the known clients, and (with the brokers' live ``series``) for the traffic seen now."""
    outcome = checked_alter(backend, [alteration], validate_only=True)
    after = apply_ops(before, alteration.ops)
    base = dict(quotas)
    if before:
        base[alteration.entity] = dict(before)
    else:
        base.pop(alteration.entity, None)
    new = apply_alteration(base, alteration)
    if alteration.entity.is_ip:
        impact = ip_impact(base, new, alteration.entity)
    else:
        impact = client_impact(base, new, clients, [alteration.entity])
    traffic = traffic_impact(base, new, series) if series and not alteration.entity.is_ip else []
    return Preview(alteration, dict(before), after, outcome, entity_diff(before, after),
                   impact, len(clients), traffic)


def _same_quotas(a: Mapping[str, float], b: Mapping[str, float]) -> bool:
    return set(a) == set(b) and all(same_value(a[k], b[k]) for k in a)


def _read_entities(backend: QuotaBackend, entities: Sequence[Entity]) -> dict[Entity, dict]:
    """The quotas of each entity: one describe per entity for a few, one describe of the
    whole set for many."""
    if len(entities) <= 20:
        return {e: backend.describe_entity(e) for e in entities}
    everything = backend.describe()
    return {e: dict(everything.get(e, {})) for e in entities}


def read_back_set(backend: QuotaBackend, expected: Mapping[Entity, Mapping[str, float]],
                  timeout_s: float = 5.0) -> tuple[dict[Entity, dict], dict[Entity, bool]]:
    """Describe the entities until each shows what is ``expected`` (brokers are eventually
    consistent); ``(what was read, per entity whether it matched)``."""
    deadline = time.monotonic() + timeout_s
    while True:
        got = _read_entities(backend, list(expected))
        settled = {e: _same_quotas(got[e], q) for e, q in expected.items()}
        if all(settled.values()) or time.monotonic() >= deadline:
            return got, settled
        time.sleep(0.2)


def read_back(backend: QuotaBackend, alteration: Alteration, expected: Mapping[str, float],
              timeout_s: float = 5.0) -> tuple[dict[str, float], bool]:
    """Describe the entity until it shows ``expected`` (brokers are eventually consistent);
    ``(what was read, whether it matched)``."""
    got, settled = read_back_set(backend, {alteration.entity: expected}, timeout_s)
    return got[alteration.entity], settled[alteration.entity]


def apply_change(backend: QuotaBackend, alteration: Alteration,
                 loaded_before: Mapping[str, float], *, actor: str,
                 cluster: Mapping[str, object], audit: AuditLog,
                 action: str = "alter") -> Applied:
    """Apply ``alteration`` if the entity still holds ``loaded_before``.

    Raises ConcurrentChange (nothing applied), AlterationError (client-side validation),
    or BackendError (the broker refused: its reason is the message); ConfigError when the
    audit log cannot be written (checked before applying)."""
    done = apply_changes(backend, [alteration], {alteration.entity: loaded_before},
                         actor=actor, cluster=cluster, audit=audit, action=action)
    if done.refused:
        result = done.refused[0]
        raise BackendError(f"The cluster refused the change to {alteration.entity.display()}: "
                           f"{result.error}" + (f" ({result.error_code})"
                                                if result.error_code else ""))
    if done.audit_error is not None:
        raise done.audit_error
    return done.applied[0]


def _audit_unknown(exc: OutcomeUnknown, alterations: Sequence[Alteration],
                   current: Mapping[Entity, Mapping[str, float]], *, actor: str,
                   cluster: Mapping[str, object], audit: AuditLog, action: str,
                   extra: Mapping | None) -> None:
    """Audit what may have changed after a lost answer: entities a describe showed applied
    (outcome "applied"), and entities sent without an answer (outcome "unknown", ``after``
    = what was asked for). Never fails: the OutcomeUnknown is what the caller must see."""
    first: dict[Entity, Alteration] = {}
    for a in alterations:
        first.setdefault(a.entity, a)
    applied = [r.entity for r in (exc.outcome.results if exc.outcome is not None else ())
               if r.ok]
    rows = [(e, "applied", "the answer was lost; a describe showed the change")
            for e in applied] + [(e, "unknown", f"outcome unknown: {exc}; 'after' is what was "
                                  f"asked for") for e in exc.unknown]
    for entity, outcome, note in rows:
        if entity not in first:
            continue
        a = first[entity]
        try:
            audit.append(new_record(actor=actor, cluster=cluster, alteration=a,
                                    before=current.get(entity, {}),
                                    after=apply_ops(current.get(entity, {}), a.ops),
                                    action=action, outcome=outcome, note=note, extra=extra))
        except QuotaError:
            return


def apply_changes(backend: QuotaBackend, alterations: Sequence[Alteration],
                  loaded: Mapping[Entity, Mapping[str, float]], *, actor: str,
                  cluster: Mapping[str, object], audit: AuditLog, action: str = "alter",
                  extra: Mapping | None = None) -> AppliedSet:
    """Apply each alteration if its entity still holds what ``loaded`` says (an entity
    missing from ``loaded`` must not exist), in one request; each entity is all-or-nothing.

    Before anything is sent: the audit log must be writable (ConfigError), every entity must
    be unchanged (ConcurrentChange listing each one that moved; nothing applied), and every
    alteration must pass client-side validation (AlterationError). Then each entity applied
    is read back and gets one audit record (``action``; ``"delete"`` for an ``"alter"``
    that empties the entity). A request that fails as a whole raises BackendError."""
    audit.ensure_writable()
    current = _read_entities(backend, [a.entity for a in alterations])
    conflicts: list[ConcurrentChange] = []
    for a in alterations:
        try:
            ensure_unchanged(a.entity, loaded.get(a.entity, {}), current[a.entity])
        except ConcurrentChange as exc:
            conflicts.append(exc)
    if len(conflicts) == 1:
        raise conflicts[0]
    if conflicts:
        raise ConcurrentChange(
            f"{len(conflicts)} entities changed since they were read; nothing was applied: "
            + " ".join(c.context["entity"].display() + ": " + "; ".join(
                k.describe() for k in c.context["changes"]) + "." for c in conflicts)
            + " Read them again and make the change again.",
            conflicts=conflicts, changes=[k for c in conflicts for k in c.context["changes"]])
    validate_alterations(alterations)
    try:
        outcome = backend.alter(alterations)
    except OutcomeUnknown as exc:  # says itself what is known, unknown and not sent
        _audit_unknown(exc, alterations, current, actor=actor, cluster=cluster, audit=audit,
                       action=action, extra=extra)
        raise
    except BackendError as exc:
        n = len(alterations)
        raise BackendError(
            f"The request to apply {n} entity change{'' if n == 1 else 's'} failed: {exc} "
            f"Whether {'it was' if n == 1 else 'they were'} applied is not known: describe "
            f"the entit{'y' if n == 1 else 'ies'} (or plan again) to see.",
            phase="alter") from exc
    ok = [a for a in alterations if outcome.for_entity(a.entity).ok]
    expected = {a.entity: apply_ops(current[a.entity], a.ops) for a in ok}
    note = "read-back did not show the change yet"
    try:
        got, settled = read_back_set(backend, expected) if ok else ({}, {})
    except QuotaError as exc:  # applied, but not readable now: record what was sent
        got, settled = {e: dict(q) for e, q in expected.items()}, {e: False for e in expected}
        note = f"could not read back ({exc}); 'after' is what was sent"
    applied: list[Applied] = []
    audit_error: QuotaError | None = None
    for a in ok:
        act = "delete" if action == "alter" and not expected[a.entity] else action
        record = new_record(actor=actor, cluster=cluster, alteration=a,
                            before=current[a.entity], after=got[a.entity], action=act,
                            note="" if settled[a.entity] else note, extra=extra)
        if audit_error is None:
            try:
                audit.append(record)
            except QuotaError as exc:
                audit_error = exc
        applied.append(Applied(a, dict(current[a.entity]), got[a.entity], record,
                               settled[a.entity]))
    return AppliedSet(outcome, applied, list(outcome.failed), audit_error)
