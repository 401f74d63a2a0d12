"""Describe of a large quota set: our CLI against kafka-configs.sh, same broker, same run.

Seeds N user entries (one alter call: split into requests of at most 10,000 changed keys),
then times whole processes describing every user: ``kafka-client-quotas --describe --output
json`` (and the text output) against ``kafka-configs.sh --describe --entity-type users``
(Kafka's ConfigCommand from the same jars, with the script's own -Xmx256m), alternating.

Each process's peak RSS is its own: every command is started by a small launcher process
(``python -S``, a few MiB) that spawns it and reads that child's ``ru_maxrss`` from
``wait4``; the launcher's own peak (``VmHWM``) is the floor of that figure. A child started
straight from this script would inherit this script's high-water mark at exec (Linux
records the old address space's peak in ``maxrss``), so every command would show at least
this script's size (the library describe below makes it hundreds of MiB). Also the library
call alone (``KafkaBackend.describe()``: time, and tracemalloc peak in a second, traced
call). Prints medians, the median of the per-pair ratios theirs / ours, and the load
average.

The Python children run in this checkout (cwd and PYTHONPATH) and may write bytecode (``.pyc``,
as an installed package has it; PYTHONDONTWRITEBYTECODE is dropped for them), so the
warm-up run compiles and the timed runs measure what a user runs.

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

#: Spawns argv[2:] (stdout and stderr inherited) and writes "exit-code seconds
#: child-maxrss-KiB own-maxrss-KiB" to the report file argv[1].
LAUNCHER = r"""
import os, sys, time
report, argv = sys.argv[1], sys.argv[2:]
start = time.perf_counter()
pid = os.posix_spawnp(argv[0], argv, os.environ)
_, status, usage = os.wait4(pid, 0)
elapsed = time.perf_counter() - start
own = next(int(line.split()[1]) for line in open("/proc/self/status")
           if line.startswith("VmHWM:"))  # the launcher's own peak, what the child inherits
with open(report, "w") as f:
    f.write(f"{os.waitstatus_to_exitcode(status)} {elapsed} {usage.ru_maxrss} {own}")
"""


def child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def run(argv: list[str]) -> tuple[float, float, int, float]:
    """(seconds, its own peak RSS in MiB, bytes of stdout, the launcher's peak in MiB) of one
    whole process, started by the launcher."""
    with tempfile.TemporaryFile() as out, tempfile.NamedTemporaryFile("r") as report:
        proc = subprocess.run([sys.executable, "-S", "-c", LAUNCHER, report.name, *argv],
                              stdout=out, stderr=subprocess.PIPE, env=child_env(), cwd=ROOT)
        fields = Path(report.name).read_text().split()
        if proc.returncode != 0 or not fields or fields[0] != "0":
            err = proc.stderr.decode(errors="replace")
            raise SystemExit(f"{argv[:4]}... failed ({fields[:1] or proc.returncode}):\n"
                             f"{err[-2000:]}")
        size = out.tell()
    _, seconds, child_kib, own_kib = fields
    return float(seconds), int(child_kib) / 1024, size, int(own_kib) / 1024


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
                "--describe", "--timeout", "60"]
        commands = {"kafka-client-quotas --describe --output json": ours + ["--output", "json"],
                    "kafka-client-quotas --describe (text)": ours,
                    "kafka-configs.sh --describe": config_command_argv(
                        bootstrap, "--describe", "--entity-type", "users")}
        theirs = "kafka-configs.sh --describe"
        seeded = 0
        print(f"describe of N user entries on {bootstrap} (Kafka 4.3.1), {args.runs} runs each, "
              f"alternating; peak RSS of each process on its own")
        for size in sizes:
            with KafkaBackend(bootstrap, timeout_s=120) as backend:
                took = seed(backend, seeded, size)
                print(f"\nN = {size:,}: seeded {size - seeded:,} entries in one alter call "
                      f"({took:.1f} s, {(size - seeded) / took:,.0f} entries/s)")
                seeded = size
                began = time.perf_counter()
                quotas = backend.describe()
                lib_s = time.perf_counter() - began
                assert len(quotas) == size, len(quotas)
                del quotas
                tracemalloc.start()
                backend.describe()
                lib_peak = tracemalloc.get_traced_memory()[1] / 2**20
                tracemalloc.stop()
            for argv in commands.values():  # warm-up: page cache, bytecode, JIT class data
                run(argv)
            results: dict[str, list] = {name: [] for name in commands}
            for _ in range(args.runs):
                for name, argv in commands.items():
                    results[name].append(run(argv))
            load = os.getloadavg()
            floor = max(r[3] for rs in results.values() for r in rs)
            print(f"  library describe() (in process)  {lib_s:6.2f} s   tracemalloc peak "
                  f"{lib_peak:6.0f} MiB (a second call, traced)")
            for name, rs in results.items():
                print(f"  {name:46s} {statistics.median(r[0] for r in rs):6.2f} s   peak RSS "
                      f"{statistics.median(r[1] for r in rs):6.0f} MiB   stdout "
                      f"{rs[0][2] / 2**20:.1f} MiB")
            for name, rs in results.items():
                if name == theirs:
                    continue
                t = statistics.median(b[0] / a[0] for a, b in zip(rs, results[theirs]))
                m = statistics.median(b[1] / a[1] for a, b in zip(rs, results[theirs]))
                print(f"  ratio theirs / ours ({name.split(' ', 2)[-1]}): time {t:.2f}x "
                      f"(target >= 3x: {'met' if t >= 3 else 'NOT met'}), memory {m:.2f}x")
            print(f"  (launcher floor {floor:.0f} MiB: a smaller peak would read as this; "
                  f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on "
                  f"{os.cpu_count()} cores)")


if __name__ == "__main__":
    main()
