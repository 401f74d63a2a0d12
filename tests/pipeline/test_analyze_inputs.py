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


# -- issue 27, item 7: the usage and snapshot files' columns, checked before Spark ------------

def _history(tmp_path, usage_columns=None, quota_columns=None, cast=None):
    """The test history (test_pipeline_tables), its usage files cut to ``usage_columns``,
    its snapshots to ``quota_columns``, or a usage column cast (``{"rate": pa.string()}``)."""
    import pyarrow.parquet as pq

    from tests.pipeline.test_pipeline_tables import write_dir

    base = write_dir(tmp_path / "hist")
    for name, keep in (("usage", usage_columns), ("quotas", quota_columns)):
        for part in (base / name).rglob("*.parquet"):
            table = pq.read_table(part)
            if keep is not None:
                table = table.select(keep)
            for column, to in ((cast or {}).items() if name == "usage" else ()):
                i = table.schema.get_field_index(column)
                table = table.set_column(i, column, table[column].cast(to))
            pq.write_table(table, part)
    return base


def _quota_file(tmp_path):
    path = tmp_path / "q.json"
    path.write_text('{"format": "quota-console/1", "entries": [{"entity": {"user": "alice"}, '
                    '"quotas": {"producer_byte_rate": 1000000}}]}')
    return path


@pytest.mark.parametrize("mode", [[], ["--no-rollups"], ["--windows"], ["--follow"]],
                         ids=["rollups", "one-shot", "rollups+windows", "follow"])
def test_a_usage_file_without_its_columns_is_one_line_exit_2_before_spark(tmp_path, mode):
    base = _history(tmp_path, usage_columns=["ts", "broker"])
    out = [] if mode == ["--follow"] else ["--out", str(tmp_path / "out")]
    code, err = analyze("--usage", str(base), "--quotas", str(_quota_file(tmp_path)), *out, *mode)
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err and "starting Spark" not in err
    assert err.startswith(f"error: {base}/usage/date=2025-01-05/part-0.parquet: columns "
                          f"'quota_type', 'user', 'client_id', 'rate', 'throttle_ms', "
                          f"'interval_s' are missing (found: ts, broker). The collector "
                          f"writes ts, broker, quota_type"), err
    assert "corrupt" not in err
    assert not (tmp_path / "out").exists() and not (base / "rollups").exists()


@pytest.mark.parametrize("make, message", [
    (lambda d: _history(d, cast={"rate": __import__("pyarrow").string()}),
     "usage/date=2025-01-05/part-0.parquet: column 'rate' is string, expected double."),
    (lambda d: _history(d, quota_columns=["ts", "entity", "key"]),
     "quotas/date=2025-01-06/part-0.parquet: column 'value' is missing (found: ts, entity, "
     "key)."),
])
def test_a_mistyped_or_missing_column_is_named_in_one_line(tmp_path, make, message):
    base = make(tmp_path)
    for mode in ([], ["--no-rollups"]):
        code, err = analyze("--usage", str(base), "--out", str(tmp_path / "out"), *mode)
        assert code == 2, err
        assert err.count("\n") == 1 and message in err, err


def test_a_file_that_is_not_parquet_is_named(tmp_path):
    base = _history(tmp_path)
    (base / "usage/date=2025-01-06/part-9.parquet").write_bytes(b"PAR1 not really")
    code, err = analyze("--usage", str(base), "--out", str(tmp_path / "out"))
    assert code == 2, err
    assert err.count("\n") == 1 and "part-9.parquet: not a readable Parquet file (" in err


def test_snapshots_are_not_checked_when_quotas_replace_them(tmp_path):
    """--quotas: the snapshots are not read, so a broken one does not stop the run."""
    from pipeline.readers import check_history

    base = _history(tmp_path, quota_columns=["ts"])
    check_history(str(base), snapshots=False)
    with pytest.raises(Exception, match="columns 'entity', 'key', 'value' are missing"):
        check_history(str(base))


def test_the_rollups_check_reads_only_files_an_update_will_read(tmp_path):
    """Files an earlier update recorded, older than its end, are not opened again; a new one,
    or one written since the last update ended, is."""
    import os

    from pipeline.errors import BadInputFile
    from pipeline.readers import check_history
    from quota_core.telemetry import rollup_files

    base = _history(tmp_path, usage_columns=["ts", "broker"])
    rollups = tmp_path / "rollups"
    old = sorted(str(p.resolve()) for p in (base / "usage").rglob("*.parquet"))
    rollup_files.add_hour_files(rollups, {"2025-01-06T00": old})
    rollup_files.save_state(rollups, {"hours": {}, "updated_at": "2099-01-01 00:00:00"})
    check_history(str(base), rollups=str(rollups))  # every file rolled up before: not read
    rollup_files.save_state(rollups, {"hours": {}, "updated_at": "2000-01-01 00:00:00"})
    with pytest.raises(BadInputFile, match="part-0.parquet: columns"):  # written since
        check_history(str(base), rollups=str(rollups))
    rollup_files.save_state(rollups, {"hours": {}, "updated_at": "2099-01-01 00:00:00"})
    os.rename(old[0], old[0].replace("part-0", "part-1"))  # a file no record names
    with pytest.raises(BadInputFile, match="part-1.parquet: columns"):
        check_history(str(base), rollups=str(rollups))
