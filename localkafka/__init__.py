"""Run real Apache Kafka on 127.0.0.1 (one broker, or a cluster of N: :class:`LocalCluster`) for tests, benchmarks and the demo.

No Docker and no fakes: the pinned Kafka jars are fetched from Maven Central once
(:func:`ensure_jars`) and the broker runs as a plain JVM (:class:`LocalBroker`), with the
Prometheus JMX exporter agent serving its client-quota metrics at ``LocalBroker.metrics_url``.
``python -m localkafka up|down|status`` manages a long-lived broker for ``make``.
"""

from .broker import ADMIN, DEFAULT_USERS, LocalBroker, free_port
from .cluster import LocalCluster
from .daemon import ensure_running, running_broker, running_cluster, stop_running
from .errors import LocalBrokerError
from .jars import (KAFKA_VERSION, config_command_argv, ensure_jars, ensure_metrics_agent,
                   ensure_telemetry_plugin, tool_argv)
from .processes import stop_process_group

__all__ = [
    "ADMIN", "DEFAULT_USERS", "KAFKA_VERSION", "LocalBroker", "LocalBrokerError", "LocalCluster",
    "config_command_argv", "ensure_jars", "ensure_metrics_agent", "ensure_running", "free_port",
    "running_broker", "running_cluster", "stop_process_group", "stop_running", "tool_argv",
]
