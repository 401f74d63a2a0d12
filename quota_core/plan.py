"""Plans: the changes that bring a cluster's quota set to a desired file, and the plan
document ``apply`` executes. Pure: quota sets in, plain values out; no I/O.

A desired file (the export format, :mod:`quota_core.serialization`) is exact *per entry*:
an entity in the file ends up with exactly the keys the file gives it (a key deleted from an
exported entry is removed; an entry with ``quotas: {}`` removes the entity). Entities the file
does not mention are *unmanaged*: listed, never changed, unless ``prune`` is set, when they
are removed.

The plan document records the exact quota set it was computed against (the set itself and
its canonical hash, :func:`quota_set_hash`), the alterations, and the hash of the set they
lead to, so ``apply`` can refuse when the cluster moved since, and a plan file that was
edited by hand is refused too.

Those hashes catch accidents (a damaged or carelessly edited file), not tampering: anyone can
recompute a sha256. With a plan key (``QUOTA_PLAN_KEY``, or ``[plan] key`` in the dashboard's
secrets) a plan carries ``signature``, an HMAC-SHA256 over its canonical content
(:func:`canonical_plan`), and :func:`verify_plan` refuses a plan whose signature does not
verify. The plan also records the id of the cluster it was made on (``cluster.cluster_id``);
:func:`check_plan_cluster` refuses it anywhere else.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import math
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Mapping, Sequence

from .alterations import Alteration, Op, apply_ops, diff_alteration
from .entities import Entity
from .errors import AlterationError, ParseError, PlanRefused, Problem, ValidationError
from .impact import (ANY_OTHER, ClientChange, KeyChange, client_impact, clients_from_entries,
                     entity_diff, ip_impact)
from .keys import NON_FINITE, json_number, same_value
from .serialization import QuotaFile, from_document, to_document
from .validation import alteration_problems, entry_problems

__all__ = ["PLAN_FORMAT", "EntityChange", "Plan", "PlanImpact", "quota_set_hash", "make_plan",
           "plan_impact", "plan_document", "read_plan", "set_diff", "change_kind", "plan_key",
           "canonical_plan", "sign_plan", "verify_plan", "check_plan_cluster", "SincePlan",
           "since_plan", "load_plan", "check_plan_fields"]

PLAN_FORMAT = "quota-console-plan/1"
QuotaSet = Mapping[Entity, Mapping[str, float]]


def canonical_json(quotas: QuotaSet) -> str:
    """One text per quota set: entries sorted, integral values as integers, NaN as "NaN"."""
    return json.dumps(to_document(quotas)["entries"], ensure_ascii=False, sort_keys=True,
                      separators=(",", ":"), allow_nan=False)


def quota_set_hash(quotas: QuotaSet) -> str:
    """``sha256:<hex>`` of :func:`canonical_json`: equal sets, equal hashes."""
    return "sha256:" + hashlib.sha256(canonical_json(quotas).encode("utf-8")).hexdigest()


def change_kind(change: KeyChange) -> str:
    """``add`` / ``change`` / ``remove`` for one key (``unchanged`` when the same, NaN too)."""
    if change.before is None:
        return "add"
    if change.after is None:
        return "remove"
    return "unchanged" if same_value(change.before, change.after) else "change"


def set_diff(before: QuotaSet, after: QuotaSet) -> list[tuple[Entity, KeyChange]]:
    """Every (entity, key) whose value differs between two sets, in entity then key order."""
    out = []
    for entity in sorted(set(before) | set(after), key=Entity.sort_key):
        for c in entity_diff(before.get(entity, {}), after.get(entity, {})):
            if change_kind(c) != "unchanged":
                out.append((entity, c))
    return out


@dataclass(frozen=True)
class EntityChange:
    """One entity's part of a plan: ``add`` (new entity), ``change`` or ``remove`` (every key
    goes), the keys that change, and the alteration that does it."""

    entity: Entity
    action: str
    keys: tuple[KeyChange, ...]
    alteration: Alteration

    @property
    def before(self) -> dict[str, float]:
        return {c.key: c.before for c in self.keys if c.before is not None}


@dataclass(frozen=True)
class Plan:
    base: dict[Entity, dict[str, float]]
    changes: tuple[EntityChange, ...]
    unmanaged: dict[Entity, dict[str, float]]
    prune: bool = False
    source: str = ""
    base_hash: str = ""

    @property
    def alterations(self) -> list[Alteration]:
        return [c.alteration for c in self.changes]

    @property
    def after(self) -> dict[Entity, dict[str, float]]:
        """The quota set once the plan is applied."""
        out = {e: dict(q) for e, q in self.base.items()}
        for c in self.changes:
            new = apply_ops(out.get(c.entity, {}), c.alteration.ops)
            if new:
                out[c.entity] = new
            else:
                out.pop(c.entity, None)
        return out

    def counts(self) -> dict[str, int]:
        out = {"add": 0, "change": 0, "remove": 0}
        for c in self.changes:
            out[c.action] += 1
        return out

    def summary(self) -> str:
        """``3 entities to change (1 add, 1 change, 1 remove)`` or ``Nothing to change``."""
        if not self.changes:
            return "Nothing to change"
        n = len(self.changes)
        return (f"{n} entit{'y' if n == 1 else 'ies'} to change ("
                + ", ".join(f"{v} {k}" for k, v in self.counts().items() if v) + ")")


@dataclass(frozen=True)
class SincePlan:
    """What the quota set did since a plan was made: ``unchanged`` (apply it), ``applied``
    (it already holds the set the plan leads to: nothing to do) or ``moved`` (refuse, with
    ``drift``: every (entity, key) that differs from the plan's base, planned → now)."""

    state: str
    drift: tuple[tuple[Entity, KeyChange], ...] = ()


def since_plan(plan: Plan, current: QuotaSet) -> SincePlan:
    """The one drift check of ``apply`` and the Plan page, run under the write lease."""
    now = quota_set_hash(current)
    if plan.changes and now == quota_set_hash(plan.after):
        return SincePlan("applied")
    if now != plan.base_hash:
        return SincePlan("moved", tuple(set_diff(plan.base, current)))
    return SincePlan("unchanged")


def _entity_change(entity: Entity, before: Mapping[str, float],
                   after: Mapping[str, float]) -> EntityChange | None:
    alteration = diff_alteration(entity, before, after)
    if not alteration.ops:
        return None
    action = "add" if not before else "remove" if not after else "change"
    keys = tuple(c for c in entity_diff(before, after) if change_kind(c) != "unchanged")
    return EntityChange(entity, action, keys, alteration)


def make_plan(current: QuotaSet, desired: QuotaFile | QuotaSet, *, prune: bool = False,
              source: str | None = None) -> Plan:
    """The changes that bring ``current`` to ``desired``.

    Every value the plan would send is validated here, as the broker and our client-side
    rules would; problems raise :class:`AlterationError` naming the file line of each."""
    qfile = desired if isinstance(desired, QuotaFile) else QuotaFile(dict(desired))
    wanted = qfile.quotas
    changes, unmanaged = [], {}
    for entity in sorted(set(current) | set(wanted), key=Entity.sort_key):
        before = dict(current.get(entity, {}))
        if entity in wanted:
            after = dict(wanted[entity])
        elif prune:
            after = {}
        else:
            unmanaged[entity] = before
            continue
        change = _entity_change(entity, before, after)
        if change is not None:
            changes.append(change)
    problems: list[Problem] = []
    for change in changes:
        for p in alteration_problems(change.alteration):
            where = qfile.where(change.entity, p.key) if qfile.line(change.entity) else ""
            problems.append(Problem(f"{where}: {p.message}" if where else p.message,
                                    entity=p.entity, key=p.key))
    if problems:
        raise AlterationError(problems[0].message if len(problems) == 1 else (
            f"{len(problems)} problems, nothing was planned:\n"
            + "\n".join(f"- {p.message}" for p in problems)), problems=problems)
    base = {e: dict(q) for e, q in current.items()}
    return Plan(base, tuple(changes), unmanaged, prune,
                source if source is not None else qfile.source, quota_set_hash(base))


# --------------------------------------------------------------------------- impact
@dataclass(frozen=True)
class PlanImpact:
    """Who gets a different effective quota: known clients (named in the entries, and seen
    in the brokers' metrics), ips, and (with live metrics) the buckets at today's rates."""

    clients: list[ClientChange]
    clients_checked: int
    ips: list[ClientChange] = field(default_factory=list)
    traffic: list = field(default_factory=list)  # live.TrafficChange


def plan_impact(plan: Plan, series: Sequence | None = None,
                extra_clients: Sequence[tuple[str, str]] = (),
                unread: Sequence[str] = ()) -> PlanImpact:
    """``unread``: the brokers not read (quota_core.coverage.unread_brokers): the verdicts at
    today's rates are unknown rather than "freed" or "not throttled" then."""
    from .live import clients_seen, traffic_impact

    before, after = plan.base, plan.after
    known = list(dict.fromkeys(clients_from_entries({**before, **after}) + list(extra_clients)
                               + (clients_seen(series, ANY_OTHER) if series else [])))
    changed = [c.entity for c in plan.changes]
    clients = client_impact(before, after, known, changed)
    ips: list[ClientChange] = []
    for entity in changed:
        if entity.is_ip:
            ips += [c for c in ip_impact(before, after, entity) if c not in ips]
    traffic = traffic_impact(before, after, series, unread) if series else []
    return PlanImpact(clients, len(known), ips, traffic)


# --------------------------------------------------------------------------- the document
def _num(value: float | None) -> Any:
    return None if value is None else json_number(value)


def _impact_json(impact: PlanImpact) -> dict:
    def change(c: ClientChange) -> dict:
        who = {"ip": c.user} if c.kind == "ip" else {
            "user": None if c.user == ANY_OTHER else c.user,
            "client-id": None if c.client_id == ANY_OTHER else c.client_id}
        return {"client": who, "label": c.label, "key": c.key, "before": _num(c.before),
                "before_level": c.before_level, "after": _num(c.after),
                "after_level": c.after_level}

    return {"clients_checked": impact.clients_checked,
            "clients": [change(c) for c in impact.clients],
            "ips": [change(c) for c in impact.ips],
            "traffic": [{"broker": t.after.broker, "quota_type": t.after.quota_type,
                         "bucket": t.after.bucket, "rate": _num(t.after.rate),
                         "quota_before": _num(t.before.quota), "quota_after": _num(t.after.quota),
                         "verdict": t.verdict, "throttled": t.throttled,
                         "unread": list(t.unread)} for t in impact.traffic]}


def plan_document(plan: Plan, impact: PlanImpact | None = None, *,
                  cluster: Mapping[str, Any] | None = None,
                  now: datetime | None = None) -> dict:
    """The plan file ``apply`` reads (JSON). ``impact`` and ``cluster`` are for people;
    ``apply`` relies on ``base`` (the set and its hash), ``changes`` and ``after_hash``."""
    ts = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
    doc = {
        "format": PLAN_FORMAT,
        "created": ts.isoformat(timespec="seconds").replace("+00:00", "Z"),
        "source": plan.source,
        "prune": plan.prune,
        "cluster": dict(cluster or {}),
        "summary": {**plan.counts(), "unmanaged": len(plan.unmanaged)},
        "base": {"hash": plan.base_hash, "entries": to_document(plan.base)["entries"]},
        "after_hash": quota_set_hash(plan.after),
        "changes": [{
            "entity": c.entity.as_dict(), "action": c.action,
            "ops": [{"key": op.key, "value": _num(op.value)} for op in c.alteration.ops],
            "keys": [{"key": k.key, "change": change_kind(k), "before": _num(k.before),
                      "after": _num(k.after)} for k in c.keys]} for c in plan.changes],
        "unmanaged": [{"entity": e.as_dict(), "quotas": {k: json_number(v)
                                                          for k, v in sorted(q.items())}}
                      for e, q in plan.unmanaged.items()],
    }
    if impact is not None:
        doc["impact"] = _impact_json(impact)
    return doc


def _op(raw: Any, where: str) -> Op:
    if not isinstance(raw, dict) or not isinstance(raw.get("key"), str) or "value" not in raw:
        raise ParseError(f"{where}: an op must be {{\"key\": ..., \"value\": number or null}}.")
    value = raw["value"]
    if value is None:
        return Op.remove(raw["key"])
    if isinstance(value, str) and value in NON_FINITE:
        value = NON_FINITE[value]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ParseError(f"{where}: {raw['key']}={value!r} is not a number.")
    return Op.set(raw["key"], value)


def _remake(source: str) -> str:
    return f"Make a new plan with `kafka-client-quotas plan FILE ... --out {source}`."


class _NotANumber:
    """A JSON value no plan holds where a number may be: a bare ``NaN`` or ``Infinity`` (a
    plan writes them as strings), a number beyond a double's range, or an integer of
    thousands of digits. Kept as its text, so the field is named, not a crash later."""

    def __init__(self, text: str) -> None:
        self.text = text


def _plan_float(text: str) -> Any:
    number = float(text)
    return number if math.isfinite(number) else _NotANumber(text)


def _plan_int(text: str) -> Any:
    digits = len(text.lstrip("-"))
    return int(text) if digits <= 1000 else _NotANumber(f"an integer of {digits} digits")


def load_plan(text: str, source: str = "the plan") -> Any:
    """The JSON document in a plan file's ``text``; a one-line :class:`ParseError` when it is
    not JSON. ``NaN``, infinities and out-of-range numbers are kept as markers that
    :func:`read_plan` refuses naming their field."""
    try:
        return json.loads(text, parse_constant=_NotANumber, parse_float=_plan_float,
                          parse_int=_plan_int)
    except (ValueError, RecursionError) as exc:  # RecursionError: [[[[... (issue 16)
        reason = " ".join(str(exc).split()) if isinstance(exc, ValueError) else \
            "nested too deep"
        raise ParseError(f"{source} is not a plan file (not JSON: {reason}). "
                         f"{_remake(source)}") from None


_HASH = re.compile(r"sha256:[0-9a-f]{64}")


def _is_time(value: Any) -> bool:
    if not isinstance(value, str) or len(value) > 40:
        return False
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


#: A plan document's fields (as :func:`plan_document` writes them): name, required, the
#: test of a value and what it must be. One table for :func:`check_plan_fields`.
_FIELD_RULES: dict[str, tuple[Any, str]] = {
    "string": (lambda v: isinstance(v, str), "a string"),
    "time": (_is_time, "a time such as 2026-01-31T12:00:00Z"),
    "bool": (lambda v: isinstance(v, bool), "true or false"),
    "object": (lambda v: isinstance(v, dict), "an object"),
    "list": (lambda v: isinstance(v, list), "a list"),
    "hash": (lambda v: isinstance(v, str) and _HASH.fullmatch(v) is not None,
             "a hash (sha256: and 64 hex digits)"),
    "count": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
              "a whole number, 0 or more"),
    "name": (lambda v: v is None or isinstance(v, str), "a string or null"),
    "action": (lambda v: isinstance(v, str) and v in ("add", "change", "remove"),
               "add, change or remove"),
    "value": (lambda v: v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))
              or (isinstance(v, str) and v in NON_FINITE),
              "a number, \"NaN\", \"Infinity\" or null (remove the key)"),
}
_TOP_FIELDS: tuple[tuple[str, bool, str], ...] = (
    ("format", True, "string"), ("created", True, "time"), ("source", True, "string"),
    ("prune", True, "bool"), ("cluster", True, "object"), ("summary", True, "object"),
    ("base", True, "object"), ("after_hash", True, "hash"), ("changes", True, "list"),
    ("unmanaged", True, "list"), ("impact", False, "object"), ("signature", False, "string"))
