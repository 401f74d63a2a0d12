"""``kafka-client-quotas``: describe, resolve and alter Kafka client quotas (KIP-546's CLI).

Examples::

    kafka-client-quotas --bootstrap-server 127.0.0.1:9092 --describe --names client-id=app
    kafka-client-quotas --sandbox quotas.sqlite --resolve --user alice --client-id app
    kafka-client-quotas --sandbox quotas.sqlite --alter --names client-id=app --defaults user \\
        --add consumer_byte_rate=2MB --delete producer_byte_rate

Exit status: 0 success, 1 the request was refused (reasons on stderr), 2 a usage error.
This module only assembles: options in, one library call, text out.
"""
from __future__ import annotations

import argparse
import contextlib
import itertools
import math
import re
import sys
from pathlib import Path
from typing import Sequence, TextIO

from . import output
from .alterations import Alteration, Op
from .backend import QuotaBackend
from .connect import open_backend
from .entities import CLIENT_ID, ENTITY_TYPES, IP, USER, Entity
from .errors import AlterationError, ParseError, QuotaError, ValidationError
from .filters import EntityFilter, FilterComponent
from .resolution import resolve, resolve_ip
from .serialization import dumps, import_plan, loads
from .spec import parse_add, parse_defaults, parse_delete, parse_names
from .validation import is_ip_literal, validate_alterations

PROG = "kafka-client-quotas"


class UsageError(Exception):
    """Wrong flags: exit 2 with the usage line."""


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


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG, description="Describe, resolve and alter Kafka client quotas.",
        epilog="Example: kafka-client-quotas --bootstrap-server 127.0.0.1:9092 --resolve "
               "--user alice --client-id app")
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
    mode.add_argument("--throttled", action="store_true",
                      help="every bucket the brokers throttle now (needs --metrics), worst "
                           "first, with the entry that sets its quota")
    where = p.add_argument_group("where the quotas live (one of)")
    where.add_argument("--bootstrap-server", metavar="HOST:PORT", help="a Kafka cluster")
    where.add_argument("--command-config", metavar="FILE",
                       help="Kafka client properties (security.protocol, sasl.*, ssl.*)")
    where.add_argument("--sandbox", metavar="PATH", help="a local sandbox store (SQLite file)")
    where.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                       help="give up on an unreachable cluster after this long (default 10)")
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
    live = p.add_argument_group("live throttling (broker metrics)")
    live.add_argument("--metrics", metavar="URL[,URL...]",
                      help="Prometheus endpoints of the brokers' JMX exporter (LABEL=URL to name "
                           "a broker); --resolve then shows rate vs quota per broker")
    live.add_argument("--above", type=float, metavar="PCT",
                      help="--throttled: also buckets running at or above PCT %% of their quota")
    p.add_argument("--output", choices=("text", "json"), default="text")
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


def run_describe(backend: QuotaBackend, args: argparse.Namespace, out: TextIO) -> int:
    choices = _entity_choices(args)
    if choices:
        filters = [EntityFilter(tuple(FilterComponent.default(t) if n is None
                                      else FilterComponent.exact(t, n) for t, n in combo),
                                args.strict)
                   for combo in _combinations(choices)]
    else:
        filters = [EntityFilter((), args.strict)]
    found: dict[Entity, dict[str, float]] = {}
    for entity_filter in filters:
        found.update(backend.describe(entity_filter))
    out.write(output.format_describe(found, args.output))
    return 0


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
    live, failed = _live_rows(args, quotas, err)
    resolutions = []
    for combo in _combinations(choices):
        names = dict(combo)
        if IP in names:
            resolutions.append(resolve_ip(quotas, names[IP]))  # type: ignore[arg-type]
        else:
            resolutions.append(resolve(quotas, names.get(USER), names.get(CLIENT_ID)))
    out.write(output.format_resolutions(resolutions, args.output, live))
    if args.output == "text":
        for note in dict.fromkeys(n for r in resolutions for n in r.client.assumptions()):
            err.write(f"note: {note}\n")
    return 1 if failed else 0


