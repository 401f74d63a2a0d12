"""``python -m localkafka up|down|status|client-config|fetch``: a local broker for make targets.

``up`` prints progress on stderr and, on stdout, one ``metrics http://127.0.0.1:PORT/metrics``
line per broker (its Prometheus endpoint) followed by the bootstrap address as the last line
(``host:port``, or a comma-separated list for ``--brokers N``), so
``BOOTSTRAP=$(python -m localkafka up | tail -n1)`` works in a Makefile.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .broker import ADMIN, LocalBroker
from .cluster import MAX_BROKERS, LocalCluster
from .daemon import DEFAULT_DIR, ensure_running, running_broker, running_cluster, stop_running
from .errors import LocalBrokerError
from .jars import KAFKA_VERSION, cache_dir, ensure_jars


def _progress(msg: str) -> None:
    print(f"localkafka: {msg}", file=sys.stderr, flush=True)


def _broker_count(text: str) -> int:
    try:
        count = int(text)
    except ValueError:
        count = 0
    if not 1 <= count <= MAX_BROKERS:
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number of brokers from 1 to {MAX_BROKERS}")
    return count


def _status(directory: Path) -> int:
    """One line per node (exit 0 when every node answers, 3 when none or not all do)."""
    cluster = LocalCluster.attach(directory)
    if cluster is not None:
        whole = running_cluster(directory) is not None
        for node in cluster.nodes:
            state = "running" if node.running() and node.answers() else "down"
            print(f"node {node.node_id} {state} {node.bootstrap} pid={node.pid} sasl={node.sasl} "
                  f"dir={node.workdir} log={node.log_path}")
            print(f"metrics {node.metrics_url or '-'}")
        print(f"bootstrap {cluster.bootstrap}" if whole else "not running (not every node answers)")
        return 0 if whole else 3
    broker = running_broker(directory)
    if broker is None:
        print("not running")
        return 3
    users = ",".join(broker.users) if broker.sasl else "-"
    print(f"running {broker.bootstrap} pid={broker.pid} sasl={broker.sasl} users={users} "
          f"dir={broker.workdir} log={broker.log_path}")
    print(f"metrics {broker.metrics_url or '- (started without the metrics agent)'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m localkafka", description=__doc__)
    sub = parser.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="start a detached broker (or reuse the running one)")
    up.add_argument("--sasl", action="store_true", help="SASL_PLAINTEXT/SCRAM-SHA-256 with ACLs")
    up.add_argument("--port", type=int, default=None, help="client port (default: a free one)")
    up.add_argument("--brokers", type=_broker_count, default=1,
                    help=f"how many brokers (1 to {MAX_BROKERS}; default 1): a KRaft cluster of N nodes")
    up.add_argument("--timeout", type=float, default=90)
    down = sub.add_parser("down", help="stop the broker (no error if none)")
    status = sub.add_parser("status", help="exit 0 if a broker answers, 3 if not")
    cc = sub.add_parser("client-config", help="write a Java client properties file for --command-config")
    cc.add_argument("path", type=Path)
    cc.add_argument("--user", default=ADMIN)
    sub.add_parser("fetch", help="only fetch the Kafka jars")
    for p in (up, down, status, cc):
        p.add_argument("--dir", type=Path, default=DEFAULT_DIR, help=f"state/work dir (default {DEFAULT_DIR})")
    args = parser.parse_args(argv)

    try:
        if args.cmd == "fetch":
            _progress(f"Kafka {KAFKA_VERSION} jars in {cache_dir()}")
            print(ensure_jars())
        elif args.cmd == "up":
            _progress(f"ensuring Kafka {KAFKA_VERSION} jars (mvn, first time only)")
            ensure_jars()
            bootstrap, started = ensure_running(args.dir, sasl=args.sasl, port=args.port,
                                                timeout=args.timeout, progress=_progress,
                                                brokers=args.brokers)
            if not started:
                _progress(f"already running on {bootstrap}")
            cluster = LocalCluster.attach(args.dir)
            nodes = cluster.nodes if cluster is not None else [LocalBroker.attach(args.dir)]
            for node in nodes:
                if node is not None and node.metrics_url:
                    print(f"metrics {node.metrics_url}", flush=True)
                else:  # a broker started by an older localkafka, before the metrics agent
                    _progress("this broker runs without the metrics agent; restart it (down, then up) to get one")
            print(bootstrap, flush=True)
        elif args.cmd == "down":
            _progress("stopped every broker" if stop_running(args.dir) else "no broker was running")
        elif args.cmd == "status":
            return _status(args.dir)
        elif args.cmd == "client-config":
            # A cluster's users are every node's: its file names the whole bootstrap list.
            attached = LocalCluster.attach(args.dir) or LocalBroker.attach(args.dir)
            if attached is None or not attached.running():
                raise LocalBrokerError(f"no broker running from {args.dir}; run 'python -m localkafka up' first")
            print(attached.write_command_config(args.path, args.user))
    except LocalBrokerError as exc:
        print(f"localkafka: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
