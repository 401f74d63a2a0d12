"""The analysis job's command line: ``python -m pipeline.analyze`` or
``spark-submit pipeline/analyze.py``.

Example::

    python -m pipeline.analyze --usage history/ --from 2025-01-01 --to 2025-01-07 \\
        --what-if proposed.yaml --out report/
    python -m pipeline.analyze --usage history/ --follow --interval 60   # beside the collector

A local folder's hourly rollups are kept in ``--rollups DIR`` (default ``history/rollups``)
and brought up to date first: a run reads only the files that arrived since the last one
(pipeline.incremental). The tables come from the rollups; ``--windows`` adds the per-sample
table. ``--follow`` keeps the rollups current until SIGINT/SIGTERM (the update under way
finishes; exit 0).

Progress lines go to stderr; the exit status is 0 on success, 1 when an input or output is
unusable (one line saying which file and column) or the topic's cluster did not answer within
``--timeout``, 2 for a usage error (a malformed or unreadable flag or file: ``--quotas``,
``--what-if``, ``--command-config``, a ``--usage`` folder that does not exist, a usage or
snapshot Parquet file with a column missing or mistyped). Every input the user names is
checked before a Spark session starts (Parquet files from their footers, with pyarrow).

A ``kafka:TOPIC`` on a SASL/TLS cluster is read with ``--command-config FILE``, the same
properties file as the rest of the CLI; the credentials go to Spark in-process, never on a
command line or in a log line.
"""
from __future__ import annotations

import argparse
import math
from contextlib import ExitStack
import sys
import time
import warnings
from datetime import datetime, timedelta, timezone
from pathlib import Path

if __package__ in (None, ""):  # run as a file (spark-submit pipeline/analyze.py)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    __package__ = "pipeline"  # noqa: A001 - lets the relative imports below work

from quota_core.backends.open import NumberAction  # noqa: E402
from quota_core.cli.edge import one_line, run_command  # noqa: E402
from quota_core.cli.signals import restore_signals, stop_on_signals  # noqa: E402
from quota_core.errors import ParseError, QuotaError  # noqa: E402

__all__ = ["main", "cli_main", "parse_args", "parse_time", "rollups_dir", "stop_on_signals"]

#: Our progress lines are the job's output on stderr: no INFO logs or progress bars between.
QUIET = {"spark.log.level": "WARN", "spark.ui.showConsoleProgress": "false"}


def parse_time(text: str, end: bool = False) -> datetime:
    """``YYYY-MM-DD`` or an ISO-8601 time (UTC unless an offset is given), as naive UTC.

    A bare date given to ``--to`` means the end of that day, so ``--from 2025-01-01 --to
    2025-01-07`` covers seven whole days.
    """
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a date (YYYY-MM-DD) or ISO-8601 time") from exc
    if value.tzinfo is not None:
        value = value.astimezone(timezone.utc).replace(tzinfo=None)
    if end and len(text) == 10:
        value += timedelta(days=1)
    return value


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="pipeline.analyze", description=__doc__.splitlines()[0])
    p.add_argument("--usage", required=True,
                   help="the collector's directory (usage/ and quotas/ in it) or kafka:TOPIC")
    p.add_argument("--kafka-bootstrap", help="HOST:PORT, with --usage kafka:TOPIC")
    p.add_argument("--command-config", metavar="FILE",
                   help="Kafka client properties for --usage kafka:TOPIC (security.protocol, "
                        "sasl.*, ssl.*), as for the rest of the CLI")
    p.add_argument("--timeout", type=float, action=NumberAction, default=30.0, metavar="SECONDS",
                   help="give up on a --usage kafka:TOPIC cluster that does not answer after "
                        "this long (default 30)")
    p.add_argument("--quotas", help="a quota export (JSON/YAML) in force over the whole range, "
                                    "instead of the snapshots in the usage directory")
    p.add_argument("--from", dest="start", type=parse_time, help="first day or time (UTC)")
    p.add_argument("--to", dest="end", type=lambda t: parse_time(t, end=True),
                   help="last day (inclusive) or time (exclusive), UTC")
    p.add_argument("--what-if", help="a quota export to compare against (what_if table)")
    p.add_argument("--out", help="directory to create with the tables (needed unless --follow)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    p.add_argument("--windows", action="store_true",
                   help="also write the windows table (one row per sample: large)")
    p.add_argument("--rollups", metavar="DIR",
                   help="where the hourly rollups are kept and updated (default: "
                        "<usage folder>/rollups; a kafka:TOPIC or Spark Connect run is whole)")
    p.add_argument("--no-rollups", action="store_true",
                   help="analyse the samples in --from/--to whole, keeping no rollups")
    p.add_argument("--follow", action="store_true",
                   help="keep the rollups current: update them every --interval until "
                        "SIGINT/SIGTERM (with --out, the tables are rewritten after each)")
    p.add_argument("--interval", type=float, action=NumberAction, default=60.0,
                   metavar="SECONDS", help="with --follow, the pause between updates "
                                           "(default 60)")
    args = p.parse_args(argv)
    if args.out is None and not args.follow:
        p.error("--out is required (unless --follow)")
    if not (math.isfinite(args.interval) and 0 < args.interval <= 86400):
        p.error(f"--interval {args.interval:g}: give a number of seconds between 0 and 86400")
    if args.no_rollups and (args.rollups or args.follow):
        p.error("--no-rollups goes with neither --rollups nor --follow")
    for flag, value in (("--from", args.start), ("--to", args.end)):
        if isinstance(value, list):  # Python 3.11's argparse gives [] for "--flag=--"
            p.error(f"{flag} --: give a date")
    if args.start and args.end and args.start >= args.end:
        p.error("--from must be before --to")
    if not (math.isfinite(args.timeout) and 0 < args.timeout <= 3600):
        p.error(f"--timeout {args.timeout:g}: give a number of seconds between 0 and 3600")
    if args.command_config and not args.usage.startswith("kafka:"):
        p.error("--command-config goes with --usage kafka:TOPIC")
    return args


