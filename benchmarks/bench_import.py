"""Large writes: ``--import`` and ``plan``/``apply`` of N entries, on the sandbox and on a real
3-broker cluster, in linear time (issue 32: 10k took 24.5 s, 20k 104 s, 100k never finished).

Per size (default 10,000, 20,000 and 100,000 entries; a third each ``{user}``,
``{client-id}`` and ``{user, client-id}``, two quota keys each), an export file is written
(the ``--export`` format), then each command runs as a whole process, as a user runs it:

* ``import``: ``kafka-client-quotas --import FILE`` into an empty store;
* ``plan``: ``kafka-client-quotas plan FILE --out PLAN`` against an empty store (a read);
* ``apply``: ``kafka-client-quotas apply PLAN`` (the lease, the guarded write, the audit).

Each run appends to its own audit log, which is then checked: every intent has its outcome
line, and the store holds the N entries. Printed per run: seconds, seconds per 1,000
entries, and that figure over the 10,000-entry figure of the same backend and command in
this run (1.0 is linear; the quadratic apply of issue 32 gave 2.1 at 20k).

The sandbox runs on a new file in a temporary directory. The cluster is started here (three
KRaft nodes, ``localkafka.LocalCluster``) and its quotas are deleted between runs, so every
run starts from an empty cluster. Hold the shared lock while it runs:

    flock /tmp/heavy-tests.lock .venv/bin/python benchmarks/bench_import.py \\
        [--sizes 10000,20000,100000] [--backends sandbox,kafka] [--commands import,plan,apply]
        [--json]

With ``--json`` each run is also printed as one JSON object per line:
``{"backend", "command", "entries", "seconds", "per_1000_s", "ratio_vs_10k", "lease_s",
"intents", "outcomes"}``. ``lease_s`` is how long the command held the write lease (from the
waiting-for-the-lease step to the recording of the outcomes, read from its progress lines).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from quota_core import Entity  # noqa: E402
from quota_core.domain.alterations import Alteration, Op  # noqa: E402
from quota_core.domain.serialization import dumps  # noqa: E402

#: The baseline every ratio is taken against.
BASE = 10_000


def quota_set(n: int) -> dict:
    """N entries: a third each user, client id, and user with client id."""
    quotas = {}
    for i in range(n):
        shape = i % 3
        if shape == 0:
            entity = Entity.of(user=f"user-{i:07d}")
        elif shape == 1:
            entity = Entity.of(client_id=f"client-{i:07d}")
        else:
            entity = Entity.of(user=f"u-{i:07d}", client_id=f"c-{i:07d}")
        quotas[entity] = {"producer_byte_rate": 1_048_576.0 + i,
                          "consumer_byte_rate": 2_097_152.0 + i}
    return quotas


def child_env(audit: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["QUOTA_AUDIT_LOG"] = str(audit)
    return env


#: The progress lines that open and close the write lease (quota_core.changes.progress).
_LEASE_STEPS = re.compile(r": (waiting for the write lease|recording [0-9,]+ outcomes in the "
                          r"audit log) \(([0-9.]+) s so far\)$", re.M)


def run(argv: list[str], audit: Path, ok: tuple[int, ...] = (0,)) -> tuple[float, float | None]:
    """Seconds of one whole ``kafka-client-quotas`` process (stdout discarded; stderr kept for a
    failure), and how long it held the write lease (from its progress lines; None without)."""
    began = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "quota_core", *argv], env=child_env(audit),
                          cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    took = time.perf_counter() - began
    err = proc.stderr.decode(errors="replace")
    if proc.returncode not in ok:
        raise SystemExit(f"{argv[:3]}... exited {proc.returncode}:\n{err[-3000:]}")
    steps = dict((m.group(1).split()[0], float(m.group(2))) for m in _LEASE_STEPS.finditer(err))
    lease = steps["recording"] - steps["waiting"] if len(steps) == 2 else None
    return took, lease


def audit_counts(audit: Path) -> tuple[int, int, int]:
    """(intents, outcomes, intents without an outcome) in the audit log."""
    intents, outcomes = set(), set()
    if audit.exists():
        for line in audit.read_text().splitlines():
            record = json.loads(line)
            if record.get("phase") == "intent":
                intents.add(record["id"])
            elif record.get("phase") == "outcome":
                outcomes.add(record["ref"])
    return len(intents), len(outcomes), len(intents - outcomes)


class Sandbox:
    name = "sandbox"

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.runs = 0

    def fresh(self) -> list[str]:
        self.runs += 1
        self.path = self.tmp / f"store-{self.runs}.sqlite"
        from quota_core.backends.sandbox import SandboxBackend

        with SandboxBackend(self.path) as backend:  # an empty store (plan reads, never creates)
            backend.init()
        return ["--sandbox", str(self.path)]

    def count(self) -> int:
        from quota_core.backends.sandbox import SandboxBackend

        with SandboxBackend(self.path) as backend:
            return len(backend.describe())

    def close(self) -> None:
        pass


class Cluster:
    name = "kafka"

    def __init__(self, tmp: Path, brokers: int, timeout_s: float) -> None:
        from localkafka import LocalCluster

        self.cluster = LocalCluster(tmp / "cluster", brokers=brokers)
        self.cluster.start()
        self.where = ["--bootstrap-server", self.cluster.bootstrap, "--timeout", f"{timeout_s:g}"]

    def _backend(self):
        from quota_core.backends.kafka import KafkaBackend

        return KafkaBackend(self.cluster.bootstrap, timeout_s=120)

    def fresh(self) -> list[str]:
        """Delete every quota: each run starts from an empty cluster."""
        with self._backend() as backend:
            every = backend.describe()
            if every:
                outcome = backend.alter([Alteration(e, tuple(Op.remove(k) for k in q))
                                         for e, q in every.items()])
                if not outcome.ok:
                    raise SystemExit(f"cleaning the cluster failed: {outcome.failed[:3]}")
        return list(self.where)

    def count(self) -> int:
        with self._backend() as backend:
            return len(backend.describe())

    def close(self) -> None:
        self.cluster.stop()


def measure(store, size: int, export: Path, tmp: Path, commands: list[str]
            ) -> Iterator[tuple[str, float, float | None, tuple[int, int, int]]]:
    """The timed commands for one size on one store: (command, seconds, seconds the write
    lease was held, audit counts), each as soon as it is measured."""
    if "import" in commands:
        audit = tmp / f"{store.name}-import-{size}.jsonl"
        where = store.fresh()
        took, lease = run([*where, "--import", str(export)], audit)
        assert store.count() == size, f"{store.name} import holds {store.count()}, not {size}"
        yield "import", took, lease, audit_counts(audit)
    if "plan" in commands or "apply" in commands:
        audit = tmp / f"{store.name}-apply-{size}.jsonl"
        where = store.fresh()
        plan = tmp / f"{store.name}-plan-{size}.json"
        took, _ = run(["plan", str(export), *where, "--out", str(plan)], audit, ok=(2,))
        if "plan" in commands:
            yield "plan", took, None, (0, 0, 0)
        if "apply" in commands:
            took, lease = run(["apply", str(plan), *where], audit)
            assert store.count() == size, f"{store.name} apply holds {store.count()}, not {size}"
            yield "apply", took, lease, audit_counts(audit)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,20000,100000")
    parser.add_argument("--backends", default="sandbox,kafka")
    parser.add_argument("--commands", default="import,plan,apply")
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="the commands' --timeout on the cluster (default 60)")
    parser.add_argument("--json", action="store_true",
                        help="also print one JSON object per run")
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    commands = [c.strip() for c in args.commands.split(",") if c.strip()]
    started = time.perf_counter()
    base: dict[tuple[str, str], float] = {}
    print(f"{'backend':8} {'command':8} {'entries':>8} {'seconds':>9} {'s/1k':>7} "
          f"{'vs 10k':>7} {'lease s':>8}  audit (intents / outcomes / open)")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        exports = {}
        for size in sizes:
            exports[size] = tmp / f"quotas-{size}.json"
            exports[size].write_text(dumps(quota_set(size)))
        for backend in backends:
            store = (Sandbox(tmp) if backend == "sandbox"
                     else Cluster(tmp, args.brokers, args.timeout))
            try:
                for size in sizes:
                    for command, took, lease, (intents, outcomes, open_) in measure(
                            store, size, exports[size], tmp, commands):
                        per_1000 = took / size * 1000
                        if size == BASE:
                            base[(backend, command)] = per_1000
                        ref = base.get((backend, command))
                        ratio = per_1000 / ref if ref else None
                        print(f"{backend:8} {command:8} {size:>8,} {took:>9.2f} {per_1000:>7.3f} "
                              f"{'' if ratio is None else f'{ratio:.2f}':>7} "
                              f"{'' if lease is None else f'{lease:.1f}':>8}  "
                              + (f"{intents:,} / {outcomes:,} / {open_:,}" if intents else "-"),
                              flush=True)
                        if args.json:
                            print(json.dumps({
                                "backend": backend, "command": command, "entries": size,
                                "seconds": round(took, 3), "per_1000_s": round(per_1000, 4),
                                "ratio_vs_10k": None if ratio is None else round(ratio, 3),
                                "lease_s": None if lease is None else round(lease, 2),
                                "intents": intents, "outcomes": outcomes}), flush=True)
            finally:
                store.close()
    load = os.getloadavg()
    print(f"(whole run {time.perf_counter() - started:.0f} s; load average {load[0]:.2f} "
          f"{load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores)")


if __name__ == "__main__":
    main()
