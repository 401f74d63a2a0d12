"""Bulk resolution against the per-pair loop, on one core, in the same run.

Builds a realistic quota set (default 100,000 entries over all 8 rung shapes: many
{user=U}, {user=U, client-id=C} and {client-id=C}, a few defaults) and a list of
(user, client-id) pairs (default 1,000,000: mostly known names, some unknown, some None).
Times ``bulk_resolve`` over all pairs (best of 3) and the straightforward loop of
``resolve_values`` over a sample (extrapolated), checks that both agree on the sample, and
prints resolves/second for each, the ratio, and whether the 1,000,000 resolves/s target is met.

    .venv/bin/python benchmarks/bench_resolve.py [--pairs 1000000] [--entries 100000]
"""
from __future__ import annotations

import os

# One core: no BLAS/OpenMP thread pools (set before numpy is imported, via quota_core.domain.bulk).
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
             "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import math  # noqa: E402
import random  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from quota_core import CLIENT_KEYS, Entity, resolve_values  # noqa: E402
from quota_core.domain.bulk import bulk_resolve  # noqa: E402

TARGET = 1_000_000  # resolves per second, bulk, one core

# Share of the entries per rung shape (the defaults get one entry each).
SHAPES = {"user": 0.38, "user+client": 0.37, "client": 0.20, "user+client-default": 0.03,
          "user-default+client": 0.02}


def pin_one_core() -> str:
    if hasattr(os, "sched_setaffinity"):
        cpu = min(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpu})
        return f"pinned to cpu {cpu}"
    return "not pinned (no sched_setaffinity), thread pools limited to 1"


