"""The Spark analysis job at scale: against a bare Spark scan + group-by, and against pandas.

Generates a collector history (Parquet, the collector's layout and schema) of ``--samples``
usage samples (default 1,000,000 and 10,000,000) over ``--buckets`` broker buckets (default
100,000) bound by a ``--entries``-entry quota set (default 100,000; two snapshots, 5 % of the
entries changed half way), in a temporary directory removed at the end. Then, per size:

* the floor: a bare Spark scan + group-by of the same Parquet, written
  (``groupBy(user, client_id, quota_type).agg(sum(interval_s), max(rate), count)``);
* the full analysis, ``pipeline.job.run`` (windows, by_client, by_entry, sizing; what_if with
  ``--what-if``), with the time of each of its phases; target: within 2x of the copy
  floor (a scan + write of every row: the job writes a 10M-row ``windows`` table);
* the same analysis in pandas in one fresh process (``benchmarks.pandas_analysis``: read,
  resolve the distinct buckets with ``bulk_resolve_buckets``, the same tables, written);
  information only (``local[2]`` has at most twice pandas' one core);
* the peak resident memory of the driver JVM (VmHWM of the java process, reset before each
  run), of the Python driver, and of the pandas process;
* whether the Spark and pandas tables agree: every row of by_client, by_entry and sizing, and
  every windows row of a sample of buckets.

Spark runs ``local[2]`` with the job's own session settings (``pipeline.session``; driver
memory is Spark's default unless ``--driver-memory``). Times are one run each (``--runs`` for
best of N); a warm-up floor run on the smallest size comes first, so the JVM is warm.

    .venv/bin/python benchmarks/bench_pipeline.py [--samples 1000000,10000000]
        [--buckets 100000] [--entries 100000] [--skip-pandas-10m] [--what-if] [--keep DIR]

With ``--incremental`` it measures the hourly rollups instead (pipeline.incremental): per
history of ``--incremental-hours`` (default 12, 48, 192 h), ``analyze`` after one new hour
(the command: the update and the tables) against the whole re-analysis of the same history
(target: <= 0.1x), the update alone against the shortest history's (target: <= 1.25x: flat
in the history's length), and with nothing new; ``--json`` adds a line per history,
``{"hours", "samples", "update_s", "command_s", "full_s"}``. Size it with ``--buckets``,
``--entries``, ``--step-s``, e.g. ``--incremental --incremental-hours 12,192 --buckets 300``.

The full default run takes about 6 minutes on 2 cores (its last line says), under 4 with
``--skip-pandas-10m``. It holds about 0.9 GB of Parquet under the system temp directory at
its peak (plus what Spark spills there) and removes it at the end.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from datetime import datetime, timezone
from multiprocessing import get_context
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

COPY_TARGET = 2.0      # the analysis within this many times a scan + write of every row
# pandas is information only: local[2] has at most twice pandas' one core (issue 19)
START = datetime(2025, 3, 3, tzinfo=timezone.utc)
TYPE_SHARE = {"produce": 0.45, "fetch": 0.35, "request": 0.18, "controller_mutation": 0.02}
CHANGED = 0.05         # share of the entries whose values change half way

_t0 = time.perf_counter()


def log(line: str) -> None:
    """A progress line, with the 1-minute load average: above ~2 (2 cores) something else
    ran during the figures around it."""
    print(f"[{time.perf_counter() - _t0:7.1f}s load {os.getloadavg()[0]:4.1f}] {line}",
          flush=True)


# -- data ----------------------------------------------------------------------------------

def changed_set(quotas: dict, share: float, seed: int) -> dict:
    """A copy of ``quotas`` with ``share`` of its client entries' values halved or doubled."""
    rng = np.random.default_rng(seed)
    out = {e: dict(q) for e, q in quotas.items()}
    client_entities = [e for e in quotas if not e.has("ip")]
    picked = rng.choice(len(client_entities), int(len(client_entities) * share), replace=False)
    for i in picked.tolist():
        e = client_entities[i]
        out[e] = {k: v * float(rng.choice((0.5, 2.0))) for k, v in out[e].items()}
    return out


