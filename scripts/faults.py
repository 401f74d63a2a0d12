"""Fault runs of the write path (issue 16), on the sandbox and a real local broker.

    .venv/bin/python scripts/faults.py              # the full run (make faults)
    .venv/bin/python scripts/faults.py --rounds 6   # a short one
    .venv/bin/python scripts/faults.py --brokers 3 --only cluster --rounds 45   # 9 node kills

1. ``--rounds`` kills (SIGKILL) of an ``apply`` subprocess at a random moment of a large plan,
   on the sandbox and on the broker: every entity the store holds changed must have its audit
   record (an intent at least). Figures: applied vs recorded; unrecorded changes, expected 0.
2. ``--rounds / 2`` rounds of two concurrent ``apply`` runs of two plans made from the same
   quota set (sandbox and broker): lost updates (both succeed, or the store holds neither
   plan's result), expected 0.
3. ``max(1, --rounds / 20)`` rounds of a broker SIGKILLed mid-``apply`` and restarted on its
   data directory: what it holds compared with what ``apply`` reported (exit code and audit
   outcomes). Changes reported applied but absent, and changes present without a record:
   both expected 0.

4. With ``--brokers 3`` (2 to 5), ``max(3, --rounds / 5)`` more rounds on a real cluster of
   that many brokers (``tests/cluster_kills.py``): a node SIGKILLed while an alter is in
   flight, in turn the broker the request went to, the active controller and a bystander,
   as it is sent or up to a second later; the console carries on without it (the same
   backend, a new one bootstrapped at the dead node, a whole CLI alter with its lease), and
   what it reported is compared with what every broker holds after the node is restarted.
   Wrong reports, expected 0. ``--only cluster`` skips parts 1-3.

Exits 1 when any expected-zero figure is not zero. Every process it starts, it stops.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from localkafka import LocalBroker  # noqa: E402
from localkafka.cluster import LocalCluster  # noqa: E402
from quota_core import Entity  # noqa: E402
from quota_core.domain.alterations import Alteration  # noqa: E402
from quota_core.changes.audit import AuditLog  # noqa: E402
from quota_core.cli.main import main as cli  # noqa: E402
from quota_core.backends.kafka import KafkaBackend  # noqa: E402
from quota_core.backends.kafka_lease import break_lease  # noqa: E402
from quota_core.planning.plan import read_plan  # noqa: E402
from quota_core.backends.sandbox import SandboxBackend  # noqa: E402

PBR = "producer_byte_rate"
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def say(text: str) -> None:
    print(text, flush=True)


class Store:
    """Where the quotas live: the flags for the CLI, and a way to read and seed them."""

    def __init__(self, sandbox: Path | None = None, broker: LocalBroker | None = None):
        self.sandbox, self.broker = sandbox, broker

    @property
    def name(self) -> str:
        return "sandbox" if self.sandbox else "broker"

    def flags(self) -> list[str]:
        return (["--sandbox", str(self.sandbox)] if self.sandbox
                else ["--bootstrap-server", self.broker.bootstrap])

    def open(self):
        return SandboxBackend(self.sandbox) if self.sandbox else \
            KafkaBackend(self.broker.bootstrap, timeout_s=60)

    def read(self, entities) -> dict:
        with self.open() as b:
            everything = b.describe()
        return {e: everything.get(e, {}) for e in entities}

    def seed(self, quotas: dict) -> None:
        with self.open() as b:
            current = b.describe()
            b.alter([Alteration.of(e, q, remove=[k for k in current.get(e, {}) if k not in q])
                     for e, q in quotas.items()])

    def free_lease(self) -> None:
        """After a writer was killed: abort its open transaction (the broker would after its
        timeout); the sandbox's lock went with the process."""
        if self.broker:
            break_lease({"bootstrap.servers": self.broker.bootstrap})


def plan(store: Store, desired: dict, out: Path) -> Path:
    doc = {"format": "quota-console/1", "entries": [
        {"entity": e.as_dict(), "quotas": q} for e, q in desired.items()]}
    src = out.with_suffix(".desired.json")
    src.write_text(json.dumps(doc))
    code = cli(["plan", str(src), *store.flags(), "--out", str(out)], out=io.StringIO(),
               err=(err := io.StringIO()))
    if code != 2:
        raise SystemExit(f"plan failed ({code}): {err.getvalue()}")
    return out


