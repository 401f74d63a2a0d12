"""The contract with the collector, as Spark sees it: checks and schemas derived from
quota_core.telemetry.schema's column tables and quota_core.throttling.live's quota_type -> key table.

Readers check a DataFrame against it (:func:`check_columns`), the Kafka reader parses message
values with :func:`spark_schema`, writers of test data use :func:`arrow_schema`; none of them
restate a column.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from quota_core.throttling import KEY_OF_TYPE
from quota_core.telemetry.schema import CLIENT_USAGE_COLUMNS, SNAPSHOT_COLUMNS
from quota_core.telemetry.schema import USAGE_COLUMNS as _USAGE

from pipeline.errors import PipelineError

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

__all__ = ["KEY_FOR_TYPE", "USAGE_COLUMNS", "OPTIONAL_USAGE_COLUMNS", "QUOTA_COLUMNS",
           "check_columns", "spark_schema", "arrow_schema"]

#: Which quota bounds a sample: the broker's quota type -> the quota key (the core's table).
KEY_FOR_TYPE: dict[str, str] = dict(KEY_OF_TYPE)
#: Column -> kind ("timestamp", "string", "double"), as quota_core.telemetry.schema defines the
#: contract with the collector. A "double" column accepts any numeric type (it is cast).
USAGE_COLUMNS: dict[str, str] = dict(_USAGE)
QUOTA_COLUMNS: dict[str, str] = dict(SNAPSHOT_COLUMNS)
#: Usage columns a file may lack (the clients' own throttle, issue 30): read as null then.
OPTIONAL_USAGE_COLUMNS: dict[str, str] = dict(CLIENT_USAGE_COLUMNS)

_NUMERIC = {"byte", "short", "int", "integer", "long", "bigint", "float", "double", "decimal",
            "tinyint", "smallint"}


def _kind_ok(kind: str, spark_type: str, text_ts: bool) -> bool:
    base = spark_type.split("(")[0]
    if kind == "double":
        return base in _NUMERIC
    if kind == "timestamp":
        return base in ("timestamp", "timestamp_ntz", "date") or (text_ts and base == "string")
    return base == "string"


def check_columns(df: "DataFrame", columns: dict[str, str], where: str,
                  text_ts: bool = False, optional: dict[str, str] | None = None
                  ) -> "DataFrame":
    """``df`` with exactly the contract's columns, cast to their types; else PipelineError.
    ``optional`` columns follow them: cast when ``df`` has them (checked likewise), null
    when it does not (files written before them).

    ``text_ts`` accepts ``ts`` as ISO-8601 text (JSON lines and Kafka messages carry it so);
    text that does not parse as a time is caught later, when the rows are read.
    """
    from pyspark.sql import functions as F

    have = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    for name, kind in columns.items():
        if name not in have:
            raise PipelineError(f"{where}: column {name!r} is missing (found: "
                                f"{', '.join(sorted(have)) or 'no columns'}). The collector "
                                f"writes {', '.join(columns)}.", path=where, column=name)
        if not _kind_ok(kind, have[name], text_ts):
            raise PipelineError(f"{where}: column {name!r} is {have[name]}, expected {kind}.",
                                path=where, column=name)
    out = []
    for name, kind in columns.items():
        col = F.col(name)
        if kind == "timestamp":
            col = F.to_timestamp(col) if have[name] == "string" else col.cast("timestamp")
        elif kind == "double":
            col = col.cast("double")
        out.append(col.alias(name))
    for name, kind in (optional or {}).items():
        if name in have and not _kind_ok(kind, have[name], text_ts):
            raise PipelineError(f"{where}: column {name!r} is {have[name]}, expected {kind}.",
                                path=where, column=name)
        out.append((F.col(name) if name in have else F.lit(None)).cast(kind).alias(name))
    return df.select(*out)


def spark_schema(columns: dict[str, str], ts_as_text: bool = False) -> "StructType":
    """A Spark schema for the contract's columns (``ts`` as text for JSON sources)."""
    from pyspark.sql.types import (DoubleType, StringType, StructField, StructType,
                                   TimestampType)

    types = {"string": StringType(), "double": DoubleType(), "timestamp": TimestampType()}
    return StructType([StructField(n, StringType() if (k == "timestamp" and ts_as_text)
                                   else types[k]) for n, k in columns.items()])


def arrow_schema(columns: dict[str, str]):
    """The pyarrow schema a Parquet writer must use (``ts`` as UTC timestamps).

    Write with it explicitly: a file whose column happens to be all null would otherwise get
    Parquet's null type, and Spark (which takes the schema from one file's footer) reads that
    as another type than the contract's.
    """
    import pyarrow as pa

    types = {"string": pa.string(), "double": pa.float64(),
             "timestamp": pa.timestamp("us", tz="UTC")}
    return pa.schema([(n, types[k]) for n, k in columns.items()])
