"""``kafka-client-quotas telemetry``: the client-metrics subscriptions (KIP-714) clients push under.

Examples::

    kafka-client-quotas telemetry list --bootstrap-server 127.0.0.1:9092 [--output json]
    kafka-client-quotas telemetry subscribe --default --bootstrap-server 127.0.0.1:9092
    kafka-client-quotas telemetry subscribe slow-app --metrics org.apache.kafka.producer. \\
        --match client_id=batch-.* --interval-ms 10000 --bootstrap-server 127.0.0.1:9092
    kafka-client-quotas telemetry unsubscribe slow-app --bootstrap-server 127.0.0.1:9092

Each subscription is a ``CLIENT_METRICS`` config resource, read and written as
``kafka-client-metrics.sh`` does. Exit status as the main command: 0 done, 1 a runtime failure,
2 a usage error (one line). On a cluster that collects nothing clients push (no plugin, or
before Kafka 3.7) a note says so; the subscriptions are still read and written where the
broker has them. ``subscribe`` and ``unsubscribe`` are recorded in the audit log, as the
dashboard's Client telemetry page records them (:mod:`quota_core.changes.subscriptions`).
"""
from __future__ import annotations

import argparse
import contextlib
import json
from typing import NoReturn, TextIO

from quota_core.backends.open import add_backend_arguments, open_backend_from
from quota_core.domain.client_metrics import (DEFAULT_SUBSCRIPTION, KAFKA_DEFAULT_INTERVAL_MS,
                                              NOT_COLLECTED, Subscription, check_name,
                                              format_subscriptions, subscription_from_input)
from quota_core.errors import UsageError
from quota_core.cli.edge import one_line, run_command
from quota_core.cli.exits import USAGE

PROG = "kafka-client-quotas telemetry"


class _OneLineParser(argparse.ArgumentParser):
    """argparse, but a malformed command line is one line on stderr (exit 2), not the usage."""

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    p = _OneLineParser(prog=PROG, description="The client-metrics subscriptions (KIP-714): "
                       "which metrics clients push to the brokers, and how often.",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="action", metavar="ACTION", parser_class=_OneLineParser)
    sub.required = True
    ls = sub.add_parser("list", help="every subscription (name, metric prefixes, match, "
                                     "interval)")
    add_backend_arguments(ls)
    ls.add_argument("--output", choices=("text", "json"), default="text",
                    help="text, or json: a list of {name, metrics, match, interval_ms}")
    s = sub.add_parser("subscribe", help="create or replace a subscription",
                       epilog=f"--default writes {DEFAULT_SUBSCRIPTION.name!r}: "
                       f"{', '.join(DEFAULT_SUBSCRIPTION.metrics)} every "
                       f"{DEFAULT_SUBSCRIPTION.interval_ms // 1000} s, for every client.")
    add_backend_arguments(s)
    s.add_argument("name", metavar="NAME", nargs="?", help="the subscription's name")
    s.add_argument("--metrics", metavar="P[,P...]",
                   help="metric-name prefixes (e.g. org.apache.kafka.producer.), or '*'")
    s.add_argument("--match", action="append", default=[], metavar="KEY=REGEX",
                   help="only clients whose KEY fully matches REGEX (repeatable; KEY: "
                        "client_id, client_instance_id, client_software_name, "
                        "client_software_version, client_source_address, client_source_port)")
    s.add_argument("--interval-ms", metavar="N",
                   help=f"push interval, 100 to 3600000 ms (default: Kafka's "
                        f"{KAFKA_DEFAULT_INTERVAL_MS})")
    s.add_argument("--default", action="store_true",
                   help="the shipped subscription: throttle times, request latency and "
                        "connection metrics every 30 s (NAME, --metrics, --interval-ms "
                        "override it)")
    u = sub.add_parser("unsubscribe", help="remove a subscription")
    add_backend_arguments(u)
    u.add_argument("name", metavar="NAME", help="the subscription's name")
    p.epilog = "actions (each has its own --help):\n" + "".join(
        "  " + a.format_usage().removeprefix("usage: ") for a in (ls, s, u))
    return p


def main(argv: list[str], out: TextIO, err: TextIO) -> int:
    """``telemetry list | subscribe | unsubscribe``."""
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            args = build_parser().parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    return run_command("telemetry", lambda: _run(args, out, err), err, one_line(PROG))


def subscription_from_args(args: argparse.Namespace) -> Subscription:
    """The subscription a ``subscribe`` command line asks for (checked: a usage error else)."""
    return subscription_from_input(args.name, args.metrics, args.match, args.interval_ms,
                                   args.default)


def _write(backend, args: argparse.Namespace, target, sub: Subscription | None,
           err: TextIO) -> None:
    """``subscribe`` / ``unsubscribe`` through the audited write the dashboard uses
    (:mod:`quota_core.changes.subscriptions`): the cluster's audit log, the OS user."""
    import os

    from quota_core.changes.audit import AuditLog, default_audit_path, os_user, store_fields
    from quota_core.changes.subscriptions import subscribe, unsubscribe
    from quota_core.cli.output import says_where_audited

    audit = AuditLog((target and target.audit_log) or default_audit_path(os.environ))
    how = {"actor": os_user(), "cluster": store_fields(backend), "audit": audit,
           "target": target}
    with says_where_audited(audit, err):
        if sub is not None:
            subscribe(backend, sub, **how)
            err.write(f"subscribed {sub.name}: {', '.join(sub.metrics)} every "
                      f"{sub.interval_ms} ms\n")
        else:
            unsubscribe(backend, args.name, **how)
            err.write(f"unsubscribed {args.name}\n")


def _run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if args.action == "subscribe":
        sub = subscription_from_args(args)
    elif args.action == "unsubscribe":
        check_name(args.name)
    from quota_core.backends.fleet_config import select_cluster
    from quota_core.changes.workflow import refuse_read_only

    cluster = select_cluster(args)  # --config/--cluster: the fleet's cluster
    if args.action != "list":  # a subscription is a write to the cluster's configs
        refuse_read_only(cluster)
    if args.sandbox or not args.bootstrap_server:
        raise UsageError("telemetry needs a Kafka cluster: give --bootstrap-server HOST:PORT "
                         "(a sandbox has no clients).")
    from quota_core.backends.kafka_client_metrics import (describe_subscriptions,
                                                          list_subscription_names,
                                                          telemetry_collected)

    with open_backend_from(args) as backend:
        if args.action == "list":
            subs = describe_subscriptions(backend, list_subscription_names(backend))
            if args.output == "json":
                out.write(json.dumps([s.as_dict() for s in subs], ensure_ascii=False,
                                     indent=2) + "\n")
            else:
                out.write(format_subscriptions(subs))
        else:
            _write(backend, args, cluster, sub if args.action == "subscribe" else None, err)
        if not telemetry_collected(backend):
            err.write(f"note: {NOT_COLLECTED} (no broker plugin receives what clients push; "
                      f"see docs/client-telemetry.md)\n")
    return 0
