"""The fleet (issue 29): ``--all-clusters`` against one cluster, as whole CLI processes.

Case ``describe``: N sandbox clusters of E entries each, in one fleet file.
``kafka-client-quotas --config F --all-clusters --describe --output json`` against the
slowest of the single-cluster runs (``--cluster NAME --describe --output json``), each a
whole process (start, read, print, exit), medians of ``--runs``. The target (issue 29,
"speed and scale"): within 1.5x of the slowest single cluster.

A sandbox describe is CPU work in this process (SQLite and the JSON writer, under the GIL),
so on C cores N clusters cost about N/C single describes however they are scheduled; a Kafka
cluster's describe is mostly waiting on the network, which the threads overlap. The
figures printed say which part is which: the per-cluster work summed (``serial_s``) beside
the concurrent run.

Case ``kafka`` (starts one local broker; run it alone): the same fleet of N names for one
broker holding E entries, so N connections and N describes over the network.

Case ``sweep``: 500 metrics endpoints, 50 dead (blackholed), a 5 s timeout: the concurrent sweep
within 2x the timeout (benchmarks/bench_sweep.py).

Cases are functions in :data:`CASES` (name -> function(args) -> dict): add one there.

    .venv/bin/python benchmarks/bench_fleet.py [--case describe|kafka|sweep] [--clusters 20]
        [--entries 10000] [--runs 3] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from quota_core import Alteration, Entity, Op  # noqa: E402
from quota_core.backends.sandbox import SandboxBackend  # noqa: E402


def child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONDONTWRITEBYTECODE", "QUOTA_CONFIG")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def timed(argv: list[str], ok: tuple[int, ...] = (0,)) -> float:
    """Seconds for one whole process; it must exit with a status in ``ok``."""
    start = time.perf_counter()
    proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          timeout=600, env=child_env(), cwd=ROOT)
    elapsed = time.perf_counter() - start
    if proc.returncode not in ok:
        raise SystemExit(f"{argv[3:]} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return elapsed


def sandbox_fleet(folder: Path, clusters: int, entries: int) -> Path:
    """``clusters`` sandbox files of ``entries`` user entries each (a different value per
    cluster), and the fleet file naming them: ``c00``, ``c01``, ..."""
    lines = []
    for c in range(clusters):
        name = f"c{c:02d}"
        with SandboxBackend(folder / f"{name}.sqlite") as backend:
            backend.alter([Alteration(Entity.from_pairs([("user", f"user-{i:06d}")]),
                                      (Op.set("producer_byte_rate", 1_000_000 + i + c),))
                           for i in range(entries)])
        lines.append(f'[clusters.{name}]\nsandbox = "{name}.sqlite"\n')
    config = folder / "fleet.toml"
    config.write_text("\n".join(lines))
    return config


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "quota_core", *args]


def case_describe(args: argparse.Namespace) -> dict:
    """``--all-clusters --describe`` over sandboxes against the slowest single cluster."""
    with tempfile.TemporaryDirectory() as tmp:
        config = sandbox_fleet(Path(tmp), args.clusters, args.entries)
        names = [f"c{c:02d}" for c in range(args.clusters)]
        timed(cli("--config", str(config), "--all-clusters", "--describe", "--output",
                  "json"))  # warm-up: bytecode, page cache
        singles = {n: [] for n in names}
        fleet_runs = []
        for _ in range(args.runs):
            for n in names:
                singles[n].append(timed(cli("--config", str(config), "--cluster", n,
                                            "--describe", "--output", "json")))
            fleet_runs.append(timed(cli("--config", str(config), "--all-clusters",
                                        "--describe", "--output", "json")))
        medians = {n: statistics.median(v) for n, v in singles.items()}
        start = time.perf_counter()  # the per-cluster work alone, without process starts
        timed(cli("--version"))
        startup = time.perf_counter() - start
        slowest = max(medians.values())
        all_s = statistics.median(fleet_runs)
        return {"case": "describe", "clusters": args.clusters, "entries": args.entries,
                "single_slowest_s": round(slowest, 3),
                "single_median_s": round(statistics.median(medians.values()), 3),
                "all_clusters_s": round(all_s, 3), "ratio": round(all_s / slowest, 2),
                "serial_s": round(sum(m - startup for m in medians.values()) + startup, 3),
                "startup_s": round(startup, 3), "cores": os.cpu_count(), "target": 1.5}


def case_kafka(args: argparse.Namespace) -> dict:
    """The same over Kafka: one local broker holding E entries, named N times in the fleet
    file (N clusters to the CLI, each its own connection), against one cluster. Here the
    describes mostly wait on the network, which the threads overlap."""
    from localkafka import LocalBroker
    from quota_core.backends.kafka import KafkaBackend

    with tempfile.TemporaryDirectory() as tmp, LocalBroker(Path(tmp) / "broker") as broker:
        with KafkaBackend(broker.bootstrap, timeout_s=60) as backend:
            outcome = backend.alter([Alteration(Entity.from_pairs([("user", f"user-{i:06d}")]),
                                                (Op.set("producer_byte_rate", 1e6 + i),))
                                     for i in range(args.entries)])
            if not outcome.ok:
                raise SystemExit(f"seeding failed: {outcome.failed[:3]}")
        config = Path(tmp) / "fleet.toml"
        config.write_text("".join(f'[clusters.k{c:02d}]\nbootstrap_servers = '
                                  f'"{broker.bootstrap}"\n' for c in range(args.clusters)))
        one = cli("--config", str(config), "--cluster", "k00", "--describe", "--output", "json",
                  "--timeout", "60")
        every = cli("--config", str(config), "--all-clusters", "--describe", "--output", "json",
                    "--timeout", "60")
        timed(every)  # warm-up
        singles, fleet_runs = [], []
        for _ in range(args.runs):
            singles.append(timed(one))
            fleet_runs.append(timed(every))
        single, all_s = statistics.median(singles), statistics.median(fleet_runs)
        return {"case": "kafka", "clusters": args.clusters, "entries": args.entries,
                "single_s": round(single, 3), "all_clusters_s": round(all_s, 3),
                "ratio": round(all_s / single, 2), "cores": os.cpu_count(), "target": 1.5}


def case_sweep(args: argparse.Namespace) -> dict:
    """Case ``sweep``: 500 metrics endpoints, 50 of them blackholed, a 5 s timeout (issue
    29: within 2x the timeout); benchmarks/bench_sweep.py runs it with more options."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_sweep import run_sweep

    return run_sweep(rounds=1)