_BASE_FIELDS = (("hash", True, "hash"), ("entries", True, "list"))
_CHANGE_FIELDS = (("entity", True, "object"), ("action", True, "action"),
                  ("ops", True, "list"), ("keys", True, "list"))
_OP_FIELDS = (("key", True, "string"), ("value", True, "value"))


def _not_numbers(doc: Any) -> tuple[str, _NotANumber] | None:
    """The first (path, marker) of a value :func:`load_plan` could not take as a number
    (iterative: JSON nests as deep as its parser allows)."""
    todo: list[tuple[str, Any]] = [("", doc)]
    while todo:
        path, value = todo.pop()
        if isinstance(value, _NotANumber):
            return path, value
        if isinstance(value, dict):
            todo += reversed([(f"{path}.{k}" if path else str(k), v) for k, v in value.items()])
        elif isinstance(value, list):
            todo += reversed([(f"{path}[{i}]", v) for i, v in enumerate(value)])
    return None


def check_plan_fields(doc: Any, source: str = "the plan") -> None:
    """Refuse (one-line :class:`ParseError`, naming the field as a path such as
    ``changes[0].ops[0].value``) a plan document with a field missing, of the wrong type, or
    holding a value that is not a JSON number (NaN, infinity, beyond a double). Unknown
    fields are let through (their numbers are still checked: the signature covers them)."""
    def refuse(path: str, problem: str) -> None:
        raise ParseError(f"{source}: field {path}: {problem}. {_remake(source)}")

    def fields(obj: dict, rules: tuple[tuple[str, bool, str], ...], prefix: str) -> None:
        for name, required, rule in rules:
            path = f"{prefix}{name}"
            if name not in obj:
                if required:
                    raise ParseError(f"{source} is not a complete plan file: field {path} is "
                                     f"missing. {_remake(source)}")
                continue
            test, what = _FIELD_RULES[rule]
            if not test(obj[name]):
                shown = json.dumps(obj[name], ensure_ascii=False, default=lambda v: "?")
                shown = shown if len(shown) <= 40 else shown[:30] + f"… ({len(shown):,} characters)"
                refuse(path, f"{shown} is not {what}")

    found = _not_numbers(doc)
    if found:
        path, marker = found
        refuse(path, f"{marker.text} is not a number a plan holds (JSON has no NaN or "
                     f"infinity; a plan writes them as \"NaN\", \"Infinity\")")
    fields(doc, _TOP_FIELDS, "")
    if doc["format"] != PLAN_FORMAT:
        refuse("format", f"{doc['format'][:40]!r} is not {PLAN_FORMAT}")
    fields(doc["base"], _BASE_FIELDS, "base.")
    for name, value in doc["cluster"].items():
        fields({name: value}, ((name, True, "name"),), "cluster.")
    fields(doc["summary"], tuple((name, True, "count") for name in
                                 ("add", "change", "remove", "unmanaged")), "summary.")
    for i, change in enumerate(doc["changes"]):
        if not isinstance(change, dict):
            refuse(f"changes[{i}]", "not an object")
        fields(change, _CHANGE_FIELDS, f"changes[{i}].")
        for j, op in enumerate(change["ops"]):
            if not isinstance(op, dict):
                refuse(f"changes[{i}].ops[{j}]", "not an object")
            fields(op, _OP_FIELDS, f"changes[{i}].ops[{j}].")
    for i, entry in enumerate(doc["unmanaged"]):
        if not isinstance(entry, dict):
            refuse(f"unmanaged[{i}]", "not an object")


