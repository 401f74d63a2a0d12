"""``kafka-client-quotas plan`` and ``apply``: bring a cluster to a desired quota file.

Examples::

    kafka-client-quotas plan quotas.yaml --bootstrap-server 127.0.0.1:9092 --out plan.json
    kafka-client-quotas apply plan.json --bootstrap-server 127.0.0.1:9092 --actor jdoe

``plan`` exit status (for CI, like ``terraform plan -detailed-exitcode``): 0 nothing to
change, 2 changes pending, 1 anything went wrong, wrong flags included, so 2 always means
"changes pending". ``apply`` exit status: 0 every change applied (or nothing to apply),
1 refused (the quota set moved since the plan, another cluster, a signature that does not
verify, the write lease not free) or not all applied (a conflict included), 2 a usage error
(wrong flags, a plan file that cannot be read or is not a well-formed plan, an unreadable
``--command-config``), 3 outcome unknown (sent, not confirmed).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
from pathlib import Path
from typing import TextIO

from ..changes.audit import AuditLog, cluster_fields, default_audit_path, os_user, store_fields
from ..backends.fleet_config import select_cluster
from ..backends.open import add_backend_arguments, open_backend_from
from ..errors import (ConcurrentChange, OutcomeUnknown, ParseError, QuotaError, UsageError,
                      ValidationError)
from ..backends.files import IMPORT_LIMIT, read_text_file
from .edge import one_line, run_command
from .exits import FAILURE, exit_code
from .output import FORMATS, entity_text, format_key_change, format_plan, says_where_audited

PROG = "kafka-client-quotas"
#: plan: changes pending (exit 2); every error, wrong flags included, is 1.
PLAN_OK, PLAN_ERROR, PLAN_PENDING = 0, 1, 2


def _where(p: argparse.ArgumentParser) -> None:
    add_backend_arguments(p)
    p.add_argument("--output", choices=FORMATS, default="text",
                   help="text (names as Kafka prints them), plain (raw names) or json")


def plan_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=f"{PROG} plan", description="Compare a desired quota file (the --export format, "
        "JSON or YAML) with the cluster: what would be added, changed and removed, and who "
        "gets a different effective quota. Exit 0: nothing to change; 2: changes pending; "
        "1: an error (wrong flags too).",
        epilog=f"Example: {PROG} plan quotas.yaml --bootstrap-server 127.0.0.1:9092 "
               f"--out plan.json\n         {PROG} plan --config fleet.toml --from-cluster "
               f"staging --cluster prod --prune --out plan.json",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", metavar="FILE", nargs="?",
                   help="the desired quota set (.json, .yaml, .yml), unless a cluster's is given")
    _where(p)
    p.add_argument("--from-cluster", metavar="NAME",
                   help="the desired quota set is this cluster's (of the fleet file): a plan "
                        "that makes --cluster's quota set equal it (a promotion)")
    p.add_argument("--out", metavar="PLANFILE",
                   help="write the plan (JSON) for `apply`: the quota set it was computed "
                        "against, its hash and the changes")
    p.add_argument("--prune", action="store_true",
                   help="also remove entries the file does not have (otherwise they are "
                        "listed as unmanaged and left alone)")
    p.add_argument("--metrics", metavar="URL[,URL...]",
                   help="the brokers' Prometheus endpoints: also judge the change at today's "
                        "rates (who would be newly throttled or freed)")
    return p


def apply_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=f"{PROG} apply", description="Apply a plan made by `plan --out`, exactly: "
        "refused if the cluster's quota set changed in any way since, on another cluster, or "
        "(with QUOTA_PLAN_KEY set) when its signature does not verify. Every change is "
        "recorded in the audit log before it is sent. Exit 0: applied; 1: refused, a "
        "conflict, or not all applied; 2: a usage error (wrong flags, an unreadable or malformed "
        "plan file, an unreadable --command-config); 3: outcome unknown.",
        epilog=f"Example: {PROG} apply plan.json --bootstrap-server 127.0.0.1:9092 "
               f"--actor jdoe")
    p.add_argument("plan_file", metavar="PLANFILE", help="a plan written by `plan --out`")
    _where(p)
    p.add_argument("--actor", metavar="NAME",
                   help="who applies it, for the audit log (default: the OS user)")
    p.add_argument("--audit-log", metavar="PATH",
                   help="the audit log (default: $QUOTA_AUDIT_LOG, else "
                        "$XDG_STATE_HOME/quota-console/audit.jsonl, ~/.local/state/... "
                        "without it, as the dashboard)")
    return p


def _parse(parser: argparse.ArgumentParser, argv: list[str], err: TextIO,
           out: TextIO) -> argparse.Namespace:
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        return parser.parse_args(argv)


def _check_where(args: argparse.Namespace) -> None:
    select_cluster(args, metrics=hasattr(args, "metrics"))  # --cluster NAME of the fleet file
    if bool(args.sandbox) == bool(args.bootstrap_server):
        raise UsageError("Say where the quotas live: --bootstrap-server HOST:PORT (a Kafka "
                     "cluster), --sandbox PATH (a local sandbox file) or --cluster NAME of "
                     "a fleet file (--config PATH or QUOTA_CONFIG), one of them.")
    if args.command_config and not args.bootstrap_server:
        raise UsageError("--command-config goes with --bootstrap-server.")
    if not (math.isfinite(args.timeout) and 0 < args.timeout <= 3600):
        raise UsageError(f"--timeout {args.timeout:g}: give a number of seconds between 0 and "
                     f"3600.")
    if args.sandbox and not Path(args.sandbox).exists():
        raise UsageError(f"No sandbox file at {args.sandbox}: create it with --alter or --import "
                     f"first. Check the path.")


#: The largest plan file ``apply`` reads: a plan of 100,000 entries (each with its key changes
#: and the clients it affects) is about 120 MiB, more than a quota file's 64 MiB (issue 32).
PLAN_LIMIT = 256 * 2**20


def _read_text(path: Path, limit: int = IMPORT_LIMIT) -> str:
    try:
        return read_text_file(path, "quota or plan file", limit)  # bounded (issue 16)
    except OSError as exc:
        raise ParseError(f"Cannot read {path}: {exc.strerror}.") from exc
    except UnicodeDecodeError as exc:
        raise ParseError(f"Cannot read {path}: it is not UTF-8 text ({exc.reason} at byte "
                         f"{exc.start}).") from exc




def _location(args: argparse.Namespace) -> str:
    where = f"sandbox {args.sandbox}" if args.sandbox else args.bootstrap_server
    cluster = getattr(args, "fleet_cluster", None)
    return f"cluster {cluster.name!r} ({where})" if cluster is not None else where


def _series(args: argparse.Namespace, err: TextIO, node_ids=()
            ) -> tuple[list | None, tuple[str, ...], bool]:
    """``(the series read, the brokers not read, whether a --metrics endpoint failed)``. A
    bucket no broker read would throttle is unknown while a broker is not read
    (quota_core.live.live_verdict); an endpoint given that cannot be read makes the exit 1,
    after the plan is printed, as --throttled does (docs/cli.md)."""
    if not args.metrics:
        return None, (), False
    from ..coverage import endpoint_address, unread_brokers
    from ..telemetry.collector import parse_endpoints
    from ..telemetry.scrape import redirect_note
    from ..telemetry.sweep import scrape_all

    series, errors = scrape_all(parse_endpoints(args.metrics), args.timeout,
                                on_redirect=lambda url, final: err.write(
                                    f"{PROG} plan: {redirect_note(url, final)}\n"),
                                on_error=lambda _, exc: err.write(
                                    f"{PROG} plan: {exc} (its buckets' verdicts at today's "
                                    f"rates are unknown)\n"))
    unread = unread_brokers(tuple(node_ids), series.brokers,
                            [(endpoint_address(e.url), None) for e, _ in errors])
    return series, unread, bool(errors)


# --------------------------------------------------------------------------- plan
def plan_main(argv: list[str], out: TextIO, err: TextIO) -> int:
    """``plan FILE ...``: 0 nothing to change, 2 changes pending, 1 an error."""
    try:
        args = _parse(plan_parser(), argv, err, out)
    except SystemExit as exc:  # --help: 0; a usage error: 1 here, so 2 means "pending"
        return PLAN_OK if not exc.code else PLAN_ERROR
    return run_command("plan", lambda: _plan(args, out, err), err,
                       one_line(f"{PROG} plan", error_for=(UsageError,), by_problem=True))


def _plan(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from ..plan import make_plan, plan_document, plan_impact, plan_key, sign_plan
    from ..backends.files import read_quota_path

    try:
        _check_where(args)
        source = None
        if args.from_cluster is not None:  # a promotion (quota_core.cli.promote)
            from .promote import start_source

            source_name, source = start_source(args)
        elif args.file is None:
            raise UsageError("Give the desired quota set: a FILE (the --export format), or "
                             "--from-cluster NAME with --cluster NAME (a promotion).")
        else:
            path = Path(args.file)
            desired = read_quota_path(path)
            if args.out and Path(args.out).resolve() == path.resolve():
                raise UsageError(f"--out {args.out} is the desired file itself: write the plan "
                                 f"elsewhere, e.g. --out plan.json.")
        target = getattr(args, "fleet_cluster", None)
        with open_backend_from(args) as backend:
            current = backend.describe()
            info = backend.info()
            cluster = {**cluster_fields(info), "cluster_id": backend.identity()}
            if target is not None:
                cluster["name"] = target.name
            if source is not None:
                from .promote import side_of

                target_side = side_of(target.name, backend)
        if source is not None:
            from .promote import format_promotion, promotion_json

            source_side = source.result()
            desired = source_side.quotas
        series, unread, failed = _series(args, err, getattr(info, "node_ids", ()) or ())
        plan = make_plan(current, desired, prune=args.prune,
                         source=None if source is None else f"cluster {source_name}")
        impact = plan_impact(plan, series, unread=unread)
        doc = plan_document(plan, impact, cluster=cluster)
        if source is not None:
            doc["promotion"] = promotion_json(source_side, target_side)
        doc = sign_plan(doc, plan_key(os.environ))
        if args.out:
            _write_plan(Path(args.out), doc)
        if args.output == "json":
            out.write(json.dumps(doc, ensure_ascii=False, indent=2) + "\n")
        else:
            out.write(format_plan(plan, impact, args.output, where=_location(args)))
            if source is not None:
                out.write(format_promotion(source_side, target_side))
        if args.out and plan.changes:
            err.write(f"Plan written to {args.out}. Apply it with: {PROG} apply {args.out} "
                      f"{_where_flags(args)}\n")
        if failed:  # an endpoint given that could not be read: an error (docs/plan-apply.md)
            return PLAN_ERROR
        return PLAN_PENDING if plan.changes else PLAN_OK
    except BrokenPipeError as exc:
        return exit_code("plan", exc)


def _promoted_from(doc: dict) -> dict:
    """A promotion's source cluster, for the audit records of its apply."""
    promotion = doc.get("promotion")
    source = promotion.get("from") if isinstance(promotion, dict) else None
    if isinstance(source, dict) and isinstance(source.get("name"), str):
        return {"promoted_from": source["name"]}
    return {}


