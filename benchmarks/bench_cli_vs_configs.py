"""Describe round trip: our CLI against kafka-configs.sh, on the same local broker, same run.

Both are timed as whole processes (start, connect, describe, print, exit), alternating
A B A B so drift in the machine's speed hits both alike. kafka-configs.sh is its
ConfigCommand class run from the same cached jars, exactly as the shell script would.
Prints both medians and the ratio; the target is at least 5x.

The Python children run in this checkout (cwd and PYTHONPATH) and may write bytecode (``.pyc``,
as an installed package has it; PYTHONDONTWRITEBYTECODE is dropped for them), so the
warm-up run compiles and the timed runs measure what a user runs.

    .venv/bin/python benchmarks/bench_cli_vs_configs.py [--runs 7]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from localkafka import LocalBroker, config_command_argv  # noqa: E402


def child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def timed(argv: list[str]) -> tuple[float, str]:
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=child_env(),
                          cwd=ROOT)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{argv[:3]}... failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return elapsed, proc.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, LocalBroker(Path(tmp) / "broker") as broker:
        bootstrap = broker.bootstrap
        seed = [sys.executable, "-m", "quota_core", "--bootstrap-server", bootstrap, "--alter",
                "--user", "alice", "--add", "producer_byte_rate=1048576"]
        subprocess.run(seed, check=True, timeout=120, env=child_env(), cwd=ROOT)
        ours = [sys.executable, "-m", "quota_core", "--bootstrap-server", bootstrap,
                "--describe", "--user", "alice"]
        theirs = config_command_argv(bootstrap, "--describe", "--entity-type", "users",
                                     "--entity-name", "alice")
        # Warm-up (page cache, JIT class data), and a check both print the quota.
        _, out_ours = timed(ours)
        _, out_theirs = timed(theirs)
        assert "producer_byte_rate=1048576" in out_ours, out_ours
        assert "producer_byte_rate=1048576" in out_theirs, out_theirs
        a, b, ratios = [], [], []
        for _ in range(args.runs):
            t_ours, _ = timed(ours)
            t_theirs, _ = timed(theirs)
            a.append(t_ours)
            b.append(t_theirs)
            ratios.append(t_theirs / t_ours)
        print(f"describe round trip over {args.runs} runs on {bootstrap} (Kafka 4.3.1)")
        print(f"  kafka-client-quotas (ours)   median {statistics.median(a) * 1000:7.0f} ms  "
              f"(min {min(a) * 1000:.0f}, max {max(a) * 1000:.0f})")
        print(f"  kafka-configs.sh             median {statistics.median(b) * 1000:7.0f} ms  "
              f"(min {min(b) * 1000:.0f}, max {max(b) * 1000:.0f})")
        ratio = statistics.median(ratios)
        print(f"  ratio (theirs / ours, median of pairs): {ratio:.1f}x  "
              f"target >= 5x: {'met' if ratio >= 5 else 'NOT met'}")
        load = os.getloadavg()
        print(f"  load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} "
              f"cores")


if __name__ == "__main__":
    main()
