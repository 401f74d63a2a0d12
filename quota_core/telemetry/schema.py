"""The usage history's schema: the contract between the collector and the Spark pipeline.

Pure: records in, records out. Two kinds of record, stored as Parquet (``DIR/usage/date=…``,
``DIR/quotas/date=…``) or as JSON values on a Kafka topic (with ``"record": "usage"|"quota"``):

**Usage samples**, one per bucket per scrape:

=============  =========  ==============================================================
column         type       meaning
=============  =========  ==============================================================
ts             timestamp  UTC time of the scrape
broker         string     the metrics endpoint's broker label
quota_type     string     produce, fetch, request or controller_mutation
user           string     the bucket's user tag, raw (null: bucket not keyed by user)
client_id      string     the bucket's client-id tag, raw (null likewise)
rate           double     the broker's rate: bytes/s, % of a thread, or mutations/s
throttle_ms    double     the broker's throttle-time (null when it reported NaN)
interval_s     double     the seconds this sample stands for
=============  =========  ==============================================================

**Quota snapshots**, the whole quota set at a time: one row per (entity, key) sharing ``ts``;
``entity`` is :func:`~quota_core.entities.entity_to_json`'s JSON text (raw names, null for
the default); an empty quota set is one row whose entity, key and value are null.
"""
from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from typing import Any, Iterable, Mapping

from ..entities import Entity, entity_from_json, entity_to_json
from ..live import KEY_OF_TYPE, Series, finite, gather

__all__ = ["USAGE_COLUMNS", "SNAPSHOT_COLUMNS", "usage_samples", "snapshot_rows",
           "snapshots_to_quotas", "topic_value", "from_topic_value", "iso_utc"]

USAGE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("ts", "timestamp"), ("broker", "string"), ("quota_type", "string"), ("user", "string"),
    ("client_id", "string"), ("rate", "double"), ("throttle_ms", "double"),
    ("interval_s", "double"))
SNAPSHOT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("ts", "timestamp"), ("entity", "string"), ("key", "string"), ("value", "double"))


def usage_samples(series: Iterable[Series], ts: datetime, interval_s: float
                  ) -> list[dict[str, Any]]:
    """One usage sample per bucket the series mention (buckets without a rate are skipped)."""
    out = []
    for (broker, quota_type, user, client_id), figures in sorted(
            gather(series).items(), key=lambda kv: tuple(x or "" for x in kv[0])):
        if "rate" not in figures or quota_type not in KEY_OF_TYPE:
            continue
        out.append({"ts": ts, "broker": broker, "quota_type": quota_type, "user": user,
                    "client_id": client_id, "rate": finite(figures["rate"]),
                    "throttle_ms": finite(figures.get("throttle")),
                    "interval_s": float(interval_s)})
    return out


def snapshot_rows(quotas: Mapping[Entity, Mapping[str, float]], ts: datetime
                  ) -> list[dict[str, Any]]:
    """The quota set as snapshot rows (one null row for an empty set)."""
    rows = [{"ts": ts, "entity": entity_to_json(e), "key": k, "value": float(v)}
            for e in sorted(quotas, key=Entity.sort_key) for k, v in sorted(quotas[e].items())]
    return rows or [{"ts": ts, "entity": None, "key": None, "value": None}]


def snapshots_to_quotas(rows: Iterable[Mapping[str, Any]]
                        ) -> dict[Any, dict[Entity, dict[str, float]]]:
    """Snapshot rows back to quota sets, one per ``ts``."""
    out: dict[Any, dict[Entity, dict[str, float]]] = {}
    for row in rows:
        quotas = out.setdefault(row["ts"], {})
        if row.get("entity") is None:
            continue
        value = row["value"]
        quotas.setdefault(entity_from_json(row["entity"]), {})[row["key"]] = \
            math.nan if value is None else float(value)
    return out


def iso_utc(ts: datetime) -> str:
    """``2026-11-23T17:21:18.123Z``."""
    return ts.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def topic_value(record: str, row: Mapping[str, Any]) -> bytes:
    """A record as a Kafka message value: JSON with ``"record"``, ts as ISO-8601 UTC."""
    doc: dict[str, Any] = {"record": record}
    for k, v in row.items():
        doc[k] = iso_utc(v) if isinstance(v, datetime) else v
    # A NaN quota (brokers accept one) is written as the bare token NaN, which Spark's and
    # Python's JSON readers take as a double.
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode()


def from_topic_value(value: bytes) -> tuple[str, dict[str, Any]]:
    """The inverse of :func:`topic_value`: ``(record kind, row)``."""
    doc = json.loads(value)
    kind = doc.pop("record")
    doc["ts"] = datetime.fromisoformat(doc["ts"].replace("Z", "+00:00"))
    return kind, doc
