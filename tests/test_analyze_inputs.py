"""``analyze`` checks every input before Spark (issue 16, finding 10 and point 8).

A topic on a cluster that never answers gives up after ``--timeout`` with one clear line
(today: retries forever); ``--command-config`` gives the credentials, which appear in no
output; malformed or unreadable files are usage errors (exit 2). No Spark session is started
by any of these (``get_session`` is replaced by one that fails the test).
"""
from __future__ import annotations

import socket
import time
from io import StringIO

import pytest

import pipeline.session
from pipeline.analyze import cli_main
from pipeline.kafka_source import client_options
from quota_core.backends.kafka_config import load_command_config

PASSWORD = "s3cret-7f3c-9a1d"


@pytest.fixture(autouse=True)
def no_spark(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a Spark session was started")

    monkeypatch.setattr(pipeline.session, "get_session", refuse)


@pytest.fixture
def silent_port():
    """A listener that accepts connections and never answers (a hung broker)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        yield server.getsockname()[1]


@pytest.fixture
def props(tmp_path):
    path = tmp_path / "client.properties"
    path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
                    "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule "
                    f'required username="alice" password="{PASSWORD}";\n')
    return path


def analyze(*argv: str) -> tuple[int, str]:
    out, err = StringIO(), StringIO()
    code = cli_main(list(argv), out, err)
    return code, err.getvalue()


def test_a_silent_cluster_is_given_up_after_the_timeout(tmp_path, silent_port, props):
    started = time.monotonic()
    code, err = analyze("--usage", "kafka:usage", "--kafka-bootstrap", f"127.0.0.1:{silent_port}",
                        "--command-config", str(props), "--timeout", "2",
                        "--out", str(tmp_path / "out"))
    took = time.monotonic() - started
    assert code == 1, err
    assert took < 30  # measured ~2 s; today it retried for minutes
    assert err.startswith(f"error: kafka:usage: the cluster at 127.0.0.1:{silent_port} could not "
                          f"be read within 2 s (--timeout): ")
    assert err.count("\n") == 1 and "starting Spark" not in err
    assert PASSWORD not in err
    assert not (tmp_path / "out").exists()


def test_the_command_config_reaches_the_kafka_source_in_process(tmp_path):
    props = tmp_path / "rdkafka.properties"  # any password, quotes and backslashes included
    props.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
                     "sasl.username=alice\nsasl.password=pa\"ss\\\\word-7f3c\n")
    config = load_command_config(props)
    options = client_options(config, 5)
    assert options["kafka.security.protocol"] == "SASL_PLAINTEXT"
    assert options["kafka.sasl.mechanism"] == "SCRAM-SHA-256"
    jaas = options["kafka.sasl.jaas.config"]
    assert jaas == ('org.apache.kafka.common.security.scram.ScramLoginModule required '
                    'username="alice" password="pa\\"ss\\\\word-7f3c";')
    assert options["kafka.default.api.timeout.ms"] == options["kafka.request.timeout.ms"] == "5000"


@pytest.mark.parametrize("make, message", [
    (lambda d: ["--quotas", str(d / "missing.yaml")], "Cannot read"),
    (lambda d: (d / "deep.yaml").write_text("[" * 100_000) and ["--quotas", str(d / "deep.yaml")],
     "nested more than 64 levels deep"),
    (lambda d: (d / "bad.yaml").write_text("entries: [\n - x\n") and ["--what-if", str(d / "bad.yaml")],
     "is not valid yaml: line 2"),
    (lambda d: ["--usage", str(d / "nowhere")], "no such folder"),
    (lambda d: ["--usage", "kafka:t", "--kafka-bootstrap", "127.0.0.1:1", "--command-config",
                str(d / "missing.properties")], "does not exist"),
    (lambda d: ["--usage", "kafka:t"], "needs --kafka-bootstrap"),
])
def test_malformed_inputs_are_usage_errors_before_spark(tmp_path, make, message):
    (tmp_path / "history").mkdir()
    argv = ["--usage", str(tmp_path / "history"), "--out", str(tmp_path / "out"), *make(tmp_path)]
    code, err = analyze(*argv)
    assert code == 2, err
    assert message in err and err.count("\n") == 1, err
