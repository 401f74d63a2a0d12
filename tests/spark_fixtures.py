"""Pytest plugin: one real local SparkSession (``local[2]``) for the whole test session.

Enable with ``pytest_plugins = [..., "tests.spark_fixtures"]`` in ``tests/conftest.py``.

* ``spark``: the session, made through ``pipeline.session.get_session`` (the job's own entry)
  with the master set to ``local[2]``, bound to 127.0.0.1, no UI, few shuffle partitions. It
  is stopped at session end, and an ``atexit`` hook stops it when teardown never ran.
* ``spark_jvm_opts``: what child JVMs started by tests (a standalone cluster, spark-submit)
  need so that they listen on 127.0.0.1 only.

Tests using ``spark`` (or any fixture starting with ``spark``) are auto-marked ``spark``.
"""
from __future__ import annotations

import atexit
import json
import os
import sys
from collections.abc import Iterator

import pytest

#: Settings for tests: small and loopback-only. The job itself sets no master.
TEST_CONF = {
    "spark.master": "local[2]",
    "spark.ui.enabled": "false",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "2",
    "spark.driver.memory": "1g",
    "spark.sql.adaptive.enabled": "true",
    # Test jobs are tiny: C1 only warms up in a third of the time on a busy 2-core machine.
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
}
_live: list = []


def _stop_all() -> None:
    for session in list(_live):
        try:
            session.stop()
        except Exception:  # noqa: BLE001 - best effort at exit
            pass
    _live.clear()


atexit.register(_stop_all)


#: pyspark 4.2 warns about pandas 3 on every conversion (it works for what we use; the
#: pins are deliberate), and calls a pandas API with a deprecated keyword.
_NOISE = ("ignore:PySpark does not yet fully support pandas:FutureWarning",
          "ignore:The copy keyword is deprecated")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if any(name == "spark" or name.startswith("spark_")
               for name in getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.spark)
            for spec in _NOISE:
                item.add_marker(pytest.mark.filterwarnings(spec))


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """A local[2] SparkSession shared by every Spark test, with the Kafka connector jars."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pipeline.session import get_session

    session = get_session("quota-console-tests", TEST_CONF)
    session.sparkContext.setLogLevel("ERROR")
    _live.append(session)
    try:
        yield session
    finally:
        _live.remove(session)
        session.stop()


def _plain(value):
    """Arrays and structs as JSON text, so rows can be sorted and compared."""
    if isinstance(value, (str, type(None), float, int, bool)):
        return value
    return json.dumps(value, default=lambda v: v.tolist() if hasattr(v, "tolist") else list(v),
                      sort_keys=True)


def comparable(df):
    """A table read back from Parquet, in a canonical row order with nested values as text:
    two runs of the job (local, cluster, Connect) compare with ``assert_frame_equal``."""
    flat = df.copy()
    for col in flat.columns:
        if flat[col].dtype == object:
            flat[col] = flat[col].map(_plain)
    return flat.sort_values(list(flat.columns), na_position="first", kind="stable") \
        .reset_index(drop=True)
