"""The same job on a real standalone Spark cluster gives the same tables as local[2].

A master and one worker are started from PySpark's own launcher (``bin/spark-class``; the
wheel ships no ``sbin/start-master.sh``), bound to 127.0.0.1 with small heaps. The job is
run as users run it, ``spark-submit --master spark://... pipeline/analyze.py``: only the
master differs from the local run, which goes through the session fixture. Every process
started here is stopped in the fixture's teardown (its whole process group, executors too).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pandas as pd
import pytest

from localkafka import free_port, stop_process_group
from pipeline.demo_history import HistorySpec, write_history, generate
from pipeline.job import run
from tests import ROOT
from tests.spark_fixtures import comparable

REPO = ROOT
SPARK_HOME = Path(__import__("pyspark").__file__).parent
LOOPBACK_ENV = {
    "SPARK_HOME": str(SPARK_HOME),
    "SPARK_LOCAL_IP": "127.0.0.1",         # every listener, web UIs included, on loopback
    "SPARK_DAEMON_MEMORY": "256m",
    "SPARK_DAEMON_JAVA_OPTS": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC "
                              "-Dspark.master.rest.enabled=false",
    "PYSPARK_PYTHON": sys.executable,
    "PYSPARK_DRIVER_PYTHON": sys.executable,
}
SUBMIT_CONF = {
    "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
    "spark.ui.enabled": "false", "spark.executor.memory": "512m", "spark.cores.max": "2",
    "spark.sql.shuffle.partitions": "4",
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
    "spark.executor.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
}
TABLES = ("windows", "by_client", "by_entry", "sizing")


def _start(argv: list[str], log: Path) -> subprocess.Popen:
    env = {**os.environ, **LOOPBACK_ENV}
    with open(log, "wb") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)  # own group: executors die with it


def _alive_workers(ui_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as r:
            return int(json.load(r).get("aliveworkers", 0))
    except OSError:
        return 0


@pytest.fixture(scope="module")
def spark_standalone(tmp_path_factory):
    """``spark://127.0.0.1:PORT`` with one worker (2 cores, 1 GB), stopped afterwards."""
    logs = tmp_path_factory.mktemp("spark-cluster")
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    port, ui = free_port(), free_port()
    master_url = f"spark://127.0.0.1:{port}"
    procs = [_start([spark_class, "org.apache.spark.deploy.master.Master", "--host",
                     "127.0.0.1", "--port", str(port), "--webui-port", str(ui)],
                    logs / "master.log")]
    try:
        procs.append(_start([spark_class, "org.apache.spark.deploy.worker.Worker", master_url,
                             "--host", "127.0.0.1", "--webui-port", str(free_port()),
                             "--cores", "2", "--memory", "1g", "--work-dir",
                             str(logs / "work")], logs / "worker.log"))
        deadline = time.monotonic() + 120
        while _alive_workers(ui) < 1:
            for p in procs:
                if p.poll() is not None:
                    pytest.fail(f"a Spark daemon exited early; see {logs}")
            if time.monotonic() > deadline:
                pytest.fail(f"the worker did not register within 120 s; see {logs}")
            time.sleep(0.5)
        yield master_url
    finally:
        for p in reversed(procs):
            stop_process_group(p, grace_s=20)


@pytest.fixture(scope="module")
def history_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    write_history(generate(HistorySpec(hours=4, step_s=300, clients=8)), out)
    return out


def test_standalone_cluster_gives_the_same_tables(spark, spark_standalone, history_dir, tmp_path):
    local = run(spark, str(history_dir), str(tmp_path / "local"))
    argv = [str(SPARK_HOME / "bin" / "spark-submit"), "--master", spark_standalone]
    for key, value in SUBMIT_CONF.items():
        argv += ["--conf", f"{key}={value}"]
    argv += [str(REPO / "pipeline" / "analyze.py"), "--usage", str(history_dir),
             "--out", str(tmp_path / "cluster"), "--windows"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300,
                          env={**os.environ, **LOOPBACK_ENV}, cwd=tmp_path)
    # spark-submit passes the Python driver's stderr on through its own stdout
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    assert f"done: {tmp_path / 'cluster'}" in output and "] reading " in output
    for table in TABLES:
        want = comparable(pd.read_parquet(local / table))
        got = comparable(pd.read_parquet(tmp_path / "cluster" / table))
        assert len(want) > 0
        pd.testing.assert_frame_equal(got, want, check_exact=True)
