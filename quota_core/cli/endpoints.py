"""The metrics endpoints a command scrapes: the ``--metrics`` list as given, or the
``--metrics-template`` filled in for the brokers the cluster lists now. One place for the main
command, ``collect`` and ``serve-metrics``."""
from __future__ import annotations

from quota_core.throttling.coverage import endpoints_from_template
from quota_core.domain.entities import ClusterInfo
from quota_core.telemetry.collector import Endpoint, parse_endpoints

__all__ = ["metrics_endpoints"]


def metrics_endpoints(metrics: str | None, template: str | None,
                      cluster: ClusterInfo | None) -> list[Endpoint]:
    """``metrics`` parsed, else ``template`` for every broker of ``cluster`` (a template
    needs a cluster: :func:`quota_core.throttling.coverage.check_endpoint_flags` refuses it without)."""
    if metrics:
        return parse_endpoints(metrics)
    if template and cluster is not None:
        return parse_endpoints(endpoints_from_template(template, cluster.node_ids, cluster.hosts))
    return []
