"""The analysis as a library call: inputs in, the five tables out (no argv, no printing).

:func:`run` is what ``pipeline.analyze`` (the command line) and the tests call; it reads,
resolves, derives the tables and writes them all or nothing.
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping

from quota_core.entities import Entity

from . import analysis
from .errors import PipelineError
from .output import WINDOWS_OPTIONS, check_out, staged, write_table
from .readers import TimeRange, check_buckets, read_quota_rows, read_usage
from .resolve import distinct_buckets, resolution_table, with_key
from .snapshots import QuotaVersions, single_version, versions_from_rows, with_version
from .spark_errors import translating

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["Inputs", "load_inputs", "build_windows", "derived_tables", "build_tables", "run"]

QuotaSet = Mapping[Entity, Mapping[str, float]]
#: The scratch table under the output's staging directory, removed before it is renamed
#: (not "_..." or ".…": Spark would not read it back).
LEVELS = "per_level-scratch"


@dataclass
class Inputs:
    samples: "DataFrame"        # with ``version``
    versions: QuotaVersions
    where: str                  # the usage path or topic, for messages
    when: TimeRange


def load_inputs(spark: "SparkSession", usage: str, when: TimeRange,
                quotas: QuotaSet | None = None, kafka_bootstrap: str | None = None,
                kafka_client: Mapping[str, str] | None = None) -> Inputs:
    """Samples and quota versions from a directory (``DIR/usage``, ``DIR/quotas``) or a topic
    (``kafka:TOPIC``). ``quotas`` (from --quotas FILE) replaces any snapshots."""
    if usage.startswith("kafka:"):
        from .kafka_source import read_topic

        if not kafka_bootstrap:
            raise PipelineError(f"--usage {usage} needs --kafka-bootstrap HOST:PORT.",
                                path=usage)
        samples, quota_rows = read_topic(spark, kafka_bootstrap, usage.removeprefix("kafka:"),
                                         when, kafka_client)
        where = usage_where = usage
    else:
        base = usage.rstrip("/")
        if "://" not in base:  # over Spark Connect the *server* would resolve a relative path
            base = str(Path(base).resolve())
        usage_where = f"{base}/usage"
        samples = read_usage(spark, usage_where, when)
        quota_dir = where = f"{base}/quotas"
        quota_rows = None
        if quotas is None:
            if "://" not in base and not Path(quota_dir).exists():
                raise PipelineError(f"{quota_dir}: no quota snapshots; give --quotas FILE (an "
                                    f"export) instead.", path=quota_dir)
            quota_rows = read_quota_rows(spark, quota_dir, when)
    if quotas is not None:
        versions = single_version(quotas)
    else:
        if quota_rows is None:
            raise PipelineError(f"{usage}: no quota snapshots; give --quotas FILE.", path=usage)
        versions = versions_from_rows(quota_rows, where)
    return Inputs(with_version(samples, versions), versions, usage_where, when)


def build_windows(inputs: Inputs) -> tuple["DataFrame", "pd.DataFrame"]:
    """The windows table (lazily) and the buckets' names (analysis.bucket_names). One job runs
    here: the distinct buckets, which are checked (any samples? known quota types?) and
    resolved on the driver."""
    keyed = with_key(inputs.samples)
    with translating(inputs.where):
        buckets = distinct_buckets(keyed)
    check_buckets(buckets, inputs.where, inputs.when)
    table = resolution_table(buckets, inputs.versions)
    win = analysis.windows(keyed, buckets, inputs.versions, table)
    return win, analysis.bucket_names(buckets, table)


def summary_levels(win: "DataFrame", names: "pd.DataFrame") -> "DataFrame":
    """analysis.per_level of ``win``, lazily, with ``names`` from :func:`build_windows`."""
    frame = win.sparkSession.createDataFrame(names, analysis.NAMES_SCHEMA)
    return analysis.per_level(win, analysis.bucket_id(frame), frame)


def derived_tables(win: "DataFrame", levels: "DataFrame", what_if: QuotaSet | None = None
                   ) -> dict[str, "DataFrame"]:
    """The tables computed from ``windows`` and its :func:`analysis.per_level` summary,
    lazily, in the order they are written."""
    tables = {"by_client": analysis.by_client(levels), "by_entry": analysis.by_entry(levels)}
    if what_if is not None:
        tables["what_if"] = analysis.what_if(win, single_version(what_if))
    tables["sizing"] = analysis.sizing(levels)
    return tables


def build_tables(inputs: Inputs, what_if: QuotaSet | None = None) -> dict[str, "DataFrame"]:
    """Every table, lazily (each derived one computes ``windows`` again; :func:`run` instead
    derives them from the windows it wrote)."""
    win, names = build_windows(inputs)
    return {"windows": win, **derived_tables(win, summary_levels(win, names), what_if)}


def run(spark: "SparkSession", usage: str, out: str, when: TimeRange = TimeRange(),
        quotas: QuotaSet | None = None, what_if: QuotaSet | None = None,
        kafka_bootstrap: str | None = None, overwrite: bool = False,
        progress: Callable[[str], None] = lambda line: None,
        kafka_client: Mapping[str, str] | None = None) -> Path:
    """Read, resolve, analyse, write: the whole job. Returns the output directory."""
    path = check_out(out, overwrite)
    progress(f"reading {usage} ({when.describe()})")
    inputs = load_inputs(spark, usage, when, quotas, kafka_bootstrap, kafka_client)
    progress(f"{len(inputs.versions)} quota version(s); resolving buckets")
    win, names = build_windows(inputs)
    with staged(out, overwrite) as tmp:
        written = write_table(win, tmp, "windows", progress, WINDOWS_OPTIONS)
        # The other tables read windows back, only the columns each needs: cheaper than
        # computing it again, or caching every sample (more than a default 1g driver holds).
        with translating(f"reading {written}"):
            win = spark.read.parquet(written)
        # per_level is read three times: written once (small) beside the tables, and
        # removed before they appear. (A cache of it, rates arrays and all, read slower.)
        levels_at = write_table(summary_levels(win, names), tmp, LEVELS, progress)
        try:
            with translating(f"reading {levels_at}"):
                levels = spark.read.parquet(levels_at)
            for name, df in derived_tables(win, levels, what_if).items():
                write_table(df, tmp, name, progress)
        finally:
            shutil.rmtree(levels_at, ignore_errors=True)
    return path