def read_plan(doc: Any, source: str = "the plan") -> Plan:
    """The :class:`Plan` in a plan document. Refuses (ParseError) a document that is not a
    plan, with a malformed field (:func:`check_plan_fields`), a change that sets a value
    no quota file may hold (the checks of every quota file's reader,
    :func:`~quota_core.validation.entry_problems`), or whose base set, hash and changes do not
    agree (edited or damaged)."""
    remake = _remake(source)
    if not isinstance(doc, dict) or doc.get("format") != PLAN_FORMAT:
        raise ParseError(f"{source} is not a plan file (format {PLAN_FORMAT}): {remake}")
    check_plan_fields(doc, source)
    try:
        base_doc, changes_doc = doc["base"], doc["changes"]
        base = from_document({"entries": base_doc["entries"]}, f"{source}, base")
        stated = base_doc["hash"]
        changes: list[EntityChange] = []
        for i, raw in enumerate(changes_doc, start=1):
            try:
                entity = Entity.from_mapping(raw["entity"])
            except ValidationError as exc:
                raise ParseError(f"{source}: field changes[{i - 1}].entity: {exc} "
                                 f"{remake}") from None
            ops = tuple(_op(o, f"{source}, change {i}") for o in raw["ops"])
            for problem in entry_problems(entity, {op.key: op.value for op in ops
                                                   if op.value is not None})[:1]:
                raise ParseError(f"{source}, change {i}: {problem.message} {remake}")
            before = base.get(entity, {})
            after = apply_ops(before, ops)
            change = _entity_change(entity, before, after)
            if change is None or change.alteration.ops != ops:
                raise ParseError(f"{source}, change {i}: its ops for {entity.display()} do not follow "
                                 f"from the base set. {remake}")
            changes.append(change)
        unmanaged = from_document({"entries": doc.get("unmanaged", [])}, f"{source}, unmanaged")
    except (KeyError, TypeError, AttributeError) as exc:
        raise ParseError(f"{source} is not a complete plan file (missing or malformed {exc}). "
                         f"{remake}") from None
    except ValidationError as exc:
        if isinstance(exc, ParseError) and str(exc).startswith(source):
            raise
        raise ParseError(f"{source}: {exc} {remake}") from None
    if quota_set_hash(base) != stated:
        raise ParseError(f"{source}: its base quota set does not match its hash ({stated}): the "
                         f"file was edited or damaged. {remake}")
    plan = Plan({e: dict(q) for e, q in base.items()}, tuple(changes),
                {e: dict(q) for e, q in unmanaged.items()}, bool(doc.get("prune")),
                str(doc.get("source") or ""), stated)
    if doc.get("after_hash") != quota_set_hash(plan.after):
        raise ParseError(f"{source}: its changes do not lead to the set it recorded "
                         f"(after_hash): the file was edited or damaged. {remake}")
    if len({c.entity for c in changes}) != len(changes):
        raise ParseError(f"{source}: an entity appears twice in its changes. {remake}")
    return plan


