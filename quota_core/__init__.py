"""quota_core: Kafka client quotas — entities, filters, validation, resolution, backends.

Pure logic over plain values; the backends (sandbox store, Kafka cluster) sit behind
:class:`QuotaBackend`. Nothing here imports Streamlit or Spark, and the Kafka client is only
imported by :mod:`quota_core.backends.kafka` when it is used.
"""
from quota_core.domain.entities import ClusterInfo, QuotaSet
from quota_core.backends.base import QuotaBackend, checked_alter
from quota_core.domain.alterations import (AlterOutcome, Alteration, EntityResult, Op, apply_ops,
                                           diff_alteration)
from quota_core.domain.entities import (CLIENT_ID, DEFAULT_TEXT, ENTITY_TYPES, IP, USER, Entity,
                                        desanitize, sanitize)
from quota_core.errors import (AlterationError, AuthenticationFailed, BackendError,
                               ConcurrentChange, ConfigError, ConnectionFailed, EntityError,
                               FilterError, NotAuthorized, ParseError, Problem, QuotaError,
                               RequestRejected, UnsupportedBroker, ValidationError)
from quota_core.domain.explain import explain, explain_key
from quota_core.domain.filters import EntityFilter, FilterComponent, MatchType, filter_quotas
from quota_core.domain.keys import (CLIENT_KEYS, IP_KEYS, QUOTA_KEYS, QuotaKey, format_value,
                                    keys_for)
from quota_core.domain.resolution import (ANONYMOUS, LADDER, Bucket, Client, KeyResolution,
                                          LadderStep, Resolution, Rung, resolve, resolve_ip,
                                          resolve_values)
from quota_core.throttling.throttle import (ThrottleEstimate, estimate_throttle, rate_window_ms,
                                            throttle_time_ms)
from quota_core.domain.units import format_bytes, format_quota, parse_byte_rate, parse_quota_value
from quota_core.domain.validation import alteration_problems, broker_rejection, validate_alterations

__all__ = [
    "BulkResolution", "ClusterInfo", "QuotaBackend", "QuotaSet", "SandboxBackend",
    "bulk_resolve", "checked_alter", "open_backend",
    "ANONYMOUS", "AlterOutcome", "Alteration", "AlterationError", "AuthenticationFailed",
    "BackendError", "Bucket", "CLIENT_ID", "CLIENT_KEYS", "Client", "ConcurrentChange",
    "ConfigError", "ConnectionFailed", "DEFAULT_TEXT", "ENTITY_TYPES", "Entity", "EntityError",
    "EntityFilter", "EntityResult", "FilterComponent", "FilterError", "IP", "IP_KEYS",
    "KeyResolution", "LADDER", "LadderStep", "MatchType", "NotAuthorized", "Op", "ParseError",
    "Problem", "QUOTA_KEYS", "QuotaError", "QuotaKey", "RequestRejected", "Resolution", "Rung",
    "ThrottleEstimate", "USER", "UnsupportedBroker", "ValidationError", "alteration_problems",
    "apply_ops", "broker_rejection", "desanitize", "diff_alteration", "estimate_throttle",
    "explain", "explain_key", "filter_quotas", "format_bytes", "format_quota", "format_value",
    "keys_for", "parse_byte_rate", "parse_quota_value", "rate_window_ms", "resolve",
    "resolve_ip", "resolve_values", "sanitize", "throttle_time_ms", "validate_alterations",
]


# Imported on first use: the CLI's start-up time is most of a describe round trip.
_LAZY = {"SandboxBackend": ".backends.sandbox", "bulk_resolve": ".domain.bulk",
         "BulkResolution": ".domain.bulk",
         "open_backend": ".backends.open"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module 'quota_core' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
