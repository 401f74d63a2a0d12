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

and, optional (:data:`CLIENT_USAGE_COLUMNS`; files written before it lack it and stay
readable: a reader that wants it takes null for a file without it):

==================  ======  ==============================================================
client_throttle_ms  double  the largest average throttle time (ms per request) the bucket's
                            client instances report themselves (KIP-714, over their last
                            pushes, on any broker); null when none of them pushes one
==================  ======  ==============================================================

**The cluster** (issue 29): ``collect --all-clusters`` also writes a ``cluster`` column (string,
the cluster's name in the fleet file) on every usage sample and snapshot row. It is the one
column of :data:`OPTIONAL_COLUMNS`: files written before it, and by a collector of one
cluster, do not have it (or hold null), and every reader takes a missing one as null, so
older histories stay readable. Each cluster also writes to a folder of its own.

**Quota snapshots**, the whole quota set at a time: one row per (entity, key) sharing ``ts``;
``entity`` is :func:`~quota_core.domain.entities.entity_to_json`'s JSON text (raw names, null for
the default); an empty quota set is one row whose entity, key and value are null.

**The quota window** travels in the same snapshot, as rows whose ``key`` is
``quota.window.num`` or ``quota.window.size.seconds`` and whose ``entity`` is
``{"broker":"<node id>"}`` (that broker's own settings) or ``{"broker":null}`` (the window
most brokers have: the one the CLI's arithmetic uses). The pipeline's throttle estimate
takes each sample's broker's window from them (:func:`windows_from_rows`); snapshots written
before they existed carry none, and the estimate then uses Kafka's defaults and says so.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Iterable, Mapping

from quota_core.throttling.brokers import WINDOW_NUM, WINDOW_SIZE, ClusterSettings
from quota_core.domain.entities import Entity, entity_from_json, entity_to_json
from quota_core.throttling.live import KEY_OF_TYPE, Series, finite, gather
from quota_core.throttling.throttle import DEFAULT_WINDOW, QuotaWindow

__all__ = ["USAGE_COLUMNS", "CLIENT_USAGE_COLUMNS", "SNAPSHOT_COLUMNS", "OPTIONAL_COLUMNS",
           "CLUSTER_COLUMN", "written_columns", "with_cluster", "WINDOW_KEYS", "usage_samples",
           "snapshot_rows",
           "window_rows", "is_window_row", "SnapshotWindows", "windows_from_rows", "snapshots_to_quotas", "topic_value", "from_topic_value", "iso_utc"]

USAGE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("ts", "timestamp"), ("broker", "string"), ("quota_type", "string"), ("user", "string"),
    ("client_id", "string"), ("rate", "double"), ("throttle_ms", "double"),
    ("interval_s", "double"))
#: Optional usage columns: written by the collector, never required of a file.
CLIENT_USAGE_COLUMNS: tuple[tuple[str, str], ...] = (("client_throttle_ms", "double"),)
SNAPSHOT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("ts", "timestamp"), ("entity", "string"), ("key", "string"), ("value", "double"))
#: The cluster's name in the fleet file, on rows of ``collect --all-clusters``.
CLUSTER_COLUMN = "cluster"
#: Columns the collector writes that a file may lack (read as null): written since issue 29,
#: after the contract's columns, on both kinds of record.
OPTIONAL_COLUMNS: tuple[tuple[str, str], ...] = ((CLUSTER_COLUMN, "string"),)


def written_columns(kind: str) -> tuple[tuple[str, str], ...]:
    """Every column the collector writes for ``kind`` (``usage`` or ``quotas``): the
    contract's, then the optional ones (the clients' own throttle on usage samples; the
    cluster on both)."""
    if kind == "usage":
        return USAGE_COLUMNS + CLIENT_USAGE_COLUMNS + OPTIONAL_COLUMNS
    return SNAPSHOT_COLUMNS + OPTIONAL_COLUMNS


def with_cluster(rows: list[dict[str, Any]], cluster: str | None) -> list[dict[str, Any]]:
    """``rows`` with ``cluster`` set on each (unchanged when ``cluster`` is None)."""
    if cluster is None:
        return rows
    for row in rows:
        row[CLUSTER_COLUMN] = cluster
    return rows


def usage_samples(series: Iterable[Series], ts: datetime, interval_s: float,
                  client_throttle=None) -> list[dict[str, Any]]:
    """One usage sample per bucket the series mention (buckets without a rate are skipped).
    ``client_throttle(quota_type, user, client_id)``: what the bucket's clients report
    (``client_throttle_ms``); without it the column is left out (null)."""
    out = []
    for (broker, quota_type, user, client_id), figures in sorted(
            gather(series).items(), key=lambda kv: tuple(x or "" for x in kv[0])):
        if "rate" not in figures or quota_type not in KEY_OF_TYPE:
            continue
        out.append({"ts": ts, "broker": broker, "quota_type": quota_type, "user": user,
                    "client_id": client_id, "rate": finite(figures["rate"]),
                    "throttle_ms": finite(figures.get("throttle")),
                    "interval_s": float(interval_s)})
        if client_throttle is not None:
            out[-1]["client_throttle_ms"] = client_throttle(quota_type, user, client_id)
    return out


