"""One record per client-quota series a broker exports: what a live view reads.

The vocabulary (quota types and the attributes each has) is Kafka's own, from the MBeans
``kafka.server:type=Produce|Fetch|Request|ControllerMutation,user=..,client-id=..`` and
``kafka.server:type=socket-server-metrics,ip=..``; whichever exporter rule set produced the
text, a series reads back as the same :class:`QuotaSeries`.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ATTRIBUTES", "QUOTA_TYPES", "EndpointSeries", "QuotaSeries"]

#: Each quota type and the MBean attributes it has (the quota managers' sensors).
ATTRIBUTES: dict[str, tuple[str, ...]] = {
    "produce": ("byte-rate", "throttle-time"),
    "fetch": ("byte-rate", "throttle-time"),
    "request": ("request-time", "throttle-time"),
    "controller_mutation": ("mutation-rate", "tokens", "throttle-time"),
    "connection": ("connection-accept-rate",),
}
QUOTA_TYPES: tuple[str, ...] = tuple(ATTRIBUTES)


@dataclass(frozen=True, slots=True)
class QuotaSeries:
    """One exported value of one quota bucket (or, for ``connection``, one ip) on one broker.

    ``user`` and ``client_id`` are the raw names (decoded from the MBean's tags); ``None``
    means the bucket is not keyed by that type, which tells which ladder levels can apply
    (both: 1, 2, 4, 5; user only: 3, 6; client id only: 7, 8). ``value`` is kept as
    exported: ``throttle-time`` is NaN when nothing was throttled lately ("not throttled",
    not an error), and ``tokens`` is about 1e20 for a bucket without a mutation quota.
    """

    broker: str            # the label of the endpoint it came from (given by the caller)
    quota_type: str        # "produce" | "fetch" | "request" | "controller_mutation" | "connection"
    attribute: str         # "byte-rate" | "throttle-time" | "request-time" | "mutation-rate" | "tokens" | "connection-accept-rate"
    user: str | None       # raw user name; None when the bucket is not keyed by user
    client_id: str | None  # raw client id; None when not keyed by client id
    ip: str | None         # for connection metrics, else None
    value: float


class EndpointSeries(list):
    """The series one endpoint answered, and the node id it says it is (``None``: it does not
    export one). An endpoint with no buckets yet still names its broker: that is how the console
    knows which brokers it watches."""

    def __init__(self, series=(), node_id: str | None = None, client_samples=()) -> None:
        super().__init__(series)
        self.node_id = node_id
        #: The client-telemetry plugin's samples on this endpoint (prometheus_client samples,
        #: read by :func:`~quota_core.telemetry.client_reports.client_reports`); empty when the
        #: broker runs no plugin.
        self.client_samples = list(client_samples)
