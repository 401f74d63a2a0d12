"""The one place a SparkSession is made: ``SparkSession.builder.getOrCreate()``, no master.

No master is set here on purpose: run with plain ``python`` it is Spark's default
(``local[*]``), under ``spark-submit --master spark://...`` it is that cluster, with
``SPARK_REMOTE`` a Spark Connect server. What this adds is what every run needs: the Kafka
connector as local jars (so nothing downloads at run time), UTC session time (sample ``ts``
are UTC and ``date=`` partitions are UTC days), Arrow for the driver-side resolution tables,
and the venv's Python for any Python worker.
"""
from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Mapping

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

__all__ = ["APP_NAME", "BASE_CONF", "get_session"]

APP_NAME = "quota-console-analyze"
#: Settings every run needs, whatever the master.
BASE_CONF: dict[str, str] = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # A Python fallback would hide a schema problem behind a slow path: fail instead.
    "spark.sql.execution.arrow.pyspark.fallback.enabled": "false",
}


#: SQL settings a Spark Connect server does not take (Connect always uses Arrow, no fallback).
_NOT_OVER_CONNECT = {"spark.sql.execution.arrow.pyspark.fallback.enabled"}


def _remote() -> bool:
    """Spark Connect: the server owns the classpath, so ``spark.jars`` cannot be set."""
    return bool(os.environ.get("SPARK_REMOTE") or os.environ.get("SPARK_CONNECT_MODE_ENABLED"))


def get_session(app_name: str = APP_NAME, conf: Mapping[str, str] | None = None,
                with_kafka: bool = True) -> "SparkSession":
    """The active session, or a new one with :data:`BASE_CONF`, ``conf`` and the connector.

    ``with_kafka=False`` skips the connector (and the one-time mvn fetch) for jobs that only
    read files. Run by plain ``python``, the JVM starts with the jars on its classpath. Under
    ``spark-submit`` the driver JVM is already running and ``spark.jars`` set now would reach
    the executors only ("Failed to find data source: kafka"), so the jars are added with SQL's
    ``ADD JAR``, which loads them in the driver and ships them to the executors.
    """
    try:
        from pyspark.sql import SparkSession
    except ModuleNotFoundError as exc:  # PySpark is the package's [pipeline] extra
        if (exc.name or "").split(".")[0] != "pyspark":
            raise
        from pipeline.errors import PipelineError

        raise PipelineError("the Spark pipeline needs PySpark, which is not installed: "
                            "pip install 'quota-console[pipeline]' (in a checkout, make venv "
                            "installs it)") from None

    # Python workers (if any) must be this interpreter, not whatever `python3` is on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    remote = _remote()
    for key, value in {**BASE_CONF, **(conf or {})}.items():
        # Over Connect only the server's runtime SQL settings can be set; the rest would only
        # be refused with a warning on stderr, between the progress lines.
        if remote and (not key.startswith("spark.sql.") or key in _NOT_OVER_CONNECT):
            continue
        builder = builder.config(key, value)
    jars: list[str] = []
    if with_kafka and not remote:
        from pipeline.jars import spark_jar_paths

        jars = spark_jar_paths()
        builder = builder.config("spark.jars", ",".join(jars))
    session = builder.getOrCreate()
    from pipeline.spark_errors import pyspark_error_logs_off

    pyspark_error_logs_off()  # each error is said in one line (spark_errors.translating)
    if jars and _jvm_started_by_spark_submit():
        for jar in jars:
            session.sql(f"ADD JAR '{jar}'")
    return session


def _jvm_started_by_spark_submit() -> bool:
    """spark-submit starts the JVM first and tells Python where it is by this variable."""
    return "PYSPARK_GATEWAY_PORT" in os.environ