def make_buckets(quotas: dict, n: int, rng: np.random.Generator) -> pd.DataFrame:
    """``n`` distinct buckets (quota_type, user tag, client-id tag), tagged as a broker tags
    them: each candidate client (user, client id) is resolved (bulk_resolve) and its bucket
    takes the parts of the rung that bound it (client id only when unlimited)."""
    from pipeline.resolve import KEYS
    from pipeline.schema import KEY_FOR_TYPE
    from quota_core.domain.bulk import bulk_resolve
    from quota_core.domain.ladder import rung

    users = np.array(sorted({e.name("user") for e in quotas if e.has("user")
                             and e.name("user") is not None}), dtype=object)
    clients = np.array(sorted({e.name("client-id") for e in quotas if e.has("client-id")
                               and e.name("client-id") is not None}), dtype=object)
    types = np.array(list(TYPE_SHARE), dtype=object)
    uses = {lvl: (rung(lvl).uses_user, rung(lvl).uses_client_id) for lvl in range(1, 9)}
    uses[0] = (False, True)
    found = pd.DataFrame(columns=["quota_type", "user", "client_id"])
    m = n
    while len(found) < n:
        def names(pool, prefix):
            known = pool[rng.integers(0, len(pool), m)] if len(pool) else np.full(m, prefix)
            strangers = np.char.add(prefix, rng.integers(0, 10**7, m).astype(str)).astype(object)
            return np.where(rng.random(m) < 0.85, known, strangers)
        cu, cc = names(users, "svc-"), names(clients, "client-")
        qt = types[rng.choice(len(types), m, p=list(TYPE_SHARE.values()))]
        res = bulk_resolve(quotas, cu.tolist(), cc.tolist(), KEYS)
        level = np.zeros(m, dtype=np.int64)
        for t, k in KEY_FOR_TYPE.items():
            level = np.where(qt == t, np.asarray(res.levels[k]), level)
        use_u = np.array([uses[lv][0] for lv in range(9)])[level]
        use_c = np.array([uses[lv][1] for lv in range(9)])[level]
        batch = pd.DataFrame({"quota_type": qt, "user": np.where(use_u, cu, None),
                              "client_id": np.where(use_c, cc, None)})
        found = pd.concat([found, batch], ignore_index=True).drop_duplicates(ignore_index=True)
        m *= 2
    found = found.iloc[:n].reset_index(drop=True)
    for col in ("user", "client_id"):  # pandas may have made None NaN: None it is
        found[col] = found[col].astype(object).where(found[col].notna(), None)
    return found


def bucket_quotas(quotas: dict, buckets: pd.DataFrame) -> np.ndarray:
    """Each bucket's limit (NaN: unlimited) as the pipeline resolves it."""
    from pipeline.resolve import KEYS
    from pipeline.schema import KEY_FOR_TYPE
    from quota_core.domain.bulk import bulk_resolve_buckets

    res = bulk_resolve_buckets(quotas, buckets["user"].tolist(), buckets["client_id"].tolist(),
                               KEYS)
    out = np.full(len(buckets), np.nan)
    qt = buckets["quota_type"].to_numpy()
    for t, k in KEY_FOR_TYPE.items():
        lv = np.asarray(res.levels[k])
        out = np.where((qt == t) & (lv > 0), np.asarray(res.values[k], dtype=float), out)
    return out


def snapshot_table(sets: list[tuple[datetime, dict]]):
    import pyarrow as pa

    from pipeline.schema import QUOTA_COLUMNS, arrow_schema
    from pipeline.snapshots import entity_json

    names: dict = {}
    ts, entity, key, value = [], [], [], []
    for when, quotas in sets:
        for e, q in quotas.items():
            text = names.get(e) or names.setdefault(e, entity_json(e))
            for k, v in sorted(q.items()):
                ts.append(when)
                entity.append(text)
                key.append(k)
                value.append(float(v))
    return pa.table({"ts": ts, "entity": entity, "key": key, "value": value},
                    schema=arrow_schema(QUOTA_COLUMNS))


