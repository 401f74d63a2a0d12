"""What the collector costs per scrape: CPU time and memory per 1,000 exported series.

    .venv/bin/python benchmarks/bench_collector.py [--buckets 2500] [--rounds 20]

The exposition text is built in our rules file's format from the real capture in
tests/fixtures/metrics/ours.txt (its naming and labels), with ``--buckets`` buckets of four
series each, plus the agent's own jvm_* lines. Each round does what the collector does per
scrape and endpoint: parse (prometheus_client), map to QuotaSeries, gather into usage
samples. A Parquet write of the samples is timed separately. Figures are per 1,000 series, as
medians; the baseline is the parse of the agent's fixed ~180 lines alone, in the same run.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import tracemalloc
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from quota_core.telemetry import parse_metrics  # noqa: E402
from quota_core.telemetry.sinks import ParquetSink  # noqa: E402
from quota_core.telemetry.schema import usage_samples  # noqa: E402

FIXTURE = REPO / "tests" / "fixtures" / "metrics" / "ours.txt"


def exposition(buckets: int) -> str:
    base = [line for line in FIXTURE.read_text().splitlines() if not line.startswith("kafka_")]
    lines = list(base)
    for i in range(buckets):
        tags = f'client_id="app-{i % 97}",quota_type="produce",user="user-{i}"'
        lines.append(f"kafka_quota_byte_rate{{{tags}}} {1000.0 + i}")
        lines.append(f"kafka_quota_throttle_time_ms{{{tags}}} NaN")
        tags = f'client_id="app-{i % 97}",quota_type="fetch",user="user-{i}"'
        lines.append(f"kafka_quota_byte_rate{{{tags}}} {2000.0 + i}")
        lines.append(f"kafka_quota_throttle_time_ms{{{tags}}} {i % 7 * 100.0}")
    return "\n".join(lines) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--buckets", type=int, default=2500)
    p.add_argument("--rounds", type=int, default=20)
    args = p.parse_args()
    series_n = args.buckets * 4
    text, floor_text = exposition(args.buckets), exposition(0)
    ts = datetime.now(timezone.utc)

    def one(t: str):
        return usage_samples(parse_metrics(t, "b1"), ts, 10.0)

    floor, full = [], []
    for _ in range(args.rounds):
        start = time.process_time()
        one(floor_text)
        floor.append(time.process_time() - start)
        start = time.process_time()
        samples = one(text)
        full.append(time.process_time() - start)
    tracemalloc.start()
    one(text)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    with tempfile.TemporaryDirectory() as tmp:
        sink = ParquetSink(tmp)
        start = time.process_time()
        sink.write(samples, [])
        write_s = time.process_time() - start
    per_k = 1000 / series_n
    med = statistics.median
    print(f"collector cost, {series_n:,} series ({args.buckets:,} buckets), median of "
          f"{args.rounds} rounds, CPU time")
    print(f"  agent's own lines only (floor):  {med(floor) * 1000:7.1f} ms per scrape")
    print(f"  parse + map + gather:            {med(full) * 1000:7.1f} ms per scrape = "
          f"{med(full) * 1000 * per_k:.1f} ms per 1,000 series")
    print(f"  Parquet write of the samples:    {write_s * 1000:7.1f} ms = "
          f"{write_s * 1000 * per_k:.1f} ms per 1,000 series")
    print(f"  peak memory of one round:        {peak / 2**20:7.1f} MiB = "
          f"{peak / 2**20 * per_k:.2f} MiB per 1,000 series")
    print(f"  at a 10 s interval: {(med(full) + write_s) / 10 * 100 * per_k:.2f} % of one core "
          f"per 1,000 series")
    return 0


if __name__ == "__main__":
    sys.exit(main())
