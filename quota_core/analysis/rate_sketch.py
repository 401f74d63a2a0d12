"""Rate distributions as KLL sketches: the one definition of their size and error, and
reading them without Spark (Apache DataSketches' Python binding, byte-compatible with the
Java sketches Spark's ``kll_sketch_agg_double`` writes).

Percentiles follow the same two rules as the Spark side (pipeline.sketches):

* a sketch that still holds every value (``n <= K``) gives exactly Spark's ``percentile``
  (linear between the closest ranks);
* a larger one gives the sketch's quantile at rank ``p`` (inclusive, as Spark's
  ``kll_sketch_get_quantile_double``), whose rank is within :data:`RANK_ERROR` of ``p``.

A merge of sketches is random past ``K`` values (KLL compacts by coin flips), so a merged
percentile past ``K`` values may differ from Spark's own merge by up to the rank error; up
to ``K`` values both are exact and equal.
"""
from __future__ import annotations

import math
from typing import Iterable

__all__ = ["K", "RANK_ERROR", "merged", "count", "percentile"]

#: The sketches' size parameter (Spark's default): about 200 values kept per level.
K = 200
#: The normalized rank error of one quantile at :data:`K`, 99 % confidence (DataSketches'
#: ``KllSketch.getNormalizedRankError(k, false)`` = 2.296 / k^0.9723): 0.0133 for k = 200.
RANK_ERROR = 2.296 / K ** 0.9723


def merged(blobs: Iterable[bytes | None]):
    """One sketch of every serialized sketch in ``blobs`` (None: an empty one)."""
    from datasketches import kll_doubles_sketch

    out = kll_doubles_sketch(K)
    for blob in blobs:
        if blob is not None and len(blob):
            out.merge(kll_doubles_sketch.deserialize(bytes(blob)))
    return out


def count(sketch) -> int:
    return int(sketch.n)


def percentile(sketch, p: float) -> float:
    """The ``p`` percentile (0..1) of ``sketch``'s values by the rules above; NaN when empty."""
    n = count(sketch)
    if n == 0:
        return math.nan
    if n > K:
        return float(sketch.get_quantile(p))
    values = sorted(value for value, _ in sketch)  # every value, each of weight 1
    position = (n - 1) * p
    lower, higher = math.floor(position), math.ceil(position)
    low, high = values[lower], values[higher]
    return low if low == high else (higher - position) * low + (position - lower) * high
