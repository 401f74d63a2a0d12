"""The analysis job's command line: ``python -m pipeline.analyze`` or
``spark-submit pipeline/analyze.py``.

Example::

    python -m pipeline.analyze --usage history/ --from 2025-01-01 --to 2025-01-07 \\
        --what-if proposed.yaml --out report/

Progress lines go to stderr; the exit status is 0 on success, 1 when an input or output is
unusable (one line saying which file and column), 2 for a usage error.
"""
from __future__ import annotations

import argparse
import sys
import time
import warnings
from datetime import datetime, timedelta, timezone
from pathlib import Path

if __package__ in (None, ""):  # run as a file (spark-submit pipeline/analyze.py)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    __package__ = "pipeline"  # noqa: A001 - lets the relative imports below work

from quota_core.errors import QuotaError  # noqa: E402

__all__ = ["main", "cli_main", "parse_args", "parse_time"]

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
    p.add_argument("--quotas", help="a quota export (JSON/YAML) in force over the whole range, "
                                    "instead of the snapshots in the usage directory")
    p.add_argument("--from", dest="start", type=parse_time, help="first day or time (UTC)")
    p.add_argument("--to", dest="end", type=lambda t: parse_time(t, end=True),
                   help="last day (inclusive) or time (exclusive), UTC")
    p.add_argument("--what-if", help="a quota export to compare against (what_if table)")
    p.add_argument("--out", required=True, help="directory to create with the tables")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    args = p.parse_args(argv)
    if args.start and args.end and args.start >= args.end:
        p.error("--from must be before --to")
    return args


def _load_set(path: str):
    from quota_core.serialization import loads

    from .errors import PipelineError

    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise PipelineError(f"{path}: cannot read it ({exc.strerror}).", path=path) from exc
    fmt = "yaml" if path.endswith((".yaml", ".yml")) else "json"
    return loads(text, fmt, source=path)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    # pyspark 4.2 warns on every pandas conversion that pandas 3 is not fully supported; what
    # the job uses works (tests/test_pipeline_*), so say it once in the docs, not per call.
    warnings.filterwarnings("ignore", "PySpark does not yet fully support pandas",
                            FutureWarning)
    started = time.monotonic()

    def progress(line: str) -> None:
        print(f"[{time.monotonic() - started:6.1f}s] {line}", file=sys.stderr, flush=True)

    from .job import run
    from .readers import TimeRange
    from .session import get_session

    try:
        quotas = _load_set(args.quotas) if args.quotas else None
        what_if = _load_set(args.what_if) if args.what_if else None
        progress("starting Spark")
        spark = get_session(conf=QUIET, with_kafka=args.usage.startswith("kafka:"))
        out = run(spark, args.usage, args.out, TimeRange(args.start, args.end), quotas, what_if,
                  args.kafka_bootstrap, args.overwrite, progress)
    except QuotaError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    progress(f"done: {out}")
    return 0


def cli_main(argv: list[str], out, err) -> int:
    """``kafka-client-quotas analyze ...``: the same job, its lines on the CLI's streams."""
    import contextlib

    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            return main(argv)
        except SystemExit as exc:  # argparse's usage errors
            return int(exc.code or 0)


if __name__ == "__main__":
    sys.exit(main())