def build_quotas(entries: int, rng: random.Random):
    """``entries`` distinct entities over the 8 shapes, and the user / client-id pools."""
    n_users = max(entries // 2, 1)
    n_clients = max(entries // 4, 1)
    users = [f"user-{i:06d}" for i in range(n_users)]
    clients = [f"client-{i:06d}" for i in range(n_clients)]

    def quotas() -> dict[str, float]:
        keys = rng.sample(CLIENT_KEYS, rng.choice((1, 1, 2, 3)))
        out = {}
        for k in keys:
            if k.endswith("byte_rate"):
                out[k] = float(rng.choice((1, 2, 5, 10, 50, 100)) * 2**20)
            else:
                out[k] = float(rng.choice((10, 25, 50, 100, 200))) / rng.choice((1, 4))
        return out

    # The defaults hold different keys, so that each of them decides some key for someone.
    result: dict[Entity, dict[str, float]] = {
        Entity.of(user=None, client_id=None): {"consumer_byte_rate": 10 * 2.0**20},  # rung 5
        Entity.of(user=None): {"request_percentage": 50.0},                          # rung 6
        Entity.of(client_id=None): {"producer_byte_rate": 5 * 2.0**20,               # rung 8
                                    "controller_mutation_rate": 10.0},
    }
    remaining = entries - len(result)
    counts = {shape: int(remaining * share) for shape, share in SHAPES.items()}
    counts["user"] += remaining - sum(counts.values())
    for u in rng.sample(users, min(counts["user"], n_users)):
        result[Entity.of(user=u)] = quotas()
    for u in rng.sample(users, min(counts["user+client-default"], n_users)):
        result[Entity.of(user=u, client_id=None)] = quotas()
    for c in rng.sample(clients, min(counts["client"], n_clients)):
        result[Entity.of(client_id=c)] = quotas()
    for c in rng.sample(clients, min(counts["user-default+client"], n_clients)):
        result[Entity.of(user=None, client_id=c)] = quotas()
    pair_entries = []
    while len(pair_entries) < counts["user+client"]:
        e = Entity.of(user=rng.choice(users), client_id=rng.choice(clients))
        if e not in result:
            result[e] = quotas()
            pair_entries.append(e)
    return result, users, clients, pair_entries


def build_pairs(n: int, users, clients, pair_entries, rng: random.Random):
    """Mostly known names (some exactly on a rung-1 entry), some unknown, some None."""
    out_users: list[str | None] = []
    out_clients: list[str | None] = []
    for _ in range(n):
        r = rng.random()
        if r < 0.20 and pair_entries:
            e = rng.choice(pair_entries)
            u, c = e.name("user"), e.name("client-id")
        else:
            u = (None if r < 0.28 else f"stranger-{rng.randrange(10**6)}" if r < 0.33
                 else rng.choice(users))
            rc = rng.random()
            c = (None if rc < 0.08 else f"unknown-app-{rng.randrange(10**6)}" if rc < 0.15
                 else rng.choice(clients))
        out_users.append(u)
        out_clients.append(c)
    return out_users, out_clients


def best_of(runs: int, fn):
    best, result = math.inf, None
    for _ in range(runs):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=1_000_000, help="pairs to resolve in bulk")
    parser.add_argument("--entries", type=int, default=100_000, help="quota entries")
    parser.add_argument("--sample", type=int, default=100_000,
                        help="pairs resolved one by one with resolve_values (extrapolated)")
    parser.add_argument("--runs", type=int, default=3, help="bulk timing: best of this many")
    parser.add_argument("--seed", type=int, default=546)
    args = parser.parse_args()
    if args.pairs < 1 or args.entries < 3 or args.sample < 1:
        parser.error("--pairs and --sample must be at least 1, --entries at least 3")

    core = pin_one_core()
    rng = random.Random(args.seed)
    t0 = time.perf_counter()
    quotas, users, clients, pair_entries = build_quotas(args.entries, rng)
    pair_users, pair_clients = build_pairs(args.pairs, users, clients, pair_entries, rng)
    setup = time.perf_counter() - t0
    shapes: dict[str, int] = {}
    for e in quotas:
        shape = "{" + ", ".join(f"{t}={'<default>' if n is None else 'X'}" for t, n in e) + "}"
        shapes[shape] = shapes.get(shape, 0) + 1
    print(f"{len(quotas):,} quota entries, {args.pairs:,} pairs ({setup:.1f} s to build); {core}")
    for shape, count in sorted(shapes.items(), key=lambda kv: -kv[1]):
        print(f"  {count:>9,}  {shape}")

    bulk_s, bulk = best_of(args.runs, lambda: bulk_resolve(quotas, pair_users, pair_clients))
    bulk_rate = args.pairs / bulk_s

    sample = min(args.sample, args.pairs)
    idx = random.Random(args.seed + 1).sample(range(args.pairs), sample)
    su = [pair_users[i] for i in idx]
    sc = [pair_clients[i] for i in idx]
    start = time.perf_counter()
    loop = [resolve_values(quotas, u, c) for u, c in zip(su, sc)]
    loop_s = time.perf_counter() - start
    loop_rate = sample / loop_s

    # The two must agree pair by pair on the sample (NaN where unlimited, level 0).
    mismatches = 0
    for j, i in enumerate(idx):
        for key in CLIENT_KEYS:
            want = loop[j][key]
            value, level = float(bulk.values[key][i]), int(bulk.levels[key][i])
            got = None if level == 0 else (value, level)
            if not (got == want or (got and want and got[1] == want[1]
                                    and math.isnan(got[0]) and math.isnan(want[0]))):
                mismatches += 1
    levels = {lvl: 0 for lvl in range(9)}
    for key in CLIENT_KEYS:
        for lvl, count in zip(*np.unique(bulk.levels[key], return_counts=True)):
            levels[int(lvl)] += int(count)
    print("winning rung over all pairs and keys: " +
          ", ".join(f"{lvl or 'none'}: {n:,}" for lvl, n in levels.items()))

    print(f"bulk_resolve     {args.pairs:>9,} pairs in {bulk_s:7.3f} s (best of {args.runs}): "
          f"{bulk_rate:>12,.0f} resolves/s")
    print(f"resolve_values   {sample:>9,} pairs in {loop_s:7.3f} s (loop, extrapolated "
          f"{args.pairs / loop_rate:.1f} s for {args.pairs:,}): {loop_rate:>12,.0f} resolves/s")
    print(f"ratio bulk / loop: {bulk_rate / loop_rate:.1f}x")
    print(f"agreement on the {sample:,}-pair sample: "
          f"{'all agree' if mismatches == 0 else f'{mismatches} MISMATCHES'}")
    met = bulk_rate >= TARGET
    print(f"target {TARGET:,} resolves/s on one core ({args.pairs:,} pairs, {len(quotas):,} "
          f"entries): {'met' if met else 'NOT met'}")
    return 0 if mismatches == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
