"""``kafka-client-quotas``: describe, resolve and alter Kafka client quotas (KIP-546's CLI).

Examples::

    kafka-client-quotas --bootstrap-server 127.0.0.1:9092 --describe --names client-id=app
    kafka-client-quotas --sandbox quotas.sqlite --resolve --user alice --client-id app
    kafka-client-quotas --sandbox quotas.sqlite --alter --names client-id=app --defaults user \\
        --add consumer_byte_rate=2MB --delete producer_byte_rate

Exit status: 0 success, 1 the request was refused (reasons on stderr), 2 a usage error,
3 outcome unknown: a change was sent and the connection lost before the answer.
This module only assembles: options in, one library call, text out.
"""
from __future__ import annotations

import argparse
import contextlib
import itertools
import math
import os
import re
import sys
from pathlib import Path
from typing import Sequence, TextIO

from quota_core.cli import output
from quota_core.domain.alterations import Alteration, Op
from quota_core.backends.base import QuotaBackend
from quota_core.backends.fleet_config import fleet_of_args, select_cluster
from quota_core.backends.open import add_backend_arguments, open_backend_from
from quota_core.domain.entities import CLIENT_ID, ENTITY_TYPES, IP, USER, Entity, _is_utf8_text
from quota_core.errors import (AlterationError, OutcomeUnknown, ParseError, QuotaError, UsageError,
                               ValidationError)
from quota_core.cli.edge import one_line, run_command
from quota_core.cli.signals import Terminated
from quota_core.domain.filters import EntityFilter, FilterComponent
from quota_core.domain.resolution import resolve, resolve_ip
from quota_core.cli.spec import parse_add, parse_defaults, parse_delete, parse_names
from quota_core.domain.keys import QUOTA_KEYS
from quota_core.domain.validation import is_ip_literal, unknown_key_message, validate_alterations

PROG = "kafka-client-quotas"




class _AppendValue(argparse.Action):
    """``action="append"`` that keeps a value of exactly ``--``.

    Python 3.11's argparse drops ``--`` from an option's value (``--client-id=--`` arrives
    as an empty list); names are opaque, so ``--`` is a name like any other.
    """

    def __call__(self, parser, namespace, values, option_string=None):  # type: ignore[override]
        if isinstance(values, list) and not values:
            values = "--"
        items = list(getattr(namespace, self.dest, None) or [])
        items.append(values)
        setattr(namespace, self.dest, items)


class _Parser(argparse.ArgumentParser):
    """The main parser: its epilog lists the subcommands, looked up only when help is shown
    (a plug-in's entry point is loaded for its line), so an ordinary run pays nothing."""

    def format_help(self) -> str:
        self.epilog = _epilog()
        return super().format_help()


