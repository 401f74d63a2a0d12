"""``kafka-client-quotas serve-metrics``: the console as a Prometheus endpoint, until SIGTERM.

Example::

    kafka-client-quotas serve-metrics --listen 127.0.0.1:9464 \\
        --bootstrap-server 127.0.0.1:9092 --metrics-template 'http://{host}:7071/metrics'

Each scrape of ``http://HOST:PORT/metrics`` reads the quota set, sweeps the brokers' endpoints
and serves the limit, use and entry of every bucket (quota_core.telemetry.exporter). Without
``--metrics`` it serves the configured quota values and its own health only. One scrape
serves every request of the next few seconds, and slow or idle connections are timed out
(quota_core.telemetry.serving).

Exit status: 0 stopped cleanly; 1 the cluster or sandbox could not be read at the start, or
the address cannot be listened on; 2 a usage error (a malformed --listen, URL or number, or a
--sandbox file that does not exist).
"""
from __future__ import annotations

import argparse
import contextlib
import math
import sys
import threading
from typing import TextIO

from quota_core.backends.fleet_config import select_cluster
from quota_core.backends.open import NumberAction, add_backend_arguments, open_backend_from
from quota_core.errors import ParseError, QuotaError, UsageError
from quota_core.cli.edge import one_line, run_command
from quota_core.cli.signals import restore_signals, stop_on_signals

PROG = "kafka-client-quotas serve-metrics"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description="Serve every bucket's limit, use and "
                                "entry, the configured quota values and the console's health "
                                "as Prometheus series.")
    p.add_argument("--listen", default="127.0.0.1:9464", metavar="HOST:PORT",
                   help="where to serve /metrics (default 127.0.0.1:9464; port 0: any free)")
    p.add_argument("--metrics", metavar="URL[,URL...]",
                   help="the brokers' Prometheus endpoints (LABEL=URL names a broker)")
    p.add_argument("--metrics-template", metavar="TEMPLATE",
                   help="one endpoint per broker of the cluster, e.g. "
                        "'http://{host}:7071/metrics' ({id}: the node id); needs "
                        "--bootstrap-server")
    p.add_argument("--scrape-timeout", type=float, action=NumberAction, default=5.0,
                   metavar="SECONDS",
                   help="per broker endpoint, within each scrape (default 5)")
    add_backend_arguments(p, all_clusters="serve every cluster of the fleet file, each "
                                          "series labelled cluster=\"NAME\"")
    return p


def listen_address(args: argparse.Namespace) -> tuple[str, int]:
    """The checked flags: ``(host, port)`` to listen on; a :class:`ParseError` or
    :class:`UsageError` for what the user must fix."""
    from quota_core.telemetry.exporter import parse_listen

    address = parse_listen(args.listen)
    select_cluster(args, metrics=True)  # --cluster NAME: its store and its metrics
    if args.metrics:
        from quota_core.telemetry.collector import parse_endpoints

        parse_endpoints(args.metrics)  # a malformed URL is refused before connecting
    from quota_core.throttling.coverage import check_endpoint_flags

    check_endpoint_flags(args.metrics, args.metrics_template, args.bootstrap_server)
    if bool(args.sandbox) == bool(args.bootstrap_server):
        raise UsageError("Say whose quotas to serve: --bootstrap-server HOST:PORT or "
                         "--sandbox PATH (one of them).")
    for flag in ("scrape_timeout", "timeout"):
        value = getattr(args, flag)
        if not (math.isfinite(value) and value > 0):
            raise ParseError(f"--{flag.replace('_', '-')} {value:g}: give a number of seconds "
                             f"greater than 0.")
    if args.sandbox:  # serving a mistyped path as an empty quota set would hide the typo
        from quota_core.backends.open import require_sandbox_file

        require_sandbox_file(args.sandbox)
    return address


def start(backend, args: argparse.Namespace, host: str, port: int, log, timeout: float):
    """Build the exporter over ``backend`` (the endpoints of ``args.metrics`` or
    ``args.metrics_template``) and serve it: returns the HTTP server. Shared with
    ``collect --serve``."""
    from quota_core.telemetry.exporter import serve

    exporter = exporter_for(backend, args.metrics, args.metrics_template, log, timeout)
    exporter.read_quotas()  # a cluster that cannot be read fails the start, with its reason
    server = serve(exporter, host, port)
    _serving(server, log)
    return server


def _serving(server, log) -> None:
    bound_host, bound_port = server.server_address[:2]
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    log(f"serve-metrics: serving http://{shown}:{bound_port}/metrics; stop with Ctrl-C or "
        f"SIGTERM")