def _load_set(path: str):
    """A quota file, read and checked as every command reads one (read_quota_path: bounds,
    the strict reader, the values' checks); a one-line :class:`ParseError` (exit 2) when it
    is unreadable, malformed or holds what may not be applied. Called before Spark starts."""
    from quota_core.backends.files import read_quota_path

    return read_quota_path(path).quotas


def _kafka_client(args: argparse.Namespace) -> dict[str, str] | None:
    """For ``--usage kafka:TOPIC``: check the cluster answers (with ``--command-config``)
    within ``--timeout`` and holds the topic, and return the Kafka source's options."""
    if not args.usage.startswith("kafka:"):
        return None
    from quota_core.errors import ParseError

    from pipeline.kafka_source import check_topic, client_options

    if not args.kafka_bootstrap:
        raise ParseError(f"--usage {args.usage} needs --kafka-bootstrap HOST:PORT.")
    config = None
    if args.command_config:
        from quota_core.backends.kafka_config import load_command_config

        config = load_command_config(args.command_config)
    check_topic(args.kafka_bootstrap, args.usage.removeprefix("kafka:"), config, args.timeout)
    return client_options(config, args.timeout)


def _check_usage_folder(usage: str) -> None:
    if usage.startswith("kafka:") or "://" in usage:
        return
    if not Path(usage).is_dir():
        from quota_core.errors import ParseError

        raise ParseError(f"--usage {usage}: no such folder. Give the collector's --to folder "
                         f"(it holds usage/ and quotas/) or kafka:TOPIC.")


def _check_files(args: argparse.Namespace, rollups: str | None, snapshots: bool) -> None:
    """The usage and snapshot files' columns, from their footers, before Spark starts: a
    missing or mistyped one is named in one line (BadInputFile: exit 2)."""
    from pipeline.readers import TimeRange, check_history

    when = TimeRange(args.start, args.end)
    if rollups is None or args.windows:  # the range is read whole
        check_history(args.usage, when, snapshots)
    if rollups is not None:  # the files an update of the rollups will read
        check_history(args.usage, when, snapshots, rollups=rollups)


def _written(args: argparse.Namespace, rollups: str | None) -> list[str]:
    """The local folders this run writes: ``--out`` and the rollups."""
    return [f for f in (args.out, rollups) if f and "://" not in f and not f.startswith("kafka:")]


def main(argv: list[str] | None = None) -> int:
    with ExitStack() as stack:
        return _main(sys.argv[1:] if argv is None else argv, stack)


