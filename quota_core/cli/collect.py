"""``kafka-client-quotas collect``: run the collector until SIGTERM or Ctrl-C.

Example::

    kafka-client-quotas collect --metrics http://127.0.0.1:7071/metrics \\
        --bootstrap-server 127.0.0.1:9092 --to history/

Exit status: 0 stopped cleanly with everything written; 1 the last flush failed or the setup
was refused (the reason on stderr); 2 a usage error.
"""
from __future__ import annotations

import argparse
import contextlib
import math
import sys
import threading
from typing import TextIO

from quota_core.telemetry.collector import Collector, parse_endpoints
from quota_core.backends.fleet_config import select_cluster
from quota_core.backends.open import NumberAction, add_fleet_arguments, open_backend_from
from quota_core.errors import ParseError
from quota_core.cli.edge import one_line, run_command
from quota_core.cli.signals import restore_signals, stop_on_signals

PROG = "kafka-client-quotas collect"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description="Scrape broker quota metrics and "
                                "snapshot the quota set into a usage history (Parquet or a "
                                "Kafka topic) for the analysis and the History page.")
    p.add_argument("--metrics", metavar="URL[,URL...]",
                   help="the brokers' Prometheus endpoints (LABEL=URL names a broker)")
    p.add_argument("--metrics-template", metavar="TEMPLATE",
                   help="one endpoint per broker of the cluster, e.g. "
                        "'http://{host}:7071/metrics' ({id}: the node id); needs "
                        "--bootstrap-server")
    p.add_argument("--bootstrap-server", metavar="HOST:PORT", help="the cluster whose quotas "
                   "are snapshot (and, with --to kafka:TOPIC, where the topic lives)")
    p.add_argument("--command-config", metavar="FILE", help="Kafka client properties")
    p.add_argument("--sandbox", metavar="PATH", help="snapshot a sandbox file's quotas instead")
    add_fleet_arguments(p)
    p.add_argument("--all-clusters", action="store_true",
                   help="collect every cluster of the fleet file, each with its own metrics, "
                        "into its history_dir or DIR/NAME; every row carries its cluster")
    p.add_argument("--to", required=True, metavar="DIR|kafka:TOPIC",
                   help="a folder (Parquet, partitioned by date) or a Kafka topic")
    p.add_argument("--every", type=float, action=NumberAction, default=10.0, metavar="SECONDS",
                   help="scrape interval (default 10)")
    p.add_argument("--snapshot-every", type=float, action=NumberAction, default=60.0, metavar="SECONDS",
                   help="describe the quota set this often; written when it changed (default 60)")
    p.add_argument("--status-every", type=float, action=NumberAction, default=60.0, metavar="SECONDS",
                   help="a status line this often (default 60)")
    p.add_argument("--timeout", type=float, action=NumberAction, default=5.0, metavar="SECONDS",
                   help="per scrape and per describe (default 5)")
    p.add_argument("--serve", metavar="HOST:PORT", help="also serve the live series as a "
                   "Prometheus endpoint, as serve-metrics does (e.g. 127.0.0.1:9464)")
    return p


def _check(args: argparse.Namespace) -> None:
    select_cluster(args, metrics=True)  # --cluster NAME: its store and its metrics
    if bool(args.metrics) == bool(args.metrics_template):
        raise ParseError("Say which endpoints to scrape: --metrics URL[,URL...] or "
                         "--metrics-template TEMPLATE (one of them).")
    from quota_core.throttling.coverage import check_endpoint_flags

    check_endpoint_flags(args.metrics, args.metrics_template, args.bootstrap_server)
    if bool(args.sandbox) == bool(args.bootstrap_server):
        raise ParseError("Say whose quotas to snapshot: --bootstrap-server HOST:PORT or "
                         "--sandbox PATH (one of them).")
    if args.to.startswith("kafka:") and not args.bootstrap_server:
        raise ParseError(f"--to {args.to} writes to a topic: give the cluster with "
                         f"--bootstrap-server.")
    _check_seconds(args)
    if args.serve is not None:
        from quota_core.telemetry.exporter import parse_listen

        parse_listen(args.serve, "--serve")
    if args.sandbox:  # snapshotting a mistyped path as an empty quota set would hide the typo
        from quota_core.backends.open import require_sandbox_file

        require_sandbox_file(args.sandbox)


def main(argv: list[str], out: TextIO, err: TextIO) -> int:
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            args = build_parser().parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    # an unreadable --command-config, a malformed flag: a usage error, "error:"
    return run_command("collect", lambda: _run(args, err), err, one_line(PROG))