def exporter_for(backend, metrics: str | None, template: str | None, log, timeout: float):
    """The :class:`~quota_core.telemetry.exporter.QuotaExporter` of one cluster: its quota
    set, the endpoints of ``metrics`` (or ``template`` for the brokers it lists at each
    scrape), its lint findings."""
    from quota_core.telemetry.exporter import QuotaExporter
    from quota_core.cli.endpoints import metrics_endpoints

    fixed = metrics_endpoints(metrics, None, None)

    def endpoints():  # a template follows the brokers the cluster lists at each scrape
        if not template:
            return fixed
        return metrics_endpoints(None, template, backend.info())

    last: list = []  # [(quotas, settings, protected), findings]: the last lint run

    def lint(quotas):
        """The lint rules that need only the quota set and the brokers' settings (the
        traffic rules need a history: ``kafka-client-quotas lint --history``). Run again
        only when one of them changed (about half a second at 100,000 entries)."""
        import os

        from quota_core.throttling.brokers import read_settings
        from quota_core.lint import LintInput, protected_from_config, run_lint

        key = (quotas, read_settings(backend), protected_from_config(os.environ))
        if not last or last[0] != key:
            last[:] = [key, run_lint(LintInput(quotas, "the served quota set", key[1],
                                               key[2])).findings]
        return last[1]

    return QuotaExporter(backend.describe, endpoints, lambda: backend.info().node_ids,
                         timeout=timeout, log=log, lint=lint)


def main(argv: list[str], out: TextIO, err: TextIO) -> int:
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            args = build_parser().parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    # serve-metrics says "error:" for every error of the tree
    return run_command("serve-metrics", lambda: _run(args, err), err,
                       one_line(PROG, error_for=(QuotaError,)))


def _run(args: argparse.Namespace, err: TextIO) -> int:
    def log(line: str) -> None:
        err.write(line + "\n")
        err.flush()

    stop = threading.Event()
    previous = stop_on_signals(stop)
    try:
        if args.all_clusters:
            return _run_fleet(args, log, stop)
        host, port = listen_address(args)
        with open_backend_from(args) as backend:
            server = start(backend, args, host, port, log, args.scrape_timeout)
            try:
                stop.wait()
            finally:
                server.shutdown()
                server.server_close()
        return 0
    finally:
        restore_signals(previous)


def _run_fleet(args: argparse.Namespace, log, stop: threading.Event) -> int:
    """``--all-clusters``: every cluster of the fleet file in one exporter, each series
    labelled ``cluster="NAME"``; each cluster with its own store and metrics."""
    from quota_core.backends.fleet_config import fleet_of_args
    from quota_core.backends.fleet_read import LazyCluster
    from quota_core.cli.fleet_run import refuse_one_cluster_flags
    from quota_core.backends.open import require_sandbox_file
    from quota_core.telemetry.exporter import FleetExporter, parse_listen
    from quota_core.telemetry.serving import serve as serve_scrapes

    host, port = parse_listen(args.listen)
    refuse_one_cluster_flags(args, "serves")
    for flag in ("scrape_timeout", "timeout"):
        value = getattr(args, flag)
        if not (math.isfinite(value) and value > 0):
            raise ParseError(f"--{flag.replace('_', '-')} {value:g}: give a number of seconds "
                             f"greater than 0.")
    fleet = fleet_of_args(args)
    fleet.select(fleet.names()[0] if len(fleet) else None)  # no cluster: a usage error
    sources = {}
    for cluster in fleet:
        if cluster.sandbox:  # serving a mistyped path as an empty quota set hides the typo
            require_sandbox_file(cluster.sandbox)
        sources[cluster.name] = LazyCluster(cluster, args.timeout)
    exporters = {name: exporter_for(source, source.cluster.metrics_arg,
                                    source.cluster.metrics_template, log, args.scrape_timeout)
                 for name, source in sources.items()}
    fleet_exporter = FleetExporter(exporters)
    try:
        fleet_exporter.scrape()  # the first read: a cluster down now is named in the log
        server = serve_scrapes(fleet_exporter.scrape, host, port)
        log(f"serve-metrics: {len(sources)} clusters ({', '.join(sources)}), each series "
            f"labelled cluster=\"NAME\"")
        _serving(server, log)
        try:
            stop.wait()
        finally:
            server.shutdown()
            server.server_close()
    finally:
        for source in sources.values():
            source.close()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:], sys.stdout, sys.stderr))
