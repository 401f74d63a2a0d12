"""Which dialect a command line is in: kafka-configs.sh's (:mod:`.configs_compat`) or
KIP-546's (:mod:`.main`). Its own small module, so that telling them apart imports nothing
(start-up time is most of a describe round trip)."""
from __future__ import annotations

from typing import Sequence

__all__ = ["TRIGGERS", "is_configs_command"]

#: Flags that switch kafka-client-quotas into this mode: kafka-configs.sh's own, never KIP-546's.
TRIGGERS = ("entity-type", "entity-name", "entity-default", "add-config", "delete-config",
            "client", "user-defaults", "client-defaults", "ip-defaults", "add-config-file",
            "topic", "broker", "broker-defaults", "broker-logger", "group", "client-metrics",
            "bootstrap-controller")


def is_configs_command(argv: Sequence[str]) -> bool:
    """Whether ``argv`` is a kafka-configs.sh command line (has one of :data:`TRIGGERS`)."""
    for token in argv:
        if token == "--":
            return False
        if token.startswith("-") and token.lstrip("-").split("=", 1)[0] in TRIGGERS:
            return True  # jopt-simple also takes -entity-type
    return False
