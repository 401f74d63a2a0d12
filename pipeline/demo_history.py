"""A realistic, deterministic quota-usage history in the collector's layout (no Spark needed).

What it holds, so the analysis has something to find: diurnal cycles with per-client phase,
bursts, brokers sharing each bucket's traffic unevenly, a shared ``{user=etl}`` bucket fed by
three client ids, clients over their quota, clients with no quota at all, a user literally
named ``<default>``, a quota change half way (one client freed, others newly throttled), a
broker missing for a while, and the broker's ``throttle_ms`` (null when it reported NaN).
Bucket tags follow the rung that bound each client (quota_core resolves them), so the tags
change when the quota change moves a client to another rung, as on a real broker.

Size is set by ``clients`` (background clients besides the named ones), ``brokers``,
``hours`` and ``step_s``: rows ≈ buckets × keys × brokers × hours × 3600 / step_s, so the
same code serves tests (thousands of rows), the demo and a 10M-sample benchmark.

    python -m pipeline.demo_history --out history/ --hours 48 --clients 50
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd

from quota_core.entities import Entity
from quota_core.ladder import rung
from quota_core.resolution import resolve_values
from quota_core.throttle import estimate_throttle

from .schema import KEY_FOR_TYPE, QUOTA_COLUMNS, USAGE_COLUMNS, arrow_schema
from .snapshots import entity_json

__all__ = ["HistorySpec", "DemoHistory", "quota_sets", "generate", "write_history", "main"]

MB = 1_000_000
QuotaSet = dict[Entity, dict[str, float]]


@dataclass(frozen=True)
class HistorySpec:
    seed: int = 7
    start: datetime = datetime(2025, 1, 6)   # UTC
    hours: float = 48.0
    step_s: int = 60
    brokers: int = 3
    clients: int = 20                         # background clients besides the named ones
    quota_every_s: int = 3600                 # how often the collector snapshots the quotas


@dataclass
class DemoHistory:
    usage: pd.DataFrame
    quotas: pd.DataFrame
    #: (in force from, quota set) as the generator applied them.
    versions: list[tuple[datetime, QuotaSet]] = field(default_factory=list)


def quota_sets() -> tuple[QuotaSet, QuotaSet]:
    """The quotas before and after the mid-history change."""
    e = Entity.of
    before: QuotaSet = {
        e(user="alice", client_id="checkout-api"): {"producer_byte_rate": 2 * MB},
        e(user="etl"): {"producer_byte_rate": 20 * MB, "consumer_byte_rate": 40 * MB},
        e(user=None, client_id="reporting"): {"consumer_byte_rate": 4 * MB},
        e(user=None): {"consumer_byte_rate": 50 * MB},
        e(client_id="terraform"): {"controller_mutation_rate": 5.0},
        e(client_id=None): {"request_percentage": 50.0},
    }
    after = {k: dict(v) for k, v in before.items()}
    after[e(user="alice", client_id="checkout-api")]["producer_byte_rate"] = 3 * MB
    after[e(user=None, client_id="reporting")]["consumer_byte_rate"] = 2.5 * MB
    return before, after


# (user, client id, quota_type, base rate, diurnal amplitude, burst probability)
_NAMED = [
    ("alice", "checkout-api", "produce", 1.6 * MB, 0.45, 0.02),
    ("etl", "etl-loader-1", "produce", 6 * MB, 0.35, 0.01),
    ("etl", "etl-loader-2", "produce", 6 * MB, 0.35, 0.01),
    ("etl", "etl-loader-3", "produce", 5 * MB, 0.35, 0.01),
    ("etl", "etl-loader-1", "fetch", 12 * MB, 0.2, 0.0),
    ("bob", "reporting", "fetch", 3 * MB, 0.4, 0.03),
    ("carol", "reporting", "fetch", 1.8 * MB, 0.4, 0.03),
    ("<default>", "legacy-app", "fetch", 1 * MB, 0.2, 0.0),
    ("batch", "batch-scanner", "request", 40.0, 0.4, 0.05),
    ("ops", "terraform", "controller_mutation", 2.0, 0.0, 0.08),
]


def _population(spec: HistorySpec, rng: np.random.Generator) -> pd.DataFrame:
    rows = list(_NAMED)
    for i in range(spec.clients):
        user = f"svc-{i:03d}"
        rows.append((user, f"producer-{i}", "produce", float(rng.lognormal(np.log(0.8 * MB), 1.0)),
                     float(rng.uniform(0.1, 0.5)), 0.01))
        rows.append((user, f"consumer-{i}", "fetch", float(rng.lognormal(np.log(1.5 * MB), 1.0)),
                     float(rng.uniform(0.1, 0.5)), 0.01))
        rows.append((user, f"producer-{i}", "request", float(rng.uniform(1, 20)),
                     float(rng.uniform(0.1, 0.5)), 0.0))
    return pd.DataFrame(rows, columns=["user", "client_id", "quota_type", "base", "amp", "burst"])


def _series(pop: pd.DataFrame, t_s: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """(clients, steps) rates: base × diurnal × noise × bursts. ``base`` is a client's mean
    rate per broker (the unit quotas are in); a bucket's brokers get uneven shares of it."""
    n = len(pop)
    phase = rng.uniform(0, 1, size=(n, 1))
    day = 1 + pop["amp"].to_numpy()[:, None] * np.sin(2 * np.pi * (t_s[None, :] / 86400 + phase))
    noise = rng.lognormal(0, 0.08, size=(n, len(t_s)))
    starts = rng.random((n, len(t_s))) < pop["burst"].to_numpy()[:, None]
    # A burst lasts a few steps: spread each start over the next 3.
    burst = starts | np.roll(starts, 1, axis=1) | np.roll(starts, 2, axis=1)
    factor = np.where(burst, rng.uniform(1.8, 3.0, size=(n, 1)), 1.0)
    return pop["base"].to_numpy()[:, None] * day * noise * factor


