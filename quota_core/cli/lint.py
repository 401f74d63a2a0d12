"""``kafka-client-quotas lint``: the quotas that will hurt someone, before they do.

Examples::

    kafka-client-quotas lint --bootstrap-server 127.0.0.1:9092 --protected 'svc-*'
    kafka-client-quotas lint quotas.yaml                      # a desired file, no cluster
    kafka-client-quotas lint --sandbox q.sqlite --history history/ --output json

Exit status (docs/interfaces.md): 0 no finding at or above ``--fail-on`` (default warning), 2 findings
at or above it, 1 any error, wrong flags and a malformed file included. The rules are the one
table :data:`quota_core.lint.RULES`; this module only assembles.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
from pathlib import Path
from typing import TextIO

from quota_core.backends.fleet_config import fleet_of_args, select_cluster
from quota_core.backends.open import add_backend_arguments, open_backend_from
from quota_core.throttling.brokers import ClusterSettings, read_settings
from quota_core.errors import UsageError
from quota_core.lint import (RULE_IDS, SEVERITIES, LintInput, LintOptions, LintReport,
                             parse_protected, protected_from_config, run_lint, severity_at_least)
from quota_core.cli.edge import one_line, run_command
from quota_core.cli.exits import exit_code
from quota_core.cli.plan import _check_where

PROG = "kafka-client-quotas lint"
LINT_CLEAN, LINT_FINDINGS = 0, 2


def lint_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG, description="Find the quotas that will hurt someone: defaults over the "
        "cluster's own clients, entries that never bind, quotas too small for one batch, and "
        "with --history the stale, churning and chronically throttled ones. Rules: "
        + ", ".join(RULE_IDS) + ". Exit 0: clean; 2: findings at or above --fail-on; 1: an "
        "error (wrong flags and a malformed file too).",
        epilog="Example: kafka-client-quotas lint quotas.yaml --protected 'client-id:connect-*'")
    p.add_argument("file", metavar="FILE", nargs="?",
                   help="a desired quota file (any format `plan` reads), linted without a "
                        "cluster")
    add_backend_arguments(p, all_clusters="lint every cluster of the fleet file at once "
                                          "(findings carry \"cluster\")")
    p.add_argument("--history", metavar="DIR",
                   help="the collector's usage history (DIR/usage, DIR/quotas) for the "
                        "traffic rules; alone, its newest quota snapshot is linted")
    p.add_argument("--metrics", metavar="URL[,URL...]",
                   help="the brokers' Prometheus endpoints (LABEL=URL names a broker), with a "
                        "cluster or sandbox: the live rules, what the clients report "
                        "(KIP-714) beside the brokers' throttling")
    p.add_argument("--protected", action="append", default=[], metavar="PATTERN",
                   help="a glob over user principals that no <default> entry may bind; "
                        "client-id:PATTERN for client ids (repeatable; also "
                        "QUOTA_LINT_PROTECTED)")
    p.add_argument("--fail-on", choices=SEVERITIES, default="warning",
                   help="exit 2 on findings at or above this severity (default warning)")
    p.add_argument("--output", choices=("text", "json"), default="text",
                   help="text (raw names) or json (a list of findings)")
    p.add_argument("--stale-days", type=float, default=LintOptions.stale_days, metavar="N",
                   help="stale: not seen for N days (default 7)")
    p.add_argument("--chronic-pct", type=float, default=LintOptions.chronic_pct, metavar="X",
                   help="chronic: throttled more than X %% of the last 7 days (default 10)")
    p.add_argument("--churn-users", type=int, default=LintOptions.churn_users, metavar="N",
                   help="churning-principals: N distinct users behind one client id (default "
                        "10)")
    return p


def _options(args: argparse.Namespace) -> LintOptions:
    for flag, value in (("--stale-days", args.stale_days), ("--chronic-pct", args.chronic_pct),
                        ("--churn-users", args.churn_users)):
        if not (math.isfinite(value) and value > 0):
            raise UsageError(f"{flag} {value:g}: give a number greater than 0.")
    return LintOptions(stale_days=args.stale_days, chronic_pct=args.chronic_pct,
                       churn_users=args.churn_users)


def _input(args: argparse.Namespace) -> LintInput:
    from quota_core.backends.files import read_quota_path

    options = _options(args)
    if args.cluster is not None or args.config or not (args.file or args.history):
        select_cluster(args)  # --cluster NAME (or the one cluster of $QUOTA_CONFIG)
    where = bool(args.sandbox or args.bootstrap_server)
    if args.file and where:
        raise UsageError("Lint a FILE or a cluster/sandbox, not both: a file is linted without "
                         "a cluster (drop --bootstrap-server / --sandbox), or drop FILE.")
    protected = protected_from_config(os.environ) + [parse_protected(p, "--protected")
                                                     for p in args.protected if p]
    usage = history_source = None
    node_ids: tuple = ()
    if args.history:
        from quota_core.lint.history_files import read_usage

        usage = read_usage(args.history, max(options.stale_days, options.chronic_days))
        history_source = f"--history {args.history}"
    if args.file:
        path = Path(args.file)
        quotas = read_quota_path(path).quotas  # what plan, --import and apply refuse, too
        settings = ClusterSettings.defaults("Kafka's defaults: a file has no brokers")
        source = str(path)
    elif where:
        _check_where(args)
        with open_backend_from(args) as backend:
            quotas = backend.describe()
            settings = read_settings(backend)
            node_ids = backend.info().node_ids if args.metrics else ()
        source = f"sandbox {args.sandbox}" if args.sandbox else args.bootstrap_server
    elif args.history:
        from quota_core.lint.history_files import read_latest_quotas

        quotas, source = read_latest_quotas(args.history)
        settings = ClusterSettings.defaults("Kafka's defaults: a history has no brokers")
    else:
        raise UsageError("Say what to lint: a desired quota FILE, --bootstrap-server HOST:PORT, "
                         "--sandbox PATH, or --history DIR.")
    clients = _clients(args, quotas, node_ids) if args.metrics else {}
    return LintInput(quotas, source, settings, protected, usage, history_source, options,
                     **clients)


def _clients(args: argparse.Namespace, quotas, node_ids) -> dict:
    """The live rules' data: every live bucket's client view (quota_core.throttling.client_view)."""
    from quota_core.throttling.client_view import ClientSide, bucket_views
    from quota_core.throttling.coverage import endpoint_address, unread_brokers
    from quota_core.throttling.live import join_usage
    from quota_core.domain.membership import Membership
    from quota_core.telemetry.collector import parse_endpoints
    from quota_core.telemetry.sweep import scrape_all

    if not (args.sandbox or args.bootstrap_server):
        raise UsageError("--metrics needs the cluster or sandbox whose quotas the brokers "
                         "enforce: add --bootstrap-server HOST:PORT or --sandbox PATH.")
    series, errors = scrape_all(parse_endpoints(args.metrics), args.timeout)
    unread = unread_brokers(tuple(node_ids), series.brokers,
                            [(endpoint_address(e.url), None) for e, _ in errors])
    side = ClientSide(tuple(series.clients), series.telemetry)
    views = bucket_views(join_usage(series, quotas), side, Membership(quotas), unread)
    return {"clients": views, "telemetry": series.telemetry,
            "client_instances": len({r.instance_id for r in series.clients}),
            "live_source": f"--metrics ({len(series.brokers)} endpoints read"
                           + (f", {len(errors)} not" if errors else "") + ")"}


def format_text(report: LintReport) -> str:
    blocks = []
    for f in report.findings:
        where = "brokers" if f.entity is None else f.entity.display()
        blocks.append(f"{f.severity} {f.rule} {where}" + (f" {f.key}" if f.key else "") + "\n"
                      f"  {f.evidence}\n"
                      f"  fix: {json.dumps(f.fix, ensure_ascii=False, separators=(',', ':'))}\n")
    return "\n".join(blocks)


def summary(report: LintReport) -> str:
    counts = ", ".join(f"{n} {s}" for s, n in report.counts().items()) or "none"
    lines = [f"lint: {len(report.findings)} finding{'' if len(report.findings) == 1 else 's'} "
             f"({counts}); {len(report.ran)} of {len(report.ran) + len(report.skipped)} rules "
             f"ran."]
    lines += [f"  ran {rule} on {what}" for rule, what in report.ran]
    lines += [f"  not run: {rule}: {why}" for rule, why in report.skipped]
    return "\n".join(lines) + "\n"


def main(argv: list[str], out: TextIO, err: TextIO) -> int:
    """``lint ...``: 0 clean, 2 findings at or above --fail-on, 1 an error."""
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            args = lint_parser().parse_args(argv)
    except SystemExit as exc:  # --help: 0; a usage error: 1, so 2 always means findings
        return LINT_CLEAN if not exc.code else exit_code("lint", UsageError("usage"))
    return run_command("lint", lambda: _run(args, out, err), err,
                       one_line(PROG, error_for=(UsageError,)))


def _run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if args.all_clusters:
        return _run_all(args, out, err)
    report = run_lint(_input(args))
    if args.output == "json":
        out.write(json.dumps([f.as_dict() for f in report.findings], ensure_ascii=False,
                             indent=2) + "\n")
    else:
        out.write(format_text(report))
    err.write(summary(report))
    failing = [f for f in report.findings if severity_at_least(f.severity, args.fail_on)]
    return LINT_FINDINGS if failing else LINT_CLEAN


def _run_all(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """``lint --all-clusters``: every cluster of the fleet, concurrently; 1 when a cluster
    could not be read, else 2 when any has findings at or above --fail-on, else 0."""
    from quota_core.cli.fleet_run import cluster_args, finish, run_each

    for flag, value in (("FILE", args.file), ("--cluster", args.cluster),
                        ("--bootstrap-server", args.bootstrap_server),
                        ("--sandbox", args.sandbox), ("--command-config", args.command_config),
                        ("--history", args.history)):
        if value:
            raise UsageError(f"--all-clusters lints every cluster of the fleet file: drop "
                             f"{flag} (or name one cluster with --cluster NAME).")
    fleet = fleet_of_args(args)
    fleet.select(fleet.names()[0] if len(fleet) else None)  # no cluster: a usage error
    say = one_line(PROG, error_for=(UsageError,))

    def one(cluster, cout: TextIO, cerr: TextIO) -> int:
        return run_command("lint", lambda: _run(cluster_args(args, fleet, cluster), cout, cerr),
                           cerr, say)

    return finish(run_each(fleet, one, PROG), args.output, out, err, PROG, ok=(0, 2),
                  result=lambda codes: LINT_FINDINGS if LINT_FINDINGS in codes else LINT_CLEAN,
                  usage=None)
