"""The one exception hierarchy of quota_core.

Everything the library, the CLI, the pages and the backends raise on purpose derives from
:class:`QuotaError`, so a caller catches one class::

    QuotaError
    ├── ValidationError          bad input, caught before anything is sent
    │   ├── EntityError          an entity that cannot exist (type, empty name, ip mixed in)
    │   ├── FilterError          a describe filter a broker would refuse
    │   ├── AlterationError      ops a broker would refuse, or that we refuse (NaN, ...)
    │   ├── ParseError           text that does not parse (--names, k=v, byte units, files)
    │   │   └── UnreadableConfig (also a ConfigError, below)
    │   └── UsageError           flags that do not go together, or a required one missing
    │       ├── UnreadableFile   a file the user named cannot be read
    │       └── InvalidClientConfig (also a ConfigError, below)
    ├── BackendError             the store or cluster could not do what was asked
    │   ├── ConnectionFailed     broker unreachable / sandbox file unusable
    │   ├── AuthenticationFailed SASL/SSL handshake refused the credentials
    │   ├── NotAuthorized        the principal lacks an ACL (names the operation and resource)
    │   ├── UnsupportedBroker    broker too old for the client-quota APIs (keys 48/49)
    │   ├── ConfigError          a client-properties file we cannot use
    │   │   ├── UnreadableConfig a properties file the user named cannot be read (also a
    │   │   │                    ParseError: a usage error, exit 2)
    │   │   └── InvalidClientConfig  an unknown key, an unsupported choice or a missing
    │   │                        store in it (also a UsageError, exit 2)
    │   ├── RequestRejected      the broker refused a whole request (e.g. a filter)
    │   ├── OutcomeUnknown       a change was sent, then the connection was lost: applied?
    │   ├── MetricsError         a metrics endpoint unreachable, or its text unreadable
    │   │   └── ScrapeLimitExceeded  an endpoint's answer passed a cap (time, size, line,
    │   │                            samples, redirects)
    │   ├── SinkError            the collector's output (folder or topic) refused a write
    │   ├── LeaseUnavailable     the cluster's write lease is held by another writer, or
    │   │                        this principal may not take it: nothing written
    │   └── WriteConflict        applied, but the read-back shows another writer's values
    ├── ConcurrentChange         an entity changed between reading and writing it
    ├── PlanRefused              a plan made on another cluster, or whose signature does not
    │                            verify: nothing applied
    └── ReadOnlyCluster          a write to a cluster the fleet file marks read_only: nothing
                                 written

(``pipeline.errors.PipelineError``, the Spark job's, derives from QuotaError too.)

Messages name the input, the rule that was broken, and how to fix it.
"""
from __future__ import annotations

from typing import Any

__all__ = [
    "QuotaError",
    "ValidationError",
    "EntityError",
    "FilterError",
    "AlterationError",
    "ParseError",
    "UsageError",
    "UnreadableFile",
    "BackendError",
    "ConnectionFailed",
    "AuthenticationFailed",
    "NotAuthorized",
    "UnsupportedBroker",
    "ConfigError",
    "UnreadableConfig",
    "InvalidClientConfig",
    "RequestRejected",
    "OutcomeUnknown",
    "MetricsError",
    "ScrapeLimitExceeded",
    "SinkError",
    "LeaseUnavailable",
    "WriteConflict",
    "ConcurrentChange",
    "PlanRefused",
    "ReadOnlyCluster",
    "Problem",
]


class QuotaError(Exception):
    """Base of every error quota_core raises on purpose."""

    def __init__(self, message: str, **context: Any) -> None:
        super().__init__(message)
        self.message = message
        self.context = context

    def __str__(self) -> str:
        return self.message


class ValidationError(QuotaError):
    """Input that must not be sent: raised before any backend is touched.

    ``problems`` lists every problem found (a form shows each next to its field);
    the message is the first one, or all of them joined.
    """

    def __init__(self, message: str, problems: list["Problem"] | None = None, **context: Any):
        super().__init__(message, **context)
        self.problems = problems or []


class EntityError(ValidationError):
    """An entity that no broker accepts: unknown type, empty name, ip mixed with user."""


class FilterError(ValidationError):
    """A describe filter that a broker refuses (type twice, ip with user, ...)."""


class AlterationError(ValidationError):
    """A quota alteration that is rejected client-side."""


class ParseError(ValidationError):
    """Text that does not parse: --names, key=value lists, byte units, import files."""


class UsageError(ValidationError):
    """Flags that do not go together, or a required one missing: the command line itself is
    wrong (exit 2 where the exit table has a usage column)."""


