"""What the clients reported waiting (issue 30), carried from the usage samples' optional
``client_throttle_ms`` through the hourly rollups to History's bucket view.

One small history, three hours on brokers b1 and b2: hour 00 in a file written before the
column existed, hours 01 and 02 with it on some of alice's samples (the same figure on both
brokers, as the collector writes it) and on none of etl's.
"""
from __future__ import annotations

from datetime import datetime, timedelta

import pandas as pd
import pyarrow.parquet as pq
import pytest
from streamlit.testing.v1 import AppTest

from pipeline.incremental import update_rollups
from pipeline.schema import OPTIONAL_USAGE_COLUMNS, QUOTA_COLUMNS, USAGE_COLUMNS, arrow_schema
from quota_core.telemetry.rollup_files import read_rollups

from tests import ROOT

T0 = datetime(2025, 1, 6)
#: alice's client_throttle_ms per (hour, minute); every other sample carries none
ALICE_WAITS = {(1, 0): 100.0, (1, 10): 200.0, (1, 20): 300.0, (2, 0): 900.0}


def usage(hour: int, with_client: bool) -> pd.DataFrame:
    rows = []
    for m in range(0, 60, 10):
        ts = pd.Timestamp(T0 + timedelta(hours=hour, minutes=m), tz="UTC")
        for broker in ("b1", "b2"):
            rows.append((ts, broker, "produce", "alice", "app", 800.0, None, 600.0,
                         ALICE_WAITS.get((hour, m))))
            rows.append((ts, broker, "produce", "etl", None, 3000.0, None, 600.0, None))
    df = pd.DataFrame(rows, columns=list(USAGE_COLUMNS) + list(OPTIONAL_USAGE_COLUMNS))
    return df if with_client else df.drop(columns=list(OPTIONAL_USAGE_COLUMNS))


def put(base, kind: str, name: str, df: pd.DataFrame, columns: dict) -> None:
    folder = base / kind / f"date={T0:%Y-%m-%d}"
    folder.mkdir(parents=True, exist_ok=True)
    df.to_parquet(folder / f"{name}.parquet", index=False, schema=arrow_schema(columns))


@pytest.fixture(scope="module")
def history(spark, tmp_path_factory):
    base = tmp_path_factory.mktemp("client-history")
    put(base, "quotas", "q-0000", pd.DataFrame(
        [(pd.Timestamp(T0, tz="UTC"), '{"user":"alice","client-id":null}',
          "producer_byte_rate", 1e9)], columns=list(QUOTA_COLUMNS)), QUOTA_COLUMNS)
    put(base, "usage", "h00-old", usage(0, False), USAGE_COLUMNS)  # before the column
    both = {**USAGE_COLUMNS, **OPTIONAL_USAGE_COLUMNS}
    for hour in (1, 2):
        put(base, "usage", f"h{hour:02d}", usage(hour, True), both)
    update_rollups(spark, str(base), str(base / "rollups"))
    return base


def bucket_sentence(history_dir, monkeypatch, user: str) -> str:
    monkeypatch.setenv("QUOTA_HISTORY_DIR", str(history_dir))
    monkeypatch.setenv("QUOTA_ANALYSIS_DIR", str(history_dir / "analysis"))
    monkeypatch.setenv("QUOTA_LOCAL_MODE", "1")
    for name in ("QUOTA_BOOTSTRAP_SERVERS", "QUOTA_METRICS", "QUOTA_SANDBOX"):
        monkeypatch.delenv(name, raising=False)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.secrets.update({"_tests": "isolated"})
    at.run()
    at.switch_page("pages/history.py").run()
    box = at.selectbox(key="hi_bucket")
    at = box.set_value((user, "app" if user == "alice" else None, "producer_byte_rate")).run()
    assert not at.exception, [e.value for e in at.exception]
    return " ".join(c.value for c in at.caption).replace("\\", "")  # markdown escapes


def test_rollups_carry_what_the_clients_reported(history):
    roll = read_rollups(history / "rollups").set_index(["hour", "broker", "user"])
    for broker in ("b1", "b2"):  # each broker's samples carry the clients' figure
        old = roll.loc[("2025-01-06T00", broker, "alice")]
        assert old["client_samples"] == 0 and pd.isna(old["client_max_ms"])  # old file: null
        one = roll.loc[("2025-01-06T01", broker, "alice")]
        assert (one["client_samples"], one["client_sum_ms"], one["client_max_ms"]) == \
            (3, 600.0, 300.0)
        two = roll.loc[("2025-01-06T02", broker, "alice")]
        assert (two["client_samples"], two["client_sum_ms"], two["client_max_ms"]) == \
            (1, 900.0, 900.0)
    assert (roll.xs("etl", level="user")["client_samples"] == 0).all()


def test_history_says_what_the_clients_reported_or_that_none_did(history, monkeypatch,
                                                                 tmp_path):
    said = bucket_sentence(history, monkeypatch, "alice")
    # (600 + 900) ms per broker over 4 samples per broker; 2 of the 3 hours
    assert ("The clients of this bucket reported waiting on average 375 ms per request "
            "(at most 900 ms) in 2 of the range's 3 hours with samples.") in said
    assert "no client telemetry" not in said
    assert "No client telemetry in this range" in bucket_sentence(history, monkeypatch, "etl")
    # rollups kept before the client columns: alice's rows read as no telemetry
    import shutil

    old = tmp_path / "old"
    shutil.copytree(history, old)
    for f in (old / "rollups" / "hourly").rglob("*.parquet"):
        table = pq.read_table(f)
        pq.write_table(table.drop_columns(["client_samples", "client_sum_ms",
                                           "client_max_ms"]), f)
    said = bucket_sentence(old, monkeypatch, "alice")
    assert "No client telemetry in this range" in said and "on average" not in said