def apply_proc(store: Store, plan_file: Path, log: Path, timeout: float = 30):
    return subprocess.Popen([sys.executable, "-m", "quota_core", "apply", str(plan_file),
                             *store.flags(), "--timeout", str(timeout), "--audit-log",
                             str(log)], env=ENV, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


# -- 1. kills mid-apply ------------------------------------------------------------------------
def _intents_written(log: Path, proc, limit: float) -> bool:
    """Wait until the apply has written its intents (it is about to send, or sending)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and proc.poll() is None:
        if log.exists() and log.stat().st_size:
            return True
        time.sleep(0.01)
    return False


def kills(store: Store, rounds: int, n: int, work: Path) -> dict:
    """Half the kills at a random moment of the whole run; the other half at a random moment
    after the intents were written (the alter, the commit, the read-back, the outcome)."""
    entities = [Entity.of(user=f"kill-{i:05d}") for i in range(n)]
    applied_total = recorded_total = unrecorded = partial = 0
    whole = after_intent = 0.0
    by_round: list[str] = []  # "[i]kill delay: applied/recorded" (i: after the intents)
    for r in range(rounds + 2):  # rounds 0 and 1 measure unkilled applies
        before = {e: {PBR: float(1000 + 2 * r)} for e in entities}
        store.seed(before)
        p = plan(store, {e: {PBR: float(1001 + 2 * r)} for e in entities},
                 work / f"{store.name}-k{r}.json")
        log = work / f"{store.name}-k{r}.jsonl"
        started = time.monotonic()
        proc = apply_proc(store, p, log)
        if r < 2:
            _intents_written(log, proc, 300)
            intents_at = time.monotonic()
            if proc.wait(300) != 0:
                raise SystemExit(f"the unkilled apply failed: {proc.stderr.read()}")
            proc.stderr.close()
            whole = max(whole, time.monotonic() - started)
            after_intent = max(after_intent, time.monotonic() - intents_at)
            continue
        mark = ""
        if r % 2:
            delay = random.uniform(0.05, 1.2) * whole
        else:
            _intents_written(log, proc, 300)
            delay, mark = random.uniform(0.0, 1.2) * after_intent, "i"
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        proc.stderr.close()
        store.free_lease()
        now = store.read(entities)
        changed = {e for e in entities if now[e] != before[e]}
        records = {r_.entity_obj() for r_ in AuditLog(log).read()}
        applied_total += len(changed)
        recorded_total += len(records)
        unrecorded += len(changed - records)
        partial += 0 < len(changed) < n
        by_round.append(f"{mark}{delay:.1f}s:{len(changed)}/{len(records)}")
    return {"store": store.name, "kills": rounds, "entities per plan": n,
            "unkilled apply (s)": round(whole, 1),
            "of which after the intents (s)": round(after_intent, 1),
            "changes applied": applied_total, "changes recorded": recorded_total,
            "applied without a record": unrecorded, "rounds with some applied": partial,
            "rounds with all applied": sum(x.split(":")[1].startswith(f"{n}/")
                                           for x in by_round),
            "per kill (delay: applied/recorded; i = after the intents)": " ".join(by_round)}


# -- 2. two concurrent applies -----------------------------------------------------------------
def concurrent(store: Store, rounds: int, work: Path) -> dict:
    alice = Entity.of(user="race-alice")
    base = {alice: {PBR: 1.0, "consumer_byte_rate": 1.0}}
    a_wants = {alice: {PBR: 2.0, "consumer_byte_rate": 2.0}}
    b_wants = {alice: {PBR: 3.0, "consumer_byte_rate": 1.0}}
    lost = both = neither = 0
    wins = {"A": 0, "B": 0}
    for r in range(rounds):
        store.seed(base)
        pa = plan(store, a_wants, work / f"{store.name}-a{r}.json")
        pb = plan(store, b_wants, work / f"{store.name}-b{r}.json")
        log = work / f"{store.name}-c{r}.jsonl"
        procs = [apply_proc(store, p, log) for p in (pa, pb)]
        codes = [p.wait(120) for p in procs]
        for p in procs:
            p.stderr.close()
        now = store.read([alice])[alice]
        ok = [name for name, c in zip("AB", codes) if c == 0]
        before_seen = [json.dumps(x.before, sort_keys=True) for x in AuditLog(log).read()
                       if x.outcome == "applied"]
        if len(ok) == 2 or len(before_seen) != len(set(before_seen)):
            both += 1
        if not ok:
            neither += 1
        expected = [read_plan(json.loads(p.read_text())).after[alice] for p, c in
                    zip((pa, pb), codes) if c == 0]
        if len(ok) == 1:
            wins[ok[0]] += 1
        if now not in expected + ([base[alice]] if not ok else []):
            lost += 1
    return {"store": store.name, "rounds": rounds, "both succeeded": both,
            "store holds neither plan (lost update)": lost, "neither succeeded": neither,
            "won by A / B": f"{wins['A']} / {wins['B']}"}


# -- 3. the broker killed mid-apply, restarted on its data -------------------------------------
def broker_crash(store: Store, rounds: int, n: int, work: Path) -> dict:
    entities = [Entity.of(user=f"crash-{i:05d}") for i in range(n)]
    rows = []
    for r in range(rounds):
        before = {e: {PBR: float(5000 + 2 * r)} for e in entities}
        store.seed(before)
        p = plan(store, {e: {PBR: float(5001 + 2 * r)} for e in entities}, work / f"x{r}.json")
        log = work / f"x{r}.jsonl"
        proc = apply_proc(store, p, log, timeout=20)
        _intents_written(log, proc, 120)  # then the alter is on its way
        time.sleep(random.uniform(0.0, 0.8))
        store.broker.kill()
        store.broker.start(timeout=120, keep_data=True)
        code = proc.wait(120)
        last = (proc.stderr.read().strip().splitlines() or [""])[-1]
        proc.stderr.close()
        store.free_lease()
        now = store.read(entities)
        there = {e for e in entities if now[e] != before[e]}
        records = {x.entity_obj(): x for x in AuditLog(log).read()}
        said_applied = {e for e, x in records.items() if x.outcome == "applied"}
        rows.append({"exit": code, "apply said": last[:160], "held after restart": len(there),
                     "reported applied": len(said_applied),
                     "reported unknown": sum(x.outcome == "unknown" for x in records.values()),
                     "reported applied but absent": len(said_applied - there),
                     "present without a record": len(there - set(records))})
    return {"store": "broker", "rounds": rounds, "entities per plan": n, "runs": rows}


# -- 4. a node of a cluster killed with an alter in flight --------------------------------------
def cluster_kills(brokers: int, rounds: int, work: Path) -> dict:
    from tests.cluster_kills import VICTIMS, kill_round

    rows = []
    say(f"starting a local cluster of {brokers} brokers …")
    with LocalCluster(work / "cluster", brokers=brokers) as cluster:
        for r in range(rounds):
            victim = VICTIMS[r % len(VICTIMS)]
            delay = 0.0 if r % 2 == 0 else round(random.uniform(0.05, 1.0), 2)
            entities = 200 if r % 4 < 2 else 3000
            row = kill_round(cluster, f"ck{r}", victim, entities, delay, timeout_s=20,
                             audit_dir=work)
            say(json.dumps(row, default=str))
            rows.append(row)
    outcomes: dict[str, int] = {}
    for row in rows:
        key = row["reported"] if row["reported"] in ("applied", "refused", "unknown") \
            else "error"
        outcomes[key] = outcomes.get(key, 0) + 1
    return {"store": f"cluster of {brokers}", "rounds": rounds, "outcomes": outcomes,
            "wrong reports": sum(bool(r["wrong"]) for r in rows), "runs": rows}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=100, help="kills per store (default 100); "
                   "concurrent rounds are half, broker restarts a twentieth")
    p.add_argument("--entities", type=int, default=2000, help="entities per killed plan")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--brokers", type=int, default=1, help="2-5: also kill nodes of a cluster "
                   "of that many brokers with an alter in flight")
    p.add_argument("--only", choices=["cluster"], help="run only the cluster kills")
    args = p.parse_args(argv)
    if args.only == "cluster" and args.brokers < 2:
        p.error("--only cluster needs --brokers 2 or more")
    random.seed(args.seed)
    results: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="quota-faults-") as tmp:
        work = Path(tmp)
        if args.brokers > 1:
            rounds = max(3, args.rounds // 5)
            say(f"cluster: {rounds} nodes killed with an alter in flight …")
            results.append({"run": "cluster kills", **cluster_kills(args.brokers, rounds, work)})
        if args.only == "cluster":
            return _summary(results)
        sandbox = Store(sandbox=work / "faults.sqlite")
        SandboxBackend(sandbox.sandbox).init()
        broker = LocalBroker(work / "broker", overrides={
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000"})
        say("starting a local broker …")
        broker.start(timeout=180)
        try:
            kafka = Store(broker=broker)
            for store in (sandbox, kafka):
                say(f"{store.name}: {args.rounds} kills mid-apply …")
                results.append({"run": "kills", **kills(store, args.rounds, args.entities, work)})
                say(json.dumps(results[-1]))
                say(f"{store.name}: {max(1, args.rounds // 2)} rounds of two concurrent applies …")
                results.append({"run": "concurrent", **concurrent(store, max(1, args.rounds // 2),
                                                                   work)})
                say(json.dumps(results[-1]))
            say(f"broker: {max(1, args.rounds // 20)} crashes mid-apply, restarted on its data …")
            results.append({"run": "broker crash", **broker_crash(
                kafka, max(1, args.rounds // 20), max(args.entities, 3000), work)})
            say(json.dumps(results[-1]))
        finally:
            broker.stop()
    return _summary(results)


def _summary(results: list[dict]) -> int:
    bad = sum(r.get("wrong reports", 0) for r in results)
    bad += sum(r.get("applied without a record", 0) + r.get("both succeeded", 0)
              + r.get("store holds neither plan (lost update)", 0) for r in results)
    bad += sum(x.get("reported applied but absent", 0) + x.get("present without a record", 0)
               for r in results for x in r.get("runs", []))
    say(json.dumps({"summary": "ok" if not bad else f"{bad} faults", "results": results},
                   indent=2))
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
