"""Where our describe of a large quota set spends its time (issue 31, item 4): one broker,
N user entries, then ``kafka-client-quotas --describe`` (text and ``--output json``) under
``python -X importtime`` (startup) and ``cProfile`` (the rest: request, decoding, sorting,
formatting), beside kafka-configs.sh's time in the same run.

    .venv/bin/python benchmarks/profile_describe.py [--size 100000] [--top 25]
"""
from __future__ import annotations

import argparse
import os
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_large_describe import child_env, seed  # noqa: E402
from localkafka import LocalBroker, config_command_argv  # noqa: E402
from quota_core.backends.kafka import KafkaBackend  # noqa: E402


def timed(argv: list[str], runs: int) -> float:
    best = []
    for _ in range(runs):
        began = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, check=True, env=child_env(), cwd=ROOT)
        best.append(time.perf_counter() - began)
    return sorted(best)[len(best) // 2]


def phases(backend: KafkaBackend, runs: int) -> None:
    """In this process, a connected backend: the whole describe() call, and of it the
    decoding of the answer (kafka_decode.decode_quotas, timed by a wrapper); the rest is the
    request and the broker's answer (the broker builds and sends 100,000s of entries)."""
    from quota_core.backends import kafka_decode

    spent: list[float] = []
    plain = kafka_decode.decode_quotas

    def timed_decode(*args):
        began = time.perf_counter()
        try:
            return plain(*args)
        finally:
            spent.append(time.perf_counter() - began)

    kafka_decode.decode_quotas = timed_decode
    try:
        whole = []
        for _ in range(runs):
            began = time.perf_counter()
            backend.describe()
            whole.append(time.perf_counter() - began)
    finally:
        kafka_decode.decode_quotas = plain
    w, d = sorted(whole)[len(whole) // 2], sorted(spent)[len(spent) // 2]
    print(f"in process: describe() {w:.2f} s, of which decoding {d:.2f} s and the request with "
          f"the broker's answer {w - d:.2f} s (median of {runs})")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=100_000)
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--runs", type=int, default=3)
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp, LocalBroker(Path(tmp) / "broker") as broker:
        with KafkaBackend(broker.bootstrap, timeout_s=120) as backend:
            print(f"seeded {a.size:,} entries in {seed(backend, 0, a.size):.1f} s")
            phases(backend, a.runs)
        ours = [sys.executable, "-m", "quota_core", "--bootstrap-server", broker.bootstrap,
                "--describe", "--timeout", "60"]
        theirs = config_command_argv(broker.bootstrap, "--describe", "--entity-type", "users")
        for argv in (ours, ours + ["--output", "json"], theirs):  # warm-up
            subprocess.run(argv, stdout=subprocess.DEVNULL, env=child_env(), cwd=ROOT)
        for label, argv in (("text", ours), ("json", ours + ["--output", "json"])):
            t_ours, t_theirs = timed(argv, a.runs), timed(theirs, a.runs)
            print(f"\n== ours ({label}) {t_ours:.2f} s, kafka-configs.sh {t_theirs:.2f} s: "
                  f"{t_theirs / t_ours:.2f}x (median of {a.runs}; load "
                  + " ".join(f"{x:.2f}" for x in os.getloadavg()) + ")")
            imp = subprocess.run([sys.executable, "-X", "importtime", *argv[1:]],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                 env=child_env(), cwd=ROOT).stderr.splitlines()
            rows = [(int(line.split("|")[1]), line.split("|")[2].rstrip()) for line in imp
                    if line.startswith("import time:") and line.split("|")[1].strip().isdigit()]
            top = [r for r in rows if not r[1].startswith("  ")]
            print(f"  imports: {sum(r[0] for r in top) / 1000:.0f} ms in all; the largest "
                  "top-level: " + ", ".join(f"{n.strip()} {us / 1000:.0f} ms" for us, n in
                                            sorted(top, reverse=True)[:8]))
            prof = Path(tmp) / f"describe-{label}.prof"
            subprocess.run([sys.executable, "-m", "cProfile", "-o", str(prof), *argv[1:]],
                           stdout=subprocess.DEVNULL, check=True, env=child_env(), cwd=ROOT)
            print(f"  cProfile, by own time (top {a.top}):")
            pstats.Stats(str(prof), stream=sys.stdout).sort_stats("tottime").print_stats(a.top)


if __name__ == "__main__":
    main()
