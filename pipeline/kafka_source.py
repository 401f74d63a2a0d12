"""The collector's Kafka topic as input: batch (the analysis) and Structured Streaming.

Each message value is one JSON object, ``"record": "usage"`` or ``"quota"`` plus that
record's columns, ``ts`` as ISO-8601 UTC text (quota_core.telemetry.schema.topic_value). Messages
are parsed with the contract's schema (pipeline.schema), never inferred. A batch read checks
every message once (parseable, a known record kind, a time in ``ts``) and names the first bad
one by partition and offset.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Mapping

from quota_core.domain import Entity

from pipeline.errors import PipelineError
from pipeline.readers import TimeRange
from pipeline.schema import QUOTA_COLUMNS, USAGE_COLUMNS, check_columns, spark_schema
from pipeline.spark_errors import translating

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

__all__ = ["RECORDS", "check_topic", "client_options", "message_schema", "parse_messages",
           "read_topic", "stream_windows"]

RECORDS = ("usage", "quota")


def message_schema():
    """``record`` plus the union of both records' columns, ``ts`` as text."""
    from pyspark.sql.types import StringType, StructField, StructType

    fields = {"record": StructField("record", StringType())}
    for columns in (USAGE_COLUMNS, QUOTA_COLUMNS):
        for f in spark_schema(columns, ts_as_text=True).fields:
            fields.setdefault(f.name, f)
    return StructType(list(fields.values()))


def _kafka_options(bootstrap: str, topic: str,
                   client: Mapping[str, str] | None = None) -> dict[str, str]:
    return {"kafka.bootstrap.servers": bootstrap, "subscribe": topic,
            "startingOffsets": "earliest", "failOnDataLoss": "false", **(client or {})}


def _jaas_quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def client_options(config=None, timeout_s: float | None = None) -> dict[str, str]:
    """The Kafka source's ``kafka.*`` options for a ``--command-config`` (a
    :class:`~quota_core.backends.kafka_config.KafkaClientConfig`: SASL, TLS) and ``--timeout``.

    They are handed to Spark in-process (DataFrameReader options), never put on a command
    line or in a log line; :func:`read_topic` names only the topic in its errors."""
    from quota_core.backends.kafka_config import _LOGIN_MODULES

    options: dict[str, str] = {}
    if timeout_s is not None:
        ms = str(max(1, int(timeout_s * 1000)))
        options.update({"kafka.request.timeout.ms": ms, "kafka.default.api.timeout.ms": ms,
                        "fetchOffset.numRetries": "1"})
    if config is None:
        return options
    options["kafka.security.protocol"] = config.security_protocol
    if config.client_id:
        options["kafka.client.id"] = config.client_id
    if config.uses_sasl:
        options["kafka.sasl.mechanism"] = config.sasl_mechanism
        options["kafka.sasl.jaas.config"] = (
            f"{_LOGIN_MODULES[config.sasl_mechanism]} required username="
            f"{_jaas_quote(config.username or '')} password={_jaas_quote(config.password or '')};")
    if config.uses_ssl and config.ssl_cafile:
        options.update({"kafka.ssl.truststore.type": "PEM",
                        "kafka.ssl.truststore.location": config.ssl_cafile})
        if not config.ssl_check_hostname:
            options["kafka.ssl.endpoint.identification.algorithm"] = ""
    return options


def check_topic(bootstrap: str, topic: str, config=None, timeout_s: float = 30.0) -> None:
    """Before any Spark session: the cluster answers within ``timeout_s`` (with the
    ``--command-config`` credentials) and holds ``topic``; else one clear
    :class:`PipelineError` (Spark's own Kafka reader would retry for minutes)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    errors: list = []  # librdkafka's reasons (authentication failed, ...), the last one wins
    conf = {"bootstrap.servers": bootstrap, "socket.timeout.ms": max(10, int(timeout_s * 1000)),
            "log_level": 0, "error_cb": errors.append,
            **(config.librdkafka_config() if config is not None else {})}
    where = f"kafka:{topic}"
    try:
        # every topic's metadata: asking for one by name may auto-create it on the broker
        metadata = AdminClient(conf).list_topics(timeout=timeout_s)
    except KafkaException as exc:
        cause = errors[-1] if errors else (exc.args[0] if exc.args else exc)
        reason = cause.str() if hasattr(cause, "str") else str(cause)
        for secret in (config.secrets if config is not None else ()):
            reason = reason.replace(secret, "***")
        raise PipelineError(f"{where}: the cluster at {bootstrap} could not be read within "
                            f"{timeout_s:g} s (--timeout): {' '.join(reason.split())}. Check "
                            f"--kafka-bootstrap and --command-config.", path=where) from None
    found = metadata.topics.get(topic)
    if found is None or found.error is not None:
        why = f" ({found.error.str()})" if found is not None else ""
        raise PipelineError(f"{where}: the cluster at {bootstrap} has no topic {topic!r}{why}. "
                            f"Check the topic name (the collector's --to kafka:TOPIC).",
                            path=where)


def parse_messages(raw: "DataFrame") -> "DataFrame":
    """Kafka rows -> one row per message: the contract's columns (``ts`` still text),
    ``record``, and the message's ``partition`` / ``offset`` for error messages."""
    from pyspark.sql import functions as F

    doc = F.from_json(F.col("value").cast("string"), message_schema())
    return raw.select(doc.alias("m"), "partition", "offset").select("m.*", "partition", "offset")


