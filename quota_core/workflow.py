"""The one apply workflow: preview, guarded apply, read-back and audit.

Every writer goes through here (the Edit page, the CLI's alter and import, plan/apply), so
all of them validate the same way, refuse the same concurrent changes and write the same
audit log. :func:`preview` is ``checked_alter(validate_only=True)`` plus the diff and the
client impact; :func:`apply_change` re-reads the entity, refuses with
:class:`~quota_core.errors.ConcurrentChange` if it moved since the form was loaded, applies,
reads the result back, and appends the audit record.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from .alterations import AlterOutcome, Alteration, apply_ops
from .audit import AuditLog, AuditRecord, new_record
from .backend import QuotaBackend, checked_alter
from .errors import BackendError
from .live import TrafficChange, traffic_impact
from .impact import (ClientChange, KeyChange, apply_alteration, client_impact,
                               entity_diff, ensure_unchanged, ip_impact)

__all__ = ["Preview", "Applied", "preview", "apply_change", "read_back"]


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


def read_back(backend: QuotaBackend, alteration: Alteration, expected: Mapping[str, float],
              timeout_s: float = 5.0) -> tuple[dict[str, float], bool]:
    """Describe the entity until it shows ``expected`` (brokers are eventually consistent);
    ``(what was read, whether it matched)``."""
    deadline = time.monotonic() + timeout_s
    while True:
        got = backend.describe_entity(alteration.entity)
        if got == dict(expected) or time.monotonic() >= deadline:
            return got, got == dict(expected)
        time.sleep(0.2)


def apply_change(backend: QuotaBackend, alteration: Alteration,
                 loaded_before: Mapping[str, float], *, actor: str,
                 cluster: Mapping[str, object], audit: AuditLog,
                 action: str = "alter") -> Applied:
    """Apply ``alteration`` if the entity still holds ``loaded_before``.

    Raises ConcurrentChange (nothing applied), AlterationError (client-side validation),
    or BackendError (the broker refused: its reason is the message)."""
    current = backend.describe_entity(alteration.entity)
    ensure_unchanged(alteration.entity, loaded_before, current)
    outcome = checked_alter(backend, [alteration])
    if not outcome.ok:
        result = outcome.failed[0]
        raise BackendError(f"The cluster refused the change to {alteration.entity}: "
                           f"{result.error}" + (f" ({result.error_code})"
                                                if result.error_code else ""))
    expected = apply_ops(current, alteration.ops)
    after, settled = read_back(backend, alteration, expected)
    record = new_record(actor=actor, cluster=cluster, alteration=alteration, before=current,
                        after=after, action=action,
                        note="" if settled else "read-back did not show the change yet")
    audit.append(record)
    return Applied(alteration, dict(current), after, record, settled)