def snapshot_rows(quotas: Mapping[Entity, Mapping[str, float]], ts: datetime
                  ) -> list[dict[str, Any]]:
    """The quota set as snapshot rows (one null row for an empty set)."""
    rows = [{"ts": ts, "entity": entity_to_json(e), "key": k, "value": float(v)}
            for e in sorted(quotas, key=Entity.sort_key) for k, v in sorted(quotas[e].items())]
    return rows or [{"ts": ts, "entity": None, "key": None, "value": None}]


#: The snapshot keys that carry the quota window (broker settings, not quotas).
WINDOW_KEYS: tuple[str, str] = (WINDOW_NUM, WINDOW_SIZE)


def _broker_text(broker: str | None) -> str:
    return json.dumps({"broker": broker}, ensure_ascii=False, separators=(",", ":"))


def window_rows(settings: ClusterSettings, ts: datetime) -> list[dict[str, Any]]:
    """The brokers' quota windows as snapshot rows: one pair per broker read, and the pair of
    the window most brokers have (``{"broker":null}``)."""
    def pair(broker: str | None, window: QuotaWindow) -> list[dict[str, Any]]:
        return [{"ts": ts, "entity": _broker_text(broker), "key": WINDOW_NUM,
                 "value": float(window.samples)},
                {"ts": ts, "entity": _broker_text(broker), "key": WINDOW_SIZE,
                 "value": float(window.sample_s)}]

    rows = pair(None, settings.window())
    for broker in sorted(settings.read, key=lambda b: b.node_id):
        rows += pair(broker.node_id, broker.window())
    return rows


def is_window_row(row: Mapping[str, Any]) -> bool:
    return row.get("key") in WINDOW_KEYS


@dataclass(frozen=True)
class SnapshotWindows:
    """The quota windows a snapshot carried: ``cluster`` (the one most brokers have) and each
    broker's own (by node id). ``carried`` is False for snapshots written before the window
    travelled with them: then every window is Kafka's defaults, and :meth:`text` says so."""

    cluster: QuotaWindow = DEFAULT_WINDOW
    brokers: Mapping[str, QuotaWindow] = field(default_factory=dict)
    carried: bool = False
    #: Why there is none, when not ``carried``.
    missing: str = ("the quota snapshots carry no quota window (written before the collector "
                    "recorded it)")

    def of(self, broker: str | None) -> QuotaWindow:
        """The window of the broker a sample came from (its label is its node id when the
        endpoint exports it); the cluster's for any other label."""
        return self.brokers.get(broker, self.cluster) if broker is not None else self.cluster

    def text(self) -> str:
        if not self.carried:
            return (f"quota window {DEFAULT_WINDOW.samples} × {DEFAULT_WINDOW.sample_s} s, "
                    f"Kafka's defaults: {self.missing}")
        differ = [f"broker {b} {w.samples} × {w.sample_s} s"
                  for b, w in sorted(self.brokers.items())
                  if (w.samples, w.sample_s) != (self.cluster.samples, self.cluster.sample_s)]
        return (f"quota window {self.cluster.samples} × {self.cluster.sample_s} s, from the "
                f"quota snapshots" + (f" ({', '.join(differ)})" if differ else ""))


def windows_from_rows(rows: Iterable[Mapping[str, Any]]) -> SnapshotWindows:
    """The windows of the latest snapshot that carried any (rows of other keys are ignored);
    a pair that is incomplete or not a positive whole number is Kafka's default for it."""
    latest: Any = None
    found: dict[str | None, dict[str, float]] = {}
    for row in rows:
        if not is_window_row(row) or row.get("value") is None:
            continue
        if latest is None or row["ts"] > latest:
            latest, found = row["ts"], {}
        if row["ts"] == latest:
            try:
                broker = json.loads(row["entity"]).get("broker")
            except (TypeError, ValueError, AttributeError):
                continue
            found.setdefault(broker, {})[row["key"]] = row["value"]
    if latest is None:
        return SnapshotWindows()

    def window(values: Mapping[str, float], source: str) -> QuotaWindow:
        num, size = values.get(WINDOW_NUM), values.get(WINDOW_SIZE)
        if not all(isinstance(v, (int, float)) and v == v and v >= 1 and float(v).is_integer()
                   for v in (num, size)):
            return QuotaWindow(source=f"Kafka's defaults: {source} carried no usable window")
        return QuotaWindow(int(num), int(size), source)

    cluster = window(found.pop(None, {}), "the quota snapshots")
    return SnapshotWindows(cluster, {b: window(v, f"broker {b}") for b, v in found.items()},
                           True)


def snapshots_to_quotas(rows: Iterable[Mapping[str, Any]]
                        ) -> dict[Any, dict[Entity, dict[str, float]]]:
    """Snapshot rows back to quota sets, one per ``ts`` (the quota window's rows apart)."""
    out: dict[Any, dict[Entity, dict[str, float]]] = {}
    for row in rows:
        quotas = out.setdefault(row["ts"], {})
        if row.get("entity") is None or is_window_row(row):
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
