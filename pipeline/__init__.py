"""pipeline: the quota-usage history, analysed with PySpark (issue 9).

Quota semantics stay in quota_core (the ladder, bucket resolution, throttle arithmetic); this
package reads the collector's history (Parquet or JSON lines under a directory, or its Kafka
topic), gives every sample the quota that bound it at that time, rolls the samples up by hour (kept
and updated incrementally), and writes the analysis tables (by_client, by_entry, what_if,
sizing from the rollups; windows when asked). Modules, each small:

============== ===========================================================================
session        the one SparkSession entry (no master set; the Kafka connector as jars)
jars           fetches the connector with mvn, once (scripts/spark/pom.xml)
schema         the collector contract as Spark checks and schemas (from quota_core)
readers        directory inputs, checked file by file; kafka_source: the topic
snapshots      quota snapshots -> versions in force over time
resolve        per-bucket resolution on the driver + one broadcast join
columns        per-sample columns (over quota, utilisation, Kafka's throttle estimate)
analysis       the tables; job: the whole run; output: all-or-nothing writes
rollups        hourly rollups per (broker, bucket, key, level); sketches: KLL rate sketches
incremental    keeps the rollups current (availableNow file streams, hours redone)
(the rollups folder's layout and reading it without Spark: quota_core.telemetry.rollup_files)
analyze        the command line (``python -m pipeline.analyze``, ``spark-submit``)
demo_history   a realistic history generator (pandas only)
============== ===========================================================================

Importing this package does not import pyspark; the functions do, when called.
"""
from pipeline.errors import PipelineError

__all__ = ["PipelineError", "get_session", "ensure_spark_jars", "run", "main"]


def __getattr__(name: str):
    # Lazy, so `import pipeline` stays cheap for the CLI and the demo generator.
    if name == "get_session":
        from pipeline.session import get_session
        return get_session
    if name == "ensure_spark_jars":
        from pipeline.jars import ensure_spark_jars
        return ensure_spark_jars
    if name == "run":
        from pipeline.job import run
        return run
    if name == "main":
        from pipeline.analyze import main
        return main
    raise AttributeError(f"module 'pipeline' has no attribute {name!r}")
