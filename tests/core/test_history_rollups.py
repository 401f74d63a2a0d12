"""quota_core.analysis.history_rollups' pure parts: the freshness line and the hour labels (the tables
are held equal to the Spark job's in tests/pipeline/test_pipeline_rollups.py)."""
from __future__ import annotations

from datetime import datetime, timezone

import pandas as pd

from quota_core.analysis import history_rollups as hr


def _epoch(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc).timestamp()


def test_freshness_names_the_latest_sample_and_the_last_update():
    state = {"up_to": "2025-01-06 14:05:00", "updated_at": "2025-01-06 14:05:29"}
    now = _epoch("2025-01-06 14:05:40")
    assert hr.freshness(state, now) == "Rollups up to 2025-01-06 14:05 UTC (40 s ago), " \
                                       "updated 11 s ago."
    assert hr.freshness({"hours": {}}, now) == "The rollups hold no samples yet."
    assert hr.freshness({"up_to": "2025-01-06 14:05:00"}, now + 7200).startswith(
        "Rollups up to 2025-01-06 14:05 UTC (2 h ")


def test_hour_labels_and_rows_as_samples_keep_names_exactly():
    assert hr.hour_label("2025-01-06T14") == "2025-01-06 14:00"
    odd = ["<default>", "a=b,c %", "ünï côdé <b>x</b>"]
    roll = pd.DataFrame({"hour": ["2025-01-06T14"] * 3, "broker": ["1", "2", "3"],
                         "user": odd, "client_id": [None, "x", None],
                         "key": ["producer_byte_rate"] * 3, "throttled_s": [0.0, 30.0, 5.0]})
    samples = hr.as_samples(roll)
    assert samples["user"].tolist() == odd
    assert samples["over_quota"].tolist() == [False, True, True]
    assert samples["ts"].iloc[0] == pd.Timestamp("2025-01-06 14:00")