# --------------------------------------------------------------------------- binding
SIGNATURE_PREFIX = "hmac-sha256:"


def plan_key(env: Mapping[str, str], secrets: Mapping | None = None) -> bytes | None:
    """The key plans are signed with: ``QUOTA_PLAN_KEY``, else ``[plan] key`` in secrets."""
    section = (secrets or {}).get("plan")
    key = env.get("QUOTA_PLAN_KEY") or (section.get("key") if isinstance(section, Mapping)
                                        else None)
    return str(key).encode("utf-8") if key else None


def canonical_plan(doc: Mapping) -> bytes:
    """The plan's content as signed: every field but ``signature``, keys sorted, compact."""
    return json.dumps({k: v for k, v in doc.items() if k != "signature"}, ensure_ascii=False,
                      sort_keys=True, separators=(",", ":"), allow_nan=False).encode("utf-8")


def _mac(doc: Mapping, key: bytes) -> str:
    return SIGNATURE_PREFIX + hmac.new(key, canonical_plan(doc), hashlib.sha256).hexdigest()


def sign_plan(doc: dict, key: bytes | None) -> dict:
    """``doc`` with its ``signature`` (unchanged without a key)."""
    if not key:
        return doc
    doc = json.loads(json.dumps(doc, ensure_ascii=False))  # as apply will read it back
    doc["signature"] = _mac(doc, key)
    return doc