def _main(raw_argv: list[str], stack: ExitStack) -> int:
    args = parse_args(raw_argv)
    # pyspark 4.2 warns on every pandas conversion that pandas 3 is not fully supported; what
    # the job uses works (tests/test_pipeline_*), so say it once in the docs, not per call.
    warnings.filterwarnings("ignore", "PySpark does not yet fully support pandas",
                            FutureWarning)
    started = time.monotonic()

    def progress(line: str) -> None:
        print(f"[{time.monotonic() - started:6.1f}s] {line}", file=sys.stderr, flush=True)

    # the CLI's one edge: ParseError (a malformed or unreadable input the user named) 2, any
    # other error of the tree 1 (quota_core.cli.exits.EXIT_CODES["analyze"]), "error: ..."
    return run_command("analyze", lambda: _analyse(args, raw_argv, stack, progress),
                       sys.stderr, one_line(None, error_for=(QuotaError,)))


def _analyse(args: argparse.Namespace, raw_argv: list[str], stack: ExitStack, progress) -> int:
    from quota_core.telemetry.folder_lock import holding_all

    from pipeline.job import run
    from pipeline.readers import TimeRange
    from pipeline.session import get_session

    quotas = _load_set(args.quotas) if args.quotas else None
    what_if = _load_set(args.what_if) if args.what_if else None
    _check_usage_folder(args.usage)
    rollups = rollups_dir(args)
    _check_files(args, rollups, quotas is None)
    client = _kafka_client(args)
    # one writer per folder, held until the job ends (--follow included): a second job
    # on the same --out or rollups stops here, naming the one that holds it
    stack.enter_context(holding_all(_written(args, rollups), ["analyze", *raw_argv]))
    progress("starting Spark")
    spark = get_session(conf=QUIET, with_kafka=args.usage.startswith("kafka:"))
    when = TimeRange(args.start, args.end)

    def analyse(overwrite: bool, update: bool = True) -> Path:
        return run(spark, args.usage, args.out, when, quotas, what_if,
                   args.kafka_bootstrap, overwrite, progress, kafka_client=client,
                   windows=args.windows, rollups_dir=rollups, update=update)

    if args.follow:
        return _follow(spark, args, rollups, quotas, analyse, progress)
    out = analyse(args.overwrite, rollups)
    progress(f"done: {out}")
    return 0


def rollups_dir(args: argparse.Namespace) -> str | None:
    """Where the rollups are kept: ``--rollups``, else ``<usage folder>/rollups`` for a local
    folder on a classic session; None (the range analysed whole) for ``--no-rollups``, a
    topic, a remote path, or Spark Connect (its server would run the streaming queries'
    Python)."""
    from pipeline.session import _remote

    if args.no_rollups:
        return None
    if args.usage.startswith("kafka:") or "://" in args.usage:
        if args.rollups or args.follow:
            raise ParseError(f"--usage {args.usage}: rollups (--rollups, --follow) are kept "
                             f"for a local folder only.")
        return None
    if args.rollups:
        return args.rollups
    if _remote():
        if args.follow:
            raise ParseError("--follow needs a classic Spark session, not Spark Connect.")
        return None
    return str(Path(args.usage) / "rollups")


def _follow(spark, args, rollups, quotas, analyse, progress) -> int:
    """``--follow``: rollups updated every ``--interval`` (and the tables, with ``--out``)
    until SIGINT/SIGTERM; the update under way finishes first. Exit 0."""
    import threading

    from pipeline.incremental import follow

    from pipeline.output import check_out

    if args.out:  # it is replaced after each update: only an --overwrite of an existing one
        check_out(args.out, args.overwrite)
    stop = threading.Event()
    previous = stop_on_signals(stop)

    def after(update) -> None:
        if args.out and (update.hours or not Path(args.out).exists()):
            progress(f"done: {analyse(True, update=False)}")

    try:
        progress(f"following {args.usage} every {args.interval:g} s (SIGINT/SIGTERM stops)")
        runs = follow(spark, args.usage, rollups, quotas, args.interval, stop, progress, after)
    finally:
        restore_signals(previous)
    progress(f"stopped after {runs} update(s)")
    return 0


def cli_main(argv: list[str], out, err) -> int:
    """analyse the usage history with Spark: what bound each sample, throttling, what-if.

    ``kafka-client-quotas analyze ...``: the same job, its lines on the CLI's streams."""
    import contextlib

    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            return main(argv)
        except SystemExit as exc:  # argparse's usage errors
            return int(exc.code or 0)


if __name__ == "__main__":
    sys.exit(main())