class _VersionAction(argparse.Action):
    """``--version``: the version (quota_core.cli.version), read only when asked for."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS,
                 help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        from quota_core.cli.version import package_version

        parser._print_message(f"{PROG} {package_version()}\n", sys.stdout)
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description="Describe, resolve and alter Kafka client quotas.",
                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action=_VersionAction, help="print the version and exit")
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--describe", action="store_true",
                      help="list the entities matching the entity flags, with their quotas")
    mode.add_argument("--resolve", action="store_true",
                      help="the effective quota per key for a user/client-id (or ip), and where "
                           "it comes from")
    mode.add_argument("--alter", action="store_true",
                      help="set (--add) and remove (--delete) quota keys of the entity")
    mode.add_argument("--export", choices=("json", "yaml"),
                      help="print every quota entry as a JSON or YAML document")
    mode.add_argument("--import", dest="import_file", metavar="FILE",
                      help="apply a JSON/YAML export (merge; with --replace make it exact)")
    mode.add_argument("--init", action="store_true",
                      help="create an empty sandbox file at --sandbox PATH (the first --alter "
                           "or --import also creates it; reads never do)")
    mode.add_argument("--throttled", action="store_true",
                      help="every bucket the brokers throttle now (needs --metrics), worst "
                           "first, with the entry that sets its quota")
    add_backend_arguments(p, all_clusters="--describe, --resolve or --throttled on every "
                                          "cluster of the fleet file at once")
    ent = p.add_argument_group("entity")
    ent.add_argument("--names", action=_AppendValue, default=[], metavar="TYPE=NAME,...",
                     help="type=name pairs; escape , = \\ in names as \\, \\= \\\\")
    ent.add_argument("--defaults", action=_AppendValue, default=[], metavar="TYPE,...",
                     help="entity types that take the default entity, e.g. user,client-id")
    ent.add_argument("--user", action=_AppendValue, default=[], metavar="NAME",
                     help="a user name, taken as is (repeat for several)")
    ent.add_argument("--client-id", action=_AppendValue, default=[], metavar="NAME",
                     help="a client id, taken as is (repeat for several)")
    ent.add_argument("--ip", action=_AppendValue, default=[], metavar="NAME",
                     help="an ip address, taken as is (repeat for several)")
    ent.add_argument("--strict", action="store_true",
                     help="describe: only entities with exactly the given types")
    alt = p.add_argument_group("alter")
    alt.add_argument("--add", action=_AppendValue, default=[], metavar="KEY=VALUE,...",
                     help="keys to set; byte rates take units: 10MB, 1.5MiB")
    alt.add_argument("--delete", action=_AppendValue, default=[], metavar="KEY,...",
                     help="keys to remove")
    alt.add_argument("--validate-only", action="store_true",
                     help="check the alteration with the backend, change nothing")
    alt.add_argument("--replace", action="store_true",
                     help="import: also remove entries the file does not have")
    alt.add_argument("--actor", metavar="NAME",
                     help="who makes the change, for the audit log (default: the OS user)")
    alt.add_argument("--audit-log", metavar="PATH",
                     help="the audit log --alter and --import append to (default: "
                          "$QUOTA_AUDIT_LOG, else $XDG_STATE_HOME/quota-console/audit.jsonl, "
                          "~/.local/state/... without it, as the dashboard)")
    live = p.add_argument_group("live throttling (broker metrics)")
    live.add_argument("--metrics", metavar="URL[,URL...]",
                      help="Prometheus endpoints of the brokers' JMX exporter (LABEL=URL to name "
                           "a broker); --resolve then shows rate vs quota per broker")
    live.add_argument("--metrics-template", metavar="TEMPLATE",
                      help="one endpoint per broker of the cluster, from a template with {host} "
                           "and/or {id} (node id), e.g. 'http://{host}:7071/metrics'; needs "
                           "--bootstrap-server (the cluster lists its brokers)")
    live.add_argument("--above", type=float, metavar="PCT",
                      help="--throttled: also buckets running at or above PCT %% of their quota")
    p.add_argument("--output", choices=output.FORMATS, default="text",
                   help="text (KIP-546: names sanitised), plain (raw names, values with "
                        "units) or json")
    return p


def _entity_choices(args: argparse.Namespace) -> dict[str, list[str | None]]:
    """Per type, the names (None = default) given by every entity flag, in order."""
    choices: dict[str, list[str | None]] = {}
    for text in args.names:
        for entity_type, name in parse_names(text):
            choices.setdefault(entity_type, []).append(name)
    for flag, entity_type in ((args.user, USER), (args.client_id, CLIENT_ID), (args.ip, IP)):
        for name in flag:
            choices.setdefault(entity_type, []).append(name)
    for text in args.defaults:
        for entity_type in parse_defaults(text):
            choices.setdefault(entity_type, []).append(None)
    return {t: choices[t] for t in ENTITY_TYPES if t in choices}


def _combinations(choices: dict[str, list[str | None]]) -> list[list[tuple[str, str | None]]]:
    """Every entity the flags describe: one name per type, over all names given."""
    types = list(choices)
    combos, seen = [], set()
    for names in itertools.product(*(choices[t] for t in types)):
        combo = tuple(zip(types, names))
        if combo not in seen:
            seen.add(combo)
            combos.append(list(combo))
    return combos


def _entities(args: argparse.Namespace) -> list[Entity]:
    choices = _entity_choices(args)
    if not choices:
        raise UsageError("Name the entity: --names user=alice,client-id=app, --user NAME, "
                         "--client-id NAME, --ip NAME or --defaults user.")
    return [Entity.from_pairs(c) for c in _combinations(choices)]


def run_describe(backend: QuotaBackend, args: argparse.Namespace, out: TextIO,
                 err: TextIO) -> int:
    choices = _entity_choices(args)
    if choices:
        filters = [EntityFilter(tuple(FilterComponent.default(t) if n is None
                                      else FilterComponent.exact(t, n) for t, n in combo),
                                args.strict)
                   for combo in _combinations(choices)]
    else:
        filters = [EntityFilter((), args.strict)]
    found: dict[Entity, dict[str, float]] = backend.describe(filters[0])  # not copied: 100k
    if len(filters) > 1:
        found = dict(found)
        for entity_filter in filters[1:]:
            found.update(backend.describe(entity_filter))
    output.write_describe(found, args.output, out)
    _settings_notes(backend, err)
    return 0


def _settings_notes(backend: QuotaBackend, err: TextIO):
    """The brokers' settings (quota_core.throttling.brokers), with one stderr line for each that changes
    the answer: a custom quota callback (named), brokers that disagree (named). The exit
    status stays what the command decides."""
    from quota_core.throttling.brokers import read_settings

    settings = read_settings(backend)
    for note in settings.notes():
        if note.kind != "unread":
            err.write(f"{PROG}: warning: {note.text}\n")
    return settings


def run_resolve(backend: QuotaBackend, args: argparse.Namespace, out: TextIO,
                err: TextIO) -> int:
    choices = _entity_choices(args)
    if not choices:
        raise UsageError("Name the client to resolve: --user NAME and/or --client-id NAME "
                         "(or --ip ADDRESS).")
    if any(None in names for names in choices.values()):
        raise UsageError("--resolve takes real names, not --defaults: a client always has a "
                         "user and a client id (omit --user for an unauthenticated client).")
    if IP in choices and len(choices) > 1:
        raise UsageError("--ip cannot be combined with --user/--client-id: ip quotas stand "
                         "alone.")
    for name in choices.get(IP, []):
        if not is_ip_literal(name):  # type: ignore[arg-type]
            raise UsageError(f"--ip {name!r} is not an IP address: connection quotas apply to "
                             f"addresses. Give one, e.g. --ip 192.0.2.10.")
    quotas = backend.describe()
    live, failed, reach, clients = _live_rows(args, quotas, err, backend)
    resolutions = []
    for combo in _combinations(choices):
        names = dict(combo)
        if IP in names:
            resolutions.append(resolve_ip(quotas, names[IP]))  # type: ignore[arg-type]
        else:
            resolutions.append(resolve(quotas, names.get(USER), names.get(CLIENT_ID)))
    settings = _settings_notes(backend, err)
    cap = settings.connection_cap() if IP in choices else None
    if cap is not None:
        err.write(f"{PROG}: note: {cap.text}\n")
    window = None if live is None else settings.window()
    out.write(output.format_resolutions(resolutions, args.output, live, quotas, window, reach,
                                        clients))
    if args.output != "json":
        for note in dict.fromkeys(n for r in resolutions for n in r.client.assumptions()):
            err.write(f"note: {note}\n")
    return 1 if failed else 0


def _live_rows(args: argparse.Namespace, quotas, err: TextIO, backend: QuotaBackend):
    """Scrape every --metrics endpoint and join with the ladder: ``(rows or None, failed,
    the brokers read and not read, what the clients pushed (quota_core.throttling.client_view.ClientSide)
    or None)``.
    An endpoint that fails gets one line on stderr; the others still answer. On a cluster,
    every broker no answering endpoint covers gets one line too (its throttling is not
    visible), and the exit stays 0 for them."""
    if not (args.metrics or args.metrics_template):
        return None, False, None, None
    from quota_core.throttling.client_view import ClientSide
    from quota_core.throttling.coverage import (endpoint_address, unread_brokers, unwatched,
                                                unwatched_sentence)
    from quota_core.throttling.live import hold, join_usage
    from quota_core.throttling.spreads import Reach
    from quota_core.telemetry.scrape import redirect_note
    from quota_core.telemetry.sweep import scrape_all
    from quota_core.cli.endpoints import metrics_endpoints

    cluster = backend.info()
    series, errors = scrape_all(metrics_endpoints(args.metrics, args.metrics_template, cluster),
                                args.timeout,
                                on_redirect=lambda url, final: err.write(
                                    f"{PROG}: {redirect_note(url, final)}\n"),
                                on_error=lambda _, exc: err.write(f"{PROG}: {exc}\n"))
    failed_names = [endpoint_address(endpoint.url) for endpoint, _ in errors]
    missing = unwatched(cluster.node_ids, series.brokers)
    for node in missing:
        err.write(f"{PROG}: {unwatched_sentence(node, failed_names)}\n")
    rows = join_usage(series, quotas)
    if any(r.recent for r in rows):
        # A bucket under 90 % of its quota with a throttle time: read the endpoints that
        # answered once more, CONFIRM_S later, before calling it "throttled recently" (a
        # throttled client's rate dips for a moment as the broker's window rolls over:
        # quota_core.throttling.live.hold).
        import time

        from quota_core.throttling import live as _live

        time.sleep(_live.CONFIRM_S)
        answered = [e for e in metrics_endpoints(args.metrics, args.metrics_template, cluster)
                    if e.url not in {endpoint.url for endpoint, _ in errors}]
        again, _ = scrape_all(answered, args.timeout)
        rows = hold(rows, join_usage(again, quotas))
    # Which brokers the figures cover, for the per-broker view (quota_core.throttling.spreads) and the
    # verdict (quota_core.throttling.live.live_verdict): each broker not read once, by node id where
    # known (quota_core.throttling.coverage.unread_brokers).
    reach = Reach(tuple(series.brokers),
                  unread_brokers(cluster.node_ids, series.brokers,
                                 [(name, None) for name in failed_names]))
    return rows, bool(errors), reach, ClientSide(tuple(series.clients), series.telemetry)


def run_throttled(backend: QuotaBackend, args: argparse.Namespace, out: TextIO,
                  err: TextIO) -> int:
    from quota_core.throttling.live import throttled_rows

    rows, failed, reach, _ = _live_rows(args, backend.describe(), err, backend)
    out.write(output.format_throttled(throttled_rows(rows or [], args.above), args.output,
                                      every=rows or [], reach=reach))
    _settings_notes(backend, err)
    return 1 if failed else 0


def _report(outcome, err: TextIO) -> int:
    """Each refused entity with the reason; when only some were refused, also what was
    applied, since each entity is all-or-nothing on its own."""
    for result in outcome.failed:
        err.write(f"{PROG}: {result.entity.display()}: {result.error}\n")
    if outcome.failed and len(outcome.failed) < len(outcome.results):
        done = "would be applied" if outcome.validate_only else "applied"
        for result in outcome.results:
            if result.ok:
                err.write(f"{PROG}: {result.entity.display()}: {done}\n")
    return 0 if outcome.ok else 1


def _parse_add(texts: list[str]) -> list[Op]:
    """--add values; a mistyped key is named as such ("did you mean"), not as a bad number."""
    try:
        return [Op.set(k, v) for text in texts for k, v in parse_add(text)]
    except ParseError as exc:
        key = exc.context.get("key")
        if key and key not in QUOTA_KEYS:
            raise AlterationError(f"--add {key}=...: {unknown_key_message(key)}") from None
        raise


def _apply(backend: QuotaBackend, alterations: list[Alteration], loaded, args: argparse.Namespace,
           err: TextIO, action: str):
    """Through the one workflow (quota_core.changes.workflow): guarded, read back, audited.
    ``(outcome, ok)``: not ok when the audit log could not be written after applying, or a
    read-back showed another writer's values (a conflict)."""
    from quota_core.changes.audit import AuditLog, default_audit_path, os_user, store_fields
    from quota_core.changes.workflow import apply_changes

    from quota_core.cli.signals import sigterm_raises

    target = getattr(args, "fleet_cluster", None)
    audit = AuditLog(args.audit_log or (target and target.audit_log)
                     or default_audit_path(os.environ))
    with sigterm_raises(), output.says_where_audited(audit, err):
        # a SIGTERM closes the audit intents before the process ends
        done = apply_changes(backend, alterations, loaded, actor=args.actor or os_user(),
                             cluster=store_fields(backend), audit=audit, action=action,
                             target=target,
                             extra={"via": f"cli {action}"},
                             lease_wait_s=getattr(args, "timeout", None),
                             progress=lambda line: err.write(f"{PROG}: {line}\n"))
    if done.conflicts:  # written, but the read-back shows another writer's values: exit 1
        from quota_core.changes.workflow import conflict_message

        err.write(f"{PROG}: conflict: {conflict_message(done.conflicts)}\n")
    if done.audit_error is not None:
        err.write(f"{PROG}: {len(done.applied)} entity change(s) were applied, but the audit "
                  f"log could not be written: {done.audit_error}\n")
    return done.outcome, done.audit_error is None and not done.conflicts


