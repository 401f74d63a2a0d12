"""Facts defined once (issue 17's "one of each"): every user reads the same definition."""
import math

from quota_core import live
from quota_core.telemetry import schema


def test_an_absent_metric_figure_reads_the_same_in_live_rows_and_the_usage_history():
    assert schema.finite is live.finite
    assert [live.finite(v) for v in (None, math.nan, 3, 2.5)] == [None, None, 3.0, 2.5]


def test_the_per_entity_read_threshold_is_one_constant(tmp_path, monkeypatch):
    """The apply workflow's read-back and the Kafka backend's propagation check switch from
    one describe per entity to one describe of the set at the same count: limits'."""
    from quota_core import limits
    from quota_core.backends import kafka
    from quota_core.backends.sandbox import SandboxBackend
    from quota_core.changes import workflow
    from quota_core.entities import Entity

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