def _tags(quotas: QuotaSet, user: str, client_id: str, key: str) -> tuple[str | None, str | None]:
    """The bucket's metric tags: the parts of the rung that bound it (client id when none)."""
    found = resolve_values(quotas, user, client_id, (key,))[key]
    if found is None:
        return None, client_id
    r = rung(found[1])
    return (user if r.uses_user else None), (client_id if r.uses_client_id else None)


def _quota_of(quotas: QuotaSet, user, client_id, key) -> float:
    found = resolve_values(quotas, user, client_id, (key,))[key]
    return np.nan if found is None else found[0]


def generate(spec: HistorySpec = HistorySpec()) -> DemoHistory:
    rng = np.random.default_rng(spec.seed)
    pop = _population(spec, rng)
    steps = int(spec.hours * 3600 // spec.step_s)
    t_s = np.arange(steps) * spec.step_s
    rates = _series(pop, t_s, rng)
    before, after = quota_sets()
    change_s = (steps * spec.step_s // 2) // spec.quota_every_s * spec.quota_every_s
    periods = [(0, change_s, before), (change_s, steps * spec.step_s, after)]
    nb = spec.brokers
    # Columns are built as numpy pieces and labels as small tables indexed at the end: a
    # DataFrame per bucket would cost more than the data at 10M samples.
    buckets: list[tuple[str, str | None, str | None, float]] = []  # quota_type, tags, quota
    pieces: dict[str, list[np.ndarray]] = {"t": [], "broker": [], "bucket": [], "rate": []}
    for lo, hi, quotas in periods:
        cols = (t_s >= lo) & (t_s < hi)
        if not cols.any():
            continue
        tagged = pop.assign(key=pop["quota_type"].map(KEY_FOR_TYPE), row=np.arange(len(pop)))
        tags = [_tags(quotas, r.user, r.client_id, r.key) for r in tagged.itertuples()]
        tagged["t_user"] = [t[0] for t in tags]
        tagged["t_client"] = [t[1] for t in tags]
        # Shared buckets: the clients with the same tags and key add up.
        for (qt, key, tu, tc), group in tagged.groupby(
                ["quota_type", "key", "t_user", "t_client"], dropna=False, sort=True):
            total = rates[group["row"].to_numpy()][:, cols].sum(axis=0)
            # Partition leadership is uneven: each broker gets its own share of the bucket.
            weights = rng.dirichlet(np.full(nb, 6.0)) * nb
            first = group.iloc[0]  # the bucket's limit is its clients' quota; NaN when none
            buckets.append((qt, None if pd.isna(tu) else tu, None if pd.isna(tc) else tc,
                            _quota_of(quotas, first.user, first.client_id, key)))
            n = int(cols.sum())
            pieces["t"].append(np.tile(t_s[cols], nb))
            pieces["broker"].append(np.repeat(np.arange(nb), n))
            pieces["bucket"].append(np.full(n * nb, len(buckets) - 1))
            pieces["rate"].append(np.concatenate([total * w for w in weights]))
    t, broker, bucket, rate = (np.concatenate(pieces[k]) for k in ("t", "broker", "bucket", "rate"))
    keep = ~_broker_gap(t, broker, spec)
    order = np.lexsort((bucket[keep], broker[keep], t[keep]))
    t, broker, bucket, rate = (a[keep][order] for a in (t, broker, bucket, rate))
    table = pd.DataFrame(buckets, columns=["quota_type", "user", "client_id", "quota"])
    labels = {c: table[c].to_numpy(dtype=object) for c in ("quota_type", "user", "client_id")}
    quota = table["quota"].to_numpy(dtype=float)[bucket]
    usage = pd.DataFrame({
        "ts": pd.Timestamp(spec.start, tz="UTC") + pd.to_timedelta(t, unit="s"),
        "broker": np.array([f"broker-{b}" for b in range(nb)], dtype=object)[broker],
        "quota_type": labels["quota_type"][bucket],
        "user": labels["user"][bucket],
        "client_id": labels["client_id"][bucket],
        "rate": rate,
        "throttle_ms": _throttle(labels["quota_type"][bucket], rate, quota, rng),
        "interval_s": float(spec.step_s),
    })
    quotas_df = _snapshots(spec, steps, change_s, before, after)
    versions = [(spec.start, before), (spec.start + timedelta(seconds=int(change_s)), after)]
    return DemoHistory(usage, quotas_df, versions)


def _broker_gap(t: np.ndarray, broker: np.ndarray, spec: HistorySpec) -> np.ndarray:
    """Rows to drop: broker-1 (when there is one) is away from 30% to 40% of the history."""
    span = spec.hours * 3600
    return (broker == 1) & (t >= 0.3 * span) & (t < 0.4 * span)


def _throttle(quota_types: np.ndarray, rate: np.ndarray, quota: np.ndarray,
              rng: np.random.Generator) -> np.ndarray:
    """The broker's throttle_ms: Kafka's own estimate (quota_core.throttle) with some jitter
    when over the quota, else NaN (null in Parquet: the broker reported NaN)."""
    over = np.flatnonzero(~np.isnan(quota) & (rate > np.nan_to_num(quota, nan=np.inf)))
    out = np.full(len(rate), np.nan)
    jitter = rng.uniform(0.9, 1.1, size=len(over))
    for i, j in zip(over.tolist(), jitter.tolist()):
        out[i] = estimate_throttle(KEY_FOR_TYPE[quota_types[i]], float(rate[i]),
                                   float(quota[i])).throttle_ms * j
    return out


def _snapshots(spec: HistorySpec, steps: int, change_s: int, before: QuotaSet,
               after: QuotaSet) -> pd.DataFrame:
    rows = []
    start = pd.Timestamp(spec.start, tz="UTC")
    for s in range(0, steps * spec.step_s, spec.quota_every_s):
        quotas = before if s < change_s else after
        ts = start + pd.Timedelta(seconds=s)
        for entity in sorted(quotas, key=Entity.sort_key):
            for key, value in sorted(quotas[entity].items()):
                rows.append((ts, entity_json(entity), key, float(value)))
    return pd.DataFrame(rows, columns=["ts", "entity", "key", "value"])


def write_history(history: DemoHistory, out: str | Path, fmt: str = "parquet") -> Path:
    """``out/usage/date=YYYY-MM-DD/part-0.parquet`` and the same for ``quotas`` (or .jsonl),
    typed with the contract's Arrow schema (as the collector writes them)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = Path(out)
    for name, df in (("usage", history.usage), ("quotas", history.quotas)):
        days = df["ts"].dt.floor("D")
        table = None
        if fmt == "parquet":
            schema = arrow_schema(USAGE_COLUMNS if name == "usage" else QUOTA_COLUMNS)
            table = pa.Table.from_pandas(df, schema=schema, preserve_index=False)
        for day in days.unique():
            mask = (days == day).to_numpy()
            target = out / name / f"date={day:%Y-%m-%d}"
            target.mkdir(parents=True, exist_ok=True)
            if table is not None:
                pq.write_table(table.filter(pa.array(mask)), target / "part-0.parquet")
            else:
                part = df[mask]
                text = part.assign(ts=part["ts"].dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ"))
                text.to_json(target / "part-0.jsonl", orient="records", lines=True)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="pipeline.demo_history", description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--seed", type=int, default=HistorySpec.seed)
    p.add_argument("--hours", type=float, default=HistorySpec.hours)
    p.add_argument("--step-s", type=int, default=HistorySpec.step_s)
    p.add_argument("--brokers", type=int, default=HistorySpec.brokers)
    p.add_argument("--clients", type=int, default=HistorySpec.clients)
    p.add_argument("--format", choices=("parquet", "json"), default="parquet")
    a = p.parse_args(argv)
    spec = HistorySpec(seed=a.seed, hours=a.hours, step_s=a.step_s, brokers=a.brokers,
                       clients=a.clients)
    history = generate(spec)
    write_history(history, a.out, a.format)
    print(f"{len(history.usage)} usage samples, {len(history.quotas)} quota rows -> {a.out}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
