"""The one apply workflow: preview, guarded apply, read-back and audit.

Every writer goes through here (the Edit page, the CLI's alter and import, plan/apply), so
all of them validate the same way, refuse the same concurrent changes and write the same
audit log. :func:`preview` is ``checked_alter(validate_only=True)`` plus the diff and the
client impact; :func:`apply_changes` (one entity: :func:`apply_change`) builds the audit
intents, takes the store's write lease, re-reads the entities once (the guard read), refuses
with :class:`~quota_core.errors.ConcurrentChange` if any moved since it was loaded, writes and
fsyncs the intents, applies in one request, reads the result back once (bounded: no second
polling loop), releases the lease and appends one outcome line per entity. A read-back that is
not what this writer wrote is a conflict, never "applied". Every step is linear in the
entities (issue 32).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

from quota_core.domain.alterations import AlterOutcome, Alteration, EntityResult, apply_ops
from quota_core.changes.audit import AuditLog, AuditRecord, new_record, outcome_record
from quota_core.changes.progress import ApplyProgress
from quota_core.backends.base import QuotaBackend, checked_alter
from quota_core.domain.entities import Entity
from quota_core.domain.fleet import DEFAULT_NAME
from quota_core.domain.validation import validate_alterations
from quota_core.errors import (BackendError, ConcurrentChange, OutcomeUnknown, QuotaError,
                               ReadOnlyCluster, WriteConflict)
from quota_core.domain.keys import json_number, same_value
from quota_core.domain.limits import PER_ENTITY_READS
from quota_core.throttling.live import TrafficChange, traffic_impact
from quota_core.planning.impact import (ClientChange, KeyChange, apply_alteration, client_impact,
                                        entity_diff, ensure_unchanged, ip_impact)

if TYPE_CHECKING:
    from quota_core.domain.fleet import ClusterConfig

#: How much longer a guarded write may take per 1,000 entities than its fixed part (the
#: lease, a describe, one request): the guard read, the intents, the alter and the read-back
#: of 100,000 entities held a 3-broker cluster's lease 32 s (64 s on busier cores; issue 32).
#: A write asks for its lease, and checks before sending that the lease has left, this much
#: more.
LEASE_S_PER_1000 = 1.0

__all__ = ["Preview", "Applied", "AppliedSet", "preview", "apply_change", "apply_changes",
           "conflict_message", "read_back_set", "refuse_read_only"]


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
    #: The read-back shows exactly what this writer wrote.
    settled: bool
    #: What this writer wrote (``after`` is what the read-back showed).
    meant: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class AppliedSet:
    """What :func:`apply_changes` did: the backend's answer per entity, the entities applied
    (read back as written, and audited), the ones refused (nothing changed there), the
    conflicts (written, but the read-back shows other values: another writer), and an
    audit-log failure after applying (the changes stand, their outcome lines are missing;
    their intents were written before)."""

    outcome: AlterOutcome
    applied: list[Applied]
    refused: list[EntityResult]
    audit_error: QuotaError | None = None
    conflicts: list[Applied] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.refused and not self.conflicts and self.audit_error is None


def preview(backend: QuotaBackend, quotas: Mapping, alteration: Alteration,
            before: Mapping[str, float], clients: Sequence[tuple[str, str]],
            series: Sequence | None = None, unread: Sequence[str] = ()) -> Preview:
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
    traffic = traffic_impact(base, new, series, unread) if series and not alteration.entity.is_ip else []
    return Preview(alteration, dict(before), after, outcome, entity_diff(before, after),
                   impact, len(clients), traffic)


def _same_quotas(a: Mapping[str, float], b: Mapping[str, float]) -> bool:
    return set(a) == set(b) and all(same_value(a[k], b[k]) for k in a)


def _read_entities(backend: QuotaBackend, entities: Sequence[Entity]) -> dict[Entity, dict]:
    """The quotas of each entity: one describe per entity for a few, one describe of the
    whole set for many."""
    if len(entities) <= PER_ENTITY_READS:
        return {e: backend.describe_entity(e) for e in entities}
    everything = backend.describe()
    return {e: dict(everything.get(e, {})) for e in entities}


def read_back_set(backend: QuotaBackend, expected: Mapping[Entity, Mapping[str, float]]
                  ) -> tuple[dict[Entity, dict], dict[Entity, bool]]:
    """The one read-back after an alter: each entity read once (one describe per entity for a
    few, one of the whole set for many); ``(what was read, per entity whether it matched)``.

    It does not poll: a backend whose reads lag its writes waits for them in its own
    ``alter`` (Kafka's: until every broker of the cluster shows the change, for at most its
    ``timeout_s``, else OutcomeUnknown naming the broker behind), so the read-back is bounded
    by that wait and one describe, whichever broker answers it, and a second loop never waits
    for the same propagation. What differs now was changed by another writer: a conflict."""
    got = _read_entities(backend, list(expected))
    return got, {e: _same_quotas(got[e], q) for e, q in expected.items()}


def apply_change(backend: QuotaBackend, alteration: Alteration,
                 loaded_before: Mapping[str, float], *, actor: str,
                 cluster: Mapping[str, object], audit: AuditLog,
                 action: str = "alter", lease_wait_s: float | None = None) -> Applied:
    """Apply ``alteration`` if the entity still holds ``loaded_before``.

    Raises ConcurrentChange (nothing applied), AlterationError (client-side validation),
    BackendError (the broker refused: its reason is the message), LeaseUnavailable (another
    writer holds the lease: nothing applied), WriteConflict (applied, but the read-back shows
    something else: another writer), OutcomeUnknown; ConfigError when the audit log cannot be
    written (checked before applying)."""
    done = apply_changes(backend, [alteration], {alteration.entity: loaded_before},
                         actor=actor, cluster=cluster, audit=audit, action=action,
                         lease_wait_s=lease_wait_s)
    if done.refused:
        result = done.refused[0]
        raise BackendError(f"The cluster refused the change to {alteration.entity.display()}: "
                           f"{result.error}" + (f" ({result.error_code})"
                                                if result.error_code else ""))
    if done.conflicts:
        raise WriteConflict(conflict_message(done.conflicts), entities=done.conflicts)
    if done.audit_error is not None:
        raise done.audit_error
    return done.applied[0]


def conflict_message(conflicts: Sequence[Applied]) -> str:
    """One sentence per entity whose read-back is not what this writer wrote."""
    def q(quotas: Mapping[str, float]) -> str:
        return "{" + ", ".join(f"{k}={json_number(v)}" for k, v in sorted(quotas.items())) + "}"

    return " ".join(
        f"{a.alteration.entity.display()} was written, but it now holds {q(a.after)}, not the "
        f"{q(a.meant)} this change wrote: another writer changed it meanwhile." for a in conflicts
    ) + " Read it again and decide which values it should hold."


def _outcomes_unknown(exc: BaseException, intents: Mapping[Entity, AuditRecord],
                      current: Mapping[Entity, Mapping[str, float]],
                      meant: Mapping[Entity, Mapping[str, float]]) -> list[AuditRecord]:
    """The outcome lines after a lost answer (OutcomeUnknown: per entity what is known) or a
    request that failed as a whole (every entity unknown)."""
    results = {r.entity: r for r in (exc.outcome.results if isinstance(exc, OutcomeUnknown)
                                     and exc.outcome is not None else ())}
    not_sent = set(exc.not_sent) if isinstance(exc, OutcomeUnknown) else set()
    lagging = isinstance(exc, OutcomeUnknown) and bool(exc.context.get("lagging"))
    rows = []
    for entity, intent in intents.items():
        r = results.get(entity)
        if r is not None and r.ok:
            rows.append(outcome_record(intent, "applied", meant[entity], note=(
                "every broker that answered shows the change" if lagging else
                "the answer was lost; a describe showed the change")))
        elif r is not None:
            rows.append(outcome_record(intent, "refused", current[entity], note=str(r.error)))
        elif entity in not_sent:
            rows.append(outcome_record(intent, "not sent", current[entity],
                                       note="not sent (not applied)"))
        else:
            rows.append(outcome_record(intent, "unknown", meant[entity],
                                       note=f"outcome unknown: {exc}; 'after' is what was "
                                            f"asked for"))
    return rows


def _append_quietly(audit: AuditLog, records: Sequence[AuditRecord]) -> QuotaError | None:
    try:
        audit.append_many(records)
    except QuotaError as exc:
        return exc
    return None


def _stopped_outcomes(exc: BaseException, intents: Mapping[Entity, AuditRecord],
                      before: Mapping[Entity, Mapping[str, float]],
                      meant: Mapping[Entity, Mapping[str, float]],
                      sent: bool) -> list[AuditRecord]:
    """The outcome lines of intents that an unforeseen stop left open (an interrupt, a lease
    that ran out before sending, a failed commit): ``not sent`` when nothing had been sent,
    else ``unknown``. No intent is left without an outcome while this process lives."""
    what = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
    if not sent:
        return [outcome_record(i, "not sent", before[e], note=f"not sent (not applied): {what}")
                for e, i in intents.items()]
    return [outcome_record(i, "unknown", meant[e], note=(
        f"outcome unknown: the writer stopped after sending ({what}); 'after' is what was "
        f"asked for: describe the entity to see")) for e, i in intents.items()]


def refuse_read_only(target: "ClusterConfig | None") -> None:
    """Every write to a cluster of the fleet goes through here first: a ``read_only = true``
    cluster is refused with one line naming it (exit 1), before anything is sent or
    recorded."""
    if target is not None and target.read_only:
        from quota_core.domain.wording import read_only_refused

        raise ReadOnlyCluster(read_only_refused(target.name, target.source or "the fleet file"),
                              cluster=target.name)


def apply_changes(backend: QuotaBackend, alterations: Sequence[Alteration],
                  loaded: Mapping[Entity, Mapping[str, float]], *, actor: str,
                  cluster: Mapping[str, object], audit: AuditLog, action: str = "alter",
                  extra: Mapping | None = None, lease_wait_s: float | None = None,
                  precheck: Callable[[QuotaBackend], None] | None = None,
                  validate: bool = True,
                  progress: Callable[[str], None] | None = None,
                  target: "ClusterConfig | None" = None) -> AppliedSet:
    """Apply each alteration if its entity still holds what ``loaded`` says (an entity
    missing from ``loaded`` must not exist); each entity is all-or-nothing.

    One guarded step, under the store's write lease (:meth:`QuotaBackend.write_lease`,
    waited for up to ``lease_wait_s``, default the backend's timeout): ``precheck`` (e.g. a
    plan's whole-set check), the re-read of every entity (ConcurrentChange listing each one
    that moved; nothing applied), the intent lines fsync-ed to the audit log, the alter, and
    the read-back. Then one outcome line per entity. An entity whose read-back is not what
    this writer wrote is a conflict (:attr:`AppliedSet.conflicts`). Before anything is sent the
    audit log must be writable (ConfigError) and the alterations valid (AlterationError). A
    request that fails as a whole raises BackendError; a lost answer OutcomeUnknown.
    ``validate=False`` leaves the values to the backend, whose refusals come back per entity
    (the kafka-configs.sh dialect prints the broker's own reasons).

    The lease is held only for the guarded step: what each entity will hold and its intent
    line are worked out before it is taken (from ``loaded``, which the re-read then proves
    current), the outcome lines after it is released. Every lookup is a dict, so the time
    grows linearly with the entities (issue 32). Every intent line written gets its outcome
    line, however the step ends (an exception names it; only a killed process leaves an
    intent open, read as "the writer stopped"). ``progress`` gets a line per step (and every
    few seconds while one lasts) for an apply of many entities
    (:class:`~quota_core.changes.progress.ApplyProgress`).

    ``target``: the cluster of the fleet being written (issue 29). A ``read_only`` one is
    refused first (:class:`~quota_core.errors.ReadOnlyCluster`: nothing sent, nothing
    recorded), and its name is recorded as ``"cluster"`` in every audit line ("default"
    without a fleet: the fleet of one)."""
    refuse_read_only(target)
    # the contract's "cluster": NAME: the fleet's name, else the fleet of one's ("default")
    cluster = ({**cluster, "name": target.name} if target is not None
               else {"name": DEFAULT_NAME, **cluster})
    audit.ensure_writable()
    if validate:
        validate_alterations(alterations)
    wait_s = lease_wait_s if lease_wait_s is not None else float(
        getattr(backend, "timeout_s", 10.0))
    first: dict[Entity, Alteration] = {}
    for a in alterations:
        first.setdefault(a.entity, a)
    n = len(first)
    timeout_s = float(getattr(backend, "timeout_s", 10.0))
    # the alter and its read-back must end while the lease is held: a bigger write asks for
    # a longer lease, and for that much of it to be left before sending
    sending_s = min(timeout_s, 20.0) + 10.0 + n / 1000 * LEASE_S_PER_1000
    hold_s = sending_s + n / 1000 * LEASE_S_PER_1000  # and the guard read and intents before
    with ApplyProgress(progress, n) as report:
        report.step(f"preparing {n:,} intents")
        # Planned before the lease: the re-read under it refuses any entity that no longer
        # holds what was loaded, so these are the values it holds when the change is sent.
        before = {e: dict(loaded.get(e, {})) for e in first}
        meant = {e: apply_ops(before[e], a.ops) for e, a in first.items()}
        intents = {e: new_record(actor=actor, cluster=cluster, alteration=a,
                                 before=before[e], after=meant[e],
                                 action="delete" if action == "alter" and not meant[e]
                                 else action, outcome="intent", extra=extra, phase="intent")
                   for e, a in first.items()}
        report.step("waiting for the write lease")
        recorded = sent = closed = False
        try:
            with backend.write_lease(actor, wait_s, hold_s=hold_s) as lease:
                report.step(f"checking that the {n:,} entities still hold what was read")
                if precheck is not None:
                    precheck(backend)
                current = _read_entities(backend, list(first))
                _refuse_moved(alterations, before, current)
                report.step(f"recording {n:,} intents in the audit log")
                audit.append_many(list(intents.values()))  # durable before anything is sent
                recorded = True
                lease.ensure(sending_s)
                report.step("sending the changes")
                sent = True
                try:
                    outcome = backend.alter(alterations)
                except OutcomeUnknown as exc:  # says itself what is known, unknown, not sent
                    closed = True
                    _append_quietly(audit, _outcomes_unknown(exc, intents, before, meant))
                    raise
                except BackendError as exc:
                    closed = True
                    _append_quietly(audit, _outcomes_unknown(exc, intents, before, meant))
                    raise BackendError(
                        f"The request to apply {len(alterations)} entity "
                        f"change{'' if len(alterations) == 1 else 's'} failed: {exc} Whether "
                        f"{'it was' if len(alterations) == 1 else 'they were'} applied is not "
                        f"known: describe the entit{'y' if len(alterations) == 1 else 'ies'} "
                        f"(or plan again) to see.", phase="alter") from exc
                answered = outcome.by_entity
                ok = [a for e, a in first.items() if e in answered and answered[e].ok]
                expected = {a.entity: meant[a.entity] for a in ok}
                unreadable = ""
                report.step(f"reading back {len(expected):,} changes")
                try:
                    got, settled = read_back_set(backend, expected) if ok else ({}, {})
                except QuotaError as exc:  # applied, but not readable now: record what was sent
                    got = {e: dict(q) for e, q in expected.items()}
                    settled = {e: True for e in expected}
                    unreadable = f"could not read back ({exc}); 'after' is what was sent"
            report.step(f"recording {n:,} outcomes in the audit log")
            rows: list[AuditRecord] = []
            applied: list[Applied] = []
            for a in ok:
                e = a.entity
                if settled[e]:
                    row = outcome_record(intents[e], "applied", got[e], note=unreadable)
                else:
                    row = outcome_record(intents[e], "conflict", got[e], note=(
                        "the read-back shows other values than this change wrote: another writer "
                        "changed the entity meanwhile"))
                rows.append(row)
                applied.append(Applied(a, dict(before[e]), got[e], row, settled[e], meant[e]))
            for e, intent in intents.items():
                r = answered.get(e)
                if r is None:  # the backend did not answer for it (never expected of one)
                    rows.append(outcome_record(intent, "unknown", meant[e],
                                               note="outcome unknown: the cluster's answer did "
                                                    "not name this entity"))
                elif not r.ok:
                    rows.append(outcome_record(intent, "refused", before[e], note=str(r.error)))
            audit_error = _append_quietly(audit, rows)
            closed = True
        except BaseException as exc:
            if recorded and not closed:  # an intent must never be left without its outcome
                _append_quietly(audit, _stopped_outcomes(exc, intents, before, meant, sent))
            raise
        report.done(f"{len(ok):,} applied, {len(outcome.failed):,} refused")
    return AppliedSet(outcome, [a for a in applied if a.settled], list(outcome.failed),
                      audit_error, [a for a in applied if not a.settled])


def _refuse_moved(alterations: Sequence[Alteration], loaded: Mapping[Entity, Mapping],
                  current: Mapping[Entity, Mapping]) -> None:
    """ConcurrentChange (nothing applied) listing every entity that no longer holds what
    was loaded."""
    conflicts: list[ConcurrentChange] = []
    for a in alterations:
        try:
            ensure_unchanged(a.entity, loaded[a.entity], current[a.entity])
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
