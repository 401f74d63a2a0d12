"""The collector's Kafka topic as input, on the real local broker: batch and streaming.

The hand-checked history of test_pipeline_tables is produced as the collector would
(quota_core.telemetry.schema.topic_value, one JSON message per record) and read back by the job
(``--usage kafka:TOPIC``) and by a Structured Streaming query (availableNow trigger).
"""
from __future__ import annotations

import math
import uuid

import pandas as pd
import pytest

from pipeline.errors import PipelineError
from pipeline.job import run
from pipeline.kafka_source import stream_windows
from quota_core.domain.entities import Entity
from quota_core.telemetry.schema import topic_value
from tests import ROOT
from tests.pipeline.test_pipeline_tables import SAMPLES, WINDOWS, quota_frame, sample, usage_frame


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "log_level": 0})
    for v in values:
        producer.produce(topic, v)
    assert producer.flush(30) == 0


def history_messages() -> list[bytes]:
    out = []
    for row in usage_frame().to_dict("records"):
        row["ts"] = row["ts"].to_pydatetime()
        row = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}
        out.append(topic_value("usage", row))
    for row in quota_frame().to_dict("records"):
        row["ts"] = row["ts"].to_pydatetime()
        out.append(topic_value("quota", row))
    return out


@pytest.fixture(scope="module")
def topic(kafka_broker):
    name = f"quota-usage-{uuid.uuid4().hex[:6]}"
    produce(kafka_broker.bootstrap, name, history_messages())
    return name


def test_batch_job_reads_the_topic(spark, kafka_broker, topic, tmp_path):
    out = run(spark, f"kafka:{topic}", str(tmp_path / "out"),
              kafka_bootstrap=kafka_broker.bootstrap)
    win = pd.read_parquet(out / "windows")
    assert len(win) == len(SAMPLES)
    for minute, broker, qt, user, client, quota, level, source, over, est, _ in WINDOWS:
        r = sample(win, minute, broker, qt, user, client)
        assert (None if pd.isna(r["level"]) else r["level"]) == level
        assert (None if pd.isna(r["source"]) else r["source"]) == source
        assert bool(r["over_quota"]) is over
        assert (None if pd.isna(r["est_throttle_ms"]) else r["est_throttle_ms"]) == est


def test_a_bad_message_is_named_by_partition_and_offset(spark, kafka_broker, tmp_path):
    name = f"quota-bad-{uuid.uuid4().hex[:6]}"
    produce(kafka_broker.bootstrap, name, history_messages()[:2] + [b"not json"])
    with pytest.raises(PipelineError, match=r"kafka:quota-bad-\w+: the message at partition 0, "
                                            r"offset 2 is not a JSON object"):
        run(spark, f"kafka:{name}", str(tmp_path / "out"), kafka_bootstrap=kafka_broker.bootstrap)
    assert not (tmp_path / "out").exists()


def test_streaming_appends_windows(spark, kafka_broker, topic, tmp_path):
    quotas = {Entity.of(user="alice", client_id="app"): {"producer_byte_rate": 1000.0}}
    batches = []
    query = stream_windows(spark, kafka_broker.bootstrap, topic, quotas, str(tmp_path / "win"),
                           str(tmp_path / "checkpoint"), available_now=True,
                           on_batch=lambda b, n: batches.append(n))
    try:
        assert query.awaitTermination(120)
    finally:
        query.stop()
    assert query.exception() is None and batches
    win = pd.read_parquet(tmp_path / "win")
    assert len(win) == len(SAMPLES)
    alice = win[win["user"] == "alice"].sort_values("ts")
    assert alice["over_quota"].tolist() == [False, True, True]
    assert set(win.loc[win["user"] != "alice", "level"]) == {0}


def test_spark_submit_reads_the_topic(kafka_broker, topic, tmp_path):
    """Under spark-submit the driver JVM exists before the session: the connector must still
    load there (pipeline.session adds it with ADD JAR)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    import pyspark

    from quota_core.domain.serialization import dumps

    quotas = tmp_path / "quotas.json"
    quotas.write_text(dumps({Entity.of(user="alice", client_id="app"):
                             {"producer_byte_rate": 1000.0}}))
    submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    repo = ROOT
    argv = [str(submit), "--master", "local[1]", "--conf", "spark.ui.enabled=false",
            "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.driver.bindAddress=127.0.0.1",
            "--conf", "spark.driver.extraJavaOptions=-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
            str(repo / "pipeline" / "analyze.py"), "--usage", f"kafka:{topic}",
            "--kafka-bootstrap", kafka_broker.bootstrap, "--quotas", str(quotas),
            "--out", str(tmp_path / "out"), "--windows"]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env,
                          cwd=tmp_path)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    win = pd.read_parquet(tmp_path / "out" / "windows")
    assert len(win) == len(SAMPLES)
    assert win.loc[win["user"] == "alice", "over_quota"].sum() == 2