def generate(out: str, samples: int, buckets: int, entries: int, brokers: int, hours: float,
             seed: int) -> dict:
    """Write ``out/usage/date=.../part-NNNNN.parquet`` (one file per scrape, as the collector
    does) and ``out/quotas/date=.../part-0.parquet``. Vectorised numpy; returns a summary."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from bench_dashboard import synthetic_quotas
    from pipeline.columns import throttle_caps
    from pipeline.schema import KEY_FOR_TYPE, USAGE_COLUMNS, arrow_schema
    from quota_core.throttling.throttle import rate_window_ms

    started = time.perf_counter()
    rng = np.random.default_rng(seed)
    before = synthetic_quotas(entries)
    after = changed_set(before, CHANGED, seed + 1)
    table = make_buckets(before, buckets, rng)
    nb, B = brokers, len(table)
    steps = max(2, math.ceil(samples / (B * nb)))
    step_s = max(1, int(hours * 3600 // steps))
    change_step = steps // 2
    q0, q1 = bucket_quotas(before, table), bucket_quotas(after, table)
    qt_names = np.array(list(KEY_FOR_TYPE), dtype=object)
    qt_code = pd.Categorical(table["quota_type"], categories=qt_names).codes.astype(np.int64)
    keys = np.array([KEY_FOR_TYPE[t] for t in qt_names], dtype=object)[qt_code]
    unlimited_scale = {"producer_byte_rate": 1e6, "consumer_byte_rate": 2e6,
                       "request_percentage": 20.0, "controller_mutation_rate": 2.0}
    limited = ~np.isnan(q0)
    scale = np.where(limited, q0, np.array([unlimited_scale[k] for k in keys]))
    base = scale * np.where(limited, rng.lognormal(np.log(0.5), 0.5, B),
                            rng.lognormal(0.0, 1.0, B))  # per-broker mean rate
    share = rng.gamma(6.0, size=(B, nb))
    share = share / share.sum(axis=1, keepdims=True) * nb  # uneven partition leadership
    amp, phase = rng.uniform(0.1, 0.5, B), rng.uniform(0.0, 1.0, B)

    # Slots (step, broker, bucket) in time order; drop a random few to hit `samples` exactly.
    total = steps * nb * B
    keep = np.ones(total, dtype=bool)
    if total > samples:
        keep[rng.choice(total, total - samples, replace=False)] = False
    slot = np.flatnonzero(keep)
    del keep
    bucket = slot % B
    broker = (slot // B) % nb
    step = slot // (B * nb)
    del slot
    t_s = step.astype(float) * step_s
    rate = (base[bucket] * share[bucket, broker]
            * (1 + amp[bucket] * np.sin(2 * np.pi * (t_s / 86400 + phase[bucket])))
            * rng.lognormal(0.0, 0.12, len(bucket))
            * np.where(rng.random(len(bucket)) < 0.02, 2.5, 1.0))
    quota = np.where(step >= change_step, q1[bucket], q0[bucket])
    with np.errstate(invalid="ignore", divide="ignore"):
        over = ~np.isnan(quota) & (rate > quota)
        raw = np.floor((rate - quota) / quota * rate_window_ms() + 0.5)
    caps = throttle_caps()
    cap_of_type = np.array([caps[KEY_FOR_TYPE[t]] or np.inf for t in qt_names])
    raw = np.minimum(raw, cap_of_type[qt_code][bucket])
    throttle = np.where(over, raw * rng.uniform(0.9, 1.1, len(bucket)), np.nan)
    del quota, raw, over

    idx = pa.array(bucket)
    start_us = int(START.timestamp() * 1_000_000)
    usage = pa.table({
        "ts": pa.array(start_us + step * (step_s * 1_000_000)).cast(pa.timestamp("us", tz="UTC")),
        "broker": pa.array([f"broker-{i}" for i in range(nb)]).take(pa.array(broker)),
        "quota_type": pa.array(qt_names.tolist()).take(pa.array(qt_code)).take(idx),
        "user": pa.array(table["user"].tolist(), pa.string(), from_pandas=True).take(idx),
        "client_id": pa.array(table["client_id"].tolist(), pa.string(),
                              from_pandas=True).take(idx),
        "rate": pa.array(rate),
        "throttle_ms": pa.array(throttle, from_pandas=True),  # NaN -> null, as the collector
        "interval_s": pa.array(np.full(len(bucket), float(step_s))),
    }, schema=arrow_schema(USAGE_COLUMNS))
    bounds = np.searchsorted(step, np.arange(steps + 1))
    for s in range(steps):
        day = datetime.fromtimestamp(START.timestamp() + s * step_s, timezone.utc)
        part = Path(out) / "usage" / f"date={day:%Y-%m-%d}"
        part.mkdir(parents=True, exist_ok=True)
        pq.write_table(usage.slice(bounds[s], bounds[s + 1] - bounds[s]),
                       part / f"part-{s:05d}.parquet")
    change_at = datetime.fromtimestamp(START.timestamp() + change_step * step_s, timezone.utc)
    for when, quotas in ((START, before), (change_at, after)):
        part = Path(out) / "quotas" / f"date={when:%Y-%m-%d}"
        part.mkdir(parents=True, exist_ok=True)
        pq.write_table(snapshot_table([(when, quotas)]), part / f"part-{when:%H%M%S}.parquet")
    size = sum(f.stat().st_size for f in Path(out).rglob("*.parquet"))
    return {"samples": len(bucket), "buckets": B, "entries": len(before), "steps": steps,
            "step_s": step_s, "brokers": nb, "bytes": size,
            "over_share": float(np.mean(~np.isnan(throttle))),
            "limited_share": float(np.mean(limited)),
            "seconds": time.perf_counter() - started}


# -- memory ----------------------------------------------------------------------------------

def _status_kib(pid: int, field: str) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def reset_peak(pid: int) -> bool:
    """Reset the process's VmHWM (peak RSS) to its current RSS (Linux: clear_refs 5)."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def peak_kib(pid: int) -> int | None:
    return _status_kib(pid, "VmHWM")


