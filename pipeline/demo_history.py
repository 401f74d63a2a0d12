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

By default it is a fixed past (from 6 January 2025, brokers ``broker-0``…, the quota sets of
:func:`quota_sets`, the named clients below), so tests can rely on it. ``make run`` gives it
its own cluster instead (:func:`generate` with ``end`` = now, the node ids as ``broker_ids``,
the quota set it seeded and the demo load's clients, placed on the brokers that lead their
topics), so the History page agrees with the live pages.

    python -m pipeline.demo_history --out history/ --hours 48 --clients 50
    python -m pipeline.demo_history --out history/ --end now --broker-ids 1,2,3
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pandas as pd

from quota_core.domain import Entity, rung, resolve_values
from quota_core.throttling import estimate_throttle

from pipeline.schema import KEY_FOR_TYPE, QUOTA_COLUMNS, USAGE_COLUMNS, arrow_schema
from pipeline.snapshots import entity_json

__all__ = ["HistorySpec", "Client", "DemoHistory", "quota_sets", "generate", "write_history",
           "main"]

MB = 1_000_000
QuotaSet = dict[Entity, dict[str, float]]


@dataclass(frozen=True)
class HistorySpec:
    seed: int = 7
    start: datetime = datetime(2025, 1, 6)   # UTC; when ``end`` is given, end - hours
    hours: float = 48.0
    step_s: int = 60
    brokers: int = 3                          # how many (ignored when broker_ids are given)
    clients: int = 20                         # background clients besides the named ones
    quota_every_s: int = 3600                 # how often the collector snapshots the quotas
    #: UTC; the history ends here (its last sample is one step before), e.g. now.
    end: datetime | None = None
    #: The brokers' labels, as the collector writes them (a real cluster: its node ids,
    #: "1", "2", "3"); default ``broker-0``, ``broker-1``, … (``brokers`` of them).
    broker_ids: tuple[str, ...] | None = None

    @property
    def first(self) -> datetime:
        """The first sample's time (naive UTC)."""
        if self.end is None:
            return self.start
        end = self.end.astimezone(timezone.utc).replace(tzinfo=None) \
            if self.end.tzinfo else self.end
        return end - timedelta(seconds=self.steps * self.step_s)

    @property
    def steps(self) -> int:
        return int(self.hours * 3600 // self.step_s)

    @property
    def labels(self) -> tuple[str, ...]:
        return self.broker_ids or tuple(f"broker-{b}" for b in range(self.brokers))


@dataclass(frozen=True)
class Client:
    """One named client of the history. ``base`` is its mean rate on each broker it talks to
    (bytes/s, % of a thread or mutations/s: the unit its quota is in); ``brokers`` the labels
    of those brokers, each getting ``base`` (None: all of them, in uneven shares, as partition
    leadership is)."""

    user: str | None
    client_id: str | None
    quota_type: str
    base: float
    amp: float = 0.3          # diurnal amplitude
    burst: float = 0.02       # probability that a burst starts at a step
    brokers: tuple[str, ...] | None = None


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


def _population(spec: HistorySpec, rng: np.random.Generator,
                named: Sequence[Client] | None) -> pd.DataFrame:
    rows = [(*row, None) for row in _NAMED] if named is None else [
        (c.user, c.client_id, c.quota_type, c.base, c.amp, c.burst, c.brokers) for c in named]
    unknown = {b for row in rows for b in (row[6] or ())} - set(spec.labels)
    if unknown:
        raise ValueError(f"named clients on brokers {sorted(unknown)} that the history does not "
                         f"have ({', '.join(spec.labels)})")
    for i in range(spec.clients):
        user = f"svc-{i:03d}"
        rows.append((user, f"producer-{i}", "produce", float(rng.lognormal(np.log(0.8 * MB), 1.0)),
                     float(rng.uniform(0.1, 0.5)), 0.01, None))
        rows.append((user, f"consumer-{i}", "fetch", float(rng.lognormal(np.log(1.5 * MB), 1.0)),
                     float(rng.uniform(0.1, 0.5)), 0.01, None))
        rows.append((user, f"producer-{i}", "request", float(rng.uniform(1, 20)),
                     float(rng.uniform(0.1, 0.5)), 0.0, None))
    return pd.DataFrame(rows, columns=["user", "client_id", "quota_type", "base", "amp", "burst",
                                       "brokers"])


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


def generate(spec: HistorySpec = HistorySpec(), quotas: tuple[QuotaSet, QuotaSet] | None = None,
             named: Sequence[Client] | None = None) -> DemoHistory:
    """The history. ``quotas``: (before, after) the change half way, default
    :func:`quota_sets` (give the same set twice for none). ``named``: the named clients,
    default this module's own (etl, alice, bob, carol, …)."""
    rng = np.random.default_rng(spec.seed)
    pop = _population(spec, rng, named)
    steps = spec.steps
    t_s = np.arange(steps) * spec.step_s
    rates = _series(pop, t_s, rng)
    before, after = quotas or quota_sets()
    change_s = (steps * spec.step_s // 2) // spec.quota_every_s * spec.quota_every_s
    periods = [(0, change_s, before), (change_s, steps * spec.step_s, after)]
    names = spec.labels  # the brokers'
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
            # The brokers the bucket's clients talk to (all, unless they were placed); a
            # broker that sees none of its traffic has no series for it, as on Kafka.
            on = _brokers_of(group["brokers"], names)
            if group["brokers"].isna().any():
                # Partition leadership is uneven: each broker gets its own share of the bucket.
                weights = rng.dirichlet(np.full(len(on), 6.0)) * len(on)
            else:  # placed clients write the partitions their brokers lead in turn: even shares
                weights = np.ones(len(on))
            first = group.iloc[0]  # the bucket's limit is its clients' quota; NaN when none
            buckets.append((qt, None if pd.isna(tu) else tu, None if pd.isna(tc) else tc,
                            _quota_of(quotas, first.user, first.client_id, key)))
            n = int(cols.sum())
            pieces["t"].append(np.tile(t_s[cols], len(on)))
            pieces["broker"].append(np.repeat(on, n))
            pieces["bucket"].append(np.full(n * len(on), len(buckets) - 1))
            pieces["rate"].append(np.concatenate([total * w for w in weights]))
    t, broker, bucket, rate = (np.concatenate(pieces[k]) for k in ("t", "broker", "bucket", "rate"))
    keep = ~_broker_gap(t, broker, spec)
    order = np.lexsort((bucket[keep], broker[keep], t[keep]))
    t, broker, bucket, rate = (a[keep][order] for a in (t, broker, bucket, rate))
    table = pd.DataFrame(buckets, columns=["quota_type", "user", "client_id", "quota"])
    labels = {c: table[c].to_numpy(dtype=object) for c in ("quota_type", "user", "client_id")}
    quota = table["quota"].to_numpy(dtype=float)[bucket]
    usage = pd.DataFrame({
        "ts": pd.Timestamp(spec.first, tz="UTC") + pd.to_timedelta(t, unit="s"),
        "broker": np.array(names, dtype=object)[broker],
        "quota_type": labels["quota_type"][bucket],
        "user": labels["user"][bucket],
        "client_id": labels["client_id"][bucket],
        "rate": rate,
        "throttle_ms": _throttle(labels["quota_type"][bucket], rate, quota, rng),
        "interval_s": float(spec.step_s),
    })
    quotas_df = _snapshots(spec, steps, change_s, before, after)
    versions = [(spec.first, before), (spec.first + timedelta(seconds=int(change_s)), after)]
    return DemoHistory(usage, quotas_df, versions)


def _brokers_of(placed: pd.Series, labels: tuple[str, ...]) -> np.ndarray:
    """Indices of the brokers a bucket's clients talk to: the union of their placements, or
    every broker when any of them is not placed."""
    if placed.isna().any():
        return np.arange(len(labels))
    wanted = set().union(*placed)
    return np.array([i for i, label in enumerate(labels) if label in wanted])


def _broker_gap(t: np.ndarray, broker: np.ndarray, spec: HistorySpec) -> np.ndarray:
    """Rows to drop: broker-1 (when there is one) is away from 30% to 40% of the history."""
    span = spec.hours * 3600
    return (broker == 1) & (t >= 0.3 * span) & (t < 0.4 * span)


def _throttle(quota_types: np.ndarray, rate: np.ndarray, quota: np.ndarray,
              rng: np.random.Generator) -> np.ndarray:
    """The broker's throttle_ms: Kafka's own estimate (quota_core.throttling.throttle) with some jitter
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
    start = pd.Timestamp(spec.first, tz="UTC")
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


def _end(text: str) -> datetime:
    if text == "now":
        return datetime.now(timezone.utc)
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not 'now' or an ISO-8601 time") from None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="pipeline.demo_history", description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--seed", type=int, default=HistorySpec.seed)
    p.add_argument("--hours", type=float, default=HistorySpec.hours)
    p.add_argument("--step-s", type=int, default=HistorySpec.step_s)
    p.add_argument("--brokers", type=int, default=HistorySpec.brokers)
    p.add_argument("--clients", type=int, default=HistorySpec.clients)
    p.add_argument("--end", type=_end, default=None,
                   help="the history ends here: 'now' or an ISO-8601 UTC time (default: a fixed "
                        "past, from 2025-01-06)")
    p.add_argument("--broker-ids", type=lambda s: tuple(s.split(",")), default=None,
                   help="the brokers' labels, comma-separated, e.g. a cluster's node ids 1,2,3")
    p.add_argument("--format", choices=("parquet", "json"), default="parquet")
    a = p.parse_args(argv)
    spec = HistorySpec(seed=a.seed, hours=a.hours, step_s=a.step_s, brokers=a.brokers,
                       clients=a.clients, end=a.end, broker_ids=a.broker_ids)
    history = generate(spec)
    write_history(history, a.out, a.format)
    print(f"{len(history.usage)} usage samples, {len(history.quotas)} quota rows -> {a.out}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
