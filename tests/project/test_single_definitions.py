"""Facts defined once (issue 17's "one of each"): every user reads the same definition."""
import math

from quota_core.throttling import live
from quota_core.telemetry import schema


def test_an_absent_metric_figure_reads_the_same_in_live_rows_and_the_usage_history():
    assert schema.finite is live.finite
    assert [live.finite(v) for v in (None, math.nan, 3, 2.5)] == [None, None, 3.0, 2.5]


def test_the_per_entity_read_threshold_is_one_constant(tmp_path, monkeypatch):
    """The apply workflow's read-back and the Kafka backend's propagation check switch from
    one describe per entity to one describe of the set at the same count: limits'."""
    from quota_core.domain import limits
    from quota_core.backends import kafka
    from quota_core.backends.sandbox import SandboxBackend
    from quota_core.changes import workflow
    from quota_core.domain.entities import Entity

    assert workflow.PER_ENTITY_READS is kafka.PER_ENTITY_READS is limits.PER_ENTITY_READS
    entities = [Entity.from_pairs([("user", f"u{i}")]) for i in range(3)]
    calls: list[str] = []
    with SandboxBackend(str(tmp_path / "q.db")) as backend:
        backend.init()
        one, everything = backend.describe_entity, backend.describe

        def describe_entity(entity):
            calls.append("one")
            return one(entity)

        def describe(entity_filter=None):
            if entity_filter is None:  # describe_entity describes with a filter: not counted
                calls.append("all")
            return everything(entity_filter)

        monkeypatch.setattr(backend, "describe_entity", describe_entity)
        monkeypatch.setattr(backend, "describe", describe)
        monkeypatch.setattr(workflow, "PER_ENTITY_READS", 3)
        workflow.read_back_set(backend, {e: {} for e in entities})
        assert calls == ["one"] * 3
        calls.clear()
        monkeypatch.setattr(workflow, "PER_ENTITY_READS", 2)
        workflow.read_back_set(backend, {e: {} for e in entities})
        assert calls == ["all"]


# -- quota sizing (issue 28): one suggestion, one display rounding ----------------------------
def test_lint_and_history_size_one_p99_to_one_quota():
    """lint's ``sized`` gave 10,900,000 B/s for a p99 of 10,848,520 where History's
    ``suggested_value`` gave 10,905,191: both are now quota_core.analysis.quota_sizing's suggestion with
    quota_core.domain.units' one display rounding, and the number shown is the number written."""
    from quota_core.lint.usage import sized
    from quota_core.analysis.quota_sizing import suggest_quota
    from quota_core.domain.units import format_rate, round_up_quota
    from ui.history import suggested_value

    for key, p99 in [("producer_byte_rate", 10_848_520.0), ("consumer_byte_rate", 1_048_577.0),
                     ("request_percentage", 131.697), ("controller_mutation_rate", 9.0999)]:
        raw = suggest_quota(key, p99)
        assert sized(key, p99) == suggested_value(key, raw) == round_up_quota(key, raw) >= p99
    assert sized("producer_byte_rate", 10_848_520.0) == 10_905_191.0
    assert format_rate("producer_byte_rate", 10_905_191.0) == "10.4 MiB/s"
    # just over 1 MiB/s is never shown as "1 MiB/s" (decimal digits gave 1,050,000 = 1.0014)
    assert format_rate("consumer_byte_rate", sized("consumer_byte_rate", 1_048_577.0)) \
        == "1.01 MiB/s"


def test_suggest_quota_is_the_p99_whole_for_whole_number_keys():
    from quota_core.analysis.quota_sizing import suggest_quota, whole_number_keys

    assert set(whole_number_keys()) == {"producer_byte_rate", "consumer_byte_rate",
                                        "connection_creation_rate"}
    assert suggest_quota("producer_byte_rate", 1500.2) == 1501.0
    assert suggest_quota("request_percentage", 75.25) == 75.25
    assert math.isnan(suggest_quota("producer_byte_rate", math.nan))


def test_the_pandas_baseline_sizes_with_the_one_suggestion():
    """The pandas baseline (benchmarks/pandas_analysis.py) gives suggest_quota of the largest
    per-bucket p99 (the Spark job's: tests/pipeline/test_pipeline_resolution.py; the rollups reader's:
    tests/pipeline/test_pipeline_rollups.py compares it with Spark's table)."""
    import numpy as np
    import pandas as pd

    import benchmarks.pandas_analysis as baseline
    from quota_core.lint.usage import p99
    from quota_core.analysis.quota_sizing import suggest_quota

    rates = {("a", "producer_byte_rate"): [1000.25, 1500.5, 1499.75],
             ("b", "producer_byte_rate"): [900.0, 1200.2],
             ("a", "request_percentage"): [12.5, 75.25, 60.0]}
    rows = [{"source": '{"user":"a"}', "level": 3, "key": key, "user": user,
             "client_id": None, "rate": r, "ts": pd.Timestamp("2026-11-23", tz="UTC")
             + pd.Timedelta(seconds=i), "quota": 1000.0}
            for (user, key), rs in rates.items() for i, r in enumerate(rs)]
    got = baseline.sizing(pd.DataFrame(rows))
    for key in ("producer_byte_rate", "request_percentage"):
        largest = max(p99(rs) for (_, k), rs in rates.items() if k == key)
        [value] = got.loc[got["key"] == key, "suggested_quota"].tolist()
        assert value == suggest_quota(key, largest), key
    assert np.isclose(got.loc[got["key"] == "producer_byte_rate", "suggested_quota"], 1501.0)