def verify_plan(doc: Mapping, key: bytes | None, source: str = "the plan") -> None:
    """Refuse (PlanRefused) a plan whose signature does not verify with ``key``, a plan
    without one when a key is configured, and a signed plan when no key is (it cannot be
    checked here). Without a key and a signature there is nothing to check."""
    stated = doc.get("signature")
    if not key:
        if stated:
            raise PlanRefused(f"{source} is signed, but no plan key is configured here to check "
                              f"it: set QUOTA_PLAN_KEY (the key `plan` signed it with).")
        return
    if not isinstance(stated, str) or not stated:
        raise PlanRefused(f"{source} is not signed, and a plan key is configured "
                          f"(QUOTA_PLAN_KEY): only signed plans are applied. Make it again "
                          f"with `kafka-client-quotas plan ... --out {source}` and the key set.")
    if not hmac.compare_digest(stated, _mac(doc, key)):
        raise PlanRefused(f"{source}: its signature does not verify with the configured plan "
                          f"key: the file was changed after `plan` wrote it (or signed with "
                          f"another key). Nothing was applied. Make a new plan.")


def check_plan_cluster(doc: Mapping, here: str | None, where: str,
                       source: str = "the plan", here_name: str | None = None) -> None:
    """Refuse (PlanRefused) a plan made on another cluster than ``here`` (its id), naming
    both: their ids, their names in the fleet where known (the plan's ``cluster.name``,
    ``here_name``), and where they are."""
    cluster = doc.get("cluster") if isinstance(doc.get("cluster"), Mapping) else {}
    made_on = cluster.get("cluster_id")
    if made_on and here and made_on == here:
        return
    name = cluster.get("name")
    named = f"{name!r}, " if isinstance(name, str) and name else ""
    planned = (f"cluster {made_on} ({named}{cluster.get('location') or 'location not recorded'})"
               if made_on else "a cluster whose id it does not record")
    this = f"{here_name!r}, " if here_name else ""
    raise PlanRefused(f"{source} was made on {planned}; this is cluster {here or 'without an id'} "
                      f"({this}{where}). Nothing was applied: make a plan against this cluster.",
                      plan_cluster=made_on, cluster=here)
