"""Facts defined once (issue 17's "one of each"): every user reads the same definition."""
import math

from quota_core import live
from quota_core.telemetry import schema


def test_an_absent_metric_figure_reads_the_same_in_live_rows_and_the_usage_history():
    assert schema.finite is live.finite
    assert [live.finite(v) for v in (None, math.nan, 3, 2.5)] == [None, None, 3.0, 2.5]