def _split(parsed: "DataFrame", where: str) -> tuple["DataFrame", "DataFrame"]:
    usage = check_columns(parsed.where("record = 'usage'"), USAGE_COLUMNS, where, text_ts=True)
    quotas = check_columns(parsed.where("record = 'quota'"), QUOTA_COLUMNS, where, text_ts=True)
    return usage, quotas


def read_topic(spark: "SparkSession", bootstrap: str, topic: str,
               when: TimeRange = TimeRange(),
               client: Mapping[str, str] | None = None) -> tuple["DataFrame", "DataFrame"]:
    """(usage samples in ``when``, quota snapshot rows up to ``when.end``) from the topic;
    ``client`` holds :func:`client_options` (credentials, timeouts)."""
    from pyspark.sql import functions as F

    where = f"kafka:{topic}"
    with translating(where):
        raw = spark.read.format("kafka").options(**_kafka_options(bootstrap, topic, client)).load()
        parsed = parse_messages(raw).cache()
        bad = parsed.where(F.col("record").isNull() | ~F.col("record").isin(*RECORDS)
                           | F.try_to_timestamp(F.col("ts")).isNull())
        first = bad.select("partition", "offset", "record", "ts").limit(1).collect()
    if first:
        p, o, record, ts = first[0]
        what = ("is not a JSON object with a 'record' field" if record is None else
                f"has record {record!r} (expected usage or quota)" if record not in RECORDS
                else f"has ts {ts!r}, not an ISO-8601 UTC time")
        raise PipelineError(f"{where}: the message at partition {p}, offset {o} {what}.",
                            path=where, column="record" if record not in RECORDS else "ts")
    usage, quotas = _split(parsed, where)
    if when.start is not None:
        usage = usage.where(F.col("ts") >= F.lit(when.start))
    if when.end is not None:
        usage = usage.where(F.col("ts") < F.lit(when.end))
        quotas = quotas.where(F.col("ts") < F.lit(when.end))
    return usage, quotas


def stream_windows(spark: "SparkSession", bootstrap: str, topic: str,
                   quotas: Mapping[Entity, Mapping[str, float]], out: str, checkpoint: str,
                   available_now: bool = False,
                   on_batch: Callable[[int, int], None] = lambda batch, rows: None
                   ) -> "StreamingQuery":
    """Append the ``windows`` table for usage messages as they arrive, against ``quotas``.

    Each micro-batch is resolved like a batch run (distinct buckets on the driver, one join)
    inside ``foreachBatch``: Python on the driver once per batch, never per row. Quota
    messages in the stream are not applied here (the quota set is fixed for the query).
    ``available_now`` processes what is in the topic and stops (for tests and catch-up).
    """
    from pipeline import analysis
    from pipeline.output import WINDOWS_OPTIONS
    from pipeline.resolve import distinct_buckets, with_key
    from pipeline.snapshots import single_version, with_version

    versions = single_version(quotas)
    where = f"kafka:{topic}"

    def batch(df: "DataFrame", batch_id: int) -> None:
        usage, _ = _split(df, where)
        keyed = with_key(with_version(usage, versions))
        buckets = distinct_buckets(keyed)
        if len(buckets):
            analysis.windows(keyed, buckets, versions).write.options(**WINDOWS_OPTIONS) \
                .mode("append").parquet(out)
        on_batch(batch_id, int(len(buckets)))

    with translating(where):
        raw = spark.readStream.format("kafka").options(**_kafka_options(bootstrap, topic)).load()
        writer = (parse_messages(raw).writeStream.foreachBatch(batch)
                  .option("checkpointLocation", checkpoint))
        writer = writer.trigger(availableNow=True) if available_now else writer
        return writer.start()
