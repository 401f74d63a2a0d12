"""Telemetry: what brokers say about quota use, and the usage history the collector writes.

Metric rules and parsing (:mod:`.rules`, :mod:`.names`, :mod:`.parse`, :mod:`.series`), the
HTTP scrape (:mod:`.scrape`), the collector (:mod:`.collector`), its sinks (:mod:`.sinks`) and
the usage history's schema shared with the Spark pipeline (:mod:`.schema`).

May import: the pure core, the standard library, prometheus-client, pyarrow and the Kafka
producer. Never changes, cli, ui, pages or pipeline (checked by import-linter).
"""
from .client_reports import ClientReport, client_reports, telemetry_collected
from .names import decode_client_id, decode_user, jmx_unquote
from .parse import parse_metrics
from .rules import MBEAN_TYPES, RULES, SeriesRule, rule_for
from .scrape import fetch_text, scrape
from .series import ATTRIBUTES, QUOTA_TYPES, QuotaSeries

__all__ = [
    "ATTRIBUTES", "ClientReport", "MBEAN_TYPES", "QUOTA_TYPES", "QuotaSeries", "RULES", "SeriesRule",
    "client_reports", "decode_client_id", "decode_user", "fetch_text", "jmx_unquote", "parse_metrics",
    "rule_for", "scrape", "telemetry_collected",
]
