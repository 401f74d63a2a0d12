"""A backend wrapper that serialises calls: one call at a time per connection.

Streamlit serves every browser session from its own thread, and a backend's connection is
not promised to be thread-safe. The lock belongs with the backends (as datasette's
``Database`` owns its write serialisation), not in a UI module.
"""
from __future__ import annotations

import contextlib
import threading

from quota_core.domain.entities import ClusterInfo
from quota_core.backends.base import QuotaBackend

__all__ = ["LockedBackend"]


class LockedBackend(QuotaBackend):
    """One call at a time per connection: Streamlit serves every browser session from its
    own thread, and a backend's connection is not promised to be thread-safe."""

    def __init__(self, inner: QuotaBackend) -> None:
        self.inner = inner
        self._lock = threading.RLock()

    def describe(self, entity_filter=None):
        with self._lock:
            return self.inner.describe(entity_filter)

    def alter(self, alterations, validate_only=False):
        with self._lock:
            return self.inner.alter(alterations, validate_only=validate_only)

    def info(self) -> ClusterInfo:
        with self._lock:
            return self.inner.info()

    @contextlib.contextmanager
    def write_lease(self, holder: str, wait_s: float, hold_s: float | None = None):
        # The store's own lease (the sandbox's transaction, Kafka's lease topic), held with
        # this connection's lock: another browser session's read on the same connection
        # must not run inside this writer's transaction.
        longer = {} if hold_s is None else {"hold_s": hold_s}
        with self._lock, self.inner.write_lease(holder, wait_s, **longer) as lease:
            yield lease

    @contextlib.contextmanager
    def held(self):
        """The wrapped backend, this connection's lock held: for the requests the backend
        interface has no method for (e.g. client-metrics subscriptions)."""
        with self._lock:
            yield self.inner

    def identity(self) -> str | None:
        with self._lock:
            return self.inner.identity()

    def broker_settings(self):
        with self._lock:
            return self.inner.broker_settings()

    def quota_window(self):
        with self._lock:
            return self.inner.quota_window()

    def broker_version(self) -> str | None:
        with self._lock:
            return self.inner.broker_version()

    def close(self) -> None:
        with self._lock:
            self.inner.close()
