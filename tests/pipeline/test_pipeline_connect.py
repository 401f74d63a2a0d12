"""The same job over Spark Connect (``SPARK_REMOTE``) gives the same tables as local[2].

A Spark Connect server is started from PySpark's own installation (the wheel ships the
``spark-connect`` jar and ``bin/spark-submit``, but no ``sbin/start-connect-server.sh``),
listening on 127.0.0.1 only, in its own process group, stopped at teardown. The job is run as
users run it, ``SPARK_REMOTE=sc://... python -m quota_core analyze``, in a subprocess: a
Connect client and the suite's classic local session cannot share one Python process. The
local run goes through the session fixture.

That the job really went through Connect is read from the server's own event log: one
Connect operation per table written, into this run's staging directory. Were ``SPARK_REMOTE``
ignored, the client would run its own local Spark, and the tables would match all the same.
"""
from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from localkafka import free_port, stop_process_group
from pipeline.demo_history import HistorySpec, generate, quota_sets, write_history
from pipeline.job import run
from quota_core.domain.serialization import dumps, loads
from tests import ROOT
from tests.spark_fixtures import comparable

REPO = ROOT
SPARK_HOME = Path(__import__("pyspark").__file__).parent
TABLES = ("windows", "by_client", "by_entry", "what_if", "sizing")
SERVER_CONF = {
    "spark.connect.grpc.binding.address": "127.0.0.1",
    "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
    "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4",
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
    # The proof that the job went through Connect (see the module docstring); plain JSON
    # lines, flushed per Connect event, so they can be read while the server runs.
    "spark.eventLog.enabled": "true", "spark.eventLog.compress": "false",
}
#: The client must not find a classic session's gateway (the suite's own) in its environment.
CLASSIC_ONLY = ("PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET", "SPARK_CONNECT_MODE_ENABLED",
                "SPARK_REMOTE")
START_TIMEOUT_S = 120


class ConnectServer:
    """A started server process; :meth:`wait_up` before use (its start overlaps other work)."""

    def __init__(self, proc: subprocess.Popen, port: int, log: Path, events: Path) -> None:
        self.proc, self.port, self.log, self.events = proc, port, log, events
        self.url = f"sc://127.0.0.1:{port}"

    def tail(self, lines: int = 60) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return f"(no log at {self.log})"
        return f"--- Spark Connect server log ({self.log}), last {lines} lines:\n" + \
            "\n".join(text.splitlines()[-lines:])

    def wait_up(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if self.proc.poll() is not None:
                pytest.fail(f"the Spark Connect server exited ({self.proc.returncode}) "
                            f"before listening\n{self.tail()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"the Spark Connect server did not listen on 127.0.0.1:{self.port} "
                            f"within {START_TIMEOUT_S} s\n{self.tail()}")
            time.sleep(0.5)

    def operations(self) -> list[dict]:
        """The Connect operations the server has started, from its event log."""
        found = []
        for path in sorted(p for p in self.events.rglob("*") if p.is_file()):
            for line in path.read_text(errors="replace").splitlines():
                if "ConnectOperationStarted" not in line:
                    continue
                try:
                    found.append(json.loads(line))
                except ValueError:  # the line being written
                    pass
        return found


@pytest.fixture(scope="module")
def spark_connect(tmp_path_factory):
    """A Spark Connect server (local[2], 1 GB driver) on 127.0.0.1, stopped afterwards."""
    logs = tmp_path_factory.mktemp("spark-connect")
    (logs / "events").mkdir()
    port = free_port()
    argv = [str(SPARK_HOME / "bin" / "spark-submit"),
            "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
            "--master", "local[2]", "--driver-memory", "1g", "--name", "quota-connect-test"]
    for key, value in {**SERVER_CONF, "spark.connect.grpc.binding.port": str(port),
                       "spark.eventLog.dir": str(logs / "events")}.items():
        argv += ["--conf", f"{key}={value}"]
    env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1",
           "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    with open(logs / "server.log", "wb") as log:
        # cwd: its spark-warehouse/ there, and relative paths would not resolve as the client's
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=logs,
                                start_new_session=True)  # own group: stopped as a whole
    try:
        yield ConnectServer(proc, port, logs / "server.log", logs / "events")
    finally:
        stop_process_group(proc)


@pytest.fixture(scope="module")
def history_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    write_history(generate(HistorySpec(hours=4, step_s=300, clients=8)), out)
    (out / "proposed.json").write_text(dumps(quota_sets()[1]), encoding="utf-8")
    return out


@pytest.fixture(scope="module")
def connect_run(spark, spark_connect, history_dir, tmp_path_factory):
    """The local tables (in process) and the job over Connect (a subprocess): their paths and
    the client's output."""
    base = tmp_path_factory.mktemp("connect-run")
    what_if = loads((history_dir / "proposed.json").read_text(encoding="utf-8"), "json")
    # While the server starts up: the same job on the suite's local session.
    local = run(spark, str(history_dir), str(base / "local"), what_if=what_if)
    spark_connect.wait_up()
    env = {k: v for k, v in os.environ.items() if k not in CLASSIC_ONLY}
    env.update(SPARK_REMOTE=spark_connect.url, PYSPARK_PYTHON=sys.executable,
               # the checkout's code, whatever the venv's (editable) install points at
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")])))
    client = base / "client"  # its cwd: not the server's
    client.mkdir()
    argv = [sys.executable, "-m", "quota_core", "analyze", "--usage", str(history_dir),
            "--what-if", str(history_dir / "proposed.json"), "--out", str(base / "connect"),
            "--windows"]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env,
                              cwd=client)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the job over Connect did not finish in 300 s: {exc.stderr!r}\n"
                    f"{spark_connect.tail()}")
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{output[-4000:]}\n{spark_connect.tail()}"
    return local, base / "connect", output


def test_spark_connect_gives_the_same_tables(spark_connect, connect_run):
    local, remote, output = connect_run
    assert f"done: {remote}" in output and "] reading " in output, output[-4000:]
    # Each table was written by a Connect operation of the server, into this run's staging
    # directory (pipeline.output.staged: a hidden sibling of --out, renamed at the end).
    staging = re.compile(re.escape(f'path: "{remote.parent}/.{remote.name}.tmp-') +
                         r'[0-9a-f]+/(\w+)"')
    written = {m.group(1) for op in spark_connect.operations()
               for m in staging.finditer(op.get("statementText", ""))}
    assert written == set(TABLES), \
        f"Connect operations wrote {sorted(written)}\n{output[-2000:]}\n{spark_connect.tail()}"
    for table in TABLES:
        want = comparable(pd.read_parquet(local / table))
        got = comparable(pd.read_parquet(remote / table))
        assert len(want) > 0, table
        pd.testing.assert_frame_equal(got, want, check_exact=True, obj=table)


def test_spark_connect_stderr_has_only_progress_lines(connect_run):
    _, _, output = connect_run
    noise = [line for line in output.splitlines()
             if line.strip() and not re.match(r"\[ *\d+\.\d+s\] ", line)]
    assert not noise, "\n".join(noise)
