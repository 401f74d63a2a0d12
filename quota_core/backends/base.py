"""The backend interface: where quotas live (a Kafka cluster, or the local sandbox store).

A backend answers ``describe(filter)`` and ``alter(alterations, validate_only)`` with the
semantics of a KRaft broker: all-or-nothing per entity, a result per entity, removal of the
last key removes the entity. Backends translate their own failures into
:class:`~quota_core.errors.BackendError` subclasses; nothing above them sees a driver error.

:func:`checked_alter` is what the CLI and the pages call: our strict client-side validation
first, then the backend.
"""
from __future__ import annotations

import contextlib
import math
import time
from abc import ABC, abstractmethod
from typing import Iterator, Mapping, Sequence

from ..alterations import AlterOutcome, Alteration
from ..entities import ClusterInfo, Entity, QuotaSet  # re-exported
from ..filters import EntityFilter
from ..validation import validate_alterations

__all__ = ["QuotaBackend", "ClusterInfo", "QuotaSet", "WriteLease", "checked_alter"]


class WriteLease:
    """The right to write, held around one guarded write (re-read, alter, read-back).

    ``expires`` is the monotonic time the lease may be taken from this writer (``inf``: held
    until released); :meth:`ensure` refuses to start a step that might outlast it."""

    def __init__(self, holder: str, expires: float = math.inf) -> None:
        self.holder = holder
        self.expires = expires

    def remaining(self) -> float:
        return self.expires - time.monotonic()

    def ensure(self, need_s: float) -> None:
        """Raise :class:`~quota_core.errors.LeaseUnavailable` unless ``need_s`` seconds of
        the lease are left (nothing is sent then)."""
        from ..errors import LeaseUnavailable

        if self.remaining() < need_s:
            raise LeaseUnavailable(
                f"The write lease of {self.holder} has {max(0.0, self.remaining()):.1f} s left, "
                f"less than the {need_s:g} s the change may take: nothing was sent. Apply "
                f"again (a smaller change, or a longer QUOTA_LEASE_SECONDS).", holder=self.holder)


class QuotaBackend(ABC):
    """A place quotas live. Implementations: SandboxBackend, KafkaBackend."""

    @abstractmethod
    def describe(self, entity_filter: EntityFilter | None = None) -> QuotaSet:
        """Every entity matching the filter (all when None) with its quotas.

        Raises FilterError for a filter the broker refuses."""

    @abstractmethod
    def alter(self, alterations: Sequence[Alteration],
              validate_only: bool = False) -> AlterOutcome:
        """Apply (or just validate) the alterations; one result per entity, in order.

        The backend applies *broker* rules only; see :func:`checked_alter` for ours."""

    @abstractmethod
    def info(self) -> ClusterInfo:
        """What this backend is connected to (cluster id and broker count for Kafka)."""

    def close(self) -> None:  # noqa: B027 - optional for backends without resources
        """Release connections or files."""

    def __enter__(self) -> "QuotaBackend":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def write_lease(self, holder: str, wait_s: float,
                    hold_s: float | None = None) -> Iterator[WriteLease]:
        """Hold this store's one write lease (waiting up to ``wait_s``) around a guarded
        write, so writers of this tool never interleave their re-read, alter and read-back.
        ``hold_s`` is how long the writer may need it: a lease that expires (Kafka's) is
        asked for at least that long (None: the store's default). Raises LeaseUnavailable
        when it cannot be taken. The base class has no other writers to keep out (a store
        held in memory); the sandbox and Kafka backends override it."""
        yield WriteLease(holder)

    def identity(self) -> str | None:
        """The id that binds a plan to this store (the cluster id)."""
        return self.info().cluster_id

    def describe_entity(self, entity: Entity) -> dict[str, float]:
        """The quotas of exactly this entity ({} when it has none)."""
        return self.describe(EntityFilter.for_entity(entity)).get(entity, {})

    def broker_settings(self) -> "ClusterSettings":  # noqa: F821 - quota_core.brokers
        """Every broker's quota settings (the window, the callback, ...). A backend without
        brokers (the sandbox) has Kafka's defaults, and says so in ``source``."""
        from ..brokers import ClusterSettings

        return ClusterSettings.defaults("Kafka's defaults: the sandbox has no brokers")

    def broker_version(self) -> str | None:
        """The Kafka version the cluster's brokers run, as far as the client can tell; None
        for a backend without brokers (the sandbox)."""
        return None

    def quota_window(self) -> "QuotaWindow":  # noqa: F821 - quota_core.throttle.QuotaWindow
        """The brokers' quota window (``quota.window.num`` × ``quota.window.size.seconds``),
        from :meth:`broker_settings`: for the sandbox Kafka's defaults, 11 × 1 s, saying so
        in the window's ``source``."""
        return self.broker_settings().window()


def checked_alter(backend: QuotaBackend, alterations: Sequence[Alteration],
                  validate_only: bool = False) -> AlterOutcome:
    """Validate client-side (raising AlterationError with every problem), then alter."""
    validate_alterations(alterations)
    return backend.alter(alterations, validate_only=validate_only)


