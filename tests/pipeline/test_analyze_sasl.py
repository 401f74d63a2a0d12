"""``analyze --usage kafka:TOPIC`` on the real SASL/SCRAM broker, with ``--command-config``.

The pre-flight (no Spark) accepts the admin's properties file, refuses a wrong password in
one line that does not hold it, and names a missing topic; the job itself reads the topic
through Spark's Kafka source with the same file's credentials (handed over in-process).
"""
from __future__ import annotations

import uuid
from io import StringIO

import pandas as pd
import pytest

from pipeline.analyze import cli_main
from pipeline.errors import PipelineError
from pipeline.job import run
from pipeline.kafka_source import check_topic, client_options
from quota_core.backends.kafka_config import load_command_config
from tests.pipeline.test_pipeline_kafka import history_messages
from tests.pipeline.test_pipeline_tables import SAMPLES

pytestmark = pytest.mark.kafka


@pytest.fixture(scope="module")
def sasl_topic(kafka_sasl_broker):
    from confluent_kafka import Producer

    name = f"quota-usage-sasl-{uuid.uuid4().hex[:6]}"
    producer = Producer({**kafka_sasl_broker.client_config(), "log_level": 0})
    for value in history_messages():
        producer.produce(name, value)
    assert producer.flush(30) == 0
    return name


def test_the_preflight_uses_the_command_config(kafka_sasl_broker, sasl_topic, tmp_path):
    props = kafka_sasl_broker.write_command_config(tmp_path / "admin.properties")
    check_topic(kafka_sasl_broker.bootstrap, sasl_topic, load_command_config(props), 20)
    with pytest.raises(PipelineError, match=r"has no topic 'nope-\w+'"):
        check_topic(kafka_sasl_broker.bootstrap, f"nope-{uuid.uuid4().hex[:4]}",
                    load_command_config(props), 20)


def test_a_wrong_password_is_one_line_without_it(kafka_sasl_broker, sasl_topic, tmp_path):
    props = kafka_sasl_broker.write_command_config(tmp_path / "admin.properties")
    good = kafka_sasl_broker.users["admin"]
    props.write_text(props.read_text().replace(good, "wrong-pass-41c7"))
    out, err = StringIO(), StringIO()
    code = cli_main(["--usage", f"kafka:{sasl_topic}", "--kafka-bootstrap",
                     kafka_sasl_broker.bootstrap, "--command-config", str(props),
                     "--timeout", "4", "--out", str(tmp_path / "out")], out, err)
    assert code == 1, err.getvalue()
    assert err.getvalue().count("\n") == 1 and "starting Spark" not in err.getvalue()
    assert "wrong-pass-41c7" not in err.getvalue() and good not in err.getvalue()
    assert not (tmp_path / "out").exists()


@pytest.mark.spark
def test_the_job_reads_a_sasl_topic(spark, kafka_sasl_broker, sasl_topic, tmp_path):
    props = kafka_sasl_broker.write_command_config(tmp_path / "admin.properties")
    client = client_options(load_command_config(props), 60)
    out = run(spark, f"kafka:{sasl_topic}", str(tmp_path / "out"),
              kafka_bootstrap=kafka_sasl_broker.bootstrap, kafka_client=client)
    assert len(pd.read_parquet(out / "windows")) == len(SAMPLES)
