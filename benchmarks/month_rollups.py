"""A month of rollups at real scale, written directly (no samples, no Spark): the layout and
columns pipeline.rollups writes and History reads (quota_core.telemetry.rollup_files).

    .venv/bin/python benchmarks/month_rollups.py DIR [--days 30] [--brokers 10] [--buckets 10000]

``DIR/hourly/hour=…/part-0.parquet`` holds, per hour, a row per broker and bucket (every
bucket seen by every broker every hour, as a scrape a minute gives: 60 samples a row);
``DIR/daily/day=…`` a row per bucket and day; ``DIR/_state.json`` the hours kept. The rate
sketches are real KLL sketches (DataSketches), drawn from a pool (the values do not matter to
the speed; the sizes do: 60 rates an hour, 1,440 a day). A few buckets are throttled (about 3 %
of them, in about a fifth of the hours). Rows are in no order (as Spark's hash-partitioned
output), so nothing leans on a sort.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

KEYS = ("producer_byte_rate", "consumer_byte_rate")


def _sketches(rng, count: int, values: int) -> list[bytes]:
    from datasketches import kll_doubles_sketch

    out = []
    for _ in range(count):
        s = kll_doubles_sketch(200)
        for v in rng.lognormal(13, 1, values):
            s.update(float(v))
        out.append(s.serialize())
    return out


def write_month(base: Path, days: int = 30, brokers: int = 10, buckets: int = 10_000,
                entries: int = 500, seed: int = 31, log=print, rates: tuple[int, int] = (60, 1440)
                ) -> dict:
    """Write the month into ``base`` (a rollups folder); ``rates``: the values in each hourly
    and each daily sketch (a test keeps them under the sketches' K, where merges are exact)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    hourly_sk, daily_sk = _sketches(rng, 64, rates[0]), _sketches(rng, 16, rates[1])
    users = [f"user-{i // 4:05d}" for i in range(buckets)]
    clients = [None if i % 4 == 0 else f"client-{i % 4}-{i:05d}" for i in range(buckets)]
    keys = [KEYS[i % 2] for i in range(buckets)]
    level = np.where(np.arange(buckets) % 10 == 0, 0, 4).astype(np.int32)  # 90 % bound
    src = [None if lv == 0 else json.dumps({"user": f"user-{(i // 4) % entries:05d}"})
           for i, lv in enumerate(level)]
    quota = np.where(level > 0, 1_048_576.0 * (1 + np.arange(buckets) % 7), np.nan)
    hot = rng.random(buckets) < 0.03
    # every (broker, bucket) once, in a fixed random order
    order = rng.permutation(brokers * buckets)
    b_idx, k_idx = order // buckets, order % buckets
    cols = {"broker": pa.array([str(b + 1) for b in range(brokers)])
            .take(pa.array(b_idx)),
            "user": pa.array(users).take(pa.array(k_idx)),
            "client_id": pa.array(clients, pa.string()).take(pa.array(k_idx)),
            "key": pa.array(keys).take(pa.array(k_idx)),
            "level": pa.array(level).take(pa.array(k_idx)),
            "source": pa.array(src, pa.string()).take(pa.array(k_idx))}
    n = len(order)
    start = datetime(2025, 3, 1)
    hours = [start + timedelta(hours=h) for h in range(days * 24)]
    pool = pa.array(hourly_sk, pa.binary())
    state_hours = {}
    started = time.perf_counter()
    for i, t in enumerate(hours):
        key = t.strftime("%Y-%m-%dT%H")
        throttled = np.where(hot[k_idx] & (rng.random(n) < 0.2), rng.uniform(1, 3600, n), 0.0)
        max_rate = rng.lognormal(14, 1, n)
        table = pa.table({
            **cols,
            "throttled_s": throttled,
            "broker_throttled_s": throttled,
            "samples": np.full(n, 60, np.int64),
            "interval_s": np.full(n, 3600.0),
            "rated_interval_s": np.full(n, 3600.0),
            "max_rate": max_rate,
            "max_utilisation": max_rate / quota[k_idx],
            "rates": pool.take(pa.array(rng.integers(0, len(pool), n))),
            "q_last": quota[k_idx],
            "t_last": pa.array(np.full(n, np.datetime64(t + timedelta(minutes=59), "us"))),
        })
        folder = base / "hourly" / f"hour={key}"
        folder.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, folder / "part-00000.parquet")
        state_hours[key] = "bench"
        if i % 48 == 47:
            log(f"  {i + 1} of {len(hours)} hours written "
                f"({time.perf_counter() - started:.0f} s)")
    dpool = pa.array(daily_sk, pa.binary())
    kk = np.arange(buckets)
    for d in range(days):
        day = (start + timedelta(days=d)).strftime("%Y-%m-%d")
        table = pa.table({
            "user": pa.array(users), "client_id": pa.array(clients, pa.string()),
            "key": pa.array(keys), "level": pa.array(level), "source": pa.array(src, pa.string()),
            "rates": dpool.take(pa.array(rng.integers(0, len(dpool), buckets))),
            "samples": np.full(buckets, 60 * 24 * brokers, np.int64), "q_last": quota[kk],
            "t_last": pa.array(np.full(buckets, np.datetime64(
                start + timedelta(days=d, hours=23, minutes=59), "us")))})
        folder = base / "daily" / f"day={day}"
        folder.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, folder / "part-00000.parquet")
    last = hours[-1] + timedelta(minutes=59)
    (base / "_state.json").write_text(json.dumps({
        "hours": state_hours, "up_to": last.isoformat(sep=" "),
        "updated_at": (last + timedelta(seconds=30)).isoformat(sep=" ")}), encoding="utf-8")
    return {"rows": n * len(hours), "hours": len(hours),
            "bytes": sum(f.stat().st_size for f in base.rglob("*.parquet"))}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dir")
    p.add_argument("--days", type=int, default=30)
    p.add_argument("--brokers", type=int, default=10)
    p.add_argument("--buckets", type=int, default=10_000)
    a = p.parse_args()
    info = write_month(Path(a.dir), a.days, a.brokers, a.buckets,
                       log=lambda s: print(s, file=sys.stderr, flush=True))
    print(json.dumps(info))
    return 0


if __name__ == "__main__":
    sys.exit(main())
