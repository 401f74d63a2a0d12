"""Bad inputs give one clear PipelineError naming the path and the column, and leave no output.

Each case breaks one thing in the small history of test_pipeline_tables and runs the whole
job; the error text is asserted, and neither ``--out`` nor a temporary sibling may remain.
"""
from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.analyze import main
from pipeline.errors import PipelineError
from pipeline.job import run
from pipeline.readers import TimeRange
from quota_core.errors import QuotaError
from tests import ROOT
from tests.pipeline.test_pipeline_tables import quota_frame, usage_frame, write_dir


def nothing_left(tmp_path) -> bool:
    """No output folder and no half-written one (the folder lock's file, unlocked, may stay:
    quota_core/telemetry/folder_lock.py)."""
    return not (tmp_path / "out").exists() and \
        not [p for p in tmp_path.glob(".out*") if p.name != ".out.lock"]


def broken(tmp_path, usage=None, quotas=None, fmt="parquet"):
    return str(write_dir(tmp_path / "in", fmt, usage, quotas))


def drop_rate(tmp_path):
    base = broken(tmp_path)
    part = tmp_path / "in/usage/date=2025-01-06/part-0.parquet"
    pq.write_table(pq.read_table(part).drop(["rate"]), part)
    return base, {}


def rate_as_text(tmp_path):
    base = broken(tmp_path)
    for part in (tmp_path / "in/usage").rglob("*.parquet"):
        table = pq.read_table(part)
        i = table.schema.get_field_index("rate")
        pq.write_table(table.set_column(i, "rate", table["rate"].cast(pa.string())), part)
    return base, {}


def corrupt_file(tmp_path):
    base = broken(tmp_path)
    (tmp_path / "in/usage/date=2025-01-06/part-1.parquet").write_bytes(b"PAR1 not really")
    return base, {}


def unknown_quota_type(tmp_path):
    usage = usage_frame()
    usage.loc[0, "quota_type"] = "replication"
    return broken(tmp_path, usage=usage), {}


def bad_entity(tmp_path):
    quotas = quota_frame()
    quotas.loc[0, "entity"] = '{"user": ""}'
    return broken(tmp_path, quotas=quotas), {}


def bad_ts_text(tmp_path):
    base = broken(tmp_path, fmt="json")
    part = tmp_path / "in/usage/date=2025-01-06/part-0.jsonl"
    part.write_text(part.read_text().replace("2025-01-06T00:01:00Z", "yesterday-ish", 1))
    return base, {}


def empty_range(tmp_path):
    """After the data: the last snapshot still binds, but there are no samples."""
    return broken(tmp_path), {"when": TimeRange(pd.Timestamp("2025-02-01").to_pydatetime(),
                                                pd.Timestamp("2025-02-02").to_pydatetime())}


def no_usage_dir(tmp_path):
    return str(tmp_path / "nowhere"), {}


def no_snapshots(tmp_path):
    base = broken(tmp_path)
    import shutil

    shutil.rmtree(tmp_path / "in/quotas")
    return base, {}


CASES = [
    (drop_rate, "date=2025-01-06/part-0.parquet: column 'rate' is missing", "rate"),
    (rate_as_text, "part-0.parquet: column 'rate' is string, expected double", "rate"),
    (corrupt_file, "part-1.parquet", None),
    (unknown_quota_type, "column 'quota_type' holds 'replication'", "quota_type"),
    (bad_entity, "column 'entity' holds '{\"user\": \"\"}'", "entity"),
    (bad_ts_text, "usage: column 'ts' holds 'yesterday-ish', which is not an ISO-8601", "ts"),
    (empty_range, "usage: no usage samples from 2025-02-01 00:00:00 to 2025-02-02", None),
    (no_usage_dir, "nowhere/usage: no such directory", None),
    (no_snapshots, "quotas: no quota snapshots; give --quotas FILE", None),
]


@pytest.mark.parametrize("make,message,column", CASES, ids=[c[0].__name__ for c in CASES])
def test_bad_input_is_one_clear_error(spark, tmp_path, make, message, column):
    base, kwargs = make(tmp_path)
    with pytest.raises(PipelineError) as info:
        run(spark, base, str(tmp_path / "out"), **kwargs)
    assert message in str(info.value)
    assert isinstance(info.value, QuotaError)
    assert info.value.path
    if column:
        assert info.value.column == column
    assert nothing_left(tmp_path)


def test_existing_output_is_kept(spark, tmp_path):
    base = broken(tmp_path)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "mine.txt").write_text("keep")
    with pytest.raises(PipelineError, match="already exists: remove it or pass --overwrite"):
        run(spark, base, str(tmp_path / "out"))
    assert (tmp_path / "out" / "mine.txt").read_text() == "keep"


def test_command_line_prints_one_line_and_exits_1(spark, tmp_path, capsys):
    base, _ = unknown_quota_type(tmp_path)
    assert main(["--usage", base, "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert "error: " in err and "'replication'" in err and "Traceback" not in err
    assert nothing_left(tmp_path)


def test_command_line_usage_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--usage", "x", "--out", "y", "--from", "2025-01-02", "--to", "2025-01-01"])
    assert info.value.code == 2
    assert "--from must be before --to" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--usage", "x", "--out", "y", "--from", "last tuesday"])



@pytest.mark.spark
def test_an_error_inside_the_rollups_stream_is_one_line_with_no_spark_log(tmp_path):
    """Issue 27, item 7: through the real CLI and Spark. A JSON-lines history (its columns are
    known only as Spark reads it) whose ts is not a time fails inside the rollups' streaming
    query: one line naming the file's folder and column, and none of Spark's own log lines
    (the 441 Java frames and the relayed Python traceback the stream logs at ERROR)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    base, _ = bad_ts_text(tmp_path)
    quotas = tmp_path / "q.json"
    quotas.write_text('{"format": "quota-console/1", "entries": []}')
    root = ROOT
    # the tests' session settings (tests/spark_fixtures.py): a quicker JVM start, no UI
    env = {**os.environ, "PYTHONPATH": str(root), "SPARK_LOCAL_IP": "127.0.0.1",
           "PYSPARK_SUBMIT_ARGS": "--master local[2] --conf spark.ui.enabled=false "
           "--conf spark.sql.shuffle.partitions=4 --driver-java-options "
           "'-XX:TieredStopAtLevel=1 -XX:+UseSerialGC' pyspark-shell"}
    done = subprocess.run([sys.executable, "-m", "quota_core", "analyze", "--usage", base,
                           "--quotas", str(quotas), "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, env=env, timeout=300, cwd=root)
    err = done.stderr
    assert done.returncode == 1, err
    assert err.rstrip("\n").splitlines()[-1].startswith(
        f"error: {Path(base).resolve()}/usage: column 'ts' holds 'yesterday-ish'"), err
    for noise in ("\tat org.apache", "Traceback", "ERROR MicroBatchExecution", "py4j"):
        assert noise not in err, err
    assert nothing_left(tmp_path)