def run_alter(backend: QuotaBackend, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    ops = _parse_add(args.add)
    ops += [Op.remove(k) for text in args.delete for k in parse_delete(text)]
    if not ops:
        raise UsageError("--alter needs --add KEY=VALUE and/or --delete KEY.")
    alterations = [Alteration(e, tuple(ops)) for e in _entities(args)]
    validate_alterations(alterations)
    if args.output != "json" and (args.validate_only or _interactive(err)):
        for alteration in alterations:  # what was understood: 10m -> 10,000,000 B/s
            err.write(output.format_alteration(alteration, args.output) + "\n")
    entities = [a.entity for a in alterations]
    if len(entities) == 1:
        loaded = {entities[0]: backend.describe_entity(entities[0])}
    else:  # one describe for all (the flags give entities of one shape), not one per entity
        found = backend.describe(EntityFilter(tuple(FilterComponent.any(t)
                                                    for t in entities[0].types), True))
        loaded = {e: dict(found.get(e, {})) for e in entities}
    removed = [op.key for op in ops if op.is_remove]
    if removed:  # brokers accept removing an unset key silently; kafka-configs refuses it
        for alteration in alterations:
            unset = [k for k in removed if k not in loaded[alteration.entity]]
            if unset:
                err.write(f"warning: {alteration.entity.display()} has no {', '.join(unset)} to delete "
                          f"(nothing to remove there).\n")
    audited = True
    if args.validate_only:
        outcome = backend.alter(alterations, validate_only=True)
    else:
        outcome, audited = _apply(backend, alterations, loaded, args, err, "alter")
    if args.output == "json":
        out.write(output.format_outcome(outcome))
    elif args.validate_only and outcome.ok:
        err.write(f"Valid: {len(alterations)} entit{'y' if len(alterations) == 1 else 'ies'} "
                  f"would be altered; nothing was changed (--validate-only).\n")
    return _report(outcome, err) or (0 if audited else 1)


def _report_unknown(exc: "OutcomeUnknown", err: TextIO) -> None:
    """Write :func:`_unknown_text` to ``err``."""
    err.write(_unknown_text(exc))


def _unknown_text(exc: "OutcomeUnknown", limit: int = 20) -> str:
    """Per entity what is known after a lost answer (at most ``limit`` lines of each kind)."""
    lines: list[str] = []
    known = exc.outcome.results if exc.outcome is not None else ()
    unchanged = set(exc.not_visible)
    groups = [
        ("applied", [r.entity for r in known if r.ok]),
        ("refused", [r for r in known if not r.ok]),
        ("outcome unknown (sent, no answer; describe shows it unchanged so far)",
         [e for e in exc.unknown if e in unchanged]),
        (exc.context.get("unknown_label", "outcome unknown (sent, no answer)"),
         [e for e in exc.unknown if e not in unchanged]),
        ("not sent (not applied)", list(exc.not_sent)),
    ]
    for what, items in groups:
        for item in items[:limit]:
            if what == "refused":
                lines.append(f"{PROG}: {item.entity}: {item.error}\n")
            else:
                lines.append(f"{PROG}: {item}: {what}\n")
        if len(items) > limit:
            lines.append(f"{PROG}: ... and {len(items) - limit:,} more: {what}\n")
    lines.append(f"{PROG}: {exc}\n")
    return "".join(lines)


_SAY = one_line(PROG, by_problem=True)


def _say(exc: QuotaError) -> str:
    """The main command's words for an error: an input the user gave reads ``error:``, a
    refused alteration one line per problem, a lost answer what is known per entity."""
    if isinstance(exc, OutcomeUnknown) and not isinstance(exc, (UsageError, ParseError)):
        return _unknown_text(exc)  # sent, answer lost: neither "applied" nor "refused"
    return _SAY(exc)


def _interactive(stream: TextIO) -> bool:
    """A person at a terminal (not a script capturing the stream)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def run_import(backend: QuotaBackend, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from quota_core.backends.files import read_quota_path
    from quota_core.domain.serialization import import_plan

    path = Path(args.import_file)
    desired = read_quota_path(path).quotas  # bounded (never a FIFO or /dev/zero) and checked
    current = backend.describe()
    if args.replace and not desired and current:
        raise ParseError(f"{path} has no entries: with --replace that would delete all "
                         f"{len(current)} quota entries. To clear them on purpose, use --alter "
                         f"--delete, or import a file that holds what should remain.")
    plan = import_plan(current, desired, replace=args.replace)
    if not plan:
        err.write("Nothing to change: the backend already holds this quota set.\n")
        return 0
    validate_alterations(plan)
    gone = [a.entity for a in plan if a.entity not in desired]
    if gone:
        err.write(f"--replace removes {len(gone)} entr{'y' if len(gone) == 1 else 'ies'} not in "
                  f"{path}: {', '.join(str(e) for e in gone[:10])}"
                  f"{' …' if len(gone) > 10 else ''}\n")
    audited = True
    if args.validate_only:
        if args.output != "json":
            for alteration in plan:
                err.write(output.format_alteration(alteration, args.output) + "\n")
        outcome = backend.alter(plan, validate_only=True)
    else:
        outcome, audited = _apply(backend, plan, current, args, err, "import")
    err.write(f"{'Validated' if args.validate_only else 'Applied'} "
              f"{len(outcome.results) - len(outcome.failed)} of {len(plan)} entity changes.\n")
    return _report(outcome, err) or (0 if audited else 1)


_BOOTSTRAP = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[^\s:,\[\]]+):[0-9]{1,5}$")


def _check_flags(args: argparse.Namespace) -> None:
    """Refuse flag combinations that would be ignored or misread, before connecting."""
    if args.sandbox and args.bootstrap_server:
        raise UsageError("Give either --sandbox PATH or --bootstrap-server HOST:PORT, not both.")
    if not args.sandbox and not args.bootstrap_server:
        raise UsageError("Say where the quotas live: --bootstrap-server HOST:PORT (a Kafka "
                         "cluster), --sandbox PATH (a local sandbox file), or --cluster NAME "
                         "of a fleet file (--config PATH or QUOTA_CONFIG).")
    if args.command_config and not args.bootstrap_server:
        raise UsageError("--command-config goes with --bootstrap-server.")
    for server in (args.bootstrap_server or "").split(",") if args.bootstrap_server else []:
        if not _BOOTSTRAP.match(server.strip()):
            raise UsageError(f"--bootstrap-server {args.bootstrap_server!r}: {server.strip()!r} is "
                             f"not HOST:PORT. Write e.g. 127.0.0.1:9092 (several: a,b comma-"
                             f"separated).")
    if not args.alter and (args.add or args.delete):
        raise UsageError("--add and --delete go with --alter.")
    if args.validate_only and not (args.alter or args.import_file):
        raise UsageError("--validate-only goes with --alter or --import.")
    if args.strict and not args.describe:
        raise UsageError("--strict goes with --describe.")
    if args.throttled and not (args.metrics or args.metrics_template):
        raise UsageError("--throttled needs --metrics URL[,URL...]: the brokers' Prometheus "
                         "endpoints (python -m localkafka status prints a local broker's), or "
                         "--metrics-template with --bootstrap-server.")
    for flag, given in (("--metrics", args.metrics), ("--metrics-template", args.metrics_template)):
        if given and not (args.resolve or args.throttled):
            raise UsageError(f"{flag} goes with --resolve or --throttled.")
    from quota_core.throttling.coverage import check_endpoint_flags

    check_endpoint_flags(args.metrics, args.metrics_template, args.bootstrap_server)
    if args.metrics:
        from quota_core.telemetry.collector import parse_endpoints

        parse_endpoints(args.metrics)  # a malformed URL is a usage error, before connecting
    if args.above is not None and not args.throttled:
        raise UsageError("--above goes with --throttled.")
    for flag, value in (("--timeout", args.timeout), ("--above", args.above)):
        if value is not None and not isinstance(value, float):  # 3.11: "--x=--" gives []
            raise UsageError(f"{flag} {' '.join(map(str, value)) or '--'}: give a number.")
    if args.above is not None and not (math.isfinite(args.above) and args.above >= 0):
        raise UsageError(f"--above {args.above:g}: give a percentage of the quota, e.g. 80.")
    if args.replace and not args.import_file:
        raise UsageError("--replace goes with --import.")
    for flag, value in (("--actor", args.actor), ("--audit-log", args.audit_log)):
        if value is not None and not (args.alter or args.import_file):
            raise UsageError(f"{flag} goes with --alter or --import (it is recorded in the "
                             f"audit log of the changes they make).")
    if (args.export or args.import_file) and (args.names or args.defaults or args.user
                                              or args.client_id or args.ip):
        raise UsageError("--export and --import work on the whole quota set: drop the entity "
                         "flags.")
    if not (math.isfinite(args.timeout) and 0 < args.timeout <= 3600):
        raise UsageError(f"--timeout {args.timeout:g}: give a number of seconds between 0 and "
                         f"3600.")
    read_only = args.describe or args.resolve or args.export or args.throttled
    if args.sandbox and read_only:
        from quota_core.backends.open import require_sandbox_file

        require_sandbox_file(args.sandbox)


def main(argv: Sequence[str] | None = None, out: TextIO | None = None,
         err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        return _main(argv, out, err)
    except KeyboardInterrupt:  # Ctrl-C during a wait: one line, the shell's status for SIGINT
        err.write(f"{PROG}: interrupted (Ctrl-C).\n")
        return 130
    except Terminated:  # SIGTERM during a write, after its audit intents were closed
        err.write(f"{PROG}: stopped by SIGTERM; the audit log says what was sent.\n")
        return 143
    except BrokenPipeError:
        return 0
    except Exception as exc:  # a bug: one line rather than a traceback (the fuzz test finds them)
        detail = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        err.write(f"{PROG}: internal error ({detail}). This is a bug: please report it with the "
                  f"command line.\n")
        return 1


def _names_are_text(args: argparse.Namespace) -> None:
    """Refuse a name holding undecodable bytes (argv is decoded with surrogateescape) before
    it reaches a backend: Kafka names are UTF-8, and Java would send such a name as '?'."""
    for entity_type, names in _entity_choices(args).items():
        for name in names:
            if name and not _is_utf8_text(name):
                Entity.from_pairs([(entity_type, name)])  # raises EntityError naming it


def run_init(args: argparse.Namespace, err: TextIO) -> int:
    """``--init``: make ``--sandbox PATH`` an empty sandbox (reads never create one)."""
    if not args.sandbox:
        raise UsageError("--init creates a sandbox file: give --sandbox PATH.")
    from quota_core.changes.workflow import refuse_read_only

    refuse_read_only(getattr(args, "fleet_cluster", None))
    from quota_core.backends.sandbox import SandboxBackend

    with SandboxBackend(args.sandbox) as backend:
        created = backend.init()
    err.write(f"Created the sandbox {args.sandbox} (no quotas yet).\n" if created else
              f"{args.sandbox} is already a sandbox: nothing changed.\n")
    return 0


def _main(argv: Sequence[str] | None, out: TextIO, err: TextIO) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    from quota_core.cli.dialect import is_configs_command
    if is_configs_command(words):  # kafka-configs.sh's quota forms (issue 11)
        from quota_core.cli import configs_compat

        return configs_compat.main(words, out, err)
    if words and words[0] in SUBCOMMANDS:
        return _subcommand(words[0], words[1:], out, err)
    if words and not words[0].startswith("-"):
        registered = registered_subcommands().get(words[0])
        if registered is not None:
            return registered.load()(words[1:], out, err)
    late = _late_subcommand(words)
    if late is not None:  # `--config F diff ...`: argparse would ask for --describe instead
        err.write(f"{PROG}: error: the subcommand comes first: {PROG} {late} "
                  f"{' '.join(w for w in words if w != late)}\n")
        return 2
    parser = build_parser()
    try:
        # argparse prints --help and usage errors itself: send them to out / err too.
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse already printed the usage error
        return int(exc.code or 0)
    return run_command("main", lambda: _run(args, out, err), err, _say)


_MODES = ("--describe", "--resolve", "--alter", "--export", "--import", "--init", "--throttled",
          "-h", "--help", "--version")


def _late_subcommand(words: list[str]) -> str | None:
    """A subcommand typed after the flags (``--config F diff``), when no mode of the main
    command is given: the word, so the error can show the right order."""
    if any(w.split("=", 1)[0] in _MODES for w in words):
        return None
    known = set(SUBCOMMANDS) | set(registered_subcommands())
    return next((w for w in words[1:] if w in known), None)


def _run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """The main command, its flags read (:func:`quota_core.cli.edge.run_command` is its
    edge)."""
    try:
        if args.all_clusters:
            return run_all_clusters(args, out, err)
        select_cluster(args, metrics=bool(args.resolve or args.throttled))
        if (args.alter or args.import_file or args.init) and not args.validate_only:
            from quota_core.changes.workflow import refuse_read_only

            refuse_read_only(getattr(args, "fleet_cluster", None))  # before connecting
        _check_flags(args)
        _names_are_text(args)
        if args.init:
            return run_init(args, err)
        with open_backend_from(args, progress=lambda line: err.write(f"{PROG}: {line}\n")
                               ) as backend:
            if args.describe:
                return run_describe(backend, args, out, err)
            if args.resolve:
                return run_resolve(backend, args, out, err)
            if args.throttled:
                return run_throttled(backend, args, out, err)
            if args.alter:
                return run_alter(backend, args, out, err)
            if args.export:
                from quota_core.domain.serialization import dumps

                out.write(dumps(backend.describe(), args.export))
                return 0
            return run_import(backend, args, out, err)
    except BrokenPipeError:
        return 0


def run_all_clusters(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """``--all-clusters``: the read on every cluster of the fleet, concurrently
    (:mod:`quota_core.cli.fleet_run`); 1 when a cluster could not be read."""
    from quota_core.cli.fleet_run import cluster_args, finish, refuse_one_cluster_flags, run_each

    if not (args.describe or args.resolve or args.throttled):
        raise UsageError("--all-clusters goes with --describe, --resolve or --throttled (and "
                         "lint): it reads every cluster. A change names one cluster: "
                         "--cluster NAME.")
    refuse_one_cluster_flags(args, "reads")
    fleet = fleet_of_args(args)
    fleet.select(fleet.names()[0] if len(fleet) else None)  # no cluster: a usage error

    def one(cluster, cout: TextIO, cerr: TextIO) -> int:
        return run_command("main", lambda: _run(cluster_args(args, fleet, cluster), cout, cerr),
                           cerr, _say)

    return finish(run_each(fleet, one, PROG), args.output, out, err, PROG)


#: Commands with their own flags: name -> (module[:function], what it does); the function
#: defaults to ``main(argv, out, err)``.
SUBCOMMANDS = {
    "configs": (".configs_compat", "a kafka-configs.sh command line, read in its dialect"),
    "plan": (".plan:plan_main", "compare a desired quota file with the cluster (exit 0 nothing "
                                "to do, 2 changes pending)"),
    "apply": (".plan:apply_main", "apply a plan file exactly, refused if the quota set changed "
                                  "since"),
    "diff": (".diff:diff_main", "the drift between two clusters of the fleet (exit 0 equal, 2 "
                                "they differ)"),
    "lint": (".lint", "find the quotas that will hurt someone (exit 0 clean, 2 findings)"),
    "collect": (".collect", "scrape broker metrics and snapshot quotas into a usage history"),
    "serve-metrics": (".serve_metrics", "serve each bucket's limit, use and entry as "
                                        "Prometheus series"),
    "telemetry": (".telemetry", "list, add and remove the client-metrics subscriptions "
                                "(KIP-714) clients push under"),
}
#: Other packages add subcommands through this entry-point group (pyproject.toml): the
#: pipeline registers ``analyze`` (Spark), so the core names no pipeline module. Each entry
#: point is a ``main(argv, out, err) -> int``, loaded only when its name is asked for.
SUBCOMMAND_GROUP = "quota_console.subcommands"


def registered_subcommands() -> dict:
    """The subcommands other packages registered: name -> entry point (not yet loaded)."""
    from importlib.metadata import entry_points

    return {ep.name: ep for ep in entry_points(group=SUBCOMMAND_GROUP)
            if ep.name not in SUBCOMMANDS}


def subcommand_lines() -> list[tuple[str, str]]:
    """Every subcommand with its one line (``--help``): ours, then the registered ones, whose
    line is the first line of their entry point's docstring."""
    lines = [(name, what) for name, (_, what) in SUBCOMMANDS.items()]
    for name, ep in sorted(registered_subcommands().items()):
        try:
            doc = (ep.load().__doc__ or "").strip()
        except Exception:  # noqa: BLE001 - a broken plug-in must not break --help
            doc = ""
        lines.append((name, doc.splitlines()[0].rstrip(".") if doc else "(no description)"))
    return lines


def _epilog() -> str:
    lines = subcommand_lines()
    width = max(len(name) for name, _ in lines)
    rows = "\n".join(f"  {name:<{width}}  {what}" for name, what in lines)
    return (f"subcommands (each has its own --help: {PROG} SUBCOMMAND --help):\n{rows}\n\n"
            f"example:\n  {PROG} --bootstrap-server 127.0.0.1:9092 --resolve --user alice "
            f"--client-id app")


def _subcommand(name: str, argv: list[str], out: TextIO, err: TextIO) -> int:
    import importlib

    module_name, _, function = SUBCOMMANDS[name][0].partition(":")
    module = importlib.import_module(module_name, __package__)
    return getattr(module, function or "main")(argv, out, err)


def main_entry() -> None:
    """Console-script entry point: exit with main()'s status."""
    sys.exit(main())


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
