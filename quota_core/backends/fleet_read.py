"""Reading clusters of the fleet when one may be down (issue 29): each answer is a value or
the :class:`~quota_core.errors.QuotaError` that kept it from being read, never a stop, so a
dead cluster holds no other back (as :func:`quota_core.telemetry.sweep.scrape_endpoint` does
for one metrics endpoint). The commands decide what an error means for them.

* :func:`read_clusters`: several clusters read at once, a thread each;
* :class:`LazyCluster`: one cluster for a long-running command (``serve-metrics`` and
  ``collect --all-clusters``), its backend opened when first needed and again after a
  failure.
"""
from __future__ import annotations

import contextlib
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Sequence

from ..errors import QuotaError
from ..fleet import ClusterConfig
from .open import open_cluster, require_sandbox_file

__all__ = ["read_clusters", "LazyCluster", "MAX_CLUSTERS_AT_ONCE"]

#: At most this many clusters are read at the same time.
MAX_CLUSTERS_AT_ONCE = 32


def read_clusters(clusters: Sequence[ClusterConfig], timeout_s: float,
                  read: Callable | None = None) -> dict[str, object]:
    """Each cluster's answer, read at once: ``{name: read(backend) or the QuotaError}``, in
    the order given, each bounded by ``timeout_s``. ``read`` defaults to the whole quota
    set; a sandbox that does not exist is an error (a read never creates one)."""
    def one(cluster: ClusterConfig):
        try:
            if cluster.sandbox:
                require_sandbox_file(cluster.sandbox)
            with open_cluster(cluster, timeout_s=timeout_s) as backend:
                return read(backend) if read else backend.describe()
        except QuotaError as exc:
            return exc

    if not clusters:
        return {}
    with ThreadPoolExecutor(max_workers=min(MAX_CLUSTERS_AT_ONCE, len(clusters)),
                            thread_name_prefix="read-cluster") as pool:
        answers = list(pool.map(one, clusters))
    return {c.name: a for c, a in zip(clusters, answers)}


class LazyCluster:
    """One cluster as a long-running reader sees it: its backend is opened when first needed
    and opened again after a failure, so a cluster that is down at the start (or goes down)
    is read as down and comes back by itself, without holding the others back. An error
    names the cluster (``cluster NAME: …``). After a failure the next :attr:`RETRY_S`
    seconds fail at once with the same error (one scrape asks a cluster for its quota set,
    its brokers and their settings: a dead one costs one timeout, not three)."""

    RETRY_S = 5.0

    def __init__(self, cluster: ClusterConfig, timeout: float) -> None:
        self.cluster, self.timeout = cluster, timeout
        self._backend = None
        self._lock = threading.Lock()
        self._failed: tuple[float, QuotaError] | None = None

    def _call(self, what: str):
        with self._lock:
            if self._failed is not None and time.monotonic() - self._failed[0] < self.RETRY_S:
                raise self._failed[1]
            try:
                if self._backend is None:
                    self._backend = open_cluster(self.cluster, timeout_s=self.timeout)
                answer = getattr(self._backend, what)()
            except QuotaError as exc:
                self._close()
                exc.message = f"cluster {self.cluster.name}: {exc.message}"
                self._failed = (time.monotonic(), exc)
                raise
            self._failed = None
            return answer

    def describe(self):
        return self._call("describe")

    def info(self):
        return self._call("info")

    def info_or_error(self):
        """:meth:`info`, or the error that kept it from being read."""
        try:
            return self.info()
        except QuotaError as exc:
            return exc

    def broker_settings(self):
        return self._call("broker_settings")

    def _close(self) -> None:
        if self._backend is not None:
            backend, self._backend = self._backend, None
            with contextlib.suppress(Exception):
                backend.close()

    def close(self) -> None:
        with self._lock:
            self._close()