def _where_flags(args: argparse.Namespace) -> str:
    cluster = getattr(args, "fleet_cluster", None)
    if cluster is not None:
        config = f"--config {args.config} " if getattr(args, "config", None) else ""
        return f"{config}--cluster {cluster.name}"
    if args.sandbox:
        return f"--sandbox {args.sandbox}"
    cc = f" --command-config {args.command_config}" if args.command_config else ""
    return f"--bootstrap-server {args.bootstrap_server}{cc}"


def _write_plan(path: Path, doc: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(json.dumps(doc, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        raise ParseError(f"Cannot write the plan to {path}: {exc.strerror}. Give a writable "
                         f"--out path.") from exc


# --------------------------------------------------------------------------- apply
class _Drift(Exception):
    """The quota set moved since the plan (found under the write lease)."""

    def __init__(self, drift: list) -> None:
        super().__init__("drift")
        self.drift = drift


class _AlreadyApplied(Exception):
    """The cluster already holds the set the plan leads to."""


def apply_main(argv: list[str], out: TextIO, err: TextIO) -> int:
    """``apply PLANFILE ...``: 0 applied, 1 refused or not all applied, 2 a usage error (flags,
    an unreadable or malformed plan file, an unreadable --command-config), 3 outcome
    unknown."""
    try:
        args = _parse(apply_parser(), argv, err, out)
    except SystemExit as exc:
        return int(exc.code or 0)
    read = [False]  # the plan file is read and verified: the write has begun
    return run_command("apply", lambda: _apply(args, out, err, read), err,
                       lambda exc: _apply_says(exc, read[0]))


_APPLY = f"{PROG} apply"
_READING = one_line(_APPLY, error_for=(UsageError,))


def _apply_says(exc: QuotaError, read: bool) -> str:
    """apply's words for an error: while the plan is read, ``error:`` for a flag and the
    message alone for a plan file that cannot be read, is not a plan (usage) or does not
    verify (PlanRefused); from the write on, what was and was not applied."""
    if not read:
        return _READING(exc)
    if isinstance(exc, ConcurrentChange):
        return f"{_APPLY}: refused: {exc}\n"
    if isinstance(exc, (OutcomeUnknown, ParseError, ValidationError)):
        # sent, answer lost; an UnreadableConfig (--command-config) or malformed flag: usage
        return f"{_APPLY}: {exc}\n"
    if getattr(exc, "context", {}).get("phase") != "alter" and "othing was" not in str(exc):
        return f"{_APPLY}: {exc} Nothing was applied.\n"
    return f"{_APPLY}: {exc}\n"


def _apply(args: argparse.Namespace, out: TextIO, err: TextIO, read: list[bool]) -> int:
    from ..plan import (check_plan_cluster, load_plan, plan_key, read_plan, since_plan,
                        verify_plan)
    from ..changes.workflow import apply_changes
    from .signals import sigterm_raises

    prefix = _APPLY
    _check_where(args)
    from ..changes.workflow import refuse_read_only

    refuse_read_only(getattr(args, "fleet_cluster", None))  # before the plan is even read
    path = Path(args.plan_file)
    doc = load_plan(_read_text(path, PLAN_LIMIT), str(path))  # NaN & co. kept to name their field
    plan = read_plan(doc, str(path))
    verify_plan(doc, plan_key(os.environ), str(path))
    read[0] = True
    target = getattr(args, "fleet_cluster", None)
    audit = AuditLog(args.audit_log or (target and target.audit_log)
                     or default_audit_path(os.environ))
    actor = args.actor or os_user()

    def unchanged_since_plan(backend) -> None:  # under the write lease
        since = since_plan(plan, backend.describe())
        if since.state == "applied":
            raise _AlreadyApplied()
        if since.state == "moved":
            raise _Drift(list(since.drift))

    try:
        with open_backend_from(args) as backend:
            check_plan_cluster(doc, backend.identity(), f"sandbox {args.sandbox}"
                               if args.sandbox else args.bootstrap_server, str(path),
                               here_name=target.name if target is not None else None)
            if not plan.changes:
                err.write(f"Nothing to apply: {path} has no changes.\n")
                return 0
            with sigterm_raises(), says_where_audited(audit, err):  # a SIGTERM closes the intents first
                done = apply_changes(backend, plan.alterations, plan.base, actor=actor,
                                     cluster=store_fields(backend), audit=audit,
                                     action="apply",
                                     extra={"via": "cli apply", "plan": str(path),
                                            **_promoted_from(doc)},
                                     lease_wait_s=args.timeout, precheck=unchanged_since_plan,
                                     target=target,
                                     progress=lambda line: err.write(f"{prefix}: {line}\n"))
    except _AlreadyApplied:
        err.write(f"Nothing to apply: the cluster already holds the quota set {path} "
                  f"leads to (it was applied already).\n")
        return 0
    except _Drift as exc:
        drift = exc.drift
        err.write(f"{prefix}: refused: the quota set changed since {path} was made "
                  f"({len(drift)} difference{'' if len(drift) == 1 else 's'}, "
                  f"before → now); nothing was applied:\n")
        for entity, change in drift[:50]:
            err.write(f"  {entity_text(entity, args.output)}: "
                      f"{format_key_change(change.key, change.before, change.after)}\n")
        if len(drift) > 50:
            err.write(f"  … and {len(drift) - 50} more\n")
        desired = _promoted_from(doc).get("promoted_from")
        desired = f"--from-cluster {desired}" if desired else "FILE"
        err.write(f"Make a new plan ({PROG} plan {desired} {_where_flags(args)} --out "
                  f"{path}), check it, and apply that.\n")
        return FAILURE  # refused: a result of the drift check, not an error class
    return _report_apply(done, plan, args, audit, actor, out, err)


def _report_apply(done, plan, args, audit: AuditLog, actor: str, out: TextIO,
                  err: TextIO) -> int:
    fmt = args.output
    refused = {r.entity: r for r in done.refused}
    if fmt == "json":
        out.write(json.dumps({
            "ok": done.ok, "audit_log": str(audit.path), "actor": actor,
            "applied": [{"entity": a.alteration.entity.as_dict(), "settled": a.settled,
                         "audit_id": a.record.id} for a in done.applied],
            "refused": [{"entity": r.entity.as_dict(), "error": r.error,
                         "error_code": r.error_code} for r in done.refused],
            "conflicts": [{"entity": a.alteration.entity.as_dict(), "now": a.after,
                           "written": a.meant, "audit_id": a.record.id}
                          for a in done.conflicts],
            "audit_error": None if done.audit_error is None else str(done.audit_error),
        }, ensure_ascii=False, indent=2) + "\n")
    else:
        conflicted = {a.alteration.entity for a in done.conflicts}
        for c in plan.changes:
            name = entity_text(c.entity, fmt)
            if c.entity in conflicted:
                out.write(f"conflict {name}: written, but the read-back shows another "
                          f"writer's values\n")
                continue
            if c.entity in refused:
                out.write(f"refused {name}: {refused[c.entity].error} (not applied)\n")
                continue
            keys = "; ".join(format_key_change(k.key, k.before, k.after, fmt) for k in c.keys)
            out.write(f"applied {name}: {keys}\n")
    if done.conflicts:
        from ..changes.workflow import conflict_message

        err.write(f"{PROG} apply: conflict: {conflict_message(done.conflicts)}\n")
    n, total = len(done.applied), len(plan.changes)
    if done.refused:
        err.write(f"{PROG} apply: applied {n} of {total} entity changes; {len(done.refused)} "
                  f"refused and not applied: "
                  f"{', '.join(entity_text(e, fmt) for e in refused)}. Fix them and make a new "
                  f"plan for what remains.\n")
    else:
        err.write(f"Applied {n} of {total} entity changes.\n")
    if done.audit_error is not None:
        err.write(f"{PROG} apply: the changes above were applied, but the audit log could not "
                  f"be written: {done.audit_error}\n")
    elif n:
        err.write(f"Recorded in the audit log {audit.path} as {actor}.\n")
    return 0 if done.ok else 1
