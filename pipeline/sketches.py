"""Rate distributions as KLL sketches (Spark 4.2's built-in ``kll_*_double`` functions).

A sketch is mergeable: an hour's sketch per (broker, bucket, key) is merged over brokers and
hours to answer any range. Percentiles from a merged sketch follow two rules:

* a sketch that still holds every value (``n <= K``: KLL keeps all of them until its first
  compaction) gives **exactly** Spark's ``percentile`` (linear between the closest ranks),
  bit for bit: its values are read back in order (:func:`sorted_values`) and
  :func:`pipeline.columns.array_percentile` is applied to them;
* a larger one gives ``kll_sketch_get_quantile_double(sketch, p)``, whose *rank* is within
  :data:`RANK_ERROR` of ``p`` (99 % confidence; DataSketches' bound for a single quantile,
  ``2.296 / K**0.9723``): the p99 of 1M samples is a value whose rank is between 0.9767 and
  1.0, not an interpolated value.

Why read values back through a grid of ranks: Spark accepts only a constant (foldable) rank
or quantile, so neither ``(i + 0.5) / n`` per row nor a rank per bucket's quota can be asked
directly. A constant array of ``2K`` ranks, ``(j + 0.5) / 2K``, asked once per sketch, holds
every value of a sketch of ``n <= K`` values at a known place (value ``i`` is the one whose
rank interval ``(i/n, (i+1)/n]`` holds grid point ``floor((i + 0.5) / n * 2K)``: the grid's
spacing, ``1 / 2K``, is at most half the interval's width).

NaN rates are not kept by a sketch (DataSketches ignores them), nor are nulls.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from quota_core.analysis import K, RANK_ERROR  # one definition (the pages read them too)

from pipeline.columns import array_percentile

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column

__all__ = ["K", "RANK_ERROR", "sketch_agg", "merge_agg", "count", "sorted_values",
           "percentile", "count_above"]


def sketch_agg(column: str) -> "Column":
    """Aggregate: the sketch of ``column``'s values."""
    from pyspark.sql import functions as F

    return F.kll_sketch_agg_double(column, K)


def merge_agg(column: str) -> "Column":
    """Aggregate: sketches merged into one."""
    from pyspark.sql import functions as F

    return F.kll_merge_agg_double(column, K)


def count(sketch: "Column") -> "Column":
    """How many values went into ``sketch`` (0 for a null sketch)."""
    from pyspark.sql import functions as F

    return F.coalesce(F.kll_sketch_get_n_double(sketch), F.lit(0))


def _grid(sketch: "Column") -> "Column":
    from pyspark.sql import functions as F

    ranks = F.array(*[F.lit((j + 0.5) / (2 * K)) for j in range(2 * K)])
    return F.kll_sketch_get_quantile_double(sketch, ranks)


def sorted_values(sketch: "Column") -> "Column":
    """Every value of a sketch that kept them all (``n <= K``), ascending; else null."""
    from pyspark.sql import functions as F

    n = count(sketch)
    grid = _grid(sketch)
    values = F.transform(F.sequence(F.lit(0), (n - 1).cast("int")),
                         lambda i: F.get(grid, F.floor((i + 0.5) / n * (2 * K)).cast("int")))
    return F.when((n > 0) & (n <= K), values)


def percentile(sketch: "Column", p: float) -> "Column":
    """Exactly Spark's ``percentile`` for ``n <= K`` values, else the sketch's quantile at
    rank ``p`` (within :data:`RANK_ERROR`); null for an empty sketch."""
    from pyspark.sql import functions as F

    n = count(sketch)
    return (F.when((n > 0) & (n <= K), array_percentile(sorted_values(sketch), p))
            .when(n > K, F.kll_sketch_get_quantile_double(sketch, F.lit(p))))


def count_above(sketch: "Column", limit: "Column") -> "Column":
    """How many of the sketch's values are above ``limit`` (a double): exact for ``n <= K``;
    else ``n`` times the share of a grid of ``2K`` quantiles above it (a share within
    :data:`RANK_ERROR` + 1/2K). 0 for an empty sketch or a null or NaN limit (unlimited)."""
    from pyspark.sql import functions as F

    n = count(sketch)
    exact = F.size(F.filter(sorted_values(sketch), lambda v: v > limit)).cast("double")
    approx = F.size(F.filter(_grid(sketch), lambda v: v > limit)) * n / F.lit(2.0 * K)
    above = F.when((n > 0) & (n <= K), exact).when(n > K, approx)
    return F.when(limit.isNull() | F.isnan(limit), F.lit(0.0)).otherwise(
        F.coalesce(above, F.lit(0.0)))