def _live_rows(args: argparse.Namespace, quotas, err: TextIO):
    """Scrape every --metrics endpoint and join with the ladder: ``(rows or None, failed)``.
    An endpoint that fails gets one line on stderr; the others still answer."""
    if not args.metrics:
        return None, False
    from .collector import parse_endpoints
    from .live import join_usage
    from .metrics import scrape

    series, failed = [], False
    for endpoint in parse_endpoints(args.metrics):
        try:
            series.extend(scrape(endpoint.url, endpoint.label, timeout=args.timeout))
        except QuotaError as exc:
            err.write(f"{PROG}: {exc}\n")
            failed = True
    return join_usage(series, quotas), failed


def run_throttled(backend: QuotaBackend, args: argparse.Namespace, out: TextIO,
                  err: TextIO) -> int:
    from .live import throttled_rows

    rows, failed = _live_rows(args, backend.describe(), err)
    out.write(output.format_throttled(throttled_rows(rows or [], args.above), args.output))
    return 1 if failed else 0


def _report(outcome, err: TextIO) -> int:
    """Each refused entity with the reason; when only some were refused, also what was
    applied, since each entity is all-or-nothing on its own."""
    for result in outcome.failed:
        err.write(f"{PROG}: {result.entity}: {result.error}\n")
    if outcome.failed and len(outcome.failed) < len(outcome.results):
        done = "would be applied" if outcome.validate_only else "applied"
        for result in outcome.results:
            if result.ok:
                err.write(f"{PROG}: {result.entity}: {done}\n")
    return 0 if outcome.ok else 1