#: name -> the function that runs the case and returns its figures.
CASES: dict[str, Callable[[argparse.Namespace], dict]] = {"describe": case_describe,
                                                          "kafka": case_kafka,
                                                          "sweep": case_sweep}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=sorted(CASES), action="append")
    parser.add_argument("--clusters", type=int, default=20)
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="also one JSON object per case")
    args = parser.parse_args()
    for name in args.case or ["describe"]:
        result = CASES[name](args)
        if name == "describe":
            print(f"--all-clusters --describe, {result['clusters']} sandbox clusters x "
                  f"{result['entries']:,} entries ({result['cores']} cores):\n"
                  f"  slowest single cluster {result['single_slowest_s']:.3f} s (median of "
                  f"the singles {result['single_median_s']:.3f} s, process start "
                  f"{result['startup_s']:.3f} s)\n"
                  f"  all clusters at once   {result['all_clusters_s']:.3f} s = "
                  f"{result['ratio']:.2f}x the slowest single (target {result['target']}x)\n"
                  f"  the singles' work one after the other, one process start: "
                  f"{result['serial_s']:.3f} s")
        elif name == "kafka":
            print(f"--all-clusters --describe, {result['clusters']} connections to one local "
                  f"broker x {result['entries']:,} entries ({result['cores']} cores):\n"
                  f"  one cluster {result['single_s']:.3f} s; all at once "
                  f"{result['all_clusters_s']:.3f} s = {result['ratio']:.2f}x (target "
                  f"{result['target']}x)")
        else:
            print(result)
        if args.json:
            print(json.dumps(result))


if __name__ == "__main__":
    main()