class UnreadableFile(UsageError):
    """A file the user named on the command line (``--add-config-file``) that cannot be read:
    a usage error (exit 2 where the exit table has a usage column; ``configs`` exits 1 for
    it, as ConfigCommand does)."""


class BackendError(QuotaError):
    """The backend (Kafka cluster or sandbox store) could not serve the request."""


class ConnectionFailed(BackendError):
    """The cluster or store cannot be reached or opened."""


class AuthenticationFailed(BackendError):
    """The broker refused the credentials."""


class NotAuthorized(BackendError):
    """The authenticated principal lacks the ACL for the operation."""


class UnsupportedBroker(BackendError):
    """The broker does not implement the client-quota APIs (Kafka < 2.6)."""


class ConfigError(BackendError):
    """A client configuration (command-config, secrets) that cannot be used."""


class RequestRejected(BackendError):
    """The broker refused the request as a whole; the message is the broker's reason."""


class MetricsError(BackendError):
    """A broker's metrics endpoint could not be fetched, or what it served is not Prometheus text.

    Raised by :mod:`quota_core.telemetry`; ``context`` carries the ``url`` (or ``broker`` label).
    """


class OutcomeUnknown(BackendError):
    """A change was sent, then the connection was lost before the answer: it may or may not
    have been applied (the CLI exits 3). Describe when the cluster answers to find out.

    ``outcome`` holds the entities whose result is known (applied, confirmed by a describe, or
    refused); ``unknown`` those that were sent without an answer that a describe could settle
    (``not_visible``: of those, the ones a describe showed unchanged); ``not_sent`` those never
    sent (definitely not applied).
    """

    def __init__(self, message: str, *, outcome: Any = None, unknown: Any = (),
                 not_visible: Any = (), not_sent: Any = (), **context: Any) -> None:
        super().__init__(message, **context)
        self.outcome = outcome
        self.unknown = tuple(unknown)
        self.not_visible = tuple(not_visible)
        self.not_sent = tuple(not_sent)


class SinkError(BackendError):
    """The collector could not write its output (a Parquet folder or a Kafka topic)."""


class ConcurrentChange(QuotaError):
    """An entity changed after it was read, so a change based on that read is refused."""


# -- bounded reads (issue 16, the read path) ---------------------------------------------------
class ScrapeLimitExceeded(MetricsError):
    """A metrics endpoint's answer passed one of the scrape's caps (size, line length, number
    of samples): the read stopped there. ``context`` carries the ``url``."""


class UnreadableConfig(ConfigError, ParseError):
    """A client-properties file the user named (``--command-config``) is missing, not a
    regular file, too large or unreadable. A :class:`ConfigError` for the code that reads
    client settings, and a :class:`ParseError` for the CLI: a usage error (exit 2), like an
    unreadable ``--import`` file."""


class InvalidClientConfig(ConfigError, UsageError):
    """Client properties the user gave (``--command-config``, a cluster's ``properties``) that
    name an unknown key, an unsupported choice or a missing file: a :class:`ConfigError` for
    the code that reads client settings, and a usage error for the CLI (exit 2), as the
    contract's "a malformed flag or file that the user gave" says."""


# -- the write path (issue 16: lease, read-back conflicts, bound plans) ----------------------
class LeaseUnavailable(BackendError):
    """The cluster's write lease could not be taken within the timeout: another writer holds
    it (``holder`` names it), or this principal may not create or write it (``acl``).
    Nothing was written."""


class WriteConflict(BackendError):
    """An applied change that the read-back does not show as this writer meant it: something
    else wrote the entity meanwhile (``entities``: what each now holds)."""


class PlanRefused(QuotaError):
    """A plan that must not be applied here: made on another cluster, or its signature (HMAC
    with the configured plan key) does not verify."""


class ReadOnlyCluster(QuotaError):
    """A write to a cluster whose fleet entry says ``read_only = true`` (issue 29): refused
    before anything is sent or recorded (exit 1). ``context`` carries the ``cluster``."""


class Problem:
    """One validation problem: where it is (entity, key or field) and what to do."""

    __slots__ = ("entity", "key", "field", "message")

    def __init__(self, message: str, entity: Any = None, key: str | None = None,
                 field: str | None = None) -> None:
        self.message = message
        self.entity = entity
        self.key = key
        self.field = field

    def __repr__(self) -> str:
        return f"Problem({self.message!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Problem) and (
            self.message, self.entity, self.key, self.field
        ) == (other.message, other.entity, other.key, other.field)

    def __hash__(self) -> int:
        return hash(self.message)
