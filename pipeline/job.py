"""The analysis as a library call: inputs in, the five tables out (no argv, no printing).

:func:`run` is what ``pipeline.analyze`` (the command line) and the tests call; it reads,
resolves, derives the tables and writes them all or nothing.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping

from quota_core.entities import Entity

from . import analysis
from .errors import PipelineError
from .output import check_out, write_tables
from .readers import TimeRange, check_buckets, read_quota_rows, read_usage
from .resolve import distinct_buckets, with_key
from .snapshots import QuotaVersions, single_version, versions_from_rows, with_version
from .spark_errors import translating

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["Inputs", "load_inputs", "build_tables", "run"]

QuotaSet = Mapping[Entity, Mapping[str, float]]


@dataclass
class Inputs:
    samples: "DataFrame"        # with ``version``
    versions: QuotaVersions
    where: str                  # the usage path or topic, for messages
    when: TimeRange


def load_inputs(spark: "SparkSession", usage: str, when: TimeRange,
                quotas: QuotaSet | None = None, kafka_bootstrap: str | None = None) -> Inputs:
    """Samples and quota versions from a directory (``DIR/usage``, ``DIR/quotas``) or a topic
    (``kafka:TOPIC``). ``quotas`` (from --quotas FILE) replaces any snapshots."""
    if usage.startswith("kafka:"):
        from .kafka_source import read_topic

        if not kafka_bootstrap:
            raise PipelineError(f"--usage {usage} needs --kafka-bootstrap HOST:PORT.",
                                path=usage)
        samples, quota_rows = read_topic(spark, kafka_bootstrap, usage.removeprefix("kafka:"),
                                         when)
        where = usage_where = usage
    else:
        base = usage.rstrip("/")
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


def build_tables(inputs: Inputs, what_if: QuotaSet | None = None) -> dict[str, "DataFrame"]:
    """The tables, lazily; ``windows`` is cached because every other table reads it.

    One job runs here: the distinct buckets, which are checked (any samples? known quota
    types?) and resolved on the driver."""
    keyed = with_key(inputs.samples)
    with translating(inputs.where):
        buckets = distinct_buckets(keyed)
    check_buckets(buckets, inputs.where, inputs.when)
    win = analysis.windows(keyed, buckets, inputs.versions).cache()
    tables = {"windows": win, "by_client": analysis.by_client(win),
              "by_entry": analysis.by_entry(win)}
    if what_if is not None:
        tables["what_if"] = analysis.what_if(win, single_version(what_if))
    tables["sizing"] = analysis.sizing(win)
    return tables


def run(spark: "SparkSession", usage: str, out: str, when: TimeRange = TimeRange(),
        quotas: QuotaSet | None = None, what_if: QuotaSet | None = None,
        kafka_bootstrap: str | None = None, overwrite: bool = False,
        progress: Callable[[str], None] = lambda line: None) -> Path:
    """Read, resolve, analyse, write: the whole job. Returns the output directory."""
    check_out(out, overwrite)
    progress(f"reading {usage} ({when.describe()})")
    inputs = load_inputs(spark, usage, when, quotas, kafka_bootstrap)
    progress(f"{len(inputs.versions)} quota version(s); resolving buckets")
    tables = build_tables(inputs, what_if)
    try:
        return write_tables(tables, out, overwrite, progress)
    finally:
        tables["windows"].unpersist()
