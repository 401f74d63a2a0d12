"""Client-quota metrics as brokers export them: which bucket is how busy, and throttled how much.

A broker's quota MBeans (``kafka.server:type=Produce|Fetch|Request|ControllerMutation,
user=..,client-id=..`` and ``type=socket-server-metrics,ip=..``) reach us as Prometheus text
from the JMX exporter java agent. :func:`parse_metrics` turns that text into
:class:`QuotaSeries` records with raw names (the tags decoded), whichever of three common rule
sets produced it (:data:`RULES`); :func:`fetch_text` / :func:`scrape` are the only I/O.
Nothing here does I/O at import.
"""
from .names import decode_client_id, decode_user, jmx_unquote
from .parse import parse_metrics
from .rules import MBEAN_TYPES, RULES, SeriesRule, rule_for
from .scrape import fetch_text, scrape
from .series import ATTRIBUTES, QUOTA_TYPES, QuotaSeries

__all__ = [
    "ATTRIBUTES", "MBEAN_TYPES", "QUOTA_TYPES", "QuotaSeries", "RULES", "SeriesRule",
    "decode_client_id", "decode_user", "fetch_text", "jmx_unquote", "parse_metrics",
    "rule_for", "scrape",
]
