"""Spark's errors become one PipelineError, here and nowhere else.

pyspark raises its own classes (``AnalysisException``, ``SparkRuntimeException``...) for plans
and queries, and ``Py4JJavaError`` for failures inside the JVM (a corrupt Parquet file is a
``SparkException`` with condition ``FAILED_READ_FILE...``). :func:`translating` catches both
at the boundary of each read or write and keeps what a person needs: which file and why.
"""
from __future__ import annotations

import re
from contextlib import contextmanager
from typing import Iterator

from pipeline.errors import PipelineError

__all__ = ["translating", "file_in", "spark_logs_off", "pyspark_error_logs_off"]

_FILE = re.compile(r"(?:file:|hdfs:|s3a?:|abfss?:|gs:)?(/[^\s'\"`,]+\.(?:parquet|json|jsonl))")
# Why a read failed, by Spark error condition (prefix match), in words.
_REASONS = {
    "FAILED_READ_FILE": "the file is corrupt or not in the expected format",
    "CANNOT_PARSE_TIMESTAMP": "a ts value is not an ISO-8601 time",
    "CAST_INVALID_INPUT": "a value does not have the column's type",
    "PATH_NOT_FOUND": "the path does not exist",
    "UNABLE_TO_INFER_SCHEMA": "there are no readable files",
    "MALFORMED_RECORD_IN_PARSING": "a record is not valid JSON",
}


def file_in(text: str) -> str | None:
    """The first data-file path mentioned in a (Java) error message, if any."""
    match = _FILE.search(text)
    return match.group(1) if match else None


def _condition(exc: BaseException) -> str:
    getter = getattr(exc, "getCondition", None) or getattr(exc, "getErrorClass", None)
    try:
        found = getter() if getter else None
    except Exception:  # noqa: BLE001 - a JVM-side getter may itself fail
        found = None
    return found or ""


def _is_spark_error(exc: BaseException) -> bool:
    module = type(exc).__module__ or ""
    return module.startswith(("pyspark", "py4j"))


@contextmanager
def translating(where: str, column: str | None = None) -> Iterator[None]:
    """Turn a Spark error raised inside the block into PipelineError about ``where``."""
    try:
        yield
    except PipelineError:
        raise
    except Exception as exc:  # noqa: BLE001 - filtered by _is_spark_error
        if not _is_spark_error(exc):
            raise
        text = str(exc)
        condition = _condition(exc)
        reason = next((why for prefix, why in _REASONS.items()
                       if condition.startswith(prefix) or prefix in text), None)
        culprit = file_in(text)
        if column is None and "CANNOT_PARSE_TIMESTAMP" in (condition + text):
            column = "ts"
        first_line = next((ln.strip() for ln in text.splitlines() if ln.strip()), type(exc).__name__)
        parts = [f"{where}: {reason or 'Spark could not read it'}"]
        if culprit:
            parts.append(f" (file {culprit})")
        if column:
            parts.append(f" (column {column!r})")
        parts.append(f". Spark said: {first_line[:300]}")
        raise PipelineError("".join(parts), path=culprit or where, column=column) from exc


@contextmanager
def spark_logs_off(spark) -> Iterator[None]:
    """Spark's own log lines off while the block runs, then back to the level before.

    A streaming query whose foreachBatch raises logs the whole Java stack, with the Python
    traceback it relays, at ERROR before the error reaches the caller, who says it in one
    line (:func:`translating`, or the PipelineError raised in the batch). Setting the level
    is public (``SparkContext.setLogLevel``); reading it is not, so the level before is read
    from log4j's root logger here, and nowhere else, falling back to ``spark.log.level``
    (else WARN). Over Spark Connect (no SparkContext) nothing is changed."""
    try:
        sc = spark.sparkContext
    except Exception:  # noqa: BLE001 - Spark Connect: the server logs, not this terminal
        yield
        return
    try:
        before = str(sc._jvm.org.apache.logging.log4j.LogManager.getRootLogger().getLevel())
    except Exception:  # noqa: BLE001 - another logging backend: the configured level
        before = sc.getConf().get("spark.log.level", "WARN")
    sc.setLogLevel("OFF")
    try:
        yield
    finally:
        sc.setLogLevel(before.upper())


#: pyspark's Python loggers that log an error's query context (with the Java stack) to
#: stderr, in JSON, whenever a captured error is made: before the caller can say it in one line.
_ERROR_LOGGERS = ("DataFrameQueryContextLogger", "SQLQueryContextLogger")


def pyspark_error_logs_off() -> None:
    """Turn off pyspark's own logging of errors (:data:`_ERROR_LOGGERS`): every Spark error
    is translated into one PipelineError line (:func:`translating`). The loggers are made
    through pyspark's own ``PySparkLogger.getLogger`` (a plain logger in their place would
    refuse the fields pyspark logs with)."""
    import logging

    from pyspark.logger import PySparkLogger

    for name in _ERROR_LOGGERS:
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL + 1)