def _run(args, err: TextIO) -> int:
    if args.all_clusters:
        return _run_fleet(args, err)
    _check(args)
    endpoints = parse_endpoints(args.metrics) if args.metrics else []

    def log(line: str) -> None:
        err.write(line + "\n")
        err.flush()

    stop = threading.Event()
    previous = stop_on_signals(stop)
    try:
        from quota_core.telemetry import scrape as scrape_once
        from quota_core.telemetry.scrape import redirect_note
        from quota_core.telemetry.sinks import open_sink

        noted: set[str] = set()  # a followed redirect is said once per endpoint

        def scrape(url: str, broker: str | None = None, timeout: float = 5.0) -> list:
            def note(final: str) -> None:
                if url not in noted:
                    noted.add(url)
                    log(f"collect: {redirect_note(url, final)}")
            return scrape_once(url, broker, timeout=timeout, on_redirect=note)

        with open_backend_from(args) as backend, contextlib.ExitStack() as stack:
            client_conf = None
            if args.to.startswith("kafka:") and args.command_config:
                from quota_core.backends.kafka_config import load_command_config

                client_conf = load_command_config(args.command_config).librdkafka_config()
            if args.metrics_template:
                from quota_core.cli.endpoints import metrics_endpoints

                endpoints = metrics_endpoints(None, args.metrics_template, backend.info())
            if args.serve is not None:  # its own connection: a backend serves one thread
                from quota_core.telemetry.exporter import parse_listen
                from quota_core.cli.serve_metrics import start

                served = stack.enter_context(open_backend_from(args))
                host, port = parse_listen(args.serve, "--serve")
                server = start(served, args, host, port, log, args.timeout)
                stack.callback(server.server_close)
                stack.callback(server.shutdown)
            sink = open_sink(args.to, client_conf, args.bootstrap_server)
            log(f"collect: scraping {', '.join(e.label for e in endpoints)} every "
                f"{args.every:g} s into {sink.label}; stop with Ctrl-C or SIGTERM")
            collector = Collector(endpoints, backend.describe, sink, scrape,
                                  scrape_every=args.every, snapshot_every=args.snapshot_every,
                                  flush_every=args.every, status_every=args.status_every,
                                  log=log, timeout=args.timeout,
                                  settings=backend.broker_settings)
            try:
                return collector.run(stop)
            finally:
                sink.close()
    finally:
        restore_signals(previous)


def _check_fleet(args: argparse.Namespace) -> None:
    from quota_core.cli.fleet_run import refuse_one_cluster_flags
    from quota_core.errors import UsageError

    refuse_one_cluster_flags(args, "collects", extra=(("--serve", args.serve),),
                             hint="; serve them all with serve-metrics --all-clusters")
    if args.to.startswith("kafka:"):
        raise UsageError(f"--all-clusters writes each cluster's history to a folder of its own "
                         f"(its history_dir, else DIR/NAME): give --to DIR, not {args.to}.")
    _check_seconds(args)


def _check_seconds(args: argparse.Namespace) -> None:
    """Every period and timeout flag is a number of seconds greater than 0."""
    for flag in ("every", "snapshot_every", "status_every", "timeout"):
        value = getattr(args, flag)
        if not (math.isfinite(value) and value > 0):
            raise ParseError(f"--{flag.replace('_', '-')} {value:g}: give a number of seconds "
                             f"greater than 0.")


def _run_fleet(args: argparse.Namespace, err: TextIO) -> int:
    """``--all-clusters``: one collector per cluster of the fleet file, each on its own
    thread with its own store, endpoints and output folder (its ``history_dir``, else
    ``--to DIR/NAME``); every row carries ``cluster``. A cluster that is down is a gap in its
    own history only (its store is opened again when needed)."""
    from pathlib import Path

    from quota_core.backends.fleet_config import fleet_of_args
    from quota_core.backends.fleet_read import LazyCluster
    from quota_core.backends.open import require_sandbox_file
    from quota_core.errors import QuotaError
    from quota_core.telemetry import scrape as scrape_once
    from quota_core.telemetry.sinks import ParquetSink
    from quota_core.cli.endpoints import metrics_endpoints

    _check_fleet(args)
    fleet = fleet_of_args(args)
    fleet.select(fleet.names()[0] if len(fleet) else None)  # no cluster: a usage error
    lock = threading.Lock()

    def logger(name: str):
        def log(line: str) -> None:
            with lock:
                err.write(line.replace("collect: ", f"collect: cluster {name}: ", 1) + "\n")
                err.flush()
        return log

    plans = []
    for cluster in fleet:
        if cluster.sandbox:
            require_sandbox_file(cluster.sandbox)
        endpoints = parse_endpoints(cluster.metrics_arg) if cluster.metrics_arg else []
        folder = Path(cluster.history_dir) if cluster.history_dir else Path(args.to) / cluster.name
        plans.append((cluster, endpoints, folder))
    stop = threading.Event()
    previous = stop_on_signals(stop)
    results: dict[str, int] = {}
    sources = []
    try:
        threads = []
        for cluster, endpoints, folder in plans:
            log = logger(cluster.name)
            source = LazyCluster(cluster, args.timeout)
            sources.append(source)
            if not endpoints and cluster.metrics_template:
                info = source.info_or_error()
                if isinstance(info, QuotaError):
                    log(f"collect: cannot list its brokers for its metrics_template, so no "
                        f"usage is scraped (its quota set still is, when it answers): {info}")
                else:
                    endpoints = metrics_endpoints(None, cluster.metrics_template, info)
            sink = ParquetSink(folder)
            log(f"collect: scraping {', '.join(e.label for e in endpoints) or 'no endpoint'} "
                f"every {args.every:g} s into {sink.label}")
            collector = Collector(endpoints, source.describe, sink, scrape_once,
                                  scrape_every=args.every, snapshot_every=args.snapshot_every,
                                  flush_every=args.every, status_every=args.status_every,
                                  log=log, timeout=args.timeout,
                                  settings=source.broker_settings, cluster=cluster.name)

            def run(name=cluster.name, collector=collector, sink=sink) -> None:
                try:
                    results[name] = collector.run(stop)
                finally:
                    sink.close()

            thread = threading.Thread(target=run, name=f"collect-{cluster.name}", daemon=True)
            thread.start()
            threads.append(thread)
        err.write(f"collect: {len(plans)} clusters ({', '.join(c.name for c, _, _ in plans)}); "
                  f"stop with Ctrl-C or SIGTERM\n")
        stop.wait()
        for thread in threads:
            thread.join(timeout=30)
    finally:
        stop.set()
        for source in sources:
            source.close()
        restore_signals(previous)
    return max(results.values(), default=0) if len(results) == len(plans) else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:], sys.stdout, sys.stderr))