def run_alter(backend: QuotaBackend, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    ops = [Op.set(k, v) for text in args.add for k, v in parse_add(text)]
    ops += [Op.remove(k) for text in args.delete for k in parse_delete(text)]
    if not ops:
        raise UsageError("--alter needs --add KEY=VALUE and/or --delete KEY.")
    alterations = [Alteration(e, tuple(ops)) for e in _entities(args)]
    validate_alterations(alterations)
    removed = [op.key for op in ops if op.is_remove]
    if removed:  # brokers accept removing an unset key silently; kafka-configs refuses it
        for alteration in alterations:
            unset = [k for k in removed if k not in backend.describe_entity(alteration.entity)]
            if unset:
                err.write(f"warning: {alteration.entity} has no {', '.join(unset)} to delete "
                          f"(nothing to remove there).\n")
    outcome = backend.alter(alterations, validate_only=args.validate_only)
    if args.output == "json":
        out.write(output.format_outcome(outcome))
    elif args.validate_only and outcome.ok:
        err.write(f"Valid: {len(alterations)} entit{'y' if len(alterations) == 1 else 'ies'} "
                  f"would be altered; nothing was changed (--validate-only).\n")
    return _report(outcome, err)


def run_import(backend: QuotaBackend, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    path = Path(args.import_file)
    fmt = "yaml" if path.suffix.lower() in (".yaml", ".yml") else "json"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ParseError(f"Cannot read {path}: {exc.strerror}.") from exc
    except UnicodeDecodeError as exc:
        raise ParseError(f"Cannot read {path}: it is not UTF-8 text ({exc.reason} at byte "
                         f"{exc.start}). Give a JSON or YAML export.") from exc
    desired = loads(text, fmt, source=str(path))
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
    outcome = backend.alter(plan, validate_only=args.validate_only)
    err.write(f"{'Validated' if args.validate_only else 'Applied'} "
              f"{len(outcome.results) - len(outcome.failed)} of {len(plan)} entity changes.\n")
    return _report(outcome, err)


_BOOTSTRAP = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[^\s:,\[\]]+):[0-9]{1,5}$")


def _check_flags(args: argparse.Namespace) -> None:
    """Refuse flag combinations that would be ignored or misread, before connecting."""
    if args.sandbox and args.bootstrap_server:
        raise UsageError("Give either --sandbox PATH or --bootstrap-server HOST:PORT, not both.")
    if not args.sandbox and not args.bootstrap_server:
        raise UsageError("Say where the quotas live: --bootstrap-server HOST:PORT (a Kafka "
                         "cluster) or --sandbox PATH (a local sandbox file).")
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
    if args.throttled and not args.metrics:
        raise UsageError("--throttled needs --metrics URL[,URL...]: the brokers' Prometheus "
                         "endpoints (python -m localkafka status prints a local broker's).")
    if args.metrics and not (args.resolve or args.throttled):
        raise UsageError("--metrics goes with --resolve or --throttled.")
    if args.above is not None and not args.throttled:
        raise UsageError("--above goes with --throttled.")
    if args.above is not None and not (math.isfinite(args.above) and args.above >= 0):
        raise UsageError(f"--above {args.above:g}: give a percentage of the quota, e.g. 80.")
    if args.replace and not args.import_file:
        raise UsageError("--replace goes with --import.")
    if (args.export or args.import_file) and (args.names or args.defaults or args.user
                                              or args.client_id or args.ip):
        raise UsageError("--export and --import work on the whole quota set: drop the entity "
                         "flags.")
    if not (math.isfinite(args.timeout) and 0 < args.timeout <= 3600):
        raise UsageError(f"--timeout {args.timeout:g}: give a number of seconds between 0 and "
                         f"3600.")
    read_only = args.describe or args.resolve or args.export or args.throttled
    if args.sandbox and read_only and not Path(args.sandbox).exists():
        raise UsageError(f"No sandbox file at {args.sandbox}: it is created by --alter or "
                         f"--import. Check the path.")


def main(argv: Sequence[str] | None = None, out: TextIO | None = None,
         err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    words = list(sys.argv[1:] if argv is None else argv)
    from . import configs_compat  # kafka-configs.sh's quota forms (issue 11)
    if configs_compat.is_configs_command(words):
        return configs_compat.main(words, out, err)
    if words and words[0] in SUBCOMMANDS:
        return _subcommand(words[0], words[1:], out, err)
    parser = build_parser()
    try:
        # argparse prints --help and usage errors itself: send them to out / err too.
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse already printed the usage error
        return int(exc.code or 0)
    try:
        _check_flags(args)
        with open_backend(args.sandbox, args.bootstrap_server, args.command_config,
                          timeout_s=args.timeout) as backend:
            if args.describe:
                return run_describe(backend, args, out)
            if args.resolve:
                return run_resolve(backend, args, out, err)
            if args.throttled:
                return run_throttled(backend, args, out, err)
            if args.alter:
                return run_alter(backend, args, out, err)
            if args.export:
                out.write(dumps(backend.describe(), args.export))
                return 0
            return run_import(backend, args, out, err)
    except (UsageError, ParseError) as exc:
        err.write(f"{PROG}: error: {exc}\n")
        return 2
    except AlterationError as exc:
        for problem in exc.problems or [exc]:
            err.write(f"{PROG}: {getattr(problem, 'message', problem)}\n")
        return 1
    except ValidationError as exc:
        err.write(f"{PROG}: {exc}\n")
        return 1
    except QuotaError as exc:
        err.write(f"{PROG}: {exc}\n")
        return 1
    except BrokenPipeError:
        return 0


#: Commands with their own flags: name -> (module, what it does).
SUBCOMMANDS = {"collect": (".collect_cli", "scrape broker metrics and snapshot quotas into a "
                                           "usage history")}


def _subcommand(name: str, argv: list[str], out: TextIO, err: TextIO) -> int:
    import importlib

    module = importlib.import_module(SUBCOMMANDS[name][0], __package__)
    return module.main(argv, out, err)


def main_entry() -> None:
    """Console-script entry point: exit with main()'s status."""
    sys.exit(main())


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