def jvm_pid() -> int | None:
    """The driver JVM: the java process among this process's descendants."""
    children: dict[int, list[int]] = {}
    comm: dict[int, str] = {}
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            stat = (p / "stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(p.name))
        comm[int(p.name)] = name
    todo = list(children.get(os.getpid(), []))
    while todo:
        pid = todo.pop()
        if comm.get(pid) == "java":
            return pid
        todo.extend(children.get(pid, []))
    return None


def mib(kib: int | None) -> str:
    return "n/a" if kib is None else f"{kib / 1024:,.0f} MiB"


# -- the runs --------------------------------------------------------------------------------

def start_spark(driver_memory: str | None):
    import warnings

    from pipeline.analyze import QUIET
    from pipeline.session import get_session

    warnings.filterwarnings("ignore", "PySpark does not yet fully support pandas", FutureWarning)
    conf = {**QUIET, "spark.master": "local[2]"}
    if driver_memory:
        conf["spark.driver.memory"] = driver_memory
    return get_session(conf=conf, with_kafka=False)


def floor(spark, data: str, out: str) -> None:
    from pyspark.sql import functions as F

    (spark.read.parquet(f"{data}/usage")
     .groupBy("user", "client_id", "quota_type")
     .agg(F.sum("interval_s").alias("interval_s"), F.max("rate").alias("max_rate"),
          F.count(F.lit(1)).alias("samples"))
     .write.mode("overwrite").parquet(out))


def copy_floor(spark, data: str, out: str) -> None:
    """Scan + write every row unchanged: the least a job that writes a per-sample table (as
    ``windows``) can cost."""
    spark.read.parquet(f"{data}/usage").write.mode("overwrite").parquet(out)


class Measured:
    """Best-of-N wall time of ``fn``, with the peak RSS over its runs of the driver JVM and of
    this process (VmHWM, reset before each run)."""

    def __init__(self, jvm: int | None):
        self.jvm = jvm

    def __call__(self, runs: int, fn):
        best, phases, jvm_peak, py_peak = math.inf, None, None, None
        for _ in range(runs):
            if self.jvm is not None:
                reset_peak(self.jvm)
            reset_peak(os.getpid())
            started = time.perf_counter()
            marks = fn()
            took = time.perf_counter() - started
            if self.jvm is not None:
                jvm_peak = max(jvm_peak or 0, peak_kib(self.jvm) or 0)
            py_peak = max(py_peak or 0, peak_kib(os.getpid()) or 0)
            if took < best:
                best, phases = took, marks
        return best, phases, jvm_peak, py_peak


class Inside:
    """Times three steps inside the job by wrapping the functions it calls (in this process
    only; nothing in the pipeline changes): folding snapshots into versions (two small Spark
    jobs + parsing on the driver), the distinct buckets (one Spark job over every sample), and
    resolving them on the driver (resolve.resolve_buckets, Python)."""

    def __init__(self):
        import pipeline.job as job
        import pipeline.resolve as resolve

        self.times: dict[str, float] = {}
        for module, name, label in ((job, "versions_from_rows", "versions"),
                                    (job, "distinct_buckets", "distinct buckets"),
                                    (resolve, "resolve_buckets", "driver resolution")):
            setattr(module, name, self._timed(getattr(module, name), label))

    def _timed(self, fn, label):
        def wrapper(*args, **kwargs):
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.times[label] = self.times.get(label, 0.0) + time.perf_counter() - started
        return wrapper


def _label(line: str) -> str:
    """A job progress line as a short phase name."""
    if line.startswith("reading"):
        return "read + quota versions"
    if "resolving" in line:
        return "distinct buckets + resolve"
    return line.removeprefix("writing ") + " (compute + write)"


def spark_job(spark, data: str, out: str, what_if: dict | None, inside: Inside):
    from pipeline.job import run

    marks: list[tuple[float, str]] = []

    def progress(line: str) -> None:
        marks.append((time.perf_counter(), line))
        log(f"    job: {line}")

    inside.times.clear()
    marks.append((time.perf_counter(), "start"))
    run(spark, data, out, what_if=what_if, overwrite=True, progress=progress)
    marks.append((time.perf_counter(), "done"))
    # Each interval is the work its opening line announced.
    phases = [(_label(a[1]), b[0] - a[0]) for a, b in zip(marks, marks[1:]) if a[1] != "start"]
    return phases, dict(inside.times)


def pandas_worker(data: str, out: str) -> dict:
    """In a fresh process: the pandas analysis, its phases and this process's peak RSS."""
    import warnings

    warnings.filterwarnings("ignore")
    from benchmarks.pandas_analysis import run

    started = time.perf_counter()
    tables, times = run(data, out)
    took = time.perf_counter() - started
    return {"seconds": took, "phases": times,
            "rows": {k: len(v) for k, v in tables.items()},
            "peak_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}


def in_fresh_process(fn, *args):
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
        return pool.submit(fn, *args).result()


# -- agreement -------------------------------------------------------------------------------

def _plain(v):
    """Parquet nested values (numpy arrays of dicts) as lists/dicts, floats to 9 digits."""
    if isinstance(v, np.ndarray):
        v = v.tolist()
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in sorted(v.items())}
    if isinstance(v, float):
        return None if math.isnan(v) else float(f"{v:.9g}")
    if v is None or v is pd.NA:
        return None
    return v


def compare(name: str, spark_df: pd.DataFrame, pandas_df: pd.DataFrame, keys: list[str]) -> bool:
    """Row by row on ``keys`` (nulls match nulls): floats within 1e-9 relative, the rest
    equal. Prints one line, and the first few differences."""
    a = spark_df.reset_index(drop=True)
    b = pandas_df.reset_index(drop=True)
    for df in (a, b):
        for k in keys:
            if df[k].dtype != object:
                df[k] = df[k].astype(object)
            df[k] = df[k].where(df[k].notna(), "\0null")
    m = a.merge(b, on=keys, how="outer", suffixes=("_s", "_p"), indicator=True)
    only = (m["_merge"] != "both").sum()
    m = m[m["_merge"] == "both"]
    bad: dict[str, int] = {}
    examples = []
    for col in [c for c in a.columns if c not in keys]:
        x, y = m[f"{col}_s"], m[f"{col}_p"]
        numeric = (pd.api.types.is_numeric_dtype(x.dtype) and pd.api.types.is_numeric_dtype(y.dtype)
                   and not pd.api.types.is_bool_dtype(x.dtype))
        if numeric:
            xs = x.to_numpy(dtype=float, na_value=np.nan)
            ys = y.to_numpy(dtype=float, na_value=np.nan)
            ok = np.isclose(xs, ys, rtol=1e-9, atol=1e-9, equal_nan=True)
        else:
            ok = np.array([_plain(p) == _plain(q) for p, q in zip(x, y)], dtype=bool)
        if (~ok).any():
            bad[col] = int((~ok).sum())
            i = int(np.flatnonzero(~ok)[0])
            examples.append(f"      {col}: spark {x.iloc[i]!r} vs pandas {y.iloc[i]!r} at "
                            f"{tuple(m[k].iloc[i] for k in keys)}")
    agree = not only and not bad and len(a) == len(b)
    print(f"    {name:<10} spark {len(a):>10,} rows, pandas {len(b):>10,}: "
          + ("all agree" if agree else
             f"{only} rows on one side only; differing values: {bad or 'none'}"), flush=True)
    for line in examples[:5]:
        print(line)
    return agree


def _utc_us(s: pd.Series) -> pd.Series:
    s = pd.to_datetime(s, utc=True)
    return s.dt.as_unit("us").astype("int64")


def check_agreement(spark_out: Path, pandas_out: Path, buckets_sample: int, seed: int) -> bool:
    import pyarrow.dataset as ds

    ok = True
    for name, keys in (("by_client", ["user", "client_id", "key"]),
                       ("by_entry", ["source", "level", "key"]),
                       ("sizing", ["source", "level", "key"])):
        s = pd.read_parquet(spark_out / name)
        p = pd.read_parquet(pandas_out / f"{name}.parquet")
        ok &= compare(name, s, p, keys)
    # windows: every row of a sample of buckets.
    clients = pd.read_parquet(pandas_out / "by_client.parquet", columns=["user", "client_id"])
    pick = clients.sample(min(buckets_sample, len(clients)), random_state=seed)
    users = [u for u in pick["user"].dropna().unique().tolist()]
    cids = [c for c in pick["client_id"].dropna().unique().tolist()]
    flt = ds.field("user").isin(users) | ds.field("client_id").isin(cids)
    frames = []
    for path in (spark_out / "windows", pandas_out / "windows.parquet"):
        df = ds.dataset(str(path), format="parquet").to_table(filter=flt).to_pandas()
        df = df.merge(pick.drop_duplicates(), on=["user", "client_id"], how="inner")
        df["ts"] = _utc_us(df["ts"])
        frames.append(df)
    ok &= compare("windows", frames[0], frames[1],
                  ["ts", "broker", "quota_type", "user", "client_id"])
    return ok


# -- incremental: rollups after one new hour vs the whole re-analysis ------------------------

INCREMENTAL_TARGET = 0.1  # analyze after 1 new hour, against the full re-analysis
FLAT_TARGET = 1.25  # the update after 1 new hour, against the shortest history's


def _timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def incremental(spark, base: Path, hours_list: list[int], buckets: int, entries: int,
                brokers: int, step_s: int, seed: int) -> dict[int, dict]:
    """Per history length: build the rollups of all but the last hour (not timed), put the
    last hour's files back, then time ``analyze`` with the rollups (reads the new hour
    only), again with nothing new, and the whole re-analysis (``--no-rollups``)."""
    from pipeline.job import run

    out: dict[int, dict] = {}
    for hours in hours_list:
        d = base / f"inc-{hours}h"
        history = d / "history"
        samples = buckets * brokers * hours * 3600 // step_s
        log(f"incremental, {hours} h history: generating {samples:,} samples")
        info = in_fresh_process(generate, str(history), samples, buckets, entries, brokers,
                                float(hours), seed)
        per_hour = 3600 // info["step_s"]
        held = d / "held"
        last = [f for f in sorted((history / "usage").rglob("part-*.parquet"))
                if int(f.stem.split("-")[1]) >= (hours - 1) * per_hour]
        for f in last:
            target = held / f.relative_to(history)
            target.parent.mkdir(parents=True, exist_ok=True)
            f.rename(target)
        rollups = str(d / "rollups")
        build = _timed(lambda: run(spark, str(history), str(d / "t0"), windows=False,
                                   rollups_dir=rollups))
        log(f"  rollups of {hours - 1} h built in {build:.1f} s (not compared)")
        for f in last:
            (held / f.relative_to(history)).rename(f)
        marks: list[float] = []

        def mark(line: str) -> None:  # the update ends with its summary line
            if line.startswith("rollups"):
                marks.append(time.perf_counter())

        started = time.perf_counter()
        new_hour = _timed(lambda: run(spark, str(history), str(d / "t1"), windows=False,
                                      rollups_dir=rollups, progress=mark))
        update = marks[-1] - started if marks else math.nan
        started = time.perf_counter()
        nothing = _timed(lambda: run(spark, str(history), str(d / "t2"), windows=False,
                                     rollups_dir=rollups, progress=mark))
        nothing_update = marks[-1] - started if len(marks) > 1 else math.nan
        whole = _timed(lambda: run(spark, str(history), str(d / "t3"), windows=False))
        out[hours] = {"samples": info["samples"], "new_hour": new_hour, "nothing": nothing,
                      "whole": whole, "build": build, "update": update,
                      "nothing_update": nothing_update,
                      "hour_samples": info["samples"] // hours}
        log(f"  after 1 new hour {new_hour:.1f} s (rollups updated in {update:.1f} s), "
            f"nothing new {nothing:.1f} s (update {nothing_update:.1f} s), whole "
            f"re-analysis {whole:.1f} s")
        shutil.rmtree(d, ignore_errors=True)
    return out


def incremental_main(a) -> int:
    hours_list = sorted({int(h) for h in a.incremental_hours.split(",") if h.strip()})
    base = Path(tempfile.mkdtemp(prefix="bench-incremental-"))
    try:
        spark = start_spark(a.driver_memory)
        log(f"Spark {spark.version}, master {spark.sparkContext.master}")
        results = incremental(spark, base, hours_list, a.buckets, a.entries, a.brokers,
                              a.step_s, a.seed)
        spark.stop()
    finally:
        shutil.rmtree(base, ignore_errors=True)
    load = os.getloadavg()
    print()
    print(f"== incremental analysis: local[2] on {os.cpu_count()} cores, {a.buckets:,} "
          f"buckets x {a.brokers} brokers, a sample each every {a.step_s} s, "
          f"{a.entries:,} quota entries; load average {load[0]:.1f}/{load[1]:.1f}/"
          f"{load[2]:.1f} (above 2: other work shared the 2 cores)")
    first = results[hours_list[0]]
    for hours, r in results.items():
        ratio = r["new_hour"] / r["whole"]
        flat = r["update"] / first["update"]
        print(f"{hours:>4} h, {r['samples']:>11,} samples ({r['hour_samples']:,} per hour): "
              f"after 1 new hour {r['new_hour']:6.1f} s, nothing new {r['nothing']:6.1f} s, "
              f"whole re-analysis {r['whole']:6.1f} s")
        print(f"      the command after 1 new hour / the whole re-analysis of the same history "
              f"{ratio:.2f}x (target <= {INCREMENTAL_TARGET}x: "
              f"{'met' if ratio <= INCREMENTAL_TARGET else 'NOT met'})")
        print(f"      of which updating the rollups: {r['update']:.1f} s after the new hour "
              f"({flat:.2f}x the {hours_list[0]} h history's; target <= {FLAT_TARGET}x: "
              f"{'met' if flat <= FLAT_TARGET else 'NOT met'}), {r['nothing_update']:.1f} s "
              f"with nothing new; the rest: the tables, from each day's merged rollups")
    if a.json:
        for hours, r in results.items():
            print(json.dumps({"hours": hours, "samples": r["samples"],
                              "update_s": round(r["update"], 3),
                              "command_s": round(r["new_hour"], 3),
                              "full_s": round(r["whole"], 3)}))
    print(f"wall time {time.perf_counter() - _t0:.0f} s")
    return 0


# -- main ------------------------------------------------------------------------------------

def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--samples", default="1000000,10000000",
                   help="usage samples, one size or several separated by commas")
    p.add_argument("--buckets", type=int, default=100_000)
    p.add_argument("--entries", type=int, default=100_000, help="quota entries")
    p.add_argument("--brokers", type=int, default=3)
    p.add_argument("--hours", type=float, default=48.0, help="history span")
    p.add_argument("--skip-pandas-10m", action="store_true",
                   help="no pandas run at the largest size (when it is 10M or more)")
    p.add_argument("--what-if", action="store_true",
                   help="the job also computes what_if (pandas does not)")
    p.add_argument("--runs", type=int, default=1, help="timed runs per figure (best of)")
    p.add_argument("--driver-memory", help="spark.driver.memory (default: Spark's, 1g)")
    p.add_argument("--windows-buckets", type=int, default=200,
                   help="buckets whose windows rows are compared")
    p.add_argument("--seed", type=int, default=9)
    p.add_argument("--keep", help="generate into this directory and keep it")
    p.add_argument("--incremental", action="store_true",
                   help="instead: analyze after 1 new hour (rollups) vs the whole "
                        "re-analysis, for --incremental-hours histories")
    p.add_argument("--incremental-hours", default="12,48,192")
    p.add_argument("--json", action="store_true",
                   help="with --incremental: also a JSON object per history length "
                        "(hours, samples, update_s, command_s, full_s)")
    p.add_argument("--step-s", type=int, default=300,
                   help="with --incremental: seconds between a bucket's samples")
    a = p.parse_args()
    if a.incremental:
        return incremental_main(a)
    sizes = sorted({int(float(s)) for s in a.samples.split(",") if s.strip()})
    if not sizes or min(sizes) < 1 or a.buckets < 1 or a.entries < 10 or a.runs < 1:
        p.error("--samples, --buckets, --runs must be positive, --entries at least 10")

    base = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="bench-pipeline-"))
    base.mkdir(parents=True, exist_ok=True)
    results: dict[int, dict] = {n: {} for n in sizes}
    all_agree = True
    try:
        # Data, each size in its own process (so the driver's memory is the job's only).
        for n in sizes:
            log(f"generating {n:,} samples, {a.buckets:,} buckets, {a.entries:,} entries")
            info = in_fresh_process(generate, str(base / f"s{n}" / "history"), n, a.buckets,
                                    a.entries, a.brokers, a.hours, a.seed)
            results[n]["data"] = info
            log(f"  {info['samples']:,} samples in {info['steps']} scrapes every "
                f"{info['step_s']} s on {info['brokers']} brokers, {info['buckets']:,} buckets "
                f"({info['limited_share']:.0%} with a quota), {info['over_share']:.1%} of samples "
                f"over quota; {info['bytes'] / 2**20:,.0f} MiB of Parquet; "
                f"{info['seconds']:.1f} s")

        # pandas, each size in a fresh process.
        for n in sizes:
            if a.skip_pandas_10m and n == sizes[-1] and n >= 10_000_000:
                log(f"pandas at {n:,}: skipped (--skip-pandas-10m)")
                continue
            log(f"pandas analysis, {n:,} samples (one process)")
            r = in_fresh_process(pandas_worker, str(base / f"s{n}" / "history"),
                                 str(base / f"s{n}" / "pandas-out"))
            results[n]["pandas"] = r
            log(f"  {r['seconds']:.1f} s, peak RSS {mib(r['peak_kib'])}; " + ", ".join(
                f"{k} {v:.1f} s" for k, v in r["phases"].items()))

        log("starting Spark (local[2])")
        spark = start_spark(a.driver_memory)
        jvm = jvm_pid()
        heap = spark.sparkContext.getConf().get("spark.driver.memory", "1g (default)")
        if jvm is None:
            log("  driver JVM not found among this process's children: no JVM memory figures")
        elif not reset_peak(jvm):
            log("  cannot reset the JVM's VmHWM: its figures are peaks since start")
        log(f"  Spark {spark.version}, master {spark.sparkContext.master}, driver memory "
            f"{heap}, JVM pid {jvm}")
        measure = Measured(jvm)
        inside = Inside()
        what_if = None
        if a.what_if:
            from bench_dashboard import synthetic_quotas
            what_if = changed_set(synthetic_quotas(a.entries), 0.10, a.seed + 2)

        first = str(base / f"s{sizes[0]}")
        log("warm-up: floor on the smallest size (not timed)")
        floor(spark, f"{first}/history", f"{first}/floor-out")
        for n in sizes:
            d = str(base / f"s{n}")
            log(f"floor, {n:,} samples: scan + group-by + write")
            secs, _, jvm_kib, _ = measure(a.runs, lambda: floor(spark, f"{d}/history",
                                                                f"{d}/floor-out"))
            results[n]["floor"] = {"seconds": secs, "jvm_kib": jvm_kib}
            log(f"  {secs:.1f} s, driver JVM peak {mib(jvm_kib)}")
            log(f"copy, {n:,} samples: scan + write every row")
            secs, _, jvm_kib, _ = measure(a.runs, lambda: copy_floor(spark, f"{d}/history",
                                                                     f"{d}/copy-out"))
            results[n]["copy"] = {"seconds": secs, "jvm_kib": jvm_kib}
            log(f"  {secs:.1f} s, driver JVM peak {mib(jvm_kib)}")
            shutil.rmtree(f"{d}/copy-out", ignore_errors=True)
            log(f"full analysis, {n:,} samples: pipeline.job.run")
            secs, phases, jvm_kib, py_kib = measure(
                a.runs, lambda: spark_job(spark, f"{d}/history", f"{d}/spark-out", what_if,
                                          inside))
            results[n]["job"] = {"seconds": secs, "phases": phases, "jvm_kib": jvm_kib,
                                 "py_kib": py_kib}
            log(f"  {secs:.1f} s, driver JVM peak {mib(jvm_kib)}, Python driver peak "
                f"{mib(py_kib)}")

        log("agreement, Spark vs pandas")
        for n in sizes:
            if "pandas" not in results[n]:
                continue
            print(f"  {n:,} samples:", flush=True)
            all_agree &= check_agreement(base / f"s{n}" / "spark-out",
                                         base / f"s{n}" / "pandas-out", a.windows_buckets,
                                         a.seed)
        spark.stop()
    finally:
        if not a.keep:
            shutil.rmtree(base, ignore_errors=True)

    print()
    print(f"== results: local[2] on {os.cpu_count()} cores, {a.buckets:,} buckets, "
          f"{a.entries:,} quota entries, driver memory {heap}"
          + (", what_if included in the job" if a.what_if else ""))
    for n in sizes:
        r = results[n]
        fl, job = r["floor"]["seconds"], r["job"]["seconds"]
        print(f"{n:>11,} samples")
        print(f"    floor (scan + group-by + write)      {fl:8.1f} s   driver JVM peak "
              f"{mib(r['floor']['jvm_kib'])}")
        print(f"    full analysis (pipeline.job.run)     {job:8.1f} s   driver JVM peak "
              f"{mib(r['job']['jvm_kib'])}, Python driver peak {mib(r['job']['py_kib'])}")
        steps, inner = r["job"]["phases"]
        print("      phases (from its progress lines): "
              + ", ".join(f"{name} {s:.1f} s" for name, s in steps))
        print("      of which: " + ", ".join(f"{name} {s:.1f} s" for name, s in inner.items()))
        print(f"    copy (scan + write every row)        {r['copy']['seconds']:8.1f} s   "
              f"driver JVM peak {mib(r['copy']['jvm_kib'])}")
        ratio = job / r["copy"]["seconds"]
        print(f"    analysis / copy: {ratio:.2f}x (target <= {COPY_TARGET}x: "
              f"{'met' if ratio <= COPY_TARGET else 'NOT met'}); analysis / floor: "
              f"{job / fl:.2f}x")
        if "pandas" in r:
            pd_s = r["pandas"]["seconds"]
            speed = pd_s / job
            target = " (information)"
            print(f"    pandas, one process                  {pd_s:8.1f} s   peak RSS "
                  f"{mib(r['pandas']['peak_kib'])}")
            print("      phases: " + ", ".join(f"{k} {v:.1f} s"
                                               for k, v in r["pandas"]["phases"].items()))
            how = (f"Spark {speed:.2f}x faster" if speed >= 1 else
                   f"Spark {1 / speed:.2f}x slower (speed-up {speed:.2f}x)")
            print(f"    Spark vs pandas: {how}{target}")
    checked = [n for n in sizes if "pandas" in results[n]]
    print("agreement Spark vs pandas: " + (
        "not checked (no pandas run)" if not checked else
        f"all agree ({', '.join(f'{n:,}' for n in checked)} samples)" if all_agree else
        "DIFFERENCES (above)"))
    print(f"wall time {time.perf_counter() - _t0:.0f} s")
    return 0 if all_agree else 1


if __name__ == "__main__":
    sys.exit(main())
