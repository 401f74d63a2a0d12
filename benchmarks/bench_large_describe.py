"""Describe of a large quota set: our CLI against kafka-configs.sh, same broker, same run.

Seeds N user entries (one alter call: split into requests of at most 10,000 changed keys),
then times whole processes describing every user: ``kafka-client-quotas --describe --defaults
user``-style (``--describe --output json``) and ``kafka-configs.sh --describe --entity-type
users`` (Kafka's ConfigCommand from the same jars), alternating, and reads each process's peak
RSS from ``wait4``. Also the library call alone (``KafkaBackend.describe()``: time and
tracemalloc peak). Prints medians and the ratios theirs / ours.

    .venv/bin/python benchmarks/bench_large_describe.py [--sizes 10000,100000] [--runs 3]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from localkafka import LocalBroker, config_command_argv  # noqa: E402
from quota_core import Alteration, Entity, Op  # noqa: E402
from quota_core.backends.kafka import KafkaBackend  # noqa: E402


def run(argv: list[str]) -> tuple[float, float, int]:
    """(seconds, peak RSS in MiB, bytes of stdout) of one whole process."""
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
        if proc.returncode != 0:
            raise SystemExit(f"{argv[:4]}... failed ({proc.returncode}):\n{err[-2000:]}")
        size = out.tell()
    return elapsed, usage.ru_maxrss / 1024, size


def seed(backend: KafkaBackend, start: int, stop: int) -> float:
    alterations = [Alteration(Entity.of(user=f"user-{i:07d}"),
                              (Op.set("producer_byte_rate", 1_048_576.0 + i),))
                   for i in range(start, stop)]
    began = time.perf_counter()
    outcome = backend.alter(alterations)
    if not outcome.ok:
        raise SystemExit(f"seeding failed: {outcome.failed[:3]}")
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    with tempfile.TemporaryDirectory() as tmp, LocalBroker(Path(tmp) / "broker") as broker:
        bootstrap = broker.bootstrap
        ours = [sys.executable, "-m", "quota_core", "--bootstrap-server", bootstrap,
                "--describe", "--output", "json", "--timeout", "60"]
        theirs = config_command_argv(bootstrap, "--describe", "--entity-type", "users")
        seeded = 0
        print(f"describe of N user entries on {bootstrap} (Kafka 4.3.1), {args.runs} runs each")
        for size in sizes:
            with KafkaBackend(bootstrap, timeout_s=120) as backend:
                took = seed(backend, seeded, size)
                print(f"\nN = {size:,}: seeded {size - seeded:,} entries in one alter call "
                      f"({took:.1f} s, {(size - seeded) / took:,.0f} entries/s)")
                seeded = size
                tracemalloc.start()
                began = time.perf_counter()
                quotas = backend.describe()
                lib_s = time.perf_counter() - began
                lib_peak = tracemalloc.get_traced_memory()[1] / 2**20
                tracemalloc.stop()
                assert len(quotas) == size, len(quotas)
            run(ours)  # warm-up: page cache, JIT class data
            run(theirs)
            a, b = [], []
            for _ in range(args.runs):
                a.append(run(ours))
                b.append(run(theirs))
            t_a, t_b = (statistics.median(x[0] for x in r) for r in (a, b))
            m_a, m_b = (statistics.median(x[1] for x in r) for r in (a, b))
            print(f"  library describe() (in process)  {lib_s:6.2f} s   tracemalloc peak "
                  f"{lib_peak:6.0f} MiB")
            print(f"  kafka-client-quotas --describe   {t_a:6.2f} s   peak RSS {m_a:6.0f} MiB   "
                  f"stdout {a[0][2] / 2**20:.1f} MiB")
            print(f"  kafka-configs.sh --describe      {t_b:6.2f} s   peak RSS {m_b:6.0f} MiB   "
                  f"stdout {b[0][2] / 2**20:.1f} MiB")
            print(f"  ratio theirs / ours: time {t_b / t_a:.1f}x, memory {m_b / m_a:.1f}x")


if __name__ == "__main__":
    main()
