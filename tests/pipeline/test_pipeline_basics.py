"""The pipeline's parts that need no Spark: jars, the demo history, the package surface."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

import pipeline
from pipeline.demo_history import HistorySpec, generate, quota_sets, write_history
from pipeline.jars import SPARK_VERSION, spark_jar_paths
from pipeline.schema import QUOTA_COLUMNS, USAGE_COLUMNS, arrow_schema

from tests import ROOT

REPO = ROOT
SMALL = HistorySpec(hours=6, step_s=300, clients=6)


def _artifact(jar: str) -> str:
    """``kafka-clients-3.9.2.jar`` -> ``kafka-clients``."""
    return re.sub(r"-\d[\w.]*\.jar$", "", Path(jar).name)


def test_connector_jars_are_exactly_what_pyspark_lacks():
    import pyspark

    assert pyspark.__version__ == SPARK_VERSION
    shipped = {_artifact(j.name) for j in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    fetched = {_artifact(j) for j in spark_jar_paths()}
    assert fetched == {"spark-sql-kafka-0-10_2.13", "spark-token-provider-kafka-0-10_2.13",
                       "kafka-clients", "commons-pool2"}
    assert not fetched & shipped  # no second copy of anything Spark ships
    assert all(Path(j).name.endswith(f"-{SPARK_VERSION}.jar") for j in spark_jar_paths()
               if Path(j).name.startswith("spark-"))


def test_demo_history_is_deterministic():
    a, b = generate(SMALL), generate(SMALL)
    pd.testing.assert_frame_equal(a.usage, b.usage)
    pd.testing.assert_frame_equal(a.quotas, b.quotas)
    other = generate(HistorySpec(seed=8, hours=6, step_s=300, clients=6))
    assert not other.usage["rate"].equals(a.usage["rate"])


def test_demo_history_has_what_the_analysis_looks_for():
    h = generate(SMALL)
    u = h.usage
    assert list(u.columns) == list(USAGE_COLUMNS)
    assert set(u["quota_type"]) == {"produce", "fetch", "request", "controller_mutation"}
    etl = u[(u["user"] == "etl") & (u["quota_type"] == "produce")]
    assert etl["client_id"].isna().all() and len(etl)  # the shared {user=etl} bucket
    assert (u["user"] == "<default>").any()              # a user literally named <default>
    assert u["throttle_ms"].isna().any() and u["throttle_ms"].notna().any()
    before, after = quota_sets()
    assert before != after and [v for _, v in h.versions] == [before, after]
    assert h.quotas["ts"].nunique() == 6                  # hourly snapshots, mostly equal
    per_broker = u.groupby("broker")["ts"].nunique()
    assert per_broker["broker-1"] < per_broker["broker-0"]  # broker-1 was away a while
    over = u[u["throttle_ms"].notna()]
    assert {"checkout-api", "reporting"} <= set(over["client_id"].dropna())


def test_demo_history_size_scales(tmp_path):
    big = HistorySpec(hours=12, step_s=300, clients=12)
    assert len(generate(big).usage) > 3 * len(generate(SMALL).usage)


def test_written_history_follows_the_contract(tmp_path):
    write_history(generate(SMALL), tmp_path)
    for name, columns in (("usage", USAGE_COLUMNS), ("quotas", QUOTA_COLUMNS)):
        files = sorted((tmp_path / name).glob("date=*/*.parquet"))
        assert files
        for f in files:
            assert pq.read_schema(f).remove_metadata() == arrow_schema(columns)


def test_demo_history_command_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "pipeline.demo_history", "--out",
                           str(tmp_path / "h"), "--hours", "2", "--step-s", "600",
                           "--clients", "2"], cwd=REPO, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "usage samples" in proc.stderr
    assert list((tmp_path / "h" / "usage").glob("date=*/*.parquet"))


def test_importing_the_package_does_not_import_spark():
    code = "import pipeline, pipeline.demo_history, sys; print('pyspark' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                         text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr


def test_public_surface():
    assert set(pipeline.__all__) == {"PipelineError", "get_session", "ensure_spark_jars", "run",
                                     "main"}
    for name in pipeline.__all__:
        assert getattr(pipeline, name) is not None
    with pytest.raises(AttributeError):
        pipeline.nothing_here  # noqa: B018
