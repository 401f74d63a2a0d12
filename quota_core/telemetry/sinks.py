"""Where the collector writes: Parquet files under a directory, or a Kafka topic.

A sink's ``write`` returns only once the records are durable (the file renamed into place and
synced; the topic's broker acknowledged every message), so a sample the collector counts as
written is never lost, whatever happens next. Failures become
:class:`~quota_core.errors.SinkError`, with the target named.
"""
from __future__ import annotations

import os
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

from ..errors import SinkError
from .schema import topic_value

__all__ = ["ParquetSink", "KafkaTopicSink", "open_sink"]


def _arrow_schema(kind: str):
    import pyarrow as pa

    ts = pa.timestamp("us", tz="UTC")
    if kind == "usage":
        return pa.schema([("ts", ts), ("broker", pa.string()), ("quota_type", pa.string()),
                          ("user", pa.string()), ("client_id", pa.string()),
                          ("rate", pa.float64()), ("throttle_ms", pa.float64()),
                          ("interval_s", pa.float64()),
                          ("client_throttle_ms", pa.float64())])  # optional (schema.py)
    return pa.schema([("ts", ts), ("entity", pa.string()), ("key", pa.string()),
                      ("value", pa.float64())])


class ParquetSink:
    """``DIR/usage/date=YYYY-MM-DD/part-….parquet`` and ``DIR/quotas/date=…/part-….parquet``
    (Hive-style partitions: Spark and pandas read the date as a column)."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.files_written = 0
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SinkError(f"Cannot create the output folder {self.directory}: {exc}. Give a "
                            f"writable --to folder.") from exc

    @property
    def label(self) -> str:
        return str(self.directory)

    def write(self, usage: Sequence[dict[str, Any]], snapshots: Sequence[dict[str, Any]]) -> None:
        for kind, rows in (("usage", usage), ("quotas", snapshots)):
            by_date: dict[str, list[dict[str, Any]]] = {}
            for row in rows:
                by_date.setdefault(row["ts"].date().isoformat(), []).append(row)
            for day, day_rows in sorted(by_date.items()):
                self._write_file(kind, day, day_rows)

    def _write_file(self, kind: str, day: str, rows: list[dict[str, Any]]) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        folder = self.directory / kind / f"date={day}"
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%f")
        final = folder / f"part-{stamp}-{uuid.uuid4().hex[:8]}.parquet"
        temp = folder / f".{final.name}.tmp"  # readers skip names starting with '.'
        try:
            folder.mkdir(parents=True, exist_ok=True)
            table = pa.Table.from_pylist(rows, schema=_arrow_schema(kind))
            with open(temp, "wb") as fh:
                pq.write_table(table, fh)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(temp, final)
            dir_fd = os.open(folder, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        except OSError as exc:
            temp.unlink(missing_ok=True)
            raise SinkError(f"Cannot write {final}: {exc}. Check the disk and the folder's "
                            f"permissions.") from exc
        self.files_written += 1

    def close(self) -> None:
        pass


class KafkaTopicSink:
    """JSON values on a topic (``"record": "usage"|"quota"``), keyed by broker label; the
    topic is created if missing."""

    def __init__(self, bootstrap: str, topic: str, client_conf: dict[str, object] | None = None,
                 timeout_s: float = 30.0) -> None:
        from confluent_kafka import KafkaException, Producer
        from confluent_kafka.admin import AdminClient, NewTopic

        self.topic, self.bootstrap, self.timeout_s = topic, bootstrap, timeout_s
        conf = {"bootstrap.servers": bootstrap, **(client_conf or {})}
        try:
            admin = AdminClient(conf)
            if topic not in admin.list_topics(timeout=timeout_s).topics:
                futures = admin.create_topics([NewTopic(topic, num_partitions=1)])
                try:
                    futures[topic].result(timeout_s)
                except KafkaException as exc:
                    if "TOPIC_ALREADY_EXISTS" not in str(exc):
                        raise
            self._producer = Producer({**conf, "enable.idempotence": True, "acks": "all",
                                       "linger.ms": 50})
        except KafkaException as exc:
            raise SinkError(f"Cannot use the topic {topic!r} on {bootstrap}: "
                            f"{exc.args[0].str() if exc.args else exc}. Check the address and "
                            f"that the client may create and write the topic.") from exc

    @property
    def label(self) -> str:
        return f"kafka topic {self.topic} on {self.bootstrap}"

    def write(self, usage: Sequence[dict[str, Any]], snapshots: Sequence[dict[str, Any]]) -> None:
        failures: list[str] = []

        def delivered(err, _msg) -> None:
            if err is not None:
                failures.append(err.str())

        for kind, rows in (("usage", usage), ("quota", snapshots)):
            for row in rows:
                key = (row.get("broker") or "quotas").encode()
                while True:
                    try:
                        self._producer.produce(self.topic, topic_value(kind, row), key,
                                               on_delivery=delivered)
                        break
                    except BufferError:  # local queue full: let deliveries drain
                        self._producer.poll(0.1)
        left = self._producer.flush(self.timeout_s)
        if left or failures:
            raise SinkError(f"{left + len(failures)} records were not acknowledged by "
                            f"{self.label}" + (f": {failures[0]}" if failures else
                                               f" within {self.timeout_s:g} s") +
                            ". They are kept and written again on the next flush.")

    def close(self) -> None:
        self._producer.flush(self.timeout_s)


def open_sink(target: str, client_conf: dict[str, object] | None = None,
              bootstrap: str | None = None):
    """``kafka:TOPIC`` (on ``bootstrap``) or a folder path."""
    if target.startswith("kafka:"):
        topic = target[len("kafka:"):]
        if not topic or not bootstrap:
            raise SinkError(f"--to {target}: give a topic name after 'kafka:' and the cluster "
                            f"with --bootstrap-server.")
        return KafkaTopicSink(bootstrap, topic, client_conf)
    return ParquetSink(target)
